package bff

import (
	"context"
	"log/slog"
)

// SyncTrigger starts the import of an athlete's Strava history
// (handlers/ingest/syncjobs/scheduler.Scheduler): a backfill job on the outbox whenever
// what was imported does not reach back to the user's horizon.
type SyncTrigger interface {
	// EnsureBackfill enqueues a backfill unless the imported history
	// already reaches the user's horizon; it reports whether it did.
	EnsureBackfill(ctx context.Context, userID, reason string) (bool, error)
}

// ensureBackfill asks for a backfill after a connect or a new milestone.
// It never fails the request: the milestone or the sign-in is saved, and
// the next connect or milestone (or an operator, scripts/syncs) asks again.
func (h *Handler) ensureBackfill(ctx context.Context, log *slog.Logger, userID, reason string) {
	if h.sync == nil {
		return
	}
	enqueued, err := h.sync.EnsureBackfill(ctx, userID, reason)
	if err != nil {
		log.WarnContext(ctx, "backfill not enqueued", "reason", reason, "error", err)
		return
	}
	if enqueued {
		log.InfoContext(ctx, "backfill enqueued", "reason", reason)
	}
}
