package fetch_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/scripts/stravasim"
	"github.com/commitcollect/backend/test/ingesttest"
)

// A webhook is unsigned, so a delete event is only a
// reason to ask Strava, and Strava's 404 (deleted or made private) is a
// tombstone that comes back when Strava shows the activity again.

// TestForgedDeleteIsNotApplied: a delete event for an activity Strava still
// serves (anyone can forge one: the ids are public) costs one Strava read
// and leaves the workout counted, audited as an unconfirmed delete.
// Protection: delete events are confirmed by a fetch (worker.go fetchNew);
// applying them directly (MarkWorkout… on the event) fails this test.
func TestForgedDeleteIsNotApplied(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	h.Link("u1", 10, time.Hour)
	h.Activity(500, 10, "Run")
	create := h.Sim.ActivityEvent("create", 500, 10, nil)
	h.Deliver(create)
	before := h.Sim.Stats().ActivityRequests

	forged := h.Sim.ActivityEvent("delete", 500, 10, nil)
	forged.EventTime = create.EventTime + 1
	h.Deliver(forged)

	w := h.Workout("u1", 500)
	if w.IsDeleted || w.DeletedAtUtc != nil || w.SportType != "Run" || w.DistanceMeters != 5000 || !h.IsCounted("u1", 500) {
		t.Fatalf("got %s after a forged delete, want the workout alive and counted", ingesttest.Brief(w))
	}
	if n := h.Sim.Stats().ActivityRequests - before; n != 1 {
		t.Fatalf("the delete event cost %d Strava reads, want 1", n)
	}
	a := h.Audits(keys.UserPK("u1"))
	if len(a[ingest.AuditActivityDelete]) != 0 {
		t.Fatalf("got %d delete audits, want none", len(a[ingest.AuditActivityDelete]))
	}
	var unconfirmed int
	for _, e := range a[ingest.AuditActivityUpdate] {
		if e.Details["aspectType"] == ingest.AspectDelete && e.Details["reason"] != "" {
			unconfirmed++
		}
	}
	if unconfirmed != 1 {
		t.Fatalf("got audits %v, want one update audit of the delete event with its reason", a)
	}
}

// TestHiddenActivityComesBackOnUpdate: Strava answers 404 for an activity
// made private; the delete event marks the workout hidden-or-deleted. When
// the athlete makes it public again, the update webhook's fetch revives
// it: counted again, the tombstone's fields cleared.
// Protections: the fetch is not skipped for a stored tombstone
// (fetchAndWrite), and the ordered upsert revives a tombstone
// (store.UpsertWorkout); restoring either makes this test fail.
func TestHiddenActivityComesBackOnUpdate(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	h.LinkReadOnly("u1", 10)
	h.Activity(600, 10, "Run")
	create := h.Sim.ActivityEvent("create", 600, 10, nil)
	h.Deliver(create)

	h.Sim.SetPrivate(600, true)
	del := h.Sim.ActivityEvent("delete", 600, 10, nil)
	del.EventTime = create.EventTime + 1
	h.Deliver(del)
	hidden := h.Workout("u1", 600)
	if !hidden.IsDeleted || hidden.DeletedReason != model.WorkoutHiddenOrDeleted || hidden.DeletedAtUtc == nil ||
		hidden.FetchStartedAtNs == 0 || h.IsCounted("u1", 600) {
		t.Fatalf("got %s after a confirmed 404, want a hidden-or-deleted tombstone carrying its fetch", ingesttest.Brief(hidden))
	}
	a := h.Audits(keys.UserPK("u1"))
	if d := a[ingest.AuditActivityDelete]; len(d) != 1 || d[0].Details["reason"] != model.WorkoutHiddenOrDeleted {
		t.Fatalf("got delete audits %v, want one with reason %s", d, model.WorkoutHiddenOrDeleted)
	}

	h.Sim.SetPrivate(600, false)
	h.Sim.UpdateActivity(600, func(a *stravasim.Activity) { a.Distance = 5100 })
	up := h.Sim.ActivityEvent("update", 600, 10, map[string]string{"private": "false"})
	up.EventTime = create.EventTime + 2
	h.Deliver(up)
	back := h.Workout("u1", 600)
	if back.IsDeleted || back.DeletedReason != "" || back.DeletedAtUtc != nil || back.DistanceMeters != 5100 ||
		back.FetchStartedAtNs <= hidden.FetchStartedAtNs || !h.IsCounted("u1", 600) {
		t.Fatalf("got %s after the activity was public again, want it alive (5100 m) and counted", ingesttest.Brief(back))
	}
}

// TestUnconfirmableDeleteWaits: when Strava cannot confirm a delete (5xx,
// 429, 401) nothing is destroyed: the job is retried, deferred or parked
// (or dropped for re-authorization), the workout unchanged; a retry that
// gets Strava's 404 then confirms it.
func TestUnconfirmableDeleteWaits(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	h.Link("u1", 10, time.Hour)
	ctx := context.Background()
	for i, tc := range []struct {
		name       string
		status     int
		maxFails   int
		wantStatus ops.OutboxStatus
		retried    bool // failures+1, to run again
		deferred   bool // deferrals+1, to run again
	}{
		{"strava 500: retried with backoff", http.StatusInternalServerError, 0, ops.OutboxReceived, true, false},
		{"strava 503 at the last attempt: parked", http.StatusServiceUnavailable, 1, ops.OutboxParked, false, false},
		{"strava 429: deferred to the window reset", http.StatusTooManyRequests, 0, ops.OutboxReceived, false, true},
		// Last: it flags the connection.
		{"strava 401: needs re-authorization, dropped", http.StatusUnauthorized, 0, ops.OutboxDone, false, false},
	} {
		id := int64(800 + i)
		h.Activity(id, 10, "Run")
		create := h.Sim.ActivityEvent("create", id, 10, nil)
		h.Deliver(create)
		before := h.Workout("u1", id)

		h.Sim.DeleteActivity(id) // Strava did delete it, but cannot say so now
		ev := h.Sim.ActivityEvent("delete", id, 10, nil)
		ev.EventTime = create.EventTime + 1
		j := ingesttest.Job(ev)
		h.Claim(j)
		w := h.NewWorker()
		if tc.maxFails > 0 {
			w.Runner.MaxFailures = tc.maxFails
		}
		h.Sim.FailNext(stravasim.EndpointActivity, tc.status, 1)
		if err := w.Run(ctx, j); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		rec := h.Outbox(j)
		after := h.Workout("u1", id)
		if after.IsDeleted || after.DistanceMeters != before.DistanceMeters || after.FetchStartedAtNs != before.FetchStartedAtNs ||
			!h.IsCounted("u1", id) {
			t.Fatalf("%s: got %s, want the workout unchanged", tc.name, ingesttest.Brief(after))
		}
		if rec.Status != tc.wantStatus || (rec.Failures == 1) != tc.retried || (rec.Deferrals == 1) != tc.deferred ||
			(tc.wantStatus == ops.OutboxReceived && rec.NotBefore == 0) {
			t.Fatalf("%s: got outbox %+v, want %s (retried %v, deferred %v)", tc.name, rec, tc.wantStatus, tc.retried, tc.deferred)
		}
		if tc.wantStatus != ops.OutboxReceived {
			continue
		}
		// The job runs again (the sweeper would, after notBefore): Strava's
		// 404 now confirms the delete.
		if err := w.Run(ctx, j); err != nil {
			t.Fatalf("%s: rerun: %v", tc.name, err)
		}
		if got := h.Workout("u1", id); !got.IsDeleted || got.DeletedReason != model.WorkoutHiddenOrDeleted || h.Outbox(j).Status != ops.OutboxDone {
			t.Fatalf("%s: got %s, outbox %+v after the retry, want it confirmed deleted", tc.name, ingesttest.Brief(got), h.Outbox(j))
		}
	}
	if c, err := h.Connection("u1"); err != nil || !c.NeedsReauth {
		t.Fatalf("got connection %+v, %v; want it flagged by the 401", c, err)
	}
}
