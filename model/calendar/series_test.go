package calendar

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func day(s string) time.Time {
	t, err := ParseDate(s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestPeriodAround(t *testing.T) {
	t.Parallel()
	tests := []struct {
		r, day, first, last string
	}{
		{Weekly, "2026-03-01", "2026-02-23", "2026-03-01"}, // a Sunday ends its week
		{Weekly, "2026-03-02", "2026-03-02", "2026-03-08"}, // a Monday starts one
		{Weekly, "2026-12-31", "2026-12-28", "2027-01-03"}, // across the year
		{Monthly, "2028-02-29", "2028-02-01", "2028-02-29"},
		{Monthly, "2026-12-31", "2026-12-01", "2026-12-31"},
		{Yearly, "2026-07-14", "2026-01-01", "2026-12-31"},
	}
	for _, tt := range tests {
		f, l := PeriodAround(tt.r, day(tt.day))
		if FormatDate(f) != tt.first || FormatDate(l) != tt.last {
			t.Errorf("PeriodAround(%s, %s) = %s..%s, want %s..%s", tt.r, tt.day, FormatDate(f), FormatDate(l), tt.first, tt.last)
		}
	}
}

func TestSeriesChecks(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		p    Period
		want string // fields, in order
	}{
		{"weekly from a Monday", Period{StartDate: "2026-03-02", Recurrence: Weekly}, ""},
		{"monthly from the 1st to a month's end", Period{StartDate: "2026-01-01", EndDate: "2026-06-30", Recurrence: Monthly}, ""},
		{"yearly from 1 January", Period{StartDate: "2026-01-01", Recurrence: Yearly}, ""},
		{"weekly from a Sunday", Period{StartDate: "2026-03-01", Recurrence: Weekly}, "periodStartDate"},
		{"monthly from the 2nd", Period{StartDate: "2026-03-02", Recurrence: Monthly}, "periodStartDate"},
		{"yearly from 1 March", Period{StartDate: "2026-03-01", Recurrence: Yearly}, "periodStartDate"},
		{"monthly ending mid-month", Period{StartDate: "2026-03-01", EndDate: "2026-06-15", Recurrence: Monthly}, "periodEndDate"},
		{"UTC instants", Period{StartAtUtc: at, Recurrence: Weekly}, "recurrence"},
		{"unknown", Period{StartDate: "2026-03-02", Recurrence: "daily"}, "recurrence"},
		{"from year 1, 105,000 weeks to walk", Period{StartDate: "0001-01-01", Recurrence: Weekly}, "periodStartDate"},
		{"the first Monday of 2000", Period{StartDate: "2000-01-03", Recurrence: Weekly}, ""},
		{"the last Monday of 1999", Period{StartDate: "1999-12-27", Recurrence: Weekly}, "periodStartDate"},
	}
	for _, tt := range tests {
		var fields []string
		for _, f := range tt.p.Check() {
			fields = append(fields, f.Field)
		}
		if got := strings.Join(fields, ","); got != tt.want {
			t.Errorf("%s: Check() names %q (%v), want %q", tt.name, got, tt.p.Check(), tt.want)
		}
	}
}

// TestOccurrencesTouchOnlyTheirPeriods: the periods an event touches are
// those holding its days, whatever the series' age.
func TestOccurrencesTouchOnlyTheirPeriods(t *testing.T) {
	t.Parallel()
	s := Period{StartDate: "2021-03-01", Recurrence: Weekly} // 260 weeks before March 2026
	got := s.Occurrences([]time.Time{day("2026-02-28"), day("2026-02-24"), day("2021-02-28"), day("2026-03-04")})
	if fmt.Sprint(got) != fmt.Sprint([]Period{{StartDate: "2026-02-23", EndDate: "2026-03-01"}, {StartDate: "2026-03-02", EndDate: "2026-03-08"}}) {
		t.Fatalf("Occurrences = %v, want the two weeks holding the days, not the one before the series", got)
	}
	so := s.OccurrencesSoFar(time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC), 1000)
	if len(so) != 262 || so[0].StartDate != "2021-03-01" || so[len(so)-1].StartDate != "2026-03-02" {
		t.Fatalf("OccurrencesSoFar: %d periods, %v..%v; want 262 from 2021-03-01 to 2026-03-02", len(so), so[0], so[len(so)-1])
	}
	// Sunday 8 March 11:00 UTC is already Monday 9 March at UTC+14.
	if so := s.OccurrencesSoFar(time.Date(2026, 3, 8, 11, 0, 0, 0, time.UTC), 2); so[1].StartDate != "2026-03-09" {
		t.Fatalf("OccurrencesSoFar at the week's turn in Kiribati: %v, want the new week begun", so)
	}
}
