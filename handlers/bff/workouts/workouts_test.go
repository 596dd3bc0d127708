package workouts_test

import (
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/bff/workouts"
	"github.com/commitcollect/backend/model"
)

// TestPeriodOf: the route shows a series' headline period (the newest
// begun on the athlete's today), its first before any has begun, its last
// once it is over, or the period named by its first day; anything else
// names period. Protections: PeriodOf's cases.
func TestPeriodOf(t *testing.T) {
	t.Parallel()
	weekly := model.MilestoneDefinition{Metric: model.MetricCount, Target: 3, PeriodStartDate: "2026-03-02", PeriodEndDate: "2026-03-29",
		Recurrence: "weekly"}
	day := func(s string) time.Time { t, _ := time.Parse(time.DateOnly, s); return t }
	tests := []struct {
		name   string
		period string
		today  time.Time // the athlete's
		want   string    // the period's first day; "" for a validation error
	}{
		{"this week", "", day("2026-03-11"), "2026-03-09"},
		{"Sunday on the athlete's clock (Monday in Kiribati): still this week", "", day("2026-03-15"), "2026-03-09"},
		{"Monday on the athlete's clock: the new week", "", day("2026-03-16"), "2026-03-16"},
		{"before the series begins: its first week", "", day("2026-02-20"), "2026-03-02"},
		{"after it ends: its last week", "", day("2026-05-01"), "2026-03-23"},
		{"a week named by its Monday", "2026-03-02", day("2026-03-20"), "2026-03-02"},
		{"a Tuesday", "2026-03-03", day("2026-03-20"), ""},
		{"before the first week", "2026-02-23", day("2026-03-20"), ""},
		{"after the last week", "2026-03-30", day("2026-03-20"), ""},
		{"not a date", "March", day("2026-03-20"), ""},
	}
	for _, tt := range tests {
		got, ve := workouts.PeriodOf(weekly, tt.period, tt.today)
		switch {
		case tt.want == "" && (ve == nil || ve.Fields[0].Field != "period"):
			t.Errorf("%s: %+v, %v; want an error naming period", tt.name, got, ve)
		case tt.want != "" && (ve != nil || got.PeriodStartDate != tt.want || got.Recurrence != ""):
			t.Errorf("%s: period from %s (recurrence %q), %v; want the week of %s", tt.name, got.PeriodStartDate, got.Recurrence, ve, tt.want)
		}
	}
	if _, ve := workouts.PeriodOf(model.MilestoneDefinition{PeriodStartDate: "2026-03-01"}, "2026-03-01", day("2026-03-20")); ve == nil {
		t.Error("a period for a milestone that does not repeat was taken")
	}
}
