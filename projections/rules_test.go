package projections_test

import (
	"maps"
	"reflect"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/calendar"
	"github.com/commitcollect/backend/model/rules"
	"github.com/commitcollect/backend/projections"
	"github.com/commitcollect/backend/test/fixture"
)

// TestRulesCountAndSayWhy: a milestone with rules counts only what passes
// every one, says how many of the period's workouts each reason left out,
// and an event that reads only its week (the others from the sums) finds
// the same as a projection of the whole period, exclusions included. A
// flag Strava toggled later (a run marked as a commute) lowers the value.
// Protections: the verdicts in steps, the excluded counts kept in the week
// sums, the rules in the sums' fingerprint (sums counted without rules are
// not used).
func TestRulesCountAndSayWhy(t *testing.T) {
	t.Parallel()
	now := fixture.March.AddDate(0, 1, 0)
	def := fixture.Definition(func(d *model.MilestoneDefinition) {
		d.Rules = &rules.Rules{MinDistanceMeters: 3000, Exclude: []string{rules.ExcludeManual, rules.ExcludeCommute}}
	})
	flagged := func(w model.Workout, f rules.Flags) model.Workout { w.Flags = &f; return w }
	// Workouts stored since flags are kept: Strava's marks are known.
	marchRun := func(id int64, day int, km float64) model.Workout {
		return flagged(marchRun(id, day, km), rules.Flags{})
	}
	ride := marchRun(6, 20, 40)
	ride.SportType = "Ride"
	log := []model.Workout{marchRun(1, 0, 10), flagged(marchRun(2, 3, 42), rules.Flags{Manual: true}), marchRun(3, 9, 2),
		flagged(marchRun(4, 10, 12), rules.Flags{Trainer: true}), marchRun(5, 17, 8), ride}
	whole, err := projections.ProjectWith(def, model.Projection{Status: model.StatusActive}, projections.Held{}, projections.Log{Workouts: log}, now)
	if err != nil {
		t.Fatal(err)
	}
	p := whole.Projection
	wantExcluded := map[string]int{"manual": 1, "below_minimum": 1, "sport": 1}
	if p.ProgressValue != 30_000_000 || p.WorkoutsCounted != 3 || !maps.Equal(p.Excluded, wantExcluded) || p.Weeks == nil {
		t.Fatalf("value %d, counted %d, excluded %v; want 30 km of 3 runs (a trainer run is not excluded here), excluded %v",
			p.ProgressValue, p.WorkoutsCounted, p.Excluded, wantExcluded)
	}

	// Strava's reconciliation brings a commute flag on run 5: the event
	// reads only its week.
	commute := flagged(marchRun(5, 17, 8), rules.Flags{Commute: true})
	after := append(log[:4:4], commute, ride)
	wantAfter, err := projections.ProjectWith(def, p, projections.Held{}, projections.Log{Workouts: after}, now)
	if err != nil {
		t.Fatal(err)
	}
	k := calendar.WeekOf(commute.StartDateUtc)
	got, err := projections.ProjectWith(def, p, projections.Held{}, projections.Log{Workouts: inWeeks(after, map[int64]bool{k: true}),
		ReadWeeks: map[int64]bool{k: true}}, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := sameCount(got, wantAfter); err != nil {
		t.Fatal(err)
	}
	wantExcluded["commute"] = 1
	if g := got.Projection; g.ProgressValue != 22_000_000 || !maps.Equal(g.Excluded, wantExcluded) || !got.Changed {
		t.Fatalf("after the commute flag: value %d, excluded %v; want 22 km, %v", g.ProgressValue, g.Excluded, wantExcluded)
	}

	// The same sums under a definition without rules are not used: the
	// fingerprint names the rules.
	plain := fixture.Definition()
	if projections.UsesWeeks(plain, p) || !projections.UsesWeeks(def, p) {
		t.Fatal("sums counted under rules were used for a definition without them, or not for their own")
	}
}

// TestNoExclusionsIsNoMap: a period where nothing was left out stores no
// excluded map (absent, never an empty map in a stream image).
func TestNoExclusionsIsNoMap(t *testing.T) {
	t.Parallel()
	r, err := projections.ProjectWith(fixture.Definition(), model.Projection{Status: model.StatusActive}, projections.Held{},
		projections.Log{Workouts: []model.Workout{marchRun(1, 0, 10)}}, fixture.March.AddDate(0, 1, 0))
	if err != nil || r.Projection.Excluded != nil {
		t.Fatalf("excluded %v (%v), want nil", r.Projection.Excluded, err)
	}
	for _, s := range r.Projection.Weeks.Sums {
		if s.Excluded != nil || !reflect.DeepEqual(s, calendar.WeekSum{Units: 10_000_000, Count: 1}) {
			t.Fatalf("week sum %+v", s)
		}
	}
}

// TestASeriesAppliesItsRulesToEveryPeriod: each period of a series is
// projected under the series' rules. Protection: Occurrence copying the
// whole definition, rules included.
func TestASeriesAppliesItsRulesToEveryPeriod(t *testing.T) {
	t.Parallel()
	s := &model.Milestone{UserID: "u", MilestoneID: "s", MilestoneDefinition: fixture.Definition(fixture.LocalDays("2026-03-02", ""),
		func(d *model.MilestoneDefinition) {
			d.Recurrence, d.Metric, d.Target = calendar.Weekly, model.MetricCount, 3
			d.Rules = &rules.Rules{Exclude: []string{rules.ExcludeTrainer}}
		})}
	for _, week := range []string{"2026-03-02", "2026-03-09"} {
		o := s.Period().Occurrence(mustDate(t, week))
		p := projections.Occurrence(s, o, nil, fixture.March)
		run := *fixture.Workout("u", 1, fixture.Start(mustDate(t, week).Add(30*time.Hour)))
		run.Flags = &rules.Flags{Trainer: true}
		r, err := projections.ProjectWith(p.MilestoneDefinition, p.Projection, projections.Held{}, projections.Log{Workouts: []model.Workout{run}},
			fixture.March.AddDate(0, 1, 0))
		if err != nil || !rules.Same(p.Rules, s.Rules) || r.Projection.WorkoutsCounted != 0 || r.Projection.Excluded["trainer"] != 1 {
			t.Fatalf("week of %s: rules %+v, counted %d, excluded %v (%v); want the series' rules, the trainer run left out",
				week, p.Rules, r.Projection.WorkoutsCounted, r.Projection.Excluded, err)
		}
	}
}

func mustDate(t *testing.T, s string) time.Time {
	t.Helper()
	d, err := calendar.ParseDate(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
