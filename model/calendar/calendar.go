// Package calendar is the athlete's calendar: days as the wall clock where
// an activity was recorded names them (Strava's start_date_local), the UTC
// instants a local day can span anywhere on Earth, and windows of start
// instants (what a milestone's log read covers). It knows no entity.
package calendar

import (
	"fmt"
	"strings"
	"time"
)

// DateLayout is the layout of a local date: YYYY-MM-DD.
const DateLayout = time.DateOnly

// The furthest any civil time zone lies from UTC: Kiribati's UTC+14 and
// the UTC−12 of Baker Island. A local day D spans, somewhere on Earth, the
// instants [D 00:00 − AheadOfUTC, D+1 00:00 + BehindUTC) of UTC.
const (
	AheadOfUTC  = 14 * time.Hour
	BehindUTC   = 12 * time.Hour
	localLayout = "2006-01-02T15:04:05"
)

// ParseDate reads a local date (YYYY-MM-DD) as midnight UTC of that day.
// An impossible date (2026-02-30) or any other shape is an error that says
// so.
func ParseDate(s string) (time.Time, error) {
	t, err := time.Parse(DateLayout, s)
	if err != nil {
		if strings.Contains(err.Error(), "out of range") {
			return time.Time{}, fmt.Errorf("%q is not a day of the calendar", s)
		}
		return time.Time{}, fmt.Errorf("%q is not a date (YYYY-MM-DD)", s)
	}
	return t, nil
}

// FormatDate is the local date of a midnight made by ParseDate.
func FormatDate(t time.Time) string { return t.Format(DateLayout) }

// LocalStart normalizes Strava's start_date_local: the wall clock where the
// activity was recorded, which Strava writes with a misleading "Z". It
// returns the wall clock without zone (2006-01-02T15:04:05) and false when
// s is empty or not a time.
func LocalStart(s string) (string, bool) {
	if s == "" {
		return "", false
	}
	for _, layout := range []string{time.RFC3339Nano, localLayout} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.Format(localLayout), true
		}
	}
	return "", false
}

// LocalDay is the date of a wall-clock start made by LocalStart, and false
// when there is none.
func LocalDay(localStart string) (string, bool) {
	if len(localStart) < len(DateLayout) {
		return "", false
	}
	d := localStart[:len(DateLayout)]
	if _, err := time.Parse(DateLayout, d); err != nil {
		return "", false
	}
	return d, true
}

// Offset is the offset from UTC of the zone an activity started at startUtc
// was recorded in, read from its wall clock (LocalStart), to the minute;
// false when there is no wall clock or the offset lies beyond every civil
// zone.
func Offset(startUtc time.Time, localStart string) (time.Duration, bool) {
	local, err := time.Parse(localLayout, localStart)
	if err != nil {
		return 0, false
	}
	off := local.Sub(startUtc.UTC()).Round(time.Minute)
	return off, off >= -BehindUTC && off <= AheadOfUTC
}

// Today is the date (a midnight UTC, as ParseDate makes) that a wall clock
// offset from UTC shows at now.
func Today(now time.Time, offset time.Duration) time.Time {
	t := now.UTC().Add(offset)
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// SpanOfDays is the window of UTC start instants that can hold an activity
// started on a local day between first and last (dates made by ParseDate,
// both included; last nil: no end) in any time zone.
func SpanOfDays(first time.Time, last *time.Time) Window {
	w := Window{From: first.Add(-AheadOfUTC)}
	if last != nil {
		to := last.AddDate(0, 0, 1).Add(BehindUTC)
		w.To = &to
	}
	return w
}

// DayOver is the instant at which day (a date made by ParseDate) is over in
// every time zone: its midnight in the zone furthest behind UTC.
func DayOver(day time.Time) time.Time { return day.AddDate(0, 0, 1).Add(BehindUTC) }
