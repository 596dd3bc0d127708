package syncstate

import (
	"math"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
)

var t0 = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

// TestWorkoutDiffers: a sync writes a listed activity only when a field a
// milestone reads changed (the name is not one). Protection: each field
// WorkoutDiffers compares.
func TestWorkoutDiffers(t *testing.T) {
	t.Parallel()
	base := model.Workout{SportType: "Run", DistanceMeters: 5000, TotalElevationGain: 40, MovingTimeSeconds: 1500, StartDateUtc: t0, Name: "a"}
	for name, edit := range map[string]func(*model.Workout){
		"sport type": func(w *model.Workout) { w.SportType = "Ride" },
		"distance":   func(w *model.Workout) { w.DistanceMeters++ },
		"elevation":  func(w *model.Workout) { w.TotalElevationGain++ },
		"time":       func(w *model.Workout) { w.MovingTimeSeconds++ },
		"start":      func(w *model.Workout) { w.StartDateUtc = w.StartDateUtc.Add(time.Second) },
	} {
		fresh := base
		edit(&fresh)
		if !WorkoutDiffers(&base, &fresh) {
			t.Errorf("%s changed: not seen", name)
		}
	}
	renamed := base
	renamed.Name = "b"
	if WorkoutDiffers(&base, &renamed) {
		t.Error("a new name alone is written: milestones never read it")
	}
}

// TestWorkoutDiffersFillsLocalDays: a workout stored before local starts
// were kept (its date key carries no local day) differs from Strava's
// version that gives one, so the next list page rewrites it (the
// migration); once filled it does not; a page that gives no local start
// rewrites nothing. Protection: localDayDiffers.
func TestWorkoutDiffersFillsLocalDays(t *testing.T) {
	t.Parallel()
	stored := func(local string) *model.Workout {
		w := &model.Workout{UserID: "u", ActivityID: 7, SportType: "Run", DistanceMeters: 5000, StartDateUtc: t0, StartDateLocal: local}
		w.Stamp() // as the log reads it: the local day is in the date key
		w.StartDateLocal = ""
		return w
	}
	fresh := func(local string) *model.Workout {
		return &model.Workout{SportType: "Run", DistanceMeters: 5000, StartDateUtc: t0, StartDateLocal: local}
	}
	day := t0.Format(time.DateOnly)
	tests := []struct {
		name          string
		stored, fresh *model.Workout
		want          bool
	}{
		{"stored without a local day, Strava gives one", stored(""), fresh(day + "T07:00:00"), true},
		{"filled and the same", stored(day + "T07:00:00"), fresh(day + "T07:00:00"), false},
		{"filled, Strava's zone moved the day", stored(day + "T07:00:00"), fresh(t0.AddDate(0, 0, 1).Format(time.DateOnly) + "T01:00:00"), true},
		{"Strava gives none", stored(""), fresh(""), false},
	}
	for _, tt := range tests {
		if got := WorkoutDiffers(tt.stored, tt.fresh); got != tt.want {
			t.Errorf("%s: WorkoutDiffers = %v, want %v", tt.name, got, tt.want)
		}
	}
}

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
