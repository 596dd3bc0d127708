package projections

// Week sums: how an event reads a week of the log, not a whole period.
//
// A milestone whose period spans a few weeks (a month, a fortnight: with an
// end, two to six weeks long) keeps, beside its progress, what its counted
// workouts add up to in each UTC week (calendar.WeekSums). A workout trigger
// names its start before and after the write; the projector then reads the
// log only for the weeks those starts fall in and takes every other week
// from the sums, so an event reads about seven days of workouts (1 read
// unit at one a day) rather than the whole period (3 at a month of them).
//
// It is still a recompute from the log, never a delta: the weeks an event
// touches are re-read and re-counted whole, so duplicates, replays and
// reordering stay harmless, and the version check orders concurrent
// recomputes as before (a recompute that wrote another week meanwhile makes
// ours conflict and re-read). The sums are only used when they were counted
// under the same definition (counting.Counter.Fingerprint); a projection of the whole
// period writes them afresh: a trigger without its days (a milestone
// written, a sync page's request), a rebuild, a log cut by the guardrail,
// and a part to be minted whose tipping workout lies in a week taken from
// the sums (its activity is not known there: Crossing.FromSums). Periods
// outside these bounds keep reading their whole period: a shorter one costs
// the same, a longer one would grow the milestone item past one write unit.
//
// Replay sensitivity: the week grid (calendar.WeekOf) and what counts
// (model/counting's verdicts) shape the stored sums, which keep each week's
// workouts left out by reason too. Changing either must bump the
// fingerprint's version (model/counting's fingerprintVersion): every stored
// sum then goes unused until the next whole-period projection writes it
// again (no rebuild needed, one larger read per milestone).

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/calendar"
	"github.com/commitcollect/backend/model/counting"
	"github.com/commitcollect/backend/model/streak"
)

// The periods that keep week sums (KeepsWeeks).
const (
	minWeeksSpan = 14 * 24 * time.Hour
	maxWeeksSpan = 42 * 24 * time.Hour
)

// KeepsWeeks reports whether def's projection keeps week sums: its period
// has an end and spans two to six weeks of start instants.
func KeepsWeeks(def model.MilestoneDefinition) bool {
	w := def.Window()
	if w.To == nil {
		return false
	}
	span := w.To.Sub(w.From)
	return span >= minWeeksSpan && span <= maxWeeksSpan
}

// UsesWeeks reports whether a recompute of def may read only the weeks its
// triggers touch: it keeps week sums and cur holds sums counted under def.
func UsesWeeks(def model.MilestoneDefinition, cur model.Projection) bool {
	return KeepsWeeks(def) && cur.Weeks != nil && cur.Weeks.Def == counting.For(def).Fingerprint()
}

// tally is what one kind of metric makes of the log: the progress value,
// how many workouts (a streak: active days) counted, the crossing of each
// part the value earns, what the projection keeps beside its progress (a
// few weeks' sums, a streak's days) and what was left out, by reason.
type tally struct {
	value     int64
	counted   int
	crossings []Crossing
	weeks     *calendar.WeekSums
	days      *streak.Days
	excluded  map[string]int
}

// tallyOf is the tally of def's metric: a streak walks its days
// (streak.go), every other metric sums its counted workouts.
func tallyOf(def model.MilestoneDefinition) func(model.MilestoneDefinition, model.Projection, []model.Workout, Log, *time.Time) tally {
	if def.Metric == model.MetricStreak {
		return streakTally
	}
	return sumTally
}

// sumTally sums def's counted workouts of ws (sorted) in (start,
// activityId) order, taking the weeks log was not read for from cur's week
// sums when they are used, and attributes each part to the workout whose
// value first reached it.
func sumTally(def model.MilestoneDefinition, cur model.Projection, ws []model.Workout, log Log, exactFrom *time.Time) tally {
	var read map[int64]bool
	if log.ReadWeeks != nil && !log.Truncated && UsesWeeks(def, cur) {
		read = log.ReadWeeks
	}
	walk, sums, excluded := steps(def, cur, ws, read)
	t := tally{excluded: excluded}
	target := def.TargetUnits()
	for _, s := range walk {
		t.counted += s.count
		t.value = satAdd(t.value, s.units)
		for e := EarnedParts(t.value, target, def.PartCount); len(t.crossings) < e; {
			t.crossings = append(t.crossings, Crossing{PartIndex: len(t.crossings), ActivityID: s.id, CorrelationID: s.corr, FromSums: s.fromSums})
		}
	}
	if KeepsWeeks(def) && exactFrom == nil {
		if len(sums) == 0 {
			sums = nil // stored absent: a stream image of an empty map does not read back (weeks_test.go)
		}
		t.weeks = &calendar.WeekSums{Def: counting.For(def).Fingerprint(), Sums: sums}
	}
	return t
}

// step is one step of the walk that counts a period and attributes its
// crossings: a counted workout, or a week taken whole from stored sums.
type step struct {
	start    time.Time
	id       int64
	corr     string
	units    int64
	count    int
	fromSums bool
}

// steps lists, in (start, activityId) order, what def counts in the
// sorted workouts ws, the week sums that result, and how many workouts of
// the period each reason left out (nil when none). With read (the weeks
// the log was read for, when def's stored sums are used), only workouts of
// those weeks are taken from ws and every other stored week is one step.
func steps(def model.MilestoneDefinition, cur model.Projection, ws []model.Workout, read map[int64]bool) ([]step, map[string]calendar.WeekSum, map[string]int) {
	var out []step
	sums := map[string]calendar.WeekSum{}
	counter := counting.For(def)
	for _, w := range ws {
		k := calendar.WeekOf(w.StartDateUtc)
		v := counter.Judge(w)
		if !v.InPeriod || (read != nil && !read[k]) {
			continue
		}
		key := strconv.FormatInt(k, 10)
		s := sums[key]
		if !v.Counted {
			s.Excluded = addReason(s.Excluded, string(v.Reason), 1)
			sums[key] = s
			continue
		}
		out = append(out, step{start: w.StartDateUtc, id: w.ActivityID, corr: w.CorrelationID, units: v.Units, count: 1})
		s.Units, s.Count = satAdd(s.Units, v.Units), s.Count+1
		sums[key] = s
	}
	if read != nil {
		for key, s := range cur.Weeks.Sums {
			k, err := strconv.ParseInt(key, 10, 64)
			if err != nil || read[k] || (s.Count == 0 && len(s.Excluded) == 0) {
				continue
			}
			if s.Count > 0 {
				out = append(out, step{start: calendar.WeekStart(k), units: s.Units, count: s.Count, fromSums: true})
			}
			sums[key] = s
		}
		slices.SortFunc(out, func(a, b step) int {
			if c := a.start.Compare(b.start); c != 0 {
				return c
			}
			return cmp.Compare(a.id, b.id)
		})
	}
	var excluded map[string]int
	for _, s := range sums {
		for r, n := range s.Excluded {
			excluded = addReason(excluded, r, n)
		}
	}
	return out, sums, excluded
}

// addReason adds n workouts left out for reason r to m, making m when nil.
func addReason(m map[string]int, r string, n int) map[string]int {
	if m == nil {
		m = map[string]int{}
	}
	m[r] += n
	return m
}

// ReachedInSums reports whether one of parts (to be minted) was reached in
// a week taken from stored sums: its tipping workout is not known.
func (r Result) ReachedInSums(parts []int) bool {
	for _, i := range parts {
		if cr, ok := r.Tipping(i); ok && cr.FromSums {
			return true
		}
	}
	return false
}

// sameWeeks reports whether two week sums are equal (no sums and an empty
// map alike).
func sameWeeks(a, b *calendar.WeekSums) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Def == b.Def && maps.EqualFunc(a.Sums, b.Sums, calendar.WeekSum.Equal)
}
