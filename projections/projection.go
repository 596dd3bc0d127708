// Package projections decides what a milestone's projected state is: a pure
// function of the milestone's definition, its current projection and the
// user's workout log. It holds no clients and reads no clock (callers pass
// now). The stream consumer (projections/consumer) and the rebuild tooling
// both call ProjectWith, so live processing and replays cannot drift apart.
//
// Replay sensitivity: changing how units are rounded (model.Metric.Units),
// which workouts count (model/counting) or how the tipping activity is chosen
// changes every projected milestone and forces a rebuild.
package projections

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/bits"
	"slices"
	"time"

	"github.com/commitcollect/backend/model"
)

// Log is the workout log one recompute inspects.
type Log struct {
	// Workouts in any order; Project sorts its own copy.
	Workouts []model.Workout
	// Truncated says the reader stopped at the guardrail
	// (model.MaxWorkoutsToInspect): workouts started before ExactFrom may
	// be missing.
	Truncated bool
	// ExactFrom, when Truncated, is the instant from which the log is
	// complete (it holds every workout started at or after it). A zero
	// ExactFrom with Truncated means nothing is known to be complete.
	ExactFrom time.Time
	// ReadWeeks, when set, are the weeks (calendar.WeekOf) the log was read for: a
	// milestone whose stored week sums UsesWeeks takes its other weeks from
	// them (weeks.go); every other milestone's whole period was read. A log
	// read by weeks is never Truncated (the reader reads whole periods then).
	ReadWeeks map[int64]bool
	// ReadDays, when set, are the local days (YYYY-MM-DD) the log was read
	// for whole: a streak whose stored days UsesDays re-finds only those
	// (streak.go).
	ReadDays map[string]bool
}

// cutNewest applies the guardrail to a log sorted by byStartThenID: it keeps
// the newest model.MaxWorkoutsToInspect workouts, minus those sharing the
// start date of the newest one left out, and returns the instant from which
// the result is complete (the store reads the same way; this covers callers
// that pass a longer log).
func cutNewest(ws []model.Workout) ([]model.Workout, time.Time) {
	cut := len(ws) - model.MaxWorkoutsToInspect
	newestLeftOut := ws[cut-1].StartDateUtc
	for cut < len(ws) && !ws[cut].StartDateUtc.After(newestLeftOut) {
		cut++
	}
	if cut == len(ws) {
		return nil, newestLeftOut.UTC().Add(time.Nanosecond)
	}
	return ws[cut:], ws[cut].StartDateUtc.UTC()
}

// truncatedFrom says whether def's period reaches before the instant from
// which log is complete, and returns that instant when it does.
func truncatedFrom(def model.MilestoneDefinition, log Log) *time.Time {
	if !log.Truncated {
		return nil
	}
	if !log.ExactFrom.IsZero() && !def.Window().From.Before(log.ExactFrom) {
		return nil // the whole period lies where the log is complete
	}
	t := log.ExactFrom.UTC()
	return &t
}

// Crossing records the workout whose cumulative value first reached part
// PartIndex's threshold, walking counted workouts in (startDateUtc,
// activityId) order.
type Crossing struct {
	PartIndex     int
	ActivityID    int64
	CorrelationID string
	// FromSums says the part was reached inside a week taken from stored
	// week sums: the workout is not known (ActivityID 0), and a part to
	// be minted needs a projection of the whole period.
	FromSums bool
}

// Result is the outcome of one projection.
type Result struct {
	// Projection is the new state. ProjectedAtUtc is now when anything
	// changed, else the current value (so an unchanged log changes nothing).
	Projection model.Projection
	// Earned is how many parts the current value earns (0..PartCount),
	// regardless of what was awarded before.
	Earned int
	// Crossings holds, for each part earned by the current value (indexes
	// 0..Earned-1), the workout that tipped it.
	Crossings []Crossing
	// NewParts are the part indexes awarded by this projection and not
	// before (cur.AwardedParts ≤ i < Projection.AwardedParts), ascending.
	NewParts []int
	// Unjustified are parts the stored state claims (counted in
	// cur.AwardedParts, or with an award item) that neither the log nor an
	// award item with its AWARD_MINTED audit entry justifies, ascending.
	// Projection.AwardedParts does not count them.
	Unjustified []int
	// Changed reports whether Projection differs from the current one
	// (ignoring ProjectedAtUtc).
	Changed bool
	// Completed reports that this projection moved status to completed.
	Completed bool
	// BecameTruncated reports that the log is truncated and the current
	// projection did not say so yet.
	BecameTruncated bool
}

// Tipping returns the crossing of part i, and false when the current value
// does not reach it (a part awarded earlier by workouts since deleted).
func (r Result) Tipping(i int) (Crossing, bool) {
	if i < 0 || i >= len(r.Crossings) {
		return Crossing{}, false
	}
	return r.Crossings[i], true
}

// EarnedParts is how many parts value earns: the number of i in
// [0, partCount) with value*partCount >= target*(i+1), i.e.
// min(partCount, floor(value*partCount/target)), computed in 128 bits so it
// cannot overflow. It is 0 when target or partCount is not positive.
func EarnedParts(value, target int64, partCount int) int {
	if value <= 0 || target <= 0 || partCount <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(value), uint64(partCount))
	if hi >= uint64(target) {
		return partCount // the quotient does not even fit in 64 bits
	}
	q, _ := bits.Div64(hi, lo, uint64(target))
	if q >= uint64(partCount) {
		return partCount
	}
	return int(q)
}

// byStartThenID orders workouts by (startDateUtc, activityId): the order in
// which crossings are attributed.
func byStartThenID(a, b model.Workout) int {
	if c := a.StartDateUtc.Compare(b.StartDateUtc); c != 0 {
		return c
	}
	return cmp.Compare(a.ActivityID, b.ActivityID)
}

func sameInstant(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// ProjectWith computes def's new projection from cur, the awards the store
// holds and the log at now. The result does not depend on the order of
// log.Workouts (each activity appears once: the log holds one item per
// activity id). AwardedParts is Justified: parts the log earns plus parts
// held with proof (award item and AWARD_MINTED entry), so awards are
// monotonic (a shrinking log never takes a held award back) while a counter
// nothing backs is lowered to what is justified (Unjustified lists the
// rest). Status is completed exactly when every part is justified. The
// projection is truncated (with ExactFromUtc) only when def's period starts
// before the instant from which the log is complete: a period the guardrail
// did not reach into stays exact. More than model.MaxWorkoutsToInspect
// workouts are cut to the newest ones. A log read by weeks (ReadWeeks)
// counts only those weeks from the log when cur's week sums are used
// (UsesWeeks), the others from the sums; a period that keeps week sums gets
// them afresh in the result (weeks.go). A streak is tallied by its own
// walk of active days (streak.go), read by days the same way (UsesDays).
//
// It returns a *model.ValidationError (model.ErrInvalid) when def cannot be
// projected (model.MilestoneDefinition.ValidateProjectable).
func ProjectWith(def model.MilestoneDefinition, cur model.Projection, held Held, log Log, now time.Time) (Result, error) {
	if err := def.ValidateProjectable(); err != nil {
		return Result{}, fmt.Errorf("project %q: %w", def.Title, err)
	}
	ws := slices.Clone(log.Workouts)
	slices.SortFunc(ws, byStartThenID)
	if len(ws) > model.MaxWorkoutsToInspect {
		var from time.Time
		ws, from = cutNewest(ws)
		if !log.Truncated || from.After(log.ExactFrom) {
			log.ExactFrom = from
		}
		log.Truncated = true
	}
	exactFrom := truncatedFrom(def, log)

	t := tallyOf(def)(def, cur, ws, log, exactFrom)
	next := model.Projection{
		ProgressValue:   t.value,
		WorkoutsCounted: t.counted,
		AwardedParts:    Justified(len(t.crossings), def.PartCount, held, now),
		Status:          model.StatusActive,
		Truncated:       exactFrom != nil,
		ExactFromUtc:    exactFrom,
		ProjectedAtUtc:  cur.ProjectedAtUtc,
		Excluded:        t.excluded,
		Weeks:           t.weeks,
		Days:            t.days,
	}
	if next.AwardedParts >= def.PartCount {
		next.Status = model.StatusCompleted
	}
	r := Result{Projection: next, Earned: len(t.crossings), Crossings: t.crossings,
		Unjustified: unjustified(next.AwardedParts, cur, held, def.PartCount, now)}
	for i := max(cur.AwardedParts, 0); i < next.AwardedParts; i++ {
		r.NewParts = append(r.NewParts, i)
	}
	curStatus := cur.Status
	if curStatus == "" {
		curStatus = model.StatusActive
	}
	r.Changed = next.ProgressValue != cur.ProgressValue || next.WorkoutsCounted != cur.WorkoutsCounted ||
		next.AwardedParts != cur.AwardedParts || next.Status != curStatus || next.Truncated != cur.Truncated ||
		!sameInstant(next.ExactFromUtc, cur.ExactFromUtc) || !sameWeeks(next.Weeks, cur.Weeks) ||
		!maps.Equal(next.Excluded, cur.Excluded) || !next.Days.Equal(cur.Days)
	r.Completed = next.Status == model.StatusCompleted && curStatus != model.StatusCompleted
	r.BecameTruncated = next.Truncated && !cur.Truncated
	if r.Changed {
		t := now.UTC()
		r.Projection.ProjectedAtUtc = &t
	}
	return r, nil
}
