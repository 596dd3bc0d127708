package model

import (
	"slices"
	"time"
)

// Window is a half-open interval of start dates [From, To); To == nil means
// no end.
type Window struct {
	From time.Time
	To   *time.Time
}

// Contains reports whether t lies in the window.
func (w Window) Contains(t time.Time) bool {
	return !t.Before(w.From) && (w.To == nil || t.Before(*w.To))
}

// Window is the interval of start dates whose workouts can count towards the
// milestone: [periodStartAtUtc, periodEndAtUtc).
func (d MilestoneDefinition) Window() Window {
	return Window{From: d.PeriodStartAtUtc.UTC(), To: d.PeriodEndAtUtc}
}

// MergeWindows returns the union of ws as disjoint windows, newest first
// (descending From). Overlapping and touching windows are merged; empty
// windows (To not after From) are dropped.
func MergeWindows(ws []Window) []Window {
	in := make([]Window, 0, len(ws))
	for _, w := range ws {
		if w.To != nil && !w.To.After(w.From) {
			continue
		}
		in = append(in, w)
	}
	slices.SortFunc(in, func(a, b Window) int { return a.From.Compare(b.From) })
	var out []Window
	for _, w := range in {
		if n := len(out); n > 0 && (out[n-1].To == nil || !w.From.After(*out[n-1].To)) {
			last := &out[n-1]
			if last.To != nil && (w.To == nil || w.To.After(*last.To)) {
				last.To = w.To
			}
			continue
		}
		out = append(out, w)
	}
	slices.Reverse(out)
	return out
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
