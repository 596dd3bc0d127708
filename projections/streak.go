package projections

// Streaks: the first metric that is not a sum.
//
// A streak milestone's value is the longest run of consecutive active days
// (or Monday-to-Sunday weeks) of its period, the athlete's own days
// (start_date_local); model/streak holds the day arithmetic, the freezes
// and the calendar's edges. The order of days matters, so a streak cannot
// keep week sums: it keeps its active days instead (streak.Days, a bitmap
// from the period's first day, 125 bytes a thousand days), beside its
// progress.
//
// An event re-reads only the local days its triggers name (Touched.Days):
// each is read whole, in every zone it can span (calendar.SpanOfDays), and
// re-found from the log, never flipped by a delta; every other day comes
// from the stored bitmap. A day's bit says some workout that counts starts
// on it; a day where nothing counted keeps the reason of its first
// workout left out (Days.Left), which progress.excluded counts.
//
// The stored days are used only when found under the same definition (the
// counting fingerprint, which names the period); otherwise, and for a
// trigger that cannot name its days, a rebuild, a log cut by the guardrail
// (whose days are not kept), or a part to be minted on a day not re-read
// (its tipping workout is not known: Crossing.FromSums), the whole period
// is read. Replay sensitivity: what counts (model/counting) and what a day
// is (Workout.LocalDate) shape the stored days, as they shape week sums.

import (
	"slices"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/calendar"
	"github.com/commitcollect/backend/model/counting"
	"github.com/commitcollect/backend/model/streak"
)

// UsesDays reports whether a recompute of def may read only the days its
// triggers touch: def is a streak and cur holds days found under it.
func UsesDays(def model.MilestoneDefinition, cur model.Projection) bool {
	return def.Metric == model.MetricStreak && cur.Days != nil && cur.Days.Def == counting.For(def).Fingerprint()
}

// StreakCalendar is def's streak calendar: its rule (a day streak when it
// has none) and its period's days; false when the period has no local
// days.
func StreakCalendar(def model.MilestoneDefinition) (streak.Calendar, bool) {
	first, last, ok := def.Period().Days()
	rule := streak.Rule{Unit: streak.Day}
	if def.Streak != nil {
		rule = *def.Streak
	}
	return streak.Calendar{Rule: rule, First: first, Last: last}, ok && def.Period().Local()
}

// dayFacts is what the log shows of one local day: the first workout that
// counts on it, or the reason the first left out was left out.
type dayFacts struct {
	tip    *model.Workout
	reason string
}

// streakTally re-finds the days log was read for (all of the period when
// cur's days are not used), takes the others from cur's days, and walks
// them: the value is the longest run, each part's crossing the first
// workout of the day its length was first reached.
func streakTally(def model.MilestoneDefinition, cur model.Projection, ws []model.Workout, log Log, exactFrom *time.Time) tally {
	cal, ok := StreakCalendar(def)
	if !ok {
		return tally{}
	}
	counter := counting.For(def)
	days := &streak.Days{Def: counter.Fingerprint()}
	var read map[string]bool
	if log.ReadDays != nil && !log.Truncated && UsesDays(def, cur) {
		read = log.ReadDays
		days.Bits = slices.Clone(cur.Days.Bits)
		for r, b := range cur.Days.Left { // Set writes in place: never into cur's
			if days.Left == nil {
				days.Left = map[string][]byte{}
			}
			days.Left[r] = slices.Clone(b)
		}
		for d := range read {
			if day, err := calendar.ParseDate(d); err == nil {
				days.Clear(streak.Index(cal.First, day))
			}
		}
	}
	seen := map[int]dayFacts{}
	for i := range ws {
		w := &ws[i]
		v := counter.Judge(*w)
		d := w.LocalDate()
		if !v.InPeriod || (read != nil && !read[d]) {
			continue
		}
		day, err := calendar.ParseDate(d)
		if err != nil {
			continue
		}
		k := streak.Index(cal.First, day)
		f := seen[k]
		switch {
		case v.Counted && f.tip == nil:
			f.tip = w
		case !v.Counted && f.reason == "":
			f.reason = string(v.Reason)
		}
		seen[k] = f
	}
	for k, f := range seen {
		if f.tip != nil {
			days.Bits = streak.Set(days.Bits, k, true)
		} else {
			days.SetLeft(f.reason, k)
		}
	}
	longest, tipping := cal.Longest(days.Bits)
	t := tally{value: int64(longest), counted: streak.Count(days.Bits), excluded: days.LeftCounts()}
	for n := 1; n <= longest; n++ {
		for e := EarnedParts(int64(n), def.TargetUnits(), def.PartCount); len(t.crossings) < e; {
			c := Crossing{PartIndex: len(t.crossings), FromSums: true}
			if f := seen[tipping[n-1]]; f.tip != nil {
				c = Crossing{PartIndex: c.PartIndex, ActivityID: f.tip.ActivityID, CorrelationID: f.tip.CorrelationID}
			}
			t.crossings = append(t.crossings, c)
		}
	}
	if exactFrom == nil {
		t.days = days
	}
	return t
}
