package model

import (
	"time"

	"github.com/commitcollect/backend/model/calendar"
	"github.com/commitcollect/backend/model/keys"
)

// Window is a half-open interval of start instants (calendar.Window).
type Window = calendar.Window

// Window is the interval of UTC start instants whose workouts can count
// towards the milestone: [periodStartAtUtc, periodEndAtUtc), or for a local
// calendar every instant at which one of its days runs somewhere on Earth
// (calendar.SpanOfDays; Counts then holds each workout to its local date).
// A local period whose dates do not parse reads nothing.
func (d MilestoneDefinition) Window() Window {
	if !d.LocalCalendar() {
		return Window{From: d.PeriodStartAtUtc.UTC(), To: d.PeriodEndAtUtc}
	}
	first, last, ok := d.LocalDays()
	if !ok {
		return Window{From: time.Time{}, To: &time.Time{}}
	}
	return calendar.SpanOfDays(first, last)
}

// LocalCalendar says whether the period is in the athlete's local calendar
// (periodStartDate) rather than in UTC instants.
func (d MilestoneDefinition) LocalCalendar() bool { return d.PeriodStartDate != "" }

// LocalDays is a local period's first and last day (last nil: no end), as
// midnights UTC (calendar.ParseDate); false when a date does not parse.
func (d MilestoneDefinition) LocalDays() (first time.Time, last *time.Time, ok bool) {
	first, err := calendar.ParseDate(d.PeriodStartDate)
	if err != nil {
		return first, nil, false
	}
	if d.PeriodEndDate == "" {
		return first, nil, true
	}
	end, err := calendar.ParseDate(d.PeriodEndDate)
	return first, &end, err == nil
}

// EndsAt is when the period is over everywhere (zero: it has no end): its
// end instant, or for a local calendar the moment its last day is over in
// every time zone (calendar.DayOver).
func (d MilestoneDefinition) EndsAt() time.Time {
	if !d.LocalCalendar() {
		if d.PeriodEndAtUtc == nil {
			return time.Time{}
		}
		return d.PeriodEndAtUtc.UTC()
	}
	if _, last, ok := d.LocalDays(); ok && last != nil {
		return calendar.DayOver(*last)
	}
	return time.Time{}
}

// InPeriod reports whether a workout's start lies in the period: its UTC
// start in [start, end), or for a local calendar its local date
// (Workout.LocalDate) between the first and last day.
func (d MilestoneDefinition) InPeriod(w *Workout) bool {
	if !d.LocalCalendar() {
		return d.Window().Contains(w.StartDateUtc)
	}
	day := w.LocalDate()
	return day >= d.PeriodStartDate && (d.PeriodEndDate == "" || day <= d.PeriodEndDate)
}

// StatusAt is the status a reader shows at now: the projected status, or
// StatusEnded once an active milestone's period is over everywhere
// (completed stays completed; a late workout may still complete an ended
// one, and the projection then says so).
func (m *Milestone) StatusAt(now time.Time) MilestoneStatus {
	if m.Status == StatusCompleted {
		return StatusCompleted
	}
	if end := m.EndsAt(); !end.IsZero() && !now.Before(end) {
		return StatusEnded
	}
	return StatusActive
}

// LocalDate is the day the workout started on the wall clock where it was
// recorded: from startDateLocal, else from its date-ordered key (a log read
// projects only that), else, for a workout stored before local starts were
// kept, the UTC date of its start (counted by UTC until a list page or a
// fetch fills it).
func (w *Workout) LocalDate() string {
	if d, ok := calendar.LocalDay(w.StartDateLocal); ok {
		return d
	}
	if d, ok := keys.WorkoutLocalDay(w.DateSK); ok {
		return d
	}
	return w.StartDateUtc.UTC().Format(calendar.DateLayout)
}

// CutAtInstant completes a log read newest first that stopped at a
// guardrail: left is the start of the newest workout left out. Workouts
// kept at that very instant are only part of it, so they go too; exactFrom
// is the instant from which kept holds every workout (the oldest start
// kept, or just after left when none is).
func CutAtInstant(ws []Workout, left time.Time) (kept []Workout, exactFrom time.Time) {
	for len(ws) > 0 && !ws[len(ws)-1].StartDateUtc.After(left) {
		ws = ws[:len(ws)-1]
	}
	if len(ws) == 0 {
		return ws, left.UTC().Add(time.Nanosecond)
	}
	return ws, ws[len(ws)-1].StartDateUtc.UTC()
}
