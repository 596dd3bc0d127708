package handoff_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/handoff"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/test/dynamolocal"
	"github.com/commitcollect/backend/test/ingesttest"
)

// claimDue claims the athlete's creates of activities ids, with a lease
// that lapses at due (then they are due, as gathered creates are at their
// gather tick), and returns their keys.
func claimDue(t *testing.T, st *store.Store, owner int64, ids []int64, now, due time.Time) []string {
	t.Helper()
	var out []string
	for _, id := range ids {
		ev := ingest.Event{ObjectType: "activity", AspectType: "create", ObjectID: id, OwnerID: owner, SubscriptionID: 1, EventTime: now.Unix()}
		key := ev.IdempotencyKey()
		job, err := json.Marshal(ingest.Job{Event: ev, CorrelationID: key, IdempotencyKey: key, ReceivedAtUtc: now})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.ClaimOutboxItem(context.Background(), key, key, string(job), now, due.Sub(now), time.Hour); err != nil {
			t.Fatal(err)
		}
		out = append(out, key)
	}
	return out
}

// TestABurstIsLeasedAsOne: an athlete's 10 due creates go out as one burst
// under one burst lease, their items untouched (still as the claim wrote
// them: no move in the Pending index); while the burst is in flight the
// next sweep dispatches nothing of the athlete, and once the lease is
// released the next sweep dispatches the burst again. Protections: the
// burst lease (without it the second sweep hands the same ten creates out
// again), and leasing the burst rather than each item (with Bursts nil each
// item is leased: its dispatch count moves).
func TestABurstIsLeasedAsOne(t *testing.T) {
	t.Parallel()
	st := dynamolocal.NewStore(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	keys := claimDue(t, st, 42, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, now, now.Add(time.Second))
	d := &ingesttest.RecordingDispatcher{}
	sw := handoff.NewSweeper(st, d, ingesttest.Log())
	sw.Now = func() time.Time { return now.Add(2 * time.Second) }
	sweep := func(name string) []ingest.Job {
		t.Helper()
		res, err := sw.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		jobs := d.Take()
		t.Logf("%s: due %d, dispatched %d, skipped %d, bursts %d", name, res.Due, res.Dispatched, res.Skipped, res.Bursts)
		return jobs
	}
	first := sweep("first sweep")
	if len(first) != 1 || len(first[0].Burst) != 10 || first[0].BurstLeaseUntil.IsZero() {
		t.Fatalf("first sweep handed off %d jobs; want one burst of 10 carrying its lease", len(first))
	}
	for _, k := range keys {
		rec, err := st.OutboxItem(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Dispatches != 1 || !rec.DueAt().Equal(now.Add(time.Second)) {
			t.Fatalf("item %s after the burst's lease: %d dispatches, due %s; want the claim's 1 and %s (not leased alone)",
				k, rec.Dispatches, rec.DueAt(), now.Add(time.Second))
		}
	}
	if again := sweep("burst in flight"); len(again) != 0 {
		t.Fatalf("a sweep while the burst is in flight handed off %d jobs; want none", len(again))
	}
	if err := st.ReleaseBurst(ctx, 42, first[0].BurstLeaseUntil); err != nil {
		t.Fatal(err)
	}
	if after := sweep("lease released"); len(after) != 1 || len(after[0].Burst) != 10 {
		t.Fatalf("after the release %d jobs; want the burst again", len(after))
	}
}
