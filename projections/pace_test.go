package projections_test

import (
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/projections"
	"github.com/commitcollect/backend/test/fixture"
)

// TestPace: the target times the share of the period's days that are over,
// and the day the target falls at the rate so far. Protections: today not
// counted as over, the days begun (today included) as the rate's divisor,
// a complete milestone on pace without a finish, no pace without an end.
func TestPace(t *testing.T) {
	t.Parallel()
	march := fixture.Definition(fixture.LocalDays("2026-03-01", "2026-03-31")) // 100 km in 31 days
	open := fixture.Definition(fixture.LocalDays("2026-03-01", ""))
	utc := fixture.Definition() // March in UTC instants
	noon := func(day string) time.Time { d := mustDate(t, day); return d.Add(12 * time.Hour) }
	tests := []struct {
		name       string
		def        model.MilestoneDefinition
		value      int64 // mm
		complete   bool
		today      string
		wantOK     bool
		wantExp    int64
		wantOnPace bool
		wantFinish string
	}{
		{name: "the first day expects nothing", def: march, today: "2026-03-01", wantOK: true, wantOnPace: true},
		{name: "nothing counted has no finish", def: march, today: "2026-03-11", wantOK: true, wantExp: 100_000_000 * 10 / 31},
		{name: "ahead of the line", def: march, value: 50_000_000, today: "2026-03-11", wantOK: true,
			wantExp: 100_000_000 * 10 / 31, wantOnPace: true, wantFinish: "2026-03-22"}, // 50 km in 11 days: 22 days
		{name: "behind the line finishes after the end", def: march, value: 10_000_000, today: "2026-03-11", wantOK: true,
			wantExp: 100_000_000 * 10 / 31, wantFinish: "2026-06-18"}, // 10 km in 11 days: the 110th day
		{name: "after the end the whole target", def: march, value: 10_000_000, today: "2026-04-02", wantOK: true,
			wantExp: 100_000_000, wantFinish: "2027-01-24"}, // 10 km in 33 days begun: the 330th day
		{name: "complete is on pace with no finish", def: march, value: 100_000_000, today: "2026-03-05", wantOK: true,
			wantExp: 100_000_000 * 4 / 31, wantOnPace: true},
		{name: "completed earlier, the value since lowered", def: march, value: 1, complete: true, today: "2026-03-05", wantOK: true,
			wantExp: 100_000_000 * 4 / 31, wantOnPace: true},
		{name: "no end, no pace", def: open, value: 5, today: "2026-03-05"},
		{name: "UTC instants share the instants", def: utc, value: 50_000_000, today: "2026-03-11", wantOK: true,
			wantExp: 100_000_000 * (10*24 + 12) / (31 * 24), wantOnPace: true, wantFinish: "2026-03-22"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, ok := projections.PaceOf(tt.def, tt.value, tt.complete, mustDate(t, tt.today), noon(tt.today))
			finish := ""
			if p.Finish != nil {
				finish = p.Finish.Format(time.DateOnly)
			}
			if ok != tt.wantOK || p.ExpectedNow != tt.wantExp || p.OnPace != tt.wantOnPace || finish != tt.wantFinish {
				t.Errorf("PaceOf = %v %+v (finish %q), want %v expected %d onPace %v finish %q",
					ok, p, finish, tt.wantOK, tt.wantExp, tt.wantOnPace, tt.wantFinish)
			}
		})
	}
}
