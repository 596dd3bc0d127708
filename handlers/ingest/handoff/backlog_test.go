package handoff_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/handoff"
	"github.com/commitcollect/backend/test/dynamolocal"
	"github.com/commitcollect/backend/test/ingesttest"
)

// TestSweepSeesTheWholeBacklog: one tenant's 5,000 deletes, deferred by
// its window cap to one reset instant, sit before 200 honest athletes'
// events in the pending index. Two sweeps at the default limit give every
// honest athlete a turn, and the noisy tenant one turn in the first.
// Protection: the sweep reading the whole due backlog (DefaultSweepRead,
// the store's rounds over the shards); reading a slice of 1,000, as the
// sweep once did, finds only the noisy tenant's items.
func TestSweepSeesTheWholeBacklog(t *testing.T) {
	t.Parallel()
	st := dynamolocal.NewStore(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	reset := now.Add(time.Minute)
	claim := func(owner, activity int64, due time.Time) error {
		ev := ingest.Event{ObjectType: "activity", AspectType: "delete", ObjectID: activity, OwnerID: owner, SubscriptionID: 1, EventTime: now.Unix()}
		if owner >= 10 {
			ev.AspectType = "create"
		}
		key := ev.IdempotencyKey()
		job, err := json.Marshal(ingest.Job{Event: ev, CorrelationID: key, IdempotencyKey: key, ReceivedAtUtc: now})
		if err != nil {
			return err
		}
		// Claimed with a lease that lapses at due: then it is due.
		if _, err := st.ClaimOutboxItem(ctx, key, key, string(job), now, due.Sub(now), time.Hour); err != nil {
			return fmt.Errorf("claim %s: %w", key, err)
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < 5000; i += 16 {
				if err := claim(1, int64(100000+i), reset); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range 200 {
		if err := claim(int64(10+i), int64(i+1), reset.Add(time.Duration(1+i)*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	d := &ingesttest.RecordingDispatcher{}
	sw := handoff.NewSweeper(st, d, ingesttest.Log())
	served := map[int64]int{}
	for sweep := 1; sweep <= 2; sweep++ {
		sw.Now = func() time.Time { return reset.Add(time.Second) }
		res, err := sw.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range d.Take() {
			served[j.Event.OwnerID]++
		}
		t.Logf("sweep %d: due=%d dispatched=%d more=%v; noisy tenant's turns so far %d, athletes served %d",
			sweep, res.Due, res.Dispatched, res.More, served[1], len(served))
		if sweep == 1 && (res.Due != 5200 || served[1] != 1) {
			t.Fatalf("sweep 1: %d due read, noisy tenant got %d turns; want the whole backlog of 5200 read and 1 turn", res.Due, served[1])
		}
	}
	if len(served) != 201 {
		t.Fatalf("after two sweeps %d of 201 athletes got a turn", len(served))
	}
}
