package calendar

import (
	"slices"
	"time"
)

// Window is a half-open interval of start instants [From, To); To == nil
// means no end.
type Window struct {
	From time.Time
	To   *time.Time
}

// Contains reports whether t lies in the window.
func (w Window) Contains(t time.Time) bool {
	return !t.Before(w.From) && (w.To == nil || t.Before(*w.To))
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
