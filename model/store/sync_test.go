package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/test/dynamolocal"
)

func TestSyncStateReadsWhatWasWrittenAndNotFoundOtherwise(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	if _, err := s.SyncState(ctx, "nobody"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("SyncState of a user without one: got %v, want ErrNotFound", err)
	}
	horizon := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	want := model.SyncState{UserID: "u1", AthleteID: 7, State: model.SyncBackfilling, Mode: model.SyncModeBackfill,
		ImportedCount: 12, HorizonUtc: horizon, UpdatedAtUtc: horizon.Add(time.Hour)}
	if err := s.Put(ctx, s.Tables().Main, &want); err != nil {
		t.Fatal(err)
	}
	got, err := s.SyncState(ctx, "u1")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != want.State || got.ImportedCount != 12 || !got.HorizonUtc.Equal(horizon) || got.Key != model.SyncStateKey("u1") {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}
