package projections

import (
	"math/big"
	"time"

	"github.com/commitcollect/backend/model"
)

// Pace is where a milestone with an end should be on the athlete's today,
// in integer units: the target times the share of the period elapsed, and
// the local day the target is reached at the rate so far.
type Pace struct {
	ExpectedNow int64
	OnPace      bool
	// Finish is the day the target is reached at the rate so far (a
	// midnight UTC naming a local date); nil when nothing is counted yet,
	// or the milestone is complete.
	Finish *time.Time
}

// PaceOf is def's pace at value (integer units) on today, the athlete's
// local day (calendar.Today), at the instant now; false when the period
// has no end. A local period's share elapsed is its days that are over
// (today is not yet): on the first day nothing is expected, after the last
// the whole target. A period of UTC instants shares its instants, its days
// are UTC dates. The rate so far is the value over the days begun, today
// included. A complete milestone is on pace and has no finish.
func PaceOf(def model.MilestoneDefinition, value int64, complete bool, today, now time.Time) (Pace, bool) {
	target := def.TargetUnits()
	p := def.Period()
	var first time.Time
	var elapsed, total int64 // the share elapsed: elapsed/total
	switch {
	case p.Local():
		f, l, ok := p.Days()
		if !ok || l == nil {
			return Pace{}, false
		}
		first, total = f, days(f, *l)+1
		elapsed = min(max(days(first, today), 0), total)
	case p.EndAtUtc != nil:
		first, today = midnight(p.StartAtUtc), midnight(now)
		total = int64(p.EndAtUtc.Sub(p.StartAtUtc))
		elapsed = min(max(int64(now.Sub(p.StartAtUtc)), 0), total)
	default:
		return Pace{}, false
	}
	out := Pace{ExpectedNow: mulDiv(target, elapsed, max(total, 1))}
	out.OnPace = value >= out.ExpectedNow
	if complete || value >= target {
		out.OnPace = true
		return out, true
	}
	if value <= 0 {
		return out, true
	}
	begun := max(days(first, today)+1, 1)
	need := mulDivUp(target, begun, value) // days at the rate so far
	finish := first.AddDate(0, 0, int(min(need-1, 100*366)))
	out.Finish = &finish
	return out, true
}

// days is how many days b lies after a (both midnights UTC).
func days(a, b time.Time) int64 { return int64(b.Sub(a) / (24 * time.Hour)) }

// midnight is t's UTC date.
func midnight(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// mulDiv is a*b/c rounded down, in big integers (c > 0).
func mulDiv(a, b, c int64) int64 {
	r := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
	return r.Quo(r, big.NewInt(c)).Int64()
}

// mulDivUp is a*b/c rounded up (c > 0, a and b not negative).
func mulDivUp(a, b, c int64) int64 {
	r := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
	r.Add(r, big.NewInt(c-1))
	return r.Quo(r, big.NewInt(c)).Int64()
}
