package consumer_test

import (
	"errors"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/store/limits"
	"github.com/commitcollect/backend/model/syncstate"
	"github.com/commitcollect/backend/projections/consumer"
	"github.com/commitcollect/backend/test/dynamolocal"
	"github.com/commitcollect/backend/test/fixture"
)

// TestGuardedWorkoutWritesAreRemovedByTheProjector: a webhook fetch's
// workout write that lands after the account deletion, or after a
// confirmed deauthorization, is removed when the projector handles its
// record (the guard is read with the milestones, no request of its own); a
// reconnect before that keeps it. Protection: the guard in the milestone
// read (keys.GuardAndMilestones) and Consumer.removeGuarded.
func TestGuardedWorkoutWritesAreRemovedByTheProjector(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putModel("rocket", 4)
	e.putMilestone("revoked", "m1", fixture.Definition(fixture.Parts(4)))
	e.putWorkout(fixture.Workout("revoked", 1, fixture.Day(1), fixture.Km(10), fixture.Corr("c1")))
	c := e.consumer(consumer.Options{})
	e.handle(c, e.newRecords())
	e.newRecords()
	now := time.Now().UTC()

	// The account of "gone" is deleted while its fetch is in flight.
	if err := e.s.Guard.MarkUserDeleted(e.ctx, "gone", now); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Workouts.UpsertWorkout(e.ctx, fixture.Workout("gone", 5, fixture.Day(1), fixture.Km(10), fixture.Corr("late"))); err != nil {
		t.Fatal(err)
	}
	// The grant of "revoked" is revoked while its fetch is in flight.
	seedGrant(t, e, "revoked")
	grant, err := e.s.Connections.StravaConnectionGrant(e.ctx, "revoked")
	if err != nil {
		t.Fatal(err)
	}
	revokedAt := now.Truncate(time.Second)
	if err := e.s.Connections.RevokeStravaConnection(e.ctx, grant, revokedAt, now, now); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Workouts.UpsertWorkout(e.ctx, fixture.Workout("revoked", 2, fixture.Day(2), fixture.Km(20), fixture.Corr("late"))); err != nil {
		t.Fatal(err)
	}
	if resp := e.handle(c, e.newRecords()); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v", resp.BatchItemFailures)
	}
	for _, w := range []struct {
		user string
		id   int64
	}{{"gone", 5}, {"revoked", 2}} {
		if _, err := e.s.Workouts.Workout(e.ctx, w.user, w.id); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("workout %d of %s written after the guard: %v, want it removed", w.id, w.user, err)
		}
	}
	if m := e.milestone("revoked", "m1"); m.ProgressValue != 10_000_000 {
		t.Errorf("revoked user's progress %d, want 10 km (the late write not counted)", m.ProgressValue)
	}
	if _, err := e.s.Workouts.Workout(e.ctx, "revoked", 1); err != nil {
		t.Errorf("workout written before the revocation: %v (the purge's to delete, not the projector's)", err)
	}

	// A reconnect clears the revocation before the projector sees the
	// next late write: it stays (the reconnect's backfill may own it).
	if err := e.s.Workouts.UpsertWorkout(e.ctx, fixture.Workout("revoked", 3, fixture.Day(3), fixture.Km(30), fixture.Corr("late"))); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Connections.ClearStravaRevocation(e.ctx, "revoked", revokedAt, now); err != nil {
		t.Fatal(err)
	}
	e.handle(c, e.newRecords())
	if _, err := e.s.Workouts.Workout(e.ctx, "revoked", 3); err != nil {
		t.Errorf("workout after the reconnect: %v, want it kept", err)
	}
}

// TestASyncPageIsProjectedOnceAtItsEnd: workouts a sync page wrote
// (syncJobKey set) trigger nothing by themselves, nor does a page that
// only counts its imports; the sync's projection request (projectedCount
// grows: its last page, or every ProjectEveryImported) projects the user
// once, whatever the number of records; a later webhook write of the same
// workout triggers again. Protections: Classify ignoring sync-page writes,
// its sync state trigger (without it the milestone never counts the page),
// and the trigger's wait for the request (without it every page recomputes).
func TestASyncPageIsProjectedOnceAtItsEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putModel("rocket", 4)
	e.putMilestone("u1", "m1", fixture.Definition(fixture.Parts(4)))
	c := e.consumer(consumer.Options{})
	e.handle(c, e.newRecords())
	e.newRecords()
	for i := range 5 {
		w := fixture.Workout("u1", int64(10+i), fixture.Day(i+1), fixture.Km(10), fixture.Corr("sync"))
		w.SyncJobKey = "SYNC#backfill#u1"
		if err := e.s.Workouts.UpsertWorkout(e.ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	before := c.Stats().UsersProjected
	if e.handle(c, e.newRecords()); c.Stats().UsersProjected != before {
		t.Fatalf("the page's workout records projected the user %d times, want 0", c.Stats().UsersProjected-before)
	}
	if m := e.milestone("u1", "m1"); m.ProgressValue != 0 {
		t.Fatalf("progress %d before the page's end, want 0", m.ProgressValue)
	}
	if _, err := limits.New(e.s).UpdateSyncState(e.ctx, "u1", func(st *syncstate.SyncState) error {
		st.ImportedCount += 5 // a page, more to come
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if e.handle(c, e.newRecords()); c.Stats().UsersProjected != before {
		t.Fatal("a page that did not ask for a projection projected the user")
	}
	if _, err := limits.New(e.s).UpdateSyncState(e.ctx, "u1", func(st *syncstate.SyncState) error {
		st.RequestProjection() // the sync's last page
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if e.handle(c, e.newRecords()); c.Stats().UsersProjected != before+1 {
		t.Fatalf("the page's end projected the user %d times, want 1", c.Stats().UsersProjected-before)
	}
	if m := e.milestone("u1", "m1"); m.ProgressValue != 50_000_000 || m.WorkoutsCounted != 5 {
		t.Fatalf("after the page's end: %d mm, %d workouts; want 50 km, 5", m.ProgressValue, m.WorkoutsCounted)
	}
	e.newRecords()
	// A sync state write without new imports triggers nothing.
	if _, err := limits.New(e.s).UpdateSyncState(e.ctx, "u1", func(st *syncstate.SyncState) error {
		st.State = syncstate.SyncIdle
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if e.handle(c, e.newRecords()); c.Stats().UsersProjected != before+1 {
		t.Fatal("a sync state write without imports projected the user")
	}
	// A webhook fetch's write of an imported workout is its own trigger.
	w := fixture.Workout("u1", 10, fixture.Day(1), fixture.Km(25), fixture.Corr("hook"))
	if err := e.s.Workouts.UpsertWorkout(e.ctx, w); err != nil {
		t.Fatal(err)
	}
	if e.handle(c, e.newRecords()); e.milestone("u1", "m1").ProgressValue != 65_000_000 {
		t.Fatalf("after the webhook's edit: %d mm, want 65 km", e.milestone("u1", "m1").ProgressValue)
	}
}

// seedGrant stores a Strava connection for user (tokens sealed).
func seedGrant(t *testing.T, e *env, user string) {
	t.Helper()
	if e.s.DB.Secrets == nil {
		e.s.DB.Secrets = dynamolocal.NewSealer(t)
	}
	c := &model.StravaConnection{UserID: user, AthleteID: 77, AccessToken: "a", RefreshToken: "r",
		ExpiresAtUtc: time.Now().Add(time.Hour).UTC(), TokenVersion: 1, Scopes: []string{"read"}, UpdatedAtUtc: time.Now().UTC()}
	if err := e.s.DB.Put(e.ctx, e.s.DB.Tables().Main, c); err != nil {
		t.Fatal(err)
	}
}
