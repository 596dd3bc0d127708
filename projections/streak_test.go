package projections_test

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/calendar"
	"github.com/commitcollect/backend/model/streak"
	"github.com/commitcollect/backend/projections"
	"github.com/commitcollect/backend/test/fixture"
)

// streakDef is a day streak of target days from March 1st 2026, counting
// runs, in parts parts.
func streakDef(target float64, parts, freezes int) model.MilestoneDefinition {
	return fixture.Definition(fixture.LocalDays("2026-03-01", ""), fixture.Parts(parts), func(d *model.MilestoneDefinition) {
		d.Metric, d.Target, d.Streak = model.MetricStreak, target, &streak.Rule{Unit: streak.Day, FreezesPerMonth: freezes}
	})
}

// at is a run started at the UTC instant utc whose wall clock read local
// (both 2006-01-02T15:04).
func at(id int64, utc, local string) model.Workout {
	u, err := time.Parse("2006-01-02T15:04", utc)
	if err != nil {
		panic(err)
	}
	w := *fixture.Workout("u", id, fixture.Start(u))
	w.StartDateLocal = local + ":00"
	return w
}

// onDay is a run at 07:00 UTC (and local) on March's day-th day (0: the 1st).
func onDay(id int64, day int) model.Workout {
	w := *fixture.Workout("u", id, fixture.Day(day))
	w.StartDateLocal = w.StartDateUtc.Format("2006-01-02T15:04:05")
	return w
}

func projectStreak(t *testing.T, def model.MilestoneDefinition, cur model.Projection, log projections.Log) projections.Result {
	t.Helper()
	r, err := projections.ProjectWith(def, cur, projections.Held{}, log, fixture.March.AddDate(0, 2, 0))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAStreakIsItsLongestRun: the value is the longest run of active days;
// each part is attributed to the first run of the day its length was
// first reached; a day where nothing counted says why. Protections: the
// walk of days (a sum would give 6), the tipping day's first workout, the
// reason kept for a day left inactive.
func TestAStreakIsItsLongestRun(t *testing.T) {
	t.Parallel()
	ride := onDay(9, 3)
	ride.SportType = "Ride"
	late := onDay(7, 1) // a second run on the 2nd, later in the day
	late.StartDateUtc = late.StartDateUtc.Add(5 * time.Hour)
	log := []model.Workout{onDay(1, 0), late, onDay(2, 1), onDay(3, 2), ride, onDay(4, 4), onDay(5, 5)}
	r := projectStreak(t, streakDef(3, 3, 0), active(), projections.Log{Workouts: log})
	p := r.Projection
	if p.ProgressValue != 3 || p.WorkoutsCounted != 5 || p.Days == nil || !maps.Equal(p.Excluded, map[string]int{"sport": 1}) {
		t.Fatalf("value %d, active days %d, excluded %v; want the longest run 3 of 5 active days, the ride's day left out for its sport",
			p.ProgressValue, p.WorkoutsCounted, p.Excluded)
	}
	var tips []int64
	for _, c := range r.Crossings {
		tips = append(tips, c.ActivityID)
	}
	if !slices.Equal(tips, []int64{1, 2, 3}) {
		t.Errorf("parts tipped by %v, want the first run of each day of the run: [1 2 3]", tips)
	}
}

// TestAStreakReadsOnlyTheDaysItTouches: an event that reads one day (the
// others from the stored days) finds what a projection of the whole period
// finds, for a late upload that heals the streak and for a deletion that
// breaks it; the stored days are not used under another definition.
// Protections: re-finding a read day whole (a stale bit stays set), the
// fingerprint on the stored days.
func TestAStreakReadsOnlyTheDaysItTouches(t *testing.T) {
	t.Parallel()
	def := streakDef(30, 1, 0)
	log := []model.Workout{onDay(1, 0), onDay(2, 1), onDay(4, 3), onDay(5, 4)}
	cur := projectStreak(t, def, active(), projections.Log{Workouts: log}).Projection
	if cur.ProgressValue != 2 {
		t.Fatalf("value %d before the upload, want 2", cur.ProgressValue)
	}
	byDay := func(ws []model.Workout, day string) projections.Log {
		var in []model.Workout
		d, _ := calendar.ParseDate(day)
		span := calendar.SpanOfDays(d, &d)
		for _, w := range ws {
			if span.Contains(w.StartDateUtc) {
				in = append(in, w)
			}
		}
		return projections.Log{Workouts: in, ReadDays: map[string]bool{day: true}}
	}
	healed := append(slices.Clone(log), onDay(3, 2))
	got := projectStreak(t, def, cur, byDay(healed, "2026-03-03")).Projection
	want := projectStreak(t, def, cur, projections.Log{Workouts: healed}).Projection
	if got.ProgressValue != 5 || want.ProgressValue != 5 || !got.Days.Equal(want.Days) {
		t.Fatalf("a late upload on the 3rd: value %d by day, %d whole; want 5 both, same days", got.ProgressValue, want.ProgressValue)
	}
	gone := slices.Clone(healed)
	gone[1].IsDeleted = true // deleted on Strava: a tombstone
	broken := projectStreak(t, def, got, byDay(gone, "2026-03-02")).Projection
	if broken.ProgressValue != 3 || streak.Get(broken.Days.Bits, 1) {
		t.Fatalf("the 2nd's run deleted: value %d, want 3 (the 3rd to the 5th)", broken.ProgressValue)
	}
	if other := streakDef(31, 1, 0); !projections.UsesDays(def, cur) || projections.UsesDays(fixture.Definition(), cur) ||
		!projections.UsesDays(other, cur) {
		t.Fatal("stored days used under another kind of definition, or not under their own (the target does not change what counts)")
	}
	ridesOnly := def
	ridesOnly.SportTypes = []string{"Ride"}
	if projections.UsesDays(ridesOnly, cur) {
		t.Fatal("days found counting runs were used for a streak of rides")
	}
}

// TestAPartTippedOnADayNotReadIsNotAttributed: a late upload that joins two
// runs can make the longest reach a part on a day the event did not read;
// the crossing says so, and the consumer reads the whole period before it
// mints (ReachedInSums).
func TestAPartTippedOnADayNotReadIsNotAttributed(t *testing.T) {
	t.Parallel()
	def := streakDef(5, 1, 0)
	log := []model.Workout{onDay(1, 0), onDay(2, 1), onDay(4, 3), onDay(5, 4), onDay(6, 5)}
	cur := projectStreak(t, def, active(), projections.Log{Workouts: log}).Projection
	r := projectStreak(t, def, cur, projections.Log{Workouts: []model.Workout{onDay(3, 2)}, ReadDays: map[string]bool{"2026-03-03": true}})
	if r.Projection.ProgressValue != 6 || !r.ReachedInSums([]int{0}) {
		t.Fatalf("value %d, crossings %+v: want 6, part 0 reached on the 5th (not read)", r.Projection.ProgressValue, r.Crossings)
	}
}

// TestTheCalendarsEdges: a streak counts dates as the athlete's wall clock
// names them (model/streak's package comment decides each edge).
func TestTheCalendarsEdges(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		freezes     int
		log         []model.Workout
		wantLongest int64
		wantDays    int
	}{
		{name: "a day of 23 hours and one of 25 are days like any other", log: []model.Workout{
			*fixture.Workout("u", 1, fixture.Local("2026-03-28T09:00", "Europe/Berlin")),
			*fixture.Workout("u", 2, fixture.Local("2026-03-29T09:00", "Europe/Berlin")), // 23 hours
			*fixture.Workout("u", 3, fixture.Local("2026-03-30T09:00", "Europe/Berlin")),
			*fixture.Workout("u", 4, fixture.Local("2026-10-25T09:00", "Europe/Berlin")), // 25 hours
		}, wantLongest: 3, wantDays: 4},
		{name: "00:30 on the night the clocks go back is on its date, either time", log: []model.Workout{
			// Azores: 01:00 local becomes 00:00 on 2026-10-25, so 00:30 is lived twice.
			at(1, "2026-10-24T12:00", "2026-10-24T11:00"),
			at(2, "2026-10-25T01:30", "2026-10-25T00:30"), // UTC−1, before the change
			at(3, "2026-10-25T01:30", "2026-10-25T00:30"), // duplicate instant, another id
			at(4, "2026-10-26T11:00", "2026-10-26T10:00"),
		}, wantLongest: 3, wantDays: 3},
		{name: "a run past midnight counts on the day it starts", log: []model.Workout{
			at(1, "2026-03-01T23:30", "2026-03-01T23:30"),
			at(2, "2026-03-03T07:00", "2026-03-03T07:00"),
		}, wantLongest: 1, wantDays: 2},
		{name: "a flight that skips a date breaks a streak without a freeze", log: []model.Workout{
			at(1, "2026-03-05T06:00", "2026-03-04T20:00"), // Honolulu, UTC−10
			at(2, "2026-03-06T00:00", "2026-03-06T14:00"), // Kiritimati, UTC+14: the 5th was never lived
		}, wantLongest: 1, wantDays: 2},
		{name: "a freeze bridges the date a flight skipped", freezes: 1, log: []model.Workout{
			at(1, "2026-03-04T06:00", "2026-03-03T20:00"),
			at(2, "2026-03-05T06:00", "2026-03-04T20:00"),
			at(3, "2026-03-06T00:00", "2026-03-06T14:00"),
		}, wantLongest: 3, wantDays: 3},
		{name: "a flight that repeats a date makes it active once", log: []model.Workout{
			at(1, "2026-03-09T23:00", "2026-03-10T08:00"), // Tokyo, UTC+9
			at(2, "2026-03-10T18:00", "2026-03-10T08:00"), // Honolulu, UTC−10: the 10th again
			at(3, "2026-03-11T18:00", "2026-03-11T08:00"),
		}, wantLongest: 2, wantDays: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := projectStreak(t, streakDef(400, 1, tt.freezes), active(), projections.Log{Workouts: tt.log}).Projection
			if p.ProgressValue != tt.wantLongest || p.WorkoutsCounted != tt.wantDays {
				t.Errorf("longest %d over %d active days, want %d over %d", p.ProgressValue, p.WorkoutsCounted, tt.wantLongest, tt.wantDays)
			}
		})
	}
}
