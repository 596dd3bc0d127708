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
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/outbox"
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
	reset := seedBacklog(t, st, 5000, 200)
	d := &ingesttest.RecordingDispatcher{}
	sw := handoff.NewSweeper(handoff.Stores{Due: st.Pending, Outbox: st.Outbox, Bursts: st.Outbox}, d, ingesttest.Log())
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

// seedBacklog files noisy deletes of athlete 1, all due at one reset
// instant a minute from now, and before them in due order nothing else;
// then one create each of honest athletes 10, 11, …, due a millisecond
// apart after the reset. It returns the reset.
func seedBacklog(t *testing.T, st *store.Adapters, noisy, honest int) time.Time {
	t.Helper()
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
		if _, err := st.Outbox.ClaimOutboxItem(ctx, key, key, string(job), now, due.Sub(now), time.Hour); err != nil {
			return fmt.Errorf("claim %s: %w", key, err)
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < noisy; i += 16 {
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
	for i := range honest {
		if err := claim(int64(10+i), int64(i+1), reset.Add(time.Duration(1+i)*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	return reset
}

// TestSweepsReachPastAFullRead: one tenant's 5,000 due deletes fill every
// read of a sweeper that reads 1,000 items (a tenth of the default, for
// the same shape at a tenth of the size: 50,000 items against 10,000 run
// in `make chaos`), before 200 honest athletes' creates. The tenant gets
// one burst, and its burst lease holds the rest of the tenant's items
// back; the sweeps set the tenant's items aside, AsideKeep to a later
// minute, until the reads reach the honest athletes, and every one of them
// is served within as many sweeps as the backlog has reads, plus two.
// Protection: the set-aside (Sweeper.Asides, aside.go); without it the
// reads find the noisy tenant's items only, sweep after sweep.
func TestSweepsReachPastAFullRead(t *testing.T) {
	t.Parallel()
	const noisy, honest, read = 5000, 200, 1000
	st := dynamolocal.NewStore(t)
	ctx := context.Background()
	reset := seedBacklog(t, st, noisy, honest)
	d := &ingesttest.RecordingDispatcher{}
	sw := handoff.NewSweeper(handoff.Stores{Due: st.Pending, Outbox: st.Outbox, Bursts: st.Outbox}, d, ingesttest.Log())
	sw.Asides, sw.Read = outbox.NewAsides(st.DB), read
	sw.Now = func() time.Time { return reset.Add(time.Second) }
	served := map[int64]bool{}
	var total handoff.SweepResult
	bound := noisy/(read-handoff.AsideKeep) + 2
	sweeps := 0
	for sweeps < bound && len(served) < honest {
		sweeps++
		res, err := sw.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		total.Due += res.Due
		total.SetAside += res.SetAside
		for _, j := range d.Take() {
			if owner := j.Event.OwnerID; owner >= 10 && len(j.Burst) == 0 {
				served[owner] = true
			}
		}
	}
	t.Logf("backlog %d + %d honest, read %d: %d sweeps, %d items read, %d set aside (%.2f a noisy item), %d honest served",
		noisy, honest, read, sweeps, total.Due, total.SetAside, float64(total.SetAside)/noisy, len(served))
	if len(served) != honest {
		t.Fatalf("%d of %d honest athletes served within %d sweeps", len(served), honest, bound)
	}
}
