package syncstate

import (
	"math"
	"time"

	"github.com/commitcollect/backend/model"
)

// The sync decisions on the domain alone: whether a listed activity is
// written, whether a user is reconciled, and how fast a cycle goes.

// ActiveMilestoneEnd reports whether ms hold an active milestone whose
// period overlaps [from, to], and the soonest end among them (zero when
// none of them ends).
func ActiveMilestoneEnd(ms []model.Milestone, from, to time.Time) (bool, time.Time) {
	var (
		any bool
		end time.Time
	)
	for _, m := range ms {
		w := m.Window()
		if m.Status != model.StatusActive || w.From.After(to) || (w.To != nil && w.To.Before(from)) {
			continue
		}
		any = true
		if w.To != nil && (end.IsZero() || w.To.Before(end)) {
			end = w.To.UTC()
		}
	}
	return any, end
}

// ReconcileDue decides whether a user whose slot came up is reconciled at
// now: never while its sync job runs or waits; when IdleReconcileDue says
// its last reconciliation would be idle old by its next slot; else only
// when a workout of the reconcile window that is not a tombstone has an
// activity id above the highest that reconciliation listed (Strava's ids
// grow with uploads: the athlete uploaded since). st may be nil (no sync
// yet). The caller has checked the milestone.
func ReconcileDue(st *SyncState, window []model.Workout, now time.Time, idle, interval time.Duration) bool {
	if st != nil && st.Running() {
		return false
	}
	if IdleReconcileDue(st, now, idle, interval) {
		return true
	}
	for _, w := range window {
		if !w.IsDeleted && w.ActivityID > st.ReconciledActivityID {
			return true
		}
	}
	return false
}

// IdleReconcileDue reports whether the slot at now is the last before the
// user's last reconciliation (st.ReconciledAtUtc; zero or st nil: never)
// turns idle old: its next slot, an interval on, would find it so. Slots
// come once per interval, and a reconciliation is stamped when its job
// runs, a little after its slot: waiting until the stamp is idle old
// passes over the slot that falls just short of it and reconciles an
// interval later. Reconciling at the last slot before keeps every gap
// within idle (plus the job's wait).
func IdleReconcileDue(st *SyncState, now time.Time, idle, interval time.Duration) bool {
	return st == nil || st.ReconciledAtUtc.IsZero() || now.Add(interval).Sub(st.ReconciledAtUtc) >= idle
}

// ReconcilePace is how many of users a cycle should have come to after
// elapsed of interval: ceil(users × elapsed / interval), all of them (and
// any that joined) once the interval has passed.
func ReconcilePace(users int, elapsed, interval time.Duration) int {
	if elapsed >= interval {
		return math.MaxInt
	}
	if elapsed <= 0 {
		return 0
	}
	return int(math.Ceil(float64(users) * float64(elapsed) / float64(interval)))
}
