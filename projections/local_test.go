package projections_test

import (
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/projections"
	"github.com/commitcollect/backend/test/fixture"
)

// TestLocalCalendarCountsWhereTheAthleteRan: "March" in the athlete's
// calendar is March on the wall clock where each activity was recorded. A
// Sydney athlete's 6 am runs on 1 March count (in UTC they are February),
// their runs on 1 April do not (in UTC they are March), and a run on
// holiday counts by the clock of the holiday.
func TestLocalCalendarCountsWhereTheAthleteRan(t *testing.T) {
	t.Parallel()
	w := func(id int64, local, zone string) model.Workout {
		return *fixture.Workout("u1", id, fixture.Km(10), fixture.Local(local, zone))
	}
	log := projections.Log{Workouts: []model.Workout{
		w(1, "2026-03-01T06:00", "Australia/Sydney"),  // UTC 28 Feb 19:00
		w(2, "2026-04-01T06:00", "Australia/Sydney"),  // UTC 31 Mar 19:00
		w(3, "2026-03-31T23:30", "Europe/London"),     // UTC 31 Mar 22:30 (BST from 29 March)
		w(4, "2026-03-31T19:00", "Pacific/Honolulu"),  // UTC 1 Apr 05:00
		w(5, "2026-02-28T23:59", "Australia/Sydney"),  // February where it was run
		w(6, "2026-03-15T07:00", "America/Sao_Paulo"), // mid-month, anywhere
	}}
	tests := []struct {
		name        string
		def         model.MilestoneDefinition
		wantCounted int
	}{
		{"local March", fixture.Definition(fixture.LocalDays("2026-03-01", "2026-03-31")), 4},               // 1, 3, 4, 6
		{"UTC March", fixture.Definition(), 3},                                                              // 2, 3, 6
		{"local first of March only", fixture.Definition(fixture.LocalDays("2026-03-01", "2026-03-01")), 1}, // 1
		{"local from April on", fixture.Definition(fixture.LocalDays("2026-04-01", "")), 1},                 // 2
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := projections.ProjectWith(tt.def, active(), projections.Held{}, log, now)
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Projection.WorkoutsCounted; got != tt.wantCounted {
				t.Fatalf("counted %d workouts, want %d", got, tt.wantCounted)
			}
			if got, want := res.Projection.ProgressValue, int64(tt.wantCounted)*10_000_000; got != want {
				t.Fatalf("progress %d mm, want %d", got, want)
			}
		})
	}
}

// TestLocalCalendarCountsLegacyWorkoutsByUTC: a workout stored before local
// starts were kept counts by its UTC date until a list page fills it.
func TestLocalCalendarCountsLegacyWorkoutsByUTC(t *testing.T) {
	t.Parallel()
	legacy := *fixture.Workout("u1", 1, fixture.Start(time.Date(2026, 2, 28, 19, 0, 0, 0, time.UTC)))
	filled := legacy
	fixture.Local("2026-03-01T06:00", "Australia/Sydney")(&filled)
	def := fixture.Definition(fixture.LocalDays("2026-03-01", "2026-03-31"))
	for _, tt := range []struct {
		name string
		w    model.Workout
		want int
	}{{"legacy: 28 February in UTC", legacy, 0}, {"filled: 1 March in Sydney", filled, 1}} {
		res, err := projections.ProjectWith(def, active(), projections.Held{}, projections.Log{Workouts: []model.Workout{tt.w}}, now)
		if err != nil {
			t.Fatal(err)
		}
		if res.Projection.WorkoutsCounted != tt.want {
			t.Errorf("%s: counted %d, want %d", tt.name, res.Projection.WorkoutsCounted, tt.want)
		}
	}
}
