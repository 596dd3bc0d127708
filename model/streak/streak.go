// Package streak is the vocabulary and the day arithmetic of streak
// milestones: a run of consecutive active days (or Monday-to-Sunday weeks)
// on the athlete's own calendar, the freezes that bridge single inactive
// ones, and the active days a projection keeps beside its progress (Days).
// It decides nothing about which workout counts (model/counting does) and
// reads no clock: callers pass the athlete's today.
//
// The calendar's edges, decided here and tested in walk_test.go:
//   - A day is a date of start_date_local, whatever its length: a day of 23
//     or 25 hours (daylight saving) is one day, and a run at 00:30 on the
//     night the clocks go back falls on the date its wall clock shows.
//   - An activity counts on the date it starts, even when it runs past
//     midnight.
//   - A flight that skips a date leaves that date without activity: it is an
//     inactive day like any other, which a freeze bridges. We see a zone
//     only where an activity was recorded, so whether a date was lived
//     cannot be told, and a streak kept by a claimed zone jump would be a
//     streak anyone could forge.
//   - A flight that repeats a date gives one date: activities on either of
//     its lives make it active once.
package streak

import (
	"fmt"
	"time"
)

// Unit is what a streak counts: days, or Monday-to-Sunday weeks.
type Unit string

// The units of a streak.
const (
	Day  Unit = "day"
	Week Unit = "week"
)

// MaxFreezesPerMonth bounds a milestone's freezes in a calendar month.
const MaxFreezesPerMonth = 4

// Rule is how a streak milestone counts, fixed when it is created.
type Rule struct {
	// Unit is Day or Week.
	Unit Unit `dynamodbav:"unit" json:"unit"`
	// FreezesPerMonth is how many single inactive days (or weeks) in each
	// calendar month are bridged, the earliest first (0..MaxFreezesPerMonth).
	// A week belongs to the month of its Monday.
	FreezesPerMonth int `dynamodbav:"freezesPerMonth,omitempty" json:"freezesPerMonth,omitempty"`
}

// Problem is one bad field of a streak definition, by its API name.
type Problem struct{ Field, Message string }

// Definition is what Check reads of a milestone definition.
type Definition struct {
	// Streak says the metric is the streak metric.
	Streak bool
	// Rule is the streak's rule, nil when none was given.
	Rule *Rule
	// Recurrence is the definition's recurrence ("" when none).
	Recurrence string
	// LocalDays says the period is in local days (periodStartDate), and
	// StartDate is its first day (YYYY-MM-DD).
	LocalDays bool
	StartDate string
}

// EarliestStart is the earliest first day of a streak (the bitmap of its
// days starts there); the same as a series' (calendar.EarliestRunStart).
const EarliestStart = "2000-01-01"

// Check reports every problem of d's streak fields: a streak needs a known
// unit, freezes within bounds, local days and no recurrence; any other
// metric takes no streak fields.
func Check(d Definition) []Problem {
	var out []Problem
	add := func(field, format string, args ...any) {
		out = append(out, Problem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if !d.Streak {
		if d.Rule != nil {
			add("streakUnit", "is only for the streak metric")
		}
		return out
	}
	switch {
	case d.Rule == nil || d.Rule.Unit == "":
		add("streakUnit", "is required for a streak (day or week)")
	case d.Rule.Unit != Day && d.Rule.Unit != Week:
		add("streakUnit", "%q is not one of day, week", d.Rule.Unit)
	}
	if d.Rule != nil && (d.Rule.FreezesPerMonth < 0 || d.Rule.FreezesPerMonth > MaxFreezesPerMonth) {
		add("freezesPerMonth", "must be between 0 and %d", MaxFreezesPerMonth)
	}
	if d.Recurrence != "" {
		add("recurrence", "a streak does not repeat: its period is one run of days")
	}
	switch {
	case !d.LocalDays:
		add("periodStartDate", "is required for a streak: it counts the athlete's own days")
	case d.StartDate < EarliestStart:
		add("periodStartDate", "a streak starts on %s or later", EarliestStart)
	}
	return out
}

// dayNumber is the index of a midnight UTC (calendar.ParseDate) since the
// Unix epoch.
func dayNumber(t time.Time) int64 {
	n := t.Unix() / 86400
	if t.Unix()%86400 < 0 {
		n--
	}
	return n
}

// dayOf is the midnight UTC of day number n.
func dayOf(n int64) time.Time { return time.Unix(n*86400, 0).UTC() }

// mondayOf is the day number of the Monday of the week holding day n
// (1970-01-01 was a Thursday).
func mondayOf(n int64) int64 {
	wd := (n + 3) % 7 // 0 = Monday
	if wd < 0 {
		wd += 7
	}
	return n - wd
}
