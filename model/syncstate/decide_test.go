package syncstate

import (
	"math"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
)

var t0 = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

// TestReconcileDueAndPace: a slot reconciles a user only when something can
// have changed, an idle user at the last slot before its last
// reconciliation turns idle old, and a cycle comes to users evenly.
// Protections: ReconcileDue's rules, IdleReconcileDue's look one slot
// ahead, ReconcilePace's rounding up.
func TestReconcileDueAndPace(t *testing.T) {
	t.Parallel()
	idle, interval := 28*24*time.Hour, 7*24*time.Hour
	recent := &SyncState{State: SyncIdle, ReconciledAtUtc: t0.Add(-time.Hour), ReconciledActivityID: 100}
	// Four slots after the last reconciliation, stamped a few minutes
	// after its slot (its job ran late): a few minutes short of idle, and
	// the next slot would be an interval past it, so this one reconciles.
	lastSlotBefore := &SyncState{State: SyncIdle, ReconciledAtUtc: t0.Add(-idle + 5*time.Minute), ReconciledActivityID: 100}
	// Three slots after: the next slot is still within idle.
	slotBefore := &SyncState{State: SyncIdle, ReconciledAtUtc: t0.Add(-idle + interval + 5*time.Minute), ReconciledActivityID: 100}
	tests := []struct {
		name   string
		st     *SyncState
		window []model.Workout
		want   bool
	}{
		{"never synced", nil, nil, true},
		{"running", &SyncState{State: SyncBackfilling}, nil, false},
		{"reconciled long ago", &SyncState{State: SyncIdle, ReconciledAtUtc: t0.Add(-idle)}, nil, true},
		{"nothing uploaded since", recent, []model.Workout{{ActivityID: 100}}, false},
		{"an upload since", recent, []model.Workout{{ActivityID: 101}}, true},
		{"only a tombstone since", recent, []model.Workout{{ActivityID: 101, IsDeleted: true}}, false},
		{"the last slot before idle", lastSlotBefore, []model.Workout{{ActivityID: 100}}, true},
		{"a slot earlier", slotBefore, []model.Workout{{ActivityID: 100}}, false},
	}
	for _, tt := range tests {
		if got := ReconcileDue(tt.st, tt.window, t0, idle, interval); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	for _, tc := range []struct {
		users             int
		elapsed, interval time.Duration
		want              int
	}{{10, 0, time.Hour, 0}, {10, time.Minute, time.Hour, 1}, {120, 30 * time.Minute, time.Hour, 60}, {10, time.Hour, time.Hour, math.MaxInt}} {
		if got := ReconcilePace(tc.users, tc.elapsed, tc.interval); got != tc.want {
			t.Errorf("ReconcilePace(%d, %s, %s) = %d, want %d", tc.users, tc.elapsed, tc.interval, got, tc.want)
		}
	}
}
