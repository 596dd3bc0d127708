package syncjobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest/syncjobs"
	"github.com/commitcollect/backend/handlers/ingest/syncjobs/scheduler"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/scripts/stravasim"
)

// TestRecheckBringsBackAnActivitySettledUnseen: a burst settled an
// old-dated activity unseen (Strava's list left it out twice) and booked
// the athlete's recheck. The recheck waits until an hour after its slot,
// then walks the whole history and writes the activity; a later booking in
// the same slot adds nothing and does not push the walk later.
// Protections: the whole-history window (with a reconciliation's 14 days
// the 2019 activity stays lost), the wait (without it the job is due at
// once, while Strava's list may still lag), the slot's key and instant
// (without them every burst books another walk, or pushes it on).
func TestRecheckBringsBackAnActivitySettledUnseen(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, syncjobs.SyncSettings{})
	ctx := context.Background()
	r.Link("u1", 96, 24*time.Hour)
	r.history(96, 8600, 3, 24*time.Hour)
	r.Sim.PutActivity(stravasim.Activity{ID: 8500, AthleteID: 96, Name: "Found again", SportType: "Run", Distance: 8000,
		MovingTime: 2400, ElapsedTime: 2500, StartDate: time.Date(2019, 5, 4, 7, 0, 0, 0, time.UTC)})

	if ok, err := r.sched.RecheckUnseen(ctx, "u1", 96, r.now); err != nil || !ok {
		t.Fatalf("first booking: %v, %v; want booked", ok, err)
	}
	slot := r.now.Truncate(scheduler.UnseenSlot)
	if ok, err := r.sched.RecheckUnseen(ctx, "u1", 96, slot.Add(scheduler.UnseenSlot-time.Minute)); err != nil || ok {
		t.Fatalf("second booking in the slot: %v, %v; want nothing new", ok, err)
	}
	key := keys.SyncJobKey(scheduler.UnseenKeyMode, "u1", slot)
	rec, err := r.St.Outbox.OutboxItem(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	until := slot.Add(scheduler.UnseenSlot + scheduler.UnseenRecheckAfter)
	if rec.Status != ops.OutboxReceived || rec.LeaseUntil != until.UnixMilli() {
		t.Fatalf("recheck %+v: want received and held until %s (an hour after its slot)", rec, until)
	}
	due, err := r.St.Pending.DueOutboxItems(ctx, until.Add(-time.Minute), 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range due {
		if d.IdempotencyKey == key {
			t.Fatal("the recheck is due before its time")
		}
	}
	r.drain(key, 10)
	if w := r.Workout("u1", 8500); w == nil || w.IsDeleted {
		t.Fatalf("workout 8500: %+v; want it back", w)
	}
	if n := len(r.Workouts("u1")); n != 4 {
		t.Fatalf("%d workouts, want the whole history of 4", n)
	}
}
