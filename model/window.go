package model

import (
	"time"

	"github.com/commitcollect/backend/model/calendar"
	"github.com/commitcollect/backend/model/keys"
)

// Window is a half-open interval of start instants (calendar.Window).
type Window = calendar.Window

// Period is the definition's period in calendar's terms.
func (d MilestoneDefinition) Period() calendar.Period {
	return calendar.Period{StartAtUtc: d.PeriodStartAtUtc, EndAtUtc: d.PeriodEndAtUtc, StartDate: d.PeriodStartDate,
		EndDate: d.PeriodEndDate, Recurrence: d.Recurrence}
}

// Window is the interval of UTC start instants whose workouts can count
// towards the milestone (calendar.Period.Window): what a log read covers.
func (d MilestoneDefinition) Window() Window { return d.Period().Window() }

// StatusAt is the status a reader shows at now: the projected status, or
// StatusEnded once an active milestone's period is over everywhere
// (completed stays completed; a late workout may still complete an ended
// one, and the projection then says so).
func (m *Milestone) StatusAt(now time.Time) MilestoneStatus {
	if m.Status == StatusCompleted {
		return StatusCompleted
	}
	if end := m.Period().EndsAt(); !end.IsZero() && !now.Before(end) {
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
