package calendar

import (
	"fmt"
	"maps"
	"time"
)

// The UTC week grid a milestone's week sums are kept on: whole weeks since
// the Unix epoch, each starting on a Thursday at 00:00 UTC. It is part of
// the stored sums (replay-sensitive: see projections' weeks.go).
const weekSeconds = 7 * 24 * 60 * 60

// WeekOf is the index of the UTC week that holds the instant t.
func WeekOf(t time.Time) int64 {
	s := t.Unix()
	k := s / weekSeconds
	if s%weekSeconds < 0 {
		k--
	}
	return k
}

// WeekStart is the first instant of week k.
func WeekStart(k int64) time.Time { return time.Unix(k*weekSeconds, 0).UTC() }

// WeekWindows are the parts of w that lie in the given weeks, in their
// order; weeks outside w give none.
func WeekWindows(w Window, weeks []int64) []Window {
	var out []Window
	for _, k := range weeks {
		from, to := WeekStart(k), WeekStart(k+1)
		if from.Before(w.From) {
			from = w.From
		}
		if w.To != nil && w.To.Before(to) {
			to = *w.To
		}
		if to.After(from) {
			out = append(out, Window{From: from, To: &to})
		}
	}
	return out
}

// WeekSums are what a milestone's counted workouts add up to in each week
// of its period, as its last projection found them in the log: a cache of
// the log that lets an event re-read only the weeks it touches
// (projections.UsesWeeks), never a source.
type WeekSums struct {
	// Def is the fingerprint of the definition they were counted under
	// (counting.Counter.Fingerprint): sums counted under another one are
	// not used.
	Def string `dynamodbav:"def"`
	// Sums maps a week's index (WeekOf, decimal) to what its counted
	// workouts add up to; weeks without one are absent.
	Sums map[string]WeekSum `dynamodbav:"sums,omitempty"`
}

// WeekSum is one week's counted workouts: their value in the metric's
// units and how many they are, and how many workouts were left out, by
// reason (absent when none).
type WeekSum struct {
	Units    int64          `dynamodbav:"u"`
	Count    int            `dynamodbav:"n"`
	Excluded map[string]int `dynamodbav:"x,omitempty"`
}

// String is the week's sums as reports print them: {units count}, then
// what was left out when anything was.
func (s WeekSum) String() string {
	if len(s.Excluded) == 0 {
		return fmt.Sprintf("{%d %d}", s.Units, s.Count)
	}
	return fmt.Sprintf("{%d %d excluded %v}", s.Units, s.Count, s.Excluded)
}

// Equal reports whether s and o hold the same sums (no exclusions and an
// empty map alike).
func (s WeekSum) Equal(o WeekSum) bool {
	return s.Units == o.Units && s.Count == o.Count && maps.Equal(s.Excluded, o.Excluded)
}
