package consumer_test

import (
	"testing"

	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/projections/consumer"
	"github.com/commitcollect/backend/test/fixture"
)

// TestWorkoutRemovalReprojects: a workout item removed from the log (DynamoDB
// TTL after a deauthorization, here a DeleteItem as its stand-in) reaches
// the projector as a stream REMOVE record and re-projects the user: progress
// drops, awards stay, and verify (a dry-run recompute) finds no drift.
// Protection: Classify treating a workout REMOVE as a trigger.
func TestWorkoutRemovalReprojects(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putModel("rocket", 4)
	e.putMilestone("u1", "m1", fixture.Definition(fixture.Parts(4)))
	e.putWorkout(fixture.Workout("u1", 1, fixture.Day(1), fixture.Km(60), fixture.Corr("c1")))
	e.putWorkout(fixture.Workout("u1", 2, fixture.Day(2), fixture.Km(30), fixture.Corr("c2")))
	c := e.consumer(consumer.Options{})
	if resp := e.handle(c, e.newRecords()); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v", resp.BatchItemFailures)
	}
	if m := e.milestone("u1", "m1"); m.ProgressValue != 90_000_000 || m.AwardedParts != 3 {
		t.Fatalf("before: progress %d awarded %d, want 90 km and 3 parts", m.ProgressValue, m.AwardedParts)
	}
	e.newRecords() // the projector's own writes

	if err := e.s.DB.Delete(e.ctx, e.s.DB.Tables().Main, keys.WorkoutKey("u1", 1)); err != nil {
		t.Fatal(err)
	}
	recs := e.newRecords()
	if len(recs) != 1 || recs[0].EventName != "REMOVE" {
		t.Fatalf("got %d records, want the workout's REMOVE", len(recs))
	}
	if resp := e.handle(c, recs); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v", resp.BatchItemFailures)
	}
	m := e.milestone("u1", "m1")
	if m.ProgressValue != 30_000_000 || m.AwardedParts != 3 || len(e.awards("u1", "m1")) != 3 {
		t.Fatalf("after: progress %d awarded %d (%d award items), want 30 km and the 3 parts kept",
			m.ProgressValue, m.AwardedParts, len(e.awards("u1", "m1")))
	}
	rep, err := c.RecomputeUser(e.ctx, "u1", true)
	if err != nil {
		t.Fatal(err)
	}
	for _, mr := range rep.Milestones {
		if mr.Drift() {
			t.Fatalf("verify reports drift: %v", mr.Diffs())
		}
	}
}
