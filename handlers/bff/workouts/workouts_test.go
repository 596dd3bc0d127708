package workouts_test

import (
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/bff/workouts"
	"github.com/commitcollect/backend/model"
)

// TestPeriodOf: the route shows a series' headline period (the newest
// begun anywhere), its first before any has begun, its last once it is
// over, or the period named by its first day; anything else names period.
// Protections: PeriodOf's cases.
func TestPeriodOf(t *testing.T) {
	t.Parallel()
	weekly := model.MilestoneDefinition{Metric: model.MetricCount, Target: 3, PeriodStartDate: "2026-03-02", PeriodEndDate: "2026-03-29",
		Recurrence: "weekly"}
	at := func(s string) time.Time { t, _ := time.Parse(time.RFC3339, s); return t }
	tests := []struct {
		name   string
		period string
		now    time.Time
		want   string // the period's first day; "" for a validation error
	}{
		{"this week", "", at("2026-03-11T12:00:00Z"), "2026-03-09"},
		{"Monday in Kiribati, Sunday in UTC: the new week has begun", "", at("2026-03-15T10:30:00Z"), "2026-03-16"},
		{"before the series begins: its first week", "", at("2026-02-20T12:00:00Z"), "2026-03-02"},
		{"after it ends: its last week", "", at("2026-05-01T12:00:00Z"), "2026-03-23"},
		{"a week named by its Monday", "2026-03-02", at("2026-03-20T12:00:00Z"), "2026-03-02"},
		{"a Tuesday", "2026-03-03", at("2026-03-20T12:00:00Z"), ""},
		{"before the first week", "2026-02-23", at("2026-03-20T12:00:00Z"), ""},
		{"after the last week", "2026-03-30", at("2026-03-20T12:00:00Z"), ""},
		{"not a date", "March", at("2026-03-20T12:00:00Z"), ""},
	}
	for _, tt := range tests {
		got, ve := workouts.PeriodOf(weekly, tt.period, tt.now)
		switch {
		case tt.want == "" && (ve == nil || ve.Fields[0].Field != "period"):
			t.Errorf("%s: %+v, %v; want an error naming period", tt.name, got, ve)
		case tt.want != "" && (ve != nil || got.PeriodStartDate != tt.want || got.Recurrence != ""):
			t.Errorf("%s: period from %s (recurrence %q), %v; want the week of %s", tt.name, got.PeriodStartDate, got.Recurrence, ve, tt.want)
		}
	}
	if _, ve := workouts.PeriodOf(model.MilestoneDefinition{PeriodStartDate: "2026-03-01"}, "2026-03-01", at("2026-03-20T12:00:00Z")); ve == nil {
		t.Error("a period for a milestone that does not repeat was taken")
	}
}
