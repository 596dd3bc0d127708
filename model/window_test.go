package model

import (
	"slices"
	"testing"
	"time"

	"github.com/commitcollect/backend/model/keys"
)

func TestWorkoutDateSKOrdersByDateThenNumericID(t *testing.T) {
	t.Parallel()
	d := time.Date(2026, 3, 1, 7, 0, 0, 0, time.UTC)
	if got, want := keys.WorkoutDateSK(d, 42, ""), "WORKOUT#2026-03-01T07:00:00.000000000Z#0000000000000000042"; got != want {
		t.Fatalf("keys.WorkoutDateSK = %q, want %q", got, want)
	}
	ordered := []struct {
		at time.Time
		id int64
	}{
		{d.Add(-time.Hour), 99999999999},
		{d, 9},
		{d, 10},
		{d, 123456789012},
		{d.Add(time.Nanosecond), 1},
		{d.Add(time.Second), 5},
		{d.In(time.FixedZone("x", 3600)).Add(2 * time.Second), 2}, // zones do not matter
	}
	var ks []string
	for _, o := range ordered {
		ks = append(ks, keys.WorkoutDateSK(o.at, o.id, "2026-03-01"))
	}
	if !slices.IsSorted(ks) {
		t.Fatalf("ks not in (date, id) order: %q", ks)
	}
}

func TestWorkoutDateRangeSelectsHalfOpenWindow(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	to := from.AddDate(0, 1, 0)
	far := time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		w    Window
		at   time.Time
		want bool
	}{
		{"at start", Window{From: from, To: &to}, from, true},
		{"just before start", Window{From: from, To: &to}, from.Add(-time.Nanosecond), false},
		{"just before end", Window{From: from, To: &to}, to.Add(-time.Nanosecond), true},
		{"at end", Window{From: from, To: &to}, to, false},
		{"open end", Window{From: from}, time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), true},
		{"end beyond year 9999 is open", Window{From: from, To: &far}, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{"zero start is all time", Window{}, time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			lo, hi := keys.WorkoutDateRange(tt.w.From, tt.w.To)
			for _, id := range []int64{1, 9223372036854775807} {
				k := keys.WorkoutDateSK(tt.at, id, "")
				if got := lo <= k && k <= hi; got != tt.want {
					t.Fatalf("%s in [%s, %s] = %v, want %v", k, lo, hi, got, tt.want)
				}
			}
		})
	}
}

// TestLocalPeriodCountsTheAthletesDay: a local period holds a workout by the
// date on the wall clock where it was recorded, whatever its UTC instant; a
// workout stored before local starts were kept counts by its UTC date.
func TestLocalPeriodCountsTheAthletesDay(t *testing.T) {
	t.Parallel()
	march := MilestoneDefinition{PeriodStartDate: "2026-03-01", PeriodEndDate: "2026-03-31"}
	utcMarch := MilestoneDefinition{PeriodStartAtUtc: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
	end := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	utcMarch.PeriodEndAtUtc = &end
	sydney6am := Workout{StartDateUtc: time.Date(2026, 2, 28, 19, 0, 0, 0, time.UTC), StartDateLocal: "2026-03-01T06:00:00"}
	honolulu := Workout{StartDateUtc: time.Date(2026, 4, 1, 5, 0, 0, 0, time.UTC), StartDateLocal: "2026-03-31T19:00:00"}
	legacy := Workout{StartDateUtc: time.Date(2026, 2, 28, 19, 0, 0, 0, time.UTC)}
	fromKey := Workout{StartDateUtc: sydney6am.StartDateUtc, ActivityID: 7}
	fromKey.DateSK = keys.WorkoutDateSK(fromKey.StartDateUtc, 7, "2026-03-01")
	tests := []struct {
		name string
		def  MilestoneDefinition
		w    Workout
		want bool
	}{
		{"Sydney 6 am on 1 March is March locally", march, sydney6am, true},
		{"... and February in UTC", utcMarch, sydney6am, false},
		{"Honolulu evening of 31 March is March locally", march, honolulu, true},
		{"... and April in UTC", utcMarch, honolulu, false},
		{"no local start: the UTC date counts", march, legacy, false},
		{"a log read's workout carries its day in the key", march, fromKey, true},
		{"open-ended local period", MilestoneDefinition{PeriodStartDate: "2026-03-01"}, honolulu, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.def.Period().Holds(tt.w.StartDateUtc, tt.w.LocalDate()); got != tt.want {
				t.Fatalf("Holds(%s, local %q) = %v, want %v", tt.w.StartDateUtc, tt.w.LocalDate(), got, tt.want)
			}
			if tt.want && !tt.def.Window().Contains(tt.w.StartDateUtc) {
				t.Fatalf("Window() %v leaves out %s, which counts: the log read would miss it", tt.def.Window(), tt.w.StartDateUtc)
			}
		})
	}
}

func TestStatusAt(t *testing.T) {
	t.Parallel()
	end := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	local := Milestone{MilestoneDefinition: MilestoneDefinition{PeriodStartDate: "2026-03-01", PeriodEndDate: "2026-03-31"}}
	utc := Milestone{MilestoneDefinition: MilestoneDefinition{PeriodStartAtUtc: end.AddDate(0, -1, 0), PeriodEndAtUtc: &end}}
	open := Milestone{MilestoneDefinition: MilestoneDefinition{PeriodStartDate: "2026-03-01"}}
	done := local
	done.Status = StatusCompleted
	lastMidnight := time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC) // 1 April 00:00 at UTC−12
	tests := []struct {
		name string
		m    Milestone
		now  time.Time
		want MilestoneStatus
	}{
		{"31 March still runs somewhere", local, lastMidnight.Add(-time.Second), StatusActive},
		{"31 March is over everywhere", local, lastMidnight, StatusEnded},
		{"a UTC period ends at its end", utc, end, StatusEnded},
		{"just before a UTC end", utc, end.Add(-time.Nanosecond), StatusActive},
		{"completed stays completed", done, lastMidnight.AddDate(1, 0, 0), StatusCompleted},
		{"no end never ends", open, lastMidnight.AddDate(10, 0, 0), StatusActive},
	}
	for _, tt := range tests {
		if got := tt.m.StatusAt(tt.now); got != tt.want {
			t.Errorf("%s: StatusAt(%s) = %s, want %s", tt.name, tt.now, got, tt.want)
		}
	}
}
