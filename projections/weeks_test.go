package projections_test

import (
	"fmt"
	"maps"
	"reflect"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/calendar"
	"github.com/commitcollect/backend/projections"
	"github.com/commitcollect/backend/test/fixture"
)

func TestKeepsWeeks(t *testing.T) {
	t.Parallel()
	days := func(n int) fixture.Edit[model.MilestoneDefinition] {
		return func(d *model.MilestoneDefinition) {
			end := d.PeriodStartAtUtc.AddDate(0, 0, n)
			d.PeriodEndAtUtc = &end
		}
	}
	tests := []struct {
		name string
		def  model.MilestoneDefinition
		want bool
	}{
		{"a month", fixture.Definition(), true},
		{"a local month", fixture.Definition(fixture.LocalDays("2026-03-01", "2026-03-31")), true},
		{"two weeks", fixture.Definition(days(14)), true},
		{"six weeks", fixture.Definition(days(42)), true},
		{"a week: read whole at no more cost", fixture.Definition(days(7)), false},
		{"thirteen days", fixture.Definition(days(13)), false},
		{"forty-three days: too many sums for one write unit", fixture.Definition(days(43)), false},
		{"a year", fixture.Definition(days(365)), false},
		{"no end", fixture.Definition(func(d *model.MilestoneDefinition) { d.PeriodEndAtUtc = nil }), false},
	}
	for _, tt := range tests {
		if got := projections.KeepsWeeks(tt.def); got != tt.want {
			t.Errorf("%s: KeepsWeeks = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestProjectingByWeeksEqualsTheWholePeriod: a recompute that reads only
// the weeks an event touches and takes the others from the sums stored by
// the last projection finds what a projection of the whole log finds:
// value, count, parts, sums, and every tipping workout that lies in a week
// it read. Protections: only the read weeks are taken from the log (a log
// holds more when another milestone's period was read whole), and sums
// counted under another definition are not used.
func TestProjectingByWeeksEqualsTheWholePeriod(t *testing.T) {
	t.Parallel()
	now, def, run := fixture.March.AddDate(0, 1, 0), fixture.Definition(), marchRun
	before := []model.Workout{run(1, 0, 12), run(2, 3, 5), run(3, 9, 8), run(4, 10, 25), run(5, 17, 7), run(6, 24, 30)}
	stored, err := projections.ProjectWith(def, model.Projection{Status: model.StatusActive}, projections.Held{}, projections.Log{Workouts: before}, now)
	if err != nil || stored.Projection.Weeks == nil {
		t.Fatalf("whole projection: %v, weeks %v", err, stored.Projection.Weeks)
	}
	week := func(day int) int64 { return calendar.WeekOf(fixture.March.AddDate(0, 0, day).Add(7 * time.Hour)) }
	replace := func(ws []model.Workout, w model.Workout) []model.Workout {
		out := []model.Workout{}
		for _, x := range ws {
			if x.ActivityID != w.ActivityID {
				out = append(out, x)
			}
		}
		return append(out, w)
	}
	gone := run(4, 10, 25)
	gone.IsDeleted = true
	tests := []struct {
		name    string
		after   []model.Workout
		touched []int64
		cur     func(*model.Projection)
	}{
		{"a new run", append(before, run(7, 25, 6)), []int64{week(25)}, nil},
		{"a run made longer", replace(before, run(3, 9, 20)), []int64{week(9)}, nil},
		{"a run deleted", replace(before, gone), []int64{week(10)}, nil},
		{"a run moved to another week", replace(before, run(5, 2, 7)), []int64{week(17), week(2)}, nil},
		{"a ride: counted nowhere", append(before, func() model.Workout { w := run(8, 12, 50); w.SportType = "Ride"; return w }()),
			[]int64{week(12)}, nil},
		{"sums of another definition: the log is read whole and counted whole", append(before, run(7, 25, 6)), []int64{week(25)},
			func(p *model.Projection) { // say, counted with rides too
				p.Weeks.Def = "another"
				for k, s := range p.Weeks.Sums {
					p.Weeks.Sums[k] = calendar.WeekSum{Units: 2 * s.Units, Count: 2 * s.Count}
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cur := stored.Projection
			cur.Weeks = &calendar.WeekSums{Def: cur.Weeks.Def, Sums: maps.Clone(cur.Weeks.Sums)}
			log := projections.Log{Workouts: tt.after}
			whole, err := projections.ProjectWith(def, cur, projections.Held{}, log, now)
			if err != nil {
				t.Fatal(err)
			}
			if tt.cur != nil {
				tt.cur(&cur)
			}
			read := map[int64]bool{}
			for _, k := range tt.touched {
				read[k] = true
			}
			// The log as read: the whole log (another milestone read it
			// whole) must give the same as only the touched weeks'.
			for _, ws := range [][]model.Workout{tt.after, inWeeks(tt.after, read)} {
				if tt.cur != nil {
					ws = tt.after // sums not used: the reader read the period whole
				}
				got, err := projections.ProjectWith(def, cur, projections.Held{}, projections.Log{Workouts: ws, ReadWeeks: read}, now)
				if err != nil {
					t.Fatal(err)
				}
				if err := sameCount(got, whole); err != nil {
					t.Errorf("log of %d workouts: %v", len(ws), err)
				}
			}
		})
	}
}

// TestAPartReachedInAStoredWeekIsNotAttributed: a run made longer early in
// the month moves the crossings of later parts into weeks taken from the
// sums: their workouts are not known there, so the crossing says FromSums
// (the consumer then reads the period whole before minting them).
func TestAPartReachedInAStoredWeekIsNotAttributed(t *testing.T) {
	t.Parallel()
	now, def, run := fixture.March.AddDate(0, 1, 0), fixture.Definition(), marchRun
	before := []model.Workout{run(1, 0, 10), run(2, 14, 10), run(3, 21, 10)}
	stored, err := projections.ProjectWith(def, model.Projection{Status: model.StatusActive}, projections.Held{}, projections.Log{Workouts: before}, now)
	if err != nil {
		t.Fatal(err)
	}
	longer := run(1, 0, 20)
	k := calendar.WeekOf(longer.StartDateUtc)
	got, err := projections.ProjectWith(def, stored.Projection, projections.Held{}, projections.Log{Workouts: []model.Workout{longer},
		ReadWeeks: map[int64]bool{k: true}}, now)
	if err != nil {
		t.Fatal(err)
	}
	var tips []string
	for _, c := range got.Crossings {
		tips = append(tips, fmt.Sprintf("%d:%d/%v", c.PartIndex, c.ActivityID, c.FromSums))
	}
	want := []string{"0:1/false", "1:1/false", "2:0/true", "3:0/true"}
	if !reflect.DeepEqual(tips, want) || got.Projection.ProgressValue != 40000000 {
		t.Fatalf("crossings %v, value %d; want %v, 40 km", tips, got.Projection.ProgressValue, want)
	}
}

// inWeeks keeps the workouts started in the given weeks.
func inWeeks(ws []model.Workout, weeks map[int64]bool) []model.Workout {
	var out []model.Workout
	for _, w := range ws {
		if weeks[calendar.WeekOf(w.StartDateUtc)] {
			out = append(out, w)
		}
	}
	return out
}

// sameCount says how got differs from want in what a projection counts.
func sameCount(got, want projections.Result) error {
	g, w := got.Projection, want.Projection
	if g.ProgressValue != w.ProgressValue || g.WorkoutsCounted != w.WorkoutsCounted || g.AwardedParts != w.AwardedParts ||
		g.Status != w.Status || got.Changed != want.Changed {
		return fmt.Errorf("got value %d count %d parts %d %s changed %v, want %d %d %d %s %v", g.ProgressValue, g.WorkoutsCounted,
			g.AwardedParts, g.Status, got.Changed, w.ProgressValue, w.WorkoutsCounted, w.AwardedParts, w.Status, want.Changed)
	}
	if !reflect.DeepEqual(g.Weeks, w.Weeks) {
		return fmt.Errorf("got sums %+v, want %+v", g.Weeks, w.Weeks)
	}
	if !maps.Equal(g.Excluded, w.Excluded) {
		return fmt.Errorf("got excluded %v, want %v", g.Excluded, w.Excluded)
	}
	for i, c := range got.Crossings {
		if !c.FromSums && c != want.Crossings[i] {
			return fmt.Errorf("crossing %d: got %+v, want %+v", i, c, want.Crossings[i])
		}
	}
	return nil
}

// marchRun is a run on March's day-th day, of km kilometres.
func marchRun(id int64, day int, km float64) model.Workout {
	return *fixture.Workout("u", id, fixture.Day(day), fixture.Km(km))
}
