package ingest_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/syncjobs"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/syncstate"
	"github.com/commitcollect/backend/test/stravasim"
)

// A webhook is unsigned, so a delete event is only a
// reason to ask Strava, and Strava's 404 (deleted or made private) is a
// tombstone that comes back when Strava shows the activity again.

// brief shows what these tests look at (a Workout's %+v prints its key only).
func brief(w *model.Workout) string {
	return fmt.Sprintf("{isDeleted %v reason %q deletedAt %v %s %.0f m fetch %d}", w.IsDeleted, w.DeletedReason,
		w.DeletedAtUtc, w.SportType, w.DistanceMeters, w.FetchStartedAtNs)
}

// linkReadOnly links like link but with an activity:read grant (the one
// CommitCollect asks for), to which Strava answers 404 for a private
// activity.
func (h *harness) linkReadOnly(user string, athlete int64) {
	h.t.Helper()
	h.link(user, athlete, time.Hour)
	tok := h.sim.IssueTokens(athlete, time.Hour, "read", "activity:read")
	c := &model.StravaConnection{UserID: user, AthleteID: athlete, AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken,
		ExpiresAtUtc: tok.ExpiresAt, Scopes: tok.Scope, TokenVersion: 1, UpdatedAtUtc: time.Now().UTC()}
	if err := h.st.Put(context.Background(), h.st.Tables().Main, c); err != nil {
		h.t.Fatal(err)
	}
}

// isCounted says whether the workout is in the user's workout log as a live
// workout (what the projection counts: isDeleted != true).
func (h *harness) isCounted(user string, id int64) bool {
	h.t.Helper()
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lg, err := h.st.WorkoutLog(context.Background(), user, []model.Window{{From: from}})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, w := range lg.Workouts {
		if w.ActivityID == id {
			return !w.IsDeleted
		}
	}
	return false
}

// TestForgedDeleteIsNotApplied: a delete event for an activity Strava still
// serves (anyone can forge one: the ids are public) costs one Strava read
// and leaves the workout counted, audited as an unconfirmed delete.
// Protection: delete events are confirmed by a fetch (worker.go fetchNew);
// applying them directly (MarkWorkout… on the event) fails this test.
func TestForgedDeleteIsNotApplied(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.link("u1", 10, time.Hour)
	h.activity(500, 10, "Run")
	create := h.sim.ActivityEvent("create", 500, 10, nil)
	h.deliver(create)
	before := h.sim.Stats().ActivityRequests

	forged := h.sim.ActivityEvent("delete", 500, 10, nil)
	forged.EventTime = create.EventTime + 1
	h.deliver(forged)

	w := h.workout("u1", 500)
	if w.IsDeleted || w.DeletedAtUtc != nil || w.SportType != "Run" || w.DistanceMeters != 5000 || !h.isCounted("u1", 500) {
		t.Fatalf("got %s after a forged delete, want the workout alive and counted", brief(w))
	}
	if n := h.sim.Stats().ActivityRequests - before; n != 1 {
		t.Fatalf("the delete event cost %d Strava reads, want 1", n)
	}
	a := h.audits(keys.UserPK("u1"))
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
	h := newHarness(t)
	h.linkReadOnly("u1", 10)
	h.activity(600, 10, "Run")
	create := h.sim.ActivityEvent("create", 600, 10, nil)
	h.deliver(create)

	h.sim.SetPrivate(600, true)
	del := h.sim.ActivityEvent("delete", 600, 10, nil)
	del.EventTime = create.EventTime + 1
	h.deliver(del)
	hidden := h.workout("u1", 600)
	if !hidden.IsDeleted || hidden.DeletedReason != model.WorkoutHiddenOrDeleted || hidden.DeletedAtUtc == nil ||
		hidden.FetchStartedAtNs == 0 || h.isCounted("u1", 600) {
		t.Fatalf("got %s after a confirmed 404, want a hidden-or-deleted tombstone carrying its fetch", brief(hidden))
	}
	a := h.audits(keys.UserPK("u1"))
	if d := a[ingest.AuditActivityDelete]; len(d) != 1 || d[0].Details["reason"] != model.WorkoutHiddenOrDeleted {
		t.Fatalf("got delete audits %v, want one with reason %s", d, model.WorkoutHiddenOrDeleted)
	}

	h.sim.SetPrivate(600, false)
	h.sim.UpdateActivity(600, func(a *stravasim.Activity) { a.Distance = 5100 })
	up := h.sim.ActivityEvent("update", 600, 10, map[string]string{"private": "false"})
	up.EventTime = create.EventTime + 2
	h.deliver(up)
	back := h.workout("u1", 600)
	if back.IsDeleted || back.DeletedReason != "" || back.DeletedAtUtc != nil || back.DistanceMeters != 5100 ||
		back.FetchStartedAtNs <= hidden.FetchStartedAtNs || !h.isCounted("u1", 600) {
		t.Fatalf("got %s after the activity was public again, want it alive (5100 m) and counted", brief(back))
	}
}

// TestHiddenActivityComesBackThroughReconciliation: the same revival without
// any webhook: a reconciliation list that shows the activity again writes
// it (a stored tombstone counts as changed), and absence from a list still
// never deletes.
// Protection: sync.go apply treats a listed tombstone as changed; counting
// it as unchanged makes this test fail.
func TestHiddenActivityComesBackThroughReconciliation(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, syncjobs.SyncSettings{ReconcileDays: 14, ReconcileInterval: time.Hour})
	r.linkReadOnly("u1", 94)
	if err := r.st.Put(context.Background(), r.st.Tables().Main, &model.Profile{UserID: "u1", AthleteID: 94}); err != nil {
		t.Fatal(err)
	}
	ids := r.history(94, 7000, 5, 24*time.Hour)
	r.drain(r.backfill("u1"), 10)
	hiddenID, goneID := ids[1], ids[3]

	r.sim.SetPrivate(hiddenID, true)
	r.deliver(r.sim.ActivityEvent("delete", hiddenID, 94, nil))
	if w := r.workout("u1", hiddenID); !w.IsDeleted || w.DeletedReason != model.WorkoutHiddenOrDeleted {
		t.Fatalf("got %s, want hidden-or-deleted", brief(w))
	}
	// A reconciliation while it is private: absent from the list, kept hidden.
	r.sim.DeleteActivity(goneID) // and one removed without any event
	r.counted.reset()
	r.now = r.now.Add(time.Hour)
	if _, err := r.sched.ReconcileAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.drain(keys.SyncJobKey(syncstate.SyncModeReconcile, "u1", r.now.Truncate(time.Hour)), 10)
	if total, _ := r.counted.writes(); total != 0 {
		t.Fatalf("got writes %v while the activity is private, want none", r.counted.upserts)
	}
	if w := r.workout("u1", goneID); w.IsDeleted {
		t.Fatalf("got %s, want a workout absent from a list kept", brief(w))
	}

	// Public again, with no webhook: the next reconciliation revives it.
	r.sim.SetPrivate(hiddenID, false)
	r.now = r.now.Add(time.Hour)
	if _, err := r.sched.ReconcileAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.drain(keys.SyncJobKey(syncstate.SyncModeReconcile, "u1", r.now.Truncate(time.Hour)), 10)
	if total, _ := r.counted.writes(); total != 1 || r.counted.upserts[hiddenID] != 1 {
		t.Fatalf("got writes %v, want exactly one, of the revived activity %d", r.counted.upserts, hiddenID)
	}
	if w := r.workout("u1", hiddenID); w.IsDeleted || w.DeletedReason != "" || w.DeletedAtUtc != nil || !r.isCounted("u1", hiddenID) {
		t.Fatalf("got %s after the list showed it again, want it alive and counted", brief(w))
	}
}

// TestUnconfirmableDeleteWaits: when Strava cannot confirm a delete (5xx,
// 429, 401) nothing is destroyed: the job is retried, deferred or parked
// (or dropped for re-authorization), the workout unchanged; a retry that
// gets Strava's 404 then confirms it.
func TestUnconfirmableDeleteWaits(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.link("u1", 10, time.Hour)
	ctx := context.Background()
	for i, tc := range []struct {
		name       string
		status     int
		maxFails   int
		wantStatus model.OutboxStatus
		retried    bool // failures+1, to run again
		deferred   bool // deferrals+1, to run again
	}{
		{"strava 500: retried with backoff", http.StatusInternalServerError, 0, model.OutboxReceived, true, false},
		{"strava 503 at the last attempt: parked", http.StatusServiceUnavailable, 1, model.OutboxParked, false, false},
		{"strava 429: deferred to the window reset", http.StatusTooManyRequests, 0, model.OutboxReceived, false, true},
		// Last: it flags the connection.
		{"strava 401: needs re-authorization, dropped", http.StatusUnauthorized, 0, model.OutboxDone, false, false},
	} {
		id := int64(800 + i)
		h.activity(id, 10, "Run")
		create := h.sim.ActivityEvent("create", id, 10, nil)
		h.deliver(create)
		before := h.workout("u1", id)

		h.sim.DeleteActivity(id) // Strava did delete it, but cannot say so now
		ev := h.sim.ActivityEvent("delete", id, 10, nil)
		ev.EventTime = create.EventTime + 1
		j := job(ev)
		h.claim(j)
		w := h.newWorker()
		if tc.maxFails > 0 {
			w.Runner.MaxFailures = tc.maxFails
		}
		h.sim.FailNext(stravasim.EndpointActivity, tc.status, 1)
		if err := w.Run(ctx, j); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		rec := h.outbox(j)
		after := h.workout("u1", id)
		if after.IsDeleted || after.DistanceMeters != before.DistanceMeters || after.FetchStartedAtNs != before.FetchStartedAtNs ||
			!h.isCounted("u1", id) {
			t.Fatalf("%s: got %s, want the workout unchanged", tc.name, brief(after))
		}
		if rec.Status != tc.wantStatus || (rec.Failures == 1) != tc.retried || (rec.Deferrals == 1) != tc.deferred ||
			(tc.wantStatus == model.OutboxReceived && rec.NotBefore == 0) {
			t.Fatalf("%s: got outbox %+v, want %s (retried %v, deferred %v)", tc.name, rec, tc.wantStatus, tc.retried, tc.deferred)
		}
		if tc.wantStatus != model.OutboxReceived {
			continue
		}
		// The job runs again (the sweeper would, after notBefore): Strava's
		// 404 now confirms the delete.
		if err := w.Run(ctx, j); err != nil {
			t.Fatalf("%s: rerun: %v", tc.name, err)
		}
		if got := h.workout("u1", id); !got.IsDeleted || got.DeletedReason != model.WorkoutHiddenOrDeleted || h.outbox(j).Status != model.OutboxDone {
			t.Fatalf("%s: got %s, outbox %+v after the retry, want it confirmed deleted", tc.name, brief(got), h.outbox(j))
		}
	}
	if c, err := h.connection("u1"); err != nil || !c.NeedsReauth {
		t.Fatalf("got connection %+v, %v; want it flagged by the 401", c, err)
	}
}
