package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/test/dynamolocal"
)

// TestBurstLeaseHoldsOneBurstAtATime: an athlete's burst lease is taken
// once while it holds (another athlete's is apart) and again once it has
// lapsed; a renewal moves its end, only under its own token; a lease for
// two bursts holds until both released it, and a lapsed lease's release
// counts for nothing. OutboxItems reads 150
// claimed items in two requests and leaves out a key never claimed.
func TestBurstLeaseHoldsOneBurstAtATime(t *testing.T) {
	t.Parallel()
	st := dynamolocal.NewStore(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	until, err := st.Outbox.LeaseBurst(ctx, 7, now, time.Minute, 1)
	if err != nil || !until.Equal(now.Add(time.Minute)) {
		t.Fatalf("first lease: %s, %v", until, err)
	}
	if _, err := st.Outbox.LeaseBurst(ctx, 7, now.Add(30*time.Second), time.Minute, 1); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("a second lease while the first holds: %v, want ErrConflict", err)
	}
	if _, err := st.Outbox.LeaseBurst(ctx, 8, now, time.Minute, 1); err != nil {
		t.Fatalf("another athlete's lease: %v", err)
	}
	if err := st.Outbox.RenewBurst(ctx, 8, now, now.Add(time.Minute)); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("a renewal naming another lease: %v, want ErrConflict", err)
	}
	renewed, err := st.Outbox.LeaseBurst(ctx, 9, now, time.Minute, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Outbox.RenewBurst(ctx, 9, renewed, renewed.Add(time.Minute)); err != nil {
		t.Fatalf("renewal: %v", err)
	}
	if _, err := st.Outbox.LeaseBurst(ctx, 9, renewed.Add(time.Second), time.Minute, 1); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("a lease past the first end of a renewed one: %v, want ErrConflict", err)
	}
	later, err := st.Outbox.LeaseBurst(ctx, 7, until, time.Minute, 2) // two bursts of one sweep
	if err != nil {
		t.Fatalf("a lease once the first lapsed: %v", err)
	}
	if err := st.Outbox.ReleaseBurst(ctx, 7, until); err != nil {
		t.Fatal(err)
	}
	if err := st.Outbox.ReleaseBurst(ctx, 7, later); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Outbox.LeaseBurst(ctx, 7, until.Add(time.Second), time.Minute, 1); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("a lease with one of its two bursts in flight (and a lapsed lease's release): %v, want ErrConflict", err)
	}
	if err := st.Outbox.ReleaseBurst(ctx, 7, later); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Outbox.LeaseBurst(ctx, 7, until.Add(time.Second), time.Minute, 1); err != nil {
		t.Fatalf("a lease once both bursts released theirs: %v", err)
	}

	var ks []string
	for i := range 150 {
		k := fmt.Sprintf("burst-item-%d", i)
		if _, err := st.Outbox.ClaimOutboxItem(ctx, k, "c", `{"v":1}`, now, time.Minute, time.Hour); err != nil {
			t.Fatal(err)
		}
		ks = append(ks, k)
	}
	recs, err := st.Outbox.OutboxItems(ctx, append(ks, "never-claimed"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range recs {
		if r.Status != ops.OutboxReceived || r.Job != `{"v":1}` {
			t.Fatalf("item %s read as %+v", r.IdempotencyKey, r)
		}
		seen[r.IdempotencyKey] = true
	}
	if len(recs) != 150 || len(seen) != 150 {
		t.Fatalf("read %d items (%d distinct); want the 150 claimed", len(recs), len(seen))
	}
}
