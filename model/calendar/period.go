package calendar

import (
	"fmt"
	"time"
)

// Period is a milestone's period in one of two calendars: UTC instants
// (StartAtUtc, optional EndAtUtc, end excluded) or the athlete's local days
// (StartDate, optional EndDate, YYYY-MM-DD, both days included). Exactly
// one is set in a valid period (Check).
type Period struct {
	StartAtUtc         time.Time
	EndAtUtc           *time.Time
	StartDate, EndDate string
	// Recurrence, when set, makes the local days a series (Weekly, Monthly,
	// Yearly) of periods, each with its own progress (Occurrence).
	Recurrence string
}

// Local says whether the period is in the athlete's local calendar.
func (p Period) Local() bool { return p.StartDate != "" }

// Days is a local period's first and last day (last nil: no end), as
// midnights UTC; false when a date does not parse.
func (p Period) Days() (first time.Time, last *time.Time, ok bool) {
	first, err := ParseDate(p.StartDate)
	if err != nil {
		return first, nil, false
	}
	if p.EndDate == "" {
		return first, nil, true
	}
	end, err := ParseDate(p.EndDate)
	return first, &end, err == nil
}

// Window is the interval of UTC start instants whose workouts can fall in
// the period: [StartAtUtc, EndAtUtc), or for local days every instant at
// which one of them runs somewhere on Earth (SpanOfDays; Holds then keeps
// each workout to its local date). A local period whose dates do not parse
// holds nothing.
func (p Period) Window() Window {
	if !p.Local() {
		return Window{From: p.StartAtUtc.UTC(), To: p.EndAtUtc}
	}
	first, last, ok := p.Days()
	if !ok {
		return Window{From: time.Time{}, To: &time.Time{}}
	}
	return SpanOfDays(first, last)
}

// Holds reports whether a workout started at startUtc, on localDay where it
// was recorded, falls in the period.
func (p Period) Holds(startUtc time.Time, localDay string) bool {
	if !p.Local() {
		return p.Window().Contains(startUtc)
	}
	return localDay >= p.StartDate && (p.EndDate == "" || localDay <= p.EndDate)
}

// EndsAt is when the period is over everywhere (zero: it has no end): its
// end instant, or the moment its last local day is over in every time zone
// (DayOver).
func (p Period) EndsAt() time.Time {
	if !p.Local() {
		if p.EndAtUtc == nil {
			return time.Time{}
		}
		return p.EndAtUtc.UTC()
	}
	if _, last, ok := p.Days(); ok && last != nil {
		return DayOver(*last)
	}
	return time.Time{}
}

// FieldProblem is one bad field of a period, by its JSON name.
type FieldProblem struct{ Field, Message string }

// Check lists what is wrong with the period: both forms or neither, a date
// that does not exist, an end before the start. Empty when it is valid.
func (p Period) Check() []FieldProblem {
	var out []FieldProblem
	add := func(field, format string, args ...any) {
		out = append(out, FieldProblem{field, fmt.Sprintf(format, args...)})
	}
	utc := !p.StartAtUtc.IsZero() || p.EndAtUtc != nil
	switch {
	case p.Local() && utc:
		add("periodStartDate", "give either periodStartDate/periodEndDate or periodStartAtUtc/periodEndAtUtc, not both")
	case p.EndDate != "" && !p.Local():
		add("periodStartDate", "is required with periodEndDate")
	case p.Local():
		first, err := ParseDate(p.StartDate)
		if err != nil {
			add("periodStartDate", "%v", err)
		}
		if p.EndDate == "" {
			break
		}
		if last, lerr := ParseDate(p.EndDate); lerr != nil {
			add("periodEndDate", "%v", lerr)
		} else if err == nil && last.Before(first) {
			add("periodEndDate", "must not be before periodStartDate")
		}
	case p.StartAtUtc.IsZero():
		add("periodStartAtUtc", "is required (or periodStartDate)")
	case p.EndAtUtc != nil && !p.EndAtUtc.After(p.StartAtUtc):
		add("periodEndAtUtc", "must be after periodStartAtUtc")
	}
	p.checkSeries(add)
	return out
}
