package projections

import (
	"time"

	"github.com/commitcollect/backend/model"
)

// AuditRetention is how long an AWARD_MINTED audit entry lives
// (model.AuditRetentionDays, the audit table's TTL). An award item older than
// this may have lost its entry by design, so the item alone justifies it.
const AuditRetention = model.AuditRetentionDays * 24 * time.Hour

// Held is what the store holds for a milestone's awards besides the log: the
// evidence that justifies an award the log no longer earns (awards are
// monotonic: a deleted workout never takes an award back).
type Held struct {
	// Minted maps the part index of every existing award item to its
	// awardedAtUtc.
	Minted map[int]time.Time
	// Audited holds the parts whose AWARD_MINTED audit entry exists. The
	// projector mints an award and its entry in one transaction, so an award
	// item with its entry was minted by the projector from a log that earned
	// it; a counter or an award item without one was not.
	Audited map[int]bool
}

// Justifies reports whether part i is held with proof: its award item exists
// and either its AWARD_MINTED entry exists or the item is older than
// AuditRetention at now (its entry may have expired).
func (h Held) Justifies(i int, now time.Time) bool {
	at, ok := h.Minted[i]
	if !ok {
		return false
	}
	return h.Audited[i] || !at.After(now.Add(-AuditRetention))
}

// Justified is how many parts are justified: the longest run of parts 0, 1,
// … each earned by the log (i < earned) or held with proof (Held.Justifies).
// It is at most partCount. This, not a stored counter, is what awardedParts
// may say: a counter raised without award items and audit entries is not
// evidence.
func Justified(earned, partCount int, h Held, now time.Time) int {
	n := min(max(earned, 0), partCount)
	for n < partCount && h.Justifies(n, now) {
		n++
	}
	return n
}

// unjustified lists the parts at or after justified that cur or h claim
// (counted in cur.AwardedParts, or with an award item) without
// justification, ascending.
func unjustified(justified int, cur model.Projection, h Held, partCount int, now time.Time) []int {
	var out []int
	for i := justified; i < partCount; i++ {
		_, minted := h.Minted[i]
		if (i < cur.AwardedParts || minted) && !h.Justifies(i, now) {
			out = append(out, i)
		}
	}
	return out
}
