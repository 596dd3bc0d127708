package main

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/ops"
)

// drops is a function-field fake of Drops over an in-memory set of
// dropped keys, listed in order whatever was re-admitted (an index that
// lags).
type drops struct {
	list    func(limit int) []ops.IdempotencyRecord
	readmit func(key string) error
}

func (d drops) DroppedOutboxItems(_ context.Context, _ int64, limit int) ([]ops.IdempotencyRecord, error) {
	return d.list(limit), nil
}

func (d drops) ReadmitOutboxItem(_ context.Context, key string, _ int64, _ time.Time) (*ops.IdempotencyRecord, error) {
	return nil, d.readmit(key)
}

// TestReadmitWalksUntilNothingMoves: 1,200 dropped events are re-admitted
// a page at a time; an index that still lists re-admitted ones (a
// conflict each) ends the walk once a page moves none; a failure stops it
// with the count so far. Protection: the stop when a page moves nothing
// (without it a lagging index loops for ever).
func TestReadmitWalksUntilNothingMoves(t *testing.T) {
	t.Parallel()
	const n = 1200
	dropped := map[string]bool{}
	var keys []string
	for i := range n {
		k := fmt.Sprintf("k%04d", i)
		dropped[k], keys = true, append(keys, k)
	}
	lagging := drops{
		// The index still lists the three keys re-admitted last before
		// the first one left, and the last three once none is left.
		list: func(limit int) []ops.IdempotencyRecord {
			for i, k := range keys {
				if dropped[k] {
					return recs(keys[max(0, i-3):min(len(keys), max(0, i-3)+limit)])
				}
			}
			return recs(keys[len(keys)-3:])
		},
		readmit: func(key string) error {
			if !dropped[key] {
				return fmt.Errorf("re-admit %s: %w", key, model.ErrConflict)
			}
			delete(dropped, key)
			return nil
		},
	}
	rep, err := Readmit(context.Background(), lagging, 7, time.Now())
	if err != nil || rep.Readmitted != n || len(dropped) != 0 {
		t.Fatalf("%+v, %v: %d left; want all %d re-admitted", rep, err, len(dropped), n)
	}
	boom := errors.New("throttled")
	failing := drops{list: func(int) []ops.IdempotencyRecord { return recs([]string{"a", "b"}) },
		readmit: func(string) error { return boom }}
	if rep, err := Readmit(context.Background(), failing, 7, time.Now()); !errors.Is(err, boom) || rep.Readmitted != 0 {
		t.Fatalf("%+v, %v; want the failure, nothing re-admitted", rep, err)
	}
}

func recs(keys []string) []ops.IdempotencyRecord {
	out := make([]ops.IdempotencyRecord, len(keys))
	for i, k := range keys {
		out[i].IdempotencyKey = k
	}
	return out
}
