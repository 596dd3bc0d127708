package bff

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/syncstate"
)

// SyncStateStore reads the user's Strava sync state.
type SyncStateStore interface {
	SyncState(ctx context.Context, userID string) (*syncstate.SyncState, error)
}

// SyncNone is the SyncJSON state of a user whose Strava history was never
// synced (no sync state item yet: the backfill is about to be enqueued, or
// the user never connected).
const SyncNone = "none"

// SyncJSON is the Strava sync shown by GET /v1/me and the landing page:
// where the import of the athlete's history (backfill) and the periodic
// re-listing of recent activities (reconciliation) stand.
type SyncJSON struct {
	// State is one of model's sync statuses (backfilling, reconciling,
	// deferred, idle, failed) or SyncNone.
	State string `json:"state"`
	// Mode is the running or last job's kind: backfill or reconcile (empty
	// with SyncNone).
	Mode string `json:"mode,omitempty"`
	// ImportedCount is how many activities the syncs wrote so far.
	ImportedCount int `json:"importedCount"`
	// Horizon is how far back history is (being) imported.
	Horizon *time.Time `json:"horizon,omitempty"`
	// LastSyncAtUtc is when the last job completed.
	LastSyncAtUtc *time.Time `json:"lastSyncAtUtc,omitempty"`
	// NextSyncAtUtc is when the next page or job is due: the end of the
	// wait while deferred, the next reconciliation while idle.
	NextSyncAtUtc *time.Time `json:"nextSyncAtUtc,omitempty"`
	// Reason says why the job waits (deferred) or stopped (failed).
	Reason string `json:"reason,omitempty"`
	// ProgressPercent is how much of the running job's window has been
	// listed (0–100, by time from now back to the window's start); 100
	// when idle.
	ProgressPercent int `json:"progressPercent"`
}

// syncJSON presents a stored sync state; st is nil when there is none.
func syncJSON(st *syncstate.SyncState) SyncJSON {
	if st == nil {
		return SyncJSON{State: SyncNone}
	}
	out := SyncJSON{
		State: string(st.State), Mode: st.Mode, ImportedCount: st.ImportedCount,
		Horizon: timePtr(st.HorizonUtc), LastSyncAtUtc: timePtr(st.LastSyncAtUtc), NextSyncAtUtc: timePtr(st.NextSyncAtUtc),
		ProgressPercent: syncProgress(st),
	}
	if st.State == syncstate.SyncDeferred || st.State == syncstate.SyncFailed {
		out.Reason = st.DeferredReason
	}
	return out
}

// syncProgress is the share of the job's window already listed. A job lists
// newest first, from its top (when it started, or for a backfill that extends
// an earlier one, where that one reached) back to WindowFromUtc, so the
// cursor's distance from the top over the window's length is how far it
// got; a job that has not listed a page yet (zero cursor) is at 0.
func syncProgress(st *syncstate.SyncState) int {
	if st.State == syncstate.SyncIdle {
		return 100
	}
	from, start, cursor := st.WindowFromUtc, st.JobStartedAtUtc, st.CursorBeforeUtc
	if st.Mode == syncstate.SyncModeBackfill && !st.ImportedFromUtc.IsZero() && st.ImportedFromUtc.Before(start) {
		start = st.ImportedFromUtc
	}
	if cursor.IsZero() || from.IsZero() || start.IsZero() || !start.After(from) {
		return 0
	}
	p := float64(start.Sub(cursor)) / float64(start.Sub(from)) * 100
	return int(math.Floor(math.Max(0, math.Min(p, 100))))
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// syncState reads and presents a user's sync state (SyncNone without one).
func (h *Handler) syncState(ctx context.Context, userID string) (SyncJSON, error) {
	st, err := h.syncs.SyncState(ctx, userID)
	switch {
	case errors.Is(err, model.ErrNotFound):
		return syncJSON(nil), nil
	case err != nil:
		return SyncJSON{}, err
	}
	return syncJSON(st), nil
}
