package timeline

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/test/fixture"
)

// TestCumulative: counted workouts add up by local day, listed only where
// the value changed; a workout that does not count adds nothing, and one
// past midnight UTC counts on its local day. Protections: the counting
// verdict, the local day, the running total.
func TestCumulative(t *testing.T) {
	t.Parallel()
	def := fixture.Definition(fixture.LocalDays("2026-03-01", "2026-03-31"))
	ride := fixture.Workout("u", 3, fixture.Day(2))
	ride.SportType = "Ride"
	late := fixture.Workout("u", 4, fixture.Local("2026-03-05T23:30", "America/New_York")) // the 6th in UTC
	ws := []model.Workout{*fixture.Workout("u", 2, fixture.Day(1)), *fixture.Workout("u", 1, fixture.Day(0)), *ride, *late,
		*fixture.Workout("u", 5, fixture.Day(1))}
	want := []Day{{Date: "2026-03-01", Value: 5000}, {Date: "2026-03-02", Value: 15000}, {Date: "2026-03-05", Value: 20000}}
	if got := Cumulative(def, ws); !reflect.DeepEqual(got, want) {
		t.Errorf("Cumulative = %+v, want %+v", got, want)
	}
}

// TestChartOf: the value's steps rise to the chart's top at the target,
// the pace line runs from nothing to the target across the period, a
// period without an end has none, and a streak draws its days as cells.
func TestChartOf(t *testing.T) {
	t.Parallel()
	end := "2026-03-10"
	today := time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC)
	c := ChartOf(Body{Metric: "distance", StartDate: "2026-03-01", EndDate: &end, Target: 100, Days: []Day{{Date: "2026-03-01", Value: 50},
		{Date: "2026-03-03", Value: 100}}}, today)
	if c.Value != "0.0,80.0 0.0,80.0 0.0,40.0 60.0,40.0 60.0,0.0 150.0,0.0" || c.Pace != "0.0,80.0 300.0,0.0" {
		t.Errorf("chart %+v", c)
	}
	if open := ChartOf(Body{Metric: "count", StartDate: "2026-03-01", Target: 3}, today); open.Pace != "" || open.Value == "" {
		t.Errorf("no end: %+v, want a value line and no pace line", open)
	}
	s := ChartOf(Body{Metric: "streak", StartDate: "2026-03-01", Target: 5, Days: []Day{{Date: "2026-03-01", Kind: KindActive},
		{Date: "2026-03-02", Kind: KindBridged}, {Date: "2026-03-03", Kind: KindActive}}}, today)
	var classes []string
	for _, cell := range s.Cells {
		classes = append(classes, cell.Class)
	}
	if got := strings.Join(classes, " "); got != "active bridged active rest rest" {
		t.Errorf("streak cells %s, want active bridged active rest rest", got)
	}
}
