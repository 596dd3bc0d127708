package projections

import (
	"maps"
	"slices"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/calendar"
)

// Touched is what a user's triggers say about the log they concern: the
// local days of the workouts written or removed (which periods of a series
// to project: Occurrence) and the UTC weeks of their starts (which weeks of
// a period to re-read when its week sums are used: weeks.go).
type Touched struct {
	// Days are the local days (midnights UTC, calendar.ParseDate).
	Days []time.Time
	// All: some trigger cannot name its days; every period is projected,
	// each read whole.
	All bool
	// Weeks are the UTC weeks (calendar.WeekOf) of the starts.
	Weeks map[int64]bool
	// WholePeriods: read every projected period whole, week sums or not.
	WholePeriods bool
}

// Add records one trigger: the local days and UTC starts of its workout
// before and after the change, or known false when it cannot name them (a
// milestone written, a sync page's request). A day without its start (a
// workout not written by this code) reads periods whole.
func (t *Touched) Add(days []string, starts []time.Time, known bool) {
	if !known {
		t.All = true
		return
	}
	for _, d := range days {
		if day, err := calendar.ParseDate(d); err == nil {
			t.Days = append(t.Days, day)
		} else {
			t.All = true
		}
	}
	if len(starts) < len(days) {
		t.WholePeriods = true
	}
	for _, s := range starts {
		if t.Weeks == nil {
			t.Weeks = map[int64]bool{}
		}
		t.Weeks[calendar.WeekOf(s)] = true
	}
}

// readWeeks are the weeks a recompute reads of a period whose week sums it
// uses, sorted; nil when periods are read whole.
func (t Touched) readWeeks() []int64 {
	if t.All || t.WholePeriods {
		return nil
	}
	return append([]int64{}, slices.Sorted(maps.Keys(t.Weeks))...) // none touched: read nothing, not the whole
}

// LogWeeks is Log.ReadWeeks for a log read by Windows: nil when periods
// are read whole.
func (t Touched) LogWeeks() map[int64]bool {
	if t.All || t.WholePeriods {
		return nil
	}
	return maps.Collect(maps.All(t.Weeks)) // a fresh map, empty when none are touched
}

// LogDays is Log.ReadDays for a log read by Windows: nil when periods are
// read whole.
func (t Touched) LogDays() map[string]bool {
	if t.All || t.WholePeriods {
		return nil
	}
	out := map[string]bool{} // empty when none are touched
	for _, d := range t.Days {
		out[calendar.FormatDate(d)] = true
	}
	return out
}

// Windows is what a recompute reads of m's period: the touched weeks when
// it uses its week sums, the touched days, each whole, when it uses its
// streak's days, else all of it.
func (t Touched) Windows(m *model.Milestone) []model.Window {
	if !t.All && !t.WholePeriods && UsesDays(m.MilestoneDefinition, m.Projection) {
		var out []model.Window
		for _, d := range t.Days {
			if m.Period().Holds(d, calendar.FormatDate(d)) {
				out = append(out, calendar.SpanOfDays(d, &d))
			}
		}
		return out
	}
	if weeks := t.readWeeks(); weeks != nil && UsesWeeks(m.MilestoneDefinition, m.Projection) {
		return calendar.WeekWindows(m.Window(), weeks)
	}
	return []model.Window{m.Window()}
}
