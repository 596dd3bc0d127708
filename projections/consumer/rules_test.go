package consumer_test

import (
	"maps"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/calendar"
	"github.com/commitcollect/backend/model/rules"
	"github.com/commitcollect/backend/projections/consumer"
	"github.com/commitcollect/backend/test/fixture"
)

// TestRulesAreProjectedAndStored: a milestone with rules stores what it
// counts and what each reason left out, through DynamoDB Local's stream; a
// commute mark Strava shows later (as reconciliation writes it) takes the
// run out, the award it tipped stays; and a recompute of the same log
// writes nothing (the stored exclusions read back as computed). Protections:
// WriteProjection storing excluded, the projection's comparison of it.
func TestRulesAreProjectedAndStored(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putModel("rocket", 2)
	const user = "u-rules"
	k := calendar.WeekOf(time.Now())
	now := calendar.WeekStart(k).Add(36 * time.Hour)
	def := fixture.Definition(func(d *model.MilestoneDefinition) {
		end := calendar.WeekStart(k + 2)
		d.PeriodStartAtUtc, d.PeriodEndAtUtc, d.Target, d.PartCount = calendar.WeekStart(k-2), &end, 20_000, 2
		d.Rules = &rules.Rules{MinMovingTimeSeconds: 600, Exclude: []string{rules.ExcludeManual, rules.ExcludeCommute}}
	})
	e.putMilestone(user, "m1", def)
	run := func(id int64, day int, km float64, f rules.Flags) *model.Workout {
		w := fixture.Workout(user, id, fixture.Start(calendar.WeekStart(k-2).Add(time.Duration(day)*24*time.Hour)), fixture.Km(km), fixture.Stored(now))
		w.Flags = &f
		return w
	}
	e.putWorkout(run(1, 1, 10, rules.Flags{}))
	e.putWorkout(run(2, 2, 42, rules.Flags{Manual: true}))
	e.putWorkout(run(3, 8, 1, rules.Flags{})) // 300 s: below the minimum
	e.putWorkout(run(4, 9, 12, rules.Flags{}))
	c := consumer.New(e.stores(), consumer.Options{Metrics: e.metrics, Now: func() time.Time { return now }})
	if resp := e.handle(c, e.newRecords()); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures: %+v", resp.BatchItemFailures)
	}
	m := e.milestone(user, "m1")
	if want := map[string]int{"manual": 1, "below_minimum": 1}; m.ProgressValue != 22_000_000 || m.WorkoutsCounted != 2 ||
		m.AwardedParts != 2 || !maps.Equal(m.Excluded, want) {
		t.Fatalf("stored %+v, want 22 km of 2 runs, both parts, excluded %v", m.Projection, want)
	}

	// Reconciliation finds run 4 marked as a commute on Strava.
	commute := run(4, 9, 12, rules.Flags{Commute: true})
	commute.FetchStartedAtNs = time.Now().UnixNano()
	if err := e.s.Workouts.UpsertWorkout(e.ctx, commute); err != nil {
		t.Fatal(err)
	}
	if resp := e.handle(c, e.newRecords()); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures: %+v", resp.BatchItemFailures)
	}
	after := e.milestone(user, "m1")
	if want := map[string]int{"manual": 1, "below_minimum": 1, "commute": 1}; after.ProgressValue != 10_000_000 ||
		after.AwardedParts != 2 || !maps.Equal(after.Excluded, want) {
		t.Fatalf("after the commute mark %+v, want 10 km, the 2 parts kept, excluded %v", after.Projection, want)
	}

	// The same log again: nothing to write.
	if _, err := c.RecomputeUser(e.ctx, user, false); err != nil {
		t.Fatal(err)
	}
	if again := e.milestone(user, "m1"); again.Version != after.Version {
		t.Fatalf("a recompute of the same log wrote version %d over %d", again.Version, after.Version)
	}
}
