package calendar

import (
	"slices"
	"strings"
	"time"
)

// Recurrences of a series: one period per week (Monday to Sunday), month
// or year, on the athlete's local calendar.
const (
	Weekly  = "weekly"
	Monthly = "monthly"
	Yearly  = "yearly"
)

// Recurrences lists the recurrences, for messages.
var Recurrences = []string{Weekly, Monthly, Yearly}

// KnownRecurrence says whether r is a recurrence.
func KnownRecurrence(r string) bool { return r == Weekly || r == Monthly || r == Yearly }

// PeriodAround is the first and last day of the period of recurrence r that
// holds day (a midnight made by ParseDate).
func PeriodAround(r string, day time.Time) (first, last time.Time) {
	switch r {
	case Weekly:
		back := (int(day.Weekday()) + 6) % 7 // days since Monday
		first = day.AddDate(0, 0, -back)
		return first, first.AddDate(0, 0, 6)
	case Monthly:
		first = time.Date(day.Year(), day.Month(), 1, 0, 0, 0, 0, time.UTC)
		return first, first.AddDate(0, 1, -1)
	case Yearly:
		first = time.Date(day.Year(), time.January, 1, 0, 0, 0, 0, time.UTC)
		return first, first.AddDate(1, 0, -1)
	}
	return day, day
}

// firstDayName says what a first day of r is, for messages.
func firstDayName(r string) string {
	switch r {
	case Weekly:
		return "a Monday"
	case Monthly:
		return "the 1st of a month"
	}
	return "1 January"
}

// EarliestRunStart is the earliest first day of a series or a streak:
// each read of a series walks its periods, and a streak keeps a bit a day
// from its first, so a start in year 1 would walk 105,000 weeks.
const EarliestRunStart = "2000-01-01"

// checkSeries adds what is wrong with a series: a recurrence of UTC
// instants, an unknown one, a start before EarliestRunStart or that is not
// a period's first day, an end that is not a period's last day.
func (p Period) checkSeries(add func(field, format string, args ...any)) {
	switch {
	case p.Recurrence == "":
		return
	case !KnownRecurrence(p.Recurrence):
		add("recurrence", "%q is not one of %v", p.Recurrence, Recurrences)
		return
	case !p.Local():
		add("recurrence", "repeats on the athlete's local calendar: give periodStartDate, not periodStartAtUtc")
		return
	}
	first, last, ok := p.Days()
	if !ok {
		return // the dates are named already
	}
	if p.StartDate < EarliestRunStart {
		add("periodStartDate", "a series starts on %s or later", EarliestRunStart)
		return
	}
	if f, _ := PeriodAround(p.Recurrence, first); !f.Equal(first) {
		add("periodStartDate", "a %s series starts on %s; %s is not (%s is)", p.Recurrence, firstDayName(p.Recurrence),
			p.StartDate, FormatDate(f))
	}
	if last != nil {
		if _, l := PeriodAround(p.Recurrence, *last); !l.Equal(*last) {
			add("periodEndDate", "a %s series ends on the last day of a period; %s is not (%s is)", p.Recurrence, p.EndDate, FormatDate(l))
		}
	}
}

// Occurrence is one period of a series, by its local days.
func (p Period) Occurrence(first time.Time) Period {
	f, l := PeriodAround(p.Recurrence, first)
	return Period{StartDate: FormatDate(f), EndDate: FormatDate(l)}
}

// Occurrences lists the series' periods that hold one of days (dates
// made by ParseDate) and lie within the series, each once, oldest first.
func (p Period) Occurrences(days []time.Time) []Period {
	first, last, ok := p.Days()
	if !ok || p.Recurrence == "" {
		return nil
	}
	seen := map[string]bool{}
	var out []Period
	for _, d := range days {
		if d.Before(first) || (last != nil && d.After(*last)) {
			continue
		}
		o := p.Occurrence(d)
		if !seen[o.StartDate] {
			seen[o.StartDate] = true
			out = append(out, o)
		}
	}
	sortPeriods(out)
	return out
}

// OccurrencesSoFar lists every period of the series that has begun by now
// somewhere on Earth (its first day has started at UTC+14), oldest first,
// at most max of the newest: what the projector may have projected.
func (p Period) OccurrencesSoFar(now time.Time, max int) []Period {
	return p.OccurrencesThrough(Today(now, AheadOfUTC), max)
}

// OccurrencesThrough lists every period of the series whose first day is
// at or before today (a date made by ParseDate: the athlete's own today,
// or Today at UTC+14 for anywhere), oldest first, at most max of the
// newest.
func (p Period) OccurrencesThrough(today time.Time, max int) []Period {
	first, last, ok := p.Days()
	if !ok || p.Recurrence == "" {
		return nil
	}
	var out []Period
	for d := first; !d.After(today) && (last == nil || !d.After(*last)); {
		o := p.Occurrence(d)
		out = append(out, o)
		_, l := PeriodAround(p.Recurrence, d)
		d = l.AddDate(0, 0, 1)
	}
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return out
}

func sortPeriods(ps []Period) {
	slices.SortFunc(ps, func(a, b Period) int { return strings.Compare(a.StartDate, b.StartDate) })
}
