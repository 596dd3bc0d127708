package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/test/dynamolocal"
)

// TestBurstLeaseHoldsOneBurstAtATime: an athlete's burst lease is taken
// once while it holds (another athlete's is apart) and again once it has
// lapsed; a release ends only the lease it names. OutboxItems reads 150
// claimed items in two requests and leaves out a key never claimed.
func TestBurstLeaseHoldsOneBurstAtATime(t *testing.T) {
	t.Parallel()
	st := dynamolocal.NewStore(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	until, err := st.LeaseBurst(ctx, 7, now, time.Minute)
	if err != nil || !until.Equal(now.Add(time.Minute)) {
		t.Fatalf("first lease: %s, %v", until, err)
	}
	if _, err := st.LeaseBurst(ctx, 7, now.Add(30*time.Second), time.Minute); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("a second lease while the first holds: %v, want ErrConflict", err)
	}
	if _, err := st.LeaseBurst(ctx, 8, now, time.Minute); err != nil {
		t.Fatalf("another athlete's lease: %v", err)
	}
	later, err := st.LeaseBurst(ctx, 7, until, time.Minute)
	if err != nil {
		t.Fatalf("a lease once the first lapsed: %v", err)
	}
	if err := st.ReleaseBurst(ctx, 7, until); err != nil {
		t.Fatal(err)
	}
	if _, err := st.LeaseBurst(ctx, 7, until.Add(time.Second), time.Minute); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("the lapsed lease's release ended the newer one: %v", err)
	}
	if err := st.ReleaseBurst(ctx, 7, later); err != nil {
		t.Fatal(err)
	}
	if _, err := st.LeaseBurst(ctx, 7, until.Add(time.Second), time.Minute); err != nil {
		t.Fatalf("a lease after the release: %v", err)
	}

	var ks []string
	for i := range 150 {
		k := fmt.Sprintf("burst-item-%d", i)
		if _, err := st.ClaimOutboxItem(ctx, k, "c", `{"v":1}`, now, time.Minute, time.Hour); err != nil {
			t.Fatal(err)
		}
		ks = append(ks, k)
	}
	recs, err := st.OutboxItems(ctx, append(ks, "never-claimed"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range recs {
		if r.Status != model.OutboxReceived || r.Job != `{"v":1}` {
			t.Fatalf("item %s read as %+v", r.IdempotencyKey, r)
		}
		seen[r.IdempotencyKey] = true
	}
	if len(recs) != 150 || len(seen) != 150 {
		t.Fatalf("read %d items (%d distinct); want the 150 claimed", len(recs), len(seen))
	}
}
