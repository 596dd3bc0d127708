package store

import (
	"context"
	"fmt"

	"github.com/commitcollect/backend/model"
)

// SyncState reads a user's Strava sync state (backfill and reconciliation
// progress) with a strongly consistent GetItem. It returns ErrNotFound when
// the user never had a sync, and ErrUnsupportedSchema when the item was
// written by newer code.
func (s *Store) SyncState(ctx context.Context, userID string) (*model.SyncState, error) {
	var st model.SyncState
	if err := s.Get(ctx, s.t.Main, model.SyncStateKey(userID), &st); err != nil {
		return nil, fmt.Errorf("read sync state of user %s: %w", userID, err)
	}
	return &st, nil
}
