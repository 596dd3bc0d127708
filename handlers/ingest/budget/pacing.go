package budget

import (
	"math"
	"time"
)

// ShareCap is what sync jobs may read of a budget of limit in a window:
// the limit less the webhooks' part (1-share of it, at least one read).
func ShareCap(limit int, share float64) int {
	return max(0, limit-ReserveOf(limit, 1-share))
}

// PacedAllowance is how many reads sync jobs may have taken by now in the
// window of length window containing now, of a budget of limit with their
// share: the share cap times the elapsed part of the window plus head (a
// head start), at most the cap.
func PacedAllowance(limit int, share float64, now time.Time, window, head time.Duration) int {
	c := ShareCap(limit, share)
	elapsed := now.UTC().Sub(now.UTC().Truncate(window)) + head
	if elapsed >= window {
		return c
	}
	return int(float64(c) * float64(elapsed) / float64(window))
}

// NextPacingSlot is when the allowance of the window grows past taken
// reads: the instant it reaches taken+1, or the window's end when the cap
// is reached within it.
func NextPacingSlot(limit int, share float64, taken int, now time.Time, window, head time.Duration) time.Time {
	start := now.UTC().Truncate(window)
	c := ShareCap(limit, share)
	if taken+1 > c || c == 0 {
		return start.Add(window)
	}
	at := start.Add(time.Duration(math.Ceil(float64(taken+1)*float64(window)/float64(c))) - head)
	if !at.After(now) {
		at = now.Add(time.Second)
	}
	return at
}

// ReconcileShareOfSync is the share of the sync reads' paced allowance a
// reconciliation may take: the repeated re-listing of athletes already
// imported stops there, and first imports always find the rest.
const ReconcileShareOfSync = 0.5

// SyncShareOf is the budget share a sync job is paced on: the sync share,
// or ReconcileShareOfSync of it for a reconciliation.
func SyncShareOf(share float64, reconciles bool) float64 {
	if reconciles {
		return share * ReconcileShareOfSync
	}
	return share
}
