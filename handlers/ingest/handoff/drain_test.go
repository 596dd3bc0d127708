package handoff_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/handoff"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/test/ingesttest"
)

// backlogStore is a function-field fake of handoff.OutboxStore over an
// in-memory backlog: a leased item is no longer due.
type backlogStore struct {
	due []ops.IdempotencyRecord
}

func (b *backlogStore) DueOutboxItems(_ context.Context, _ time.Time, limit int) ([]ops.IdempotencyRecord, error) {
	return append([]ops.IdempotencyRecord(nil), b.due[:min(limit, len(b.due))]...), nil
}

func (b *backlogStore) LeaseOutboxItem(_ context.Context, key string, _ time.Time, _ time.Duration) (*ops.IdempotencyRecord, error) {
	for i, d := range b.due {
		if d.IdempotencyKey == key {
			b.due = append(b.due[:i], b.due[i+1:]...)
			ev := ingest.Event{ObjectType: "activity", AspectType: "update", ObjectID: int64(i + 1), OwnerID: int64(i + 1), SubscriptionID: 1, EventTime: 1}
			k, _ := json.Marshal(ingest.Job{IdempotencyKey: key, CorrelationID: key, Event: ev})
			d.Job = string(k)
			return &d, nil
		}
	}
	return nil, model.ErrNotFound
}

func (b *backlogStore) SettleOutboxItem(context.Context, string, ops.OutboxStatus, string, time.Time) error {
	return nil
}

// TestDrainSweepsWhileWorkIsLeft: the sweeper Lambda's invocation sweeps
// again while a sweep leaves due work and time is left, so 450 athletes'
// due updates at a limit of 200 are all handed off in one invocation (three
// sweeps), and a deadline within the spare stops it after one. Protection:
// Drain's loop (a sweep a minute left 250 of them waiting a minute more).
func TestDrainSweepsWhileWorkIsLeft(t *testing.T) {
	t.Parallel()
	backlog := func() *backlogStore {
		b := &backlogStore{}
		for i := range 450 {
			b.due = append(b.due, webhook("update", int64(i), int64(i+1), i))
		}
		return b
	}
	for _, tc := range []struct {
		name       string
		timeout    time.Duration
		wantSweeps int
		wantLeft   int
	}{
		{"time left: drained", time.Minute, 3, 0},
		{"deadline within the spare: one sweep", 5 * time.Second, 1, 250},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := backlog()
			d := &ingesttest.RecordingDispatcher{}
			sw := handoff.NewSweeper(handoff.Stores{Due: b, Outbox: b}, d, ingesttest.Log())
			ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
			defer cancel()
			res, sweeps, err := sw.Drain(ctx, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d sweeps, %d dispatched, %d left", sweeps, res.Dispatched, len(b.due))
			if sweeps != tc.wantSweeps || len(b.due) != tc.wantLeft || res.Dispatched != 450-tc.wantLeft {
				t.Fatalf("got %d sweeps, %d dispatched, %d left; want %d sweeps, %d left", sweeps, res.Dispatched, len(b.due), tc.wantSweeps, tc.wantLeft)
			}
		})
	}
}
