package limits_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store/limits"
	"github.com/commitcollect/backend/model/syncstate"
	"github.com/commitcollect/backend/test/dynamolocal"
)

func TestSyncStateReadsWhatWasWrittenAndNotFoundOtherwise(t *testing.T) {
	t.Parallel()
	st := dynamolocal.NewStore(t)
	s := limits.New(st)
	ctx := context.Background()
	if _, err := s.SyncState(ctx, "nobody"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("SyncState of a user without one: got %v, want ErrNotFound", err)
	}
	horizon := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	want := syncstate.SyncState{UserID: "u1", AthleteID: 7, State: syncstate.SyncBackfilling, Mode: syncstate.SyncModeBackfill,
		ImportedCount: 12, HorizonUtc: horizon, UpdatedAtUtc: horizon.Add(time.Hour)}
	if err := st.DB.Put(ctx, st.DB.Tables().Main, &want); err != nil {
		t.Fatal(err)
	}
	got, err := s.SyncState(ctx, "u1")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != want.State || got.ImportedCount != 12 || !got.HorizonUtc.Equal(horizon) || got.Key != keys.SyncStateKey("u1") {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// TestDailySyncReadsSpreadOverShards: concurrent sync reads of a long
// window taken over keys.SyncReadsShards counters never exceed what is
// allowed between them, and land on several partitions, not one.
// Protections: the split allowance (each shard allowed the whole would let
// shards × allowed through) and the pick (always shard 0 is one key).
func TestDailySyncReadsSpreadOverShards(t *testing.T) {
	t.Parallel()
	st := dynamolocal.NewStore(t)
	s := limits.New(st)
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC)
	const allowed, attempts = 40, 120
	var mu sync.Mutex
	taken, refused := 0, 0
	var wg sync.WaitGroup
	for i := range attempts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.TakeSyncRead(ctx, now, 24*time.Hour, allowed, keys.SyncReadsShards, uint64(i)*2654435761)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				taken++
			case errors.Is(err, model.ErrConflict):
				refused++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	total, used := 0, 0
	for shard := range keys.SyncReadsShards {
		var r syncstate.SyncReads
		if err := st.DB.Get(ctx, st.DB.Tables().Main, keys.SyncReadsKey(now.Truncate(24*time.Hour), 24*time.Hour, shard), &r); err == nil && r.Reads > 0 {
			total += r.Reads
			used++
		}
	}
	t.Logf("%d attempts: %d taken, %d refused, counted %d over %d shards", attempts, taken, refused, total, used)
	if taken > allowed || total != taken {
		t.Errorf("took %d reads (counted %d), want at most the %d allowed", taken, total, allowed)
	}
	if taken < allowed/2 {
		t.Errorf("took %d of %d allowed with %d attempts: the two-shard probe leaves too much unused", taken, allowed, attempts)
	}
	if used < keys.SyncReadsShards/2 {
		t.Errorf("reads landed on %d counters, want them spread over the %d shards", used, keys.SyncReadsShards)
	}
}
