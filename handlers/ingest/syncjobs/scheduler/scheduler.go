// Package scheduler decides whose history is imported and re-checked when,
// and enqueues the sync jobs package syncjobs runs: a backfill when an
// athlete connects or a milestone reaches further back (scheduler.go), the
// reconciliation's resumable walk of the users index (reconcile.go), and
// the re-listings after an outage or a burst's unseen events (recover.go).
package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/syncjobs"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/syncstate"
)

// Scheduler enqueues sync jobs on the outbox: a backfill when an
// athlete connects or a milestone reaches before what was imported, a
// reconciliation per active athlete per interval slot, an operator's
// restart. Keys are deterministic (keys.SyncJobKey), so enqueueing twice
// claims once. The api (BFF hooks), the sweeper (reconciliation) and
// scripts/syncs use it.
type Scheduler struct {
	store    Stores
	dispatch ingest.Dispatcher
	log      *slog.Logger
	// Now is the clock; tests may replace it.
	Now func() time.Time
	// Settings shape the jobs (defaults when zero).
	Settings syncjobs.SyncSettings
	// Lease is the lease of a fresh job (ingest.DefaultLease when zero): the
	// sweeper dispatches it again once it lapses.
	Lease time.Duration
}

// New builds a scheduler that hands new jobs to d (nil: the
// sweeper dispatches them once their lease lapses).
func New(st Stores, d ingest.Dispatcher, log *slog.Logger) *Scheduler {
	return &Scheduler{store: st, dispatch: d, log: log, Now: func() time.Time { return time.Now().UTC() }}
}

// Horizon is how far back a user's history should be imported at now: the
// earliest period start of the user's active milestones, but at most
// MaxDays back (also the horizon without any milestone), at UTC day
// granularity so that the same day yields the same backfill key.
func (s *Scheduler) Horizon(ctx context.Context, userID string, now time.Time) (time.Time, error) {
	h, _, err := s.horizon(ctx, userID, now)
	return h, err
}

// horizon is Horizon and the end of the soonest-ending active milestone
// (the job's priority; zero without one).
func (s *Scheduler) horizon(ctx context.Context, userID string, now time.Time) (time.Time, time.Time, error) {
	cfg := s.Settings.WithDefaults()
	floor := now.UTC().AddDate(0, 0, -cfg.MaxDays).Truncate(24 * time.Hour)
	ms, err := s.store.Milestones.UserMilestones(ctx, userID)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("sync horizon of user %s: %w", userID, err)
	}
	_, end := syncstate.ActiveMilestoneEnd(ms.Milestones, now, now)
	var earliest time.Time
	for _, m := range ms.Milestones {
		if m.Status != model.StatusActive {
			continue
		}
		if start := m.Window().From; earliest.IsZero() || start.Before(earliest) {
			earliest = start
		}
	}
	if earliest.IsZero() || earliest.Before(floor) {
		return floor, end, nil
	}
	return earliest.Truncate(24 * time.Hour), end, nil
}

// EnsureBackfill enqueues a backfill of the user's history to its Horizon
// unless what was imported (or a running backfill) already reaches it. It
// is called on every Strava connect and every milestone creation; reason
// is logged. It reports whether a job was enqueued; a user without a
// usable connection has nothing to sync (false, nil).
func (s *Scheduler) EnsureBackfill(ctx context.Context, userID, reason string) (bool, error) {
	athleteID, needsReauth, err := s.store.Connections.ConnectionStatus(ctx, userID)
	if errors.Is(err, model.ErrNotFound) || (err == nil && needsReauth) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("ensure backfill of user %s: %w", userID, err)
	}
	now := s.Now()
	horizon, end, err := s.horizon(ctx, userID, now)
	if err != nil {
		return false, err
	}
	st, err := s.store.States.SyncState(ctx, userID)
	if err != nil && !errors.Is(err, model.ErrNotFound) {
		return false, fmt.Errorf("ensure backfill of user %s: %w", userID, err)
	}
	if st != nil {
		covered := st.ImportedFromUtc
		if st.Running() && st.Mode == syncstate.SyncModeBackfill && (covered.IsZero() || st.WindowFromUtc.Before(covered)) {
			covered = st.WindowFromUtc
		}
		if !covered.IsZero() && !horizon.Before(covered) {
			return false, nil
		}
	}
	job := ingest.SyncJob{UserID: userID, AthleteID: athleteID, Mode: syncstate.SyncModeBackfill, FromUtc: horizon, MilestoneEndUtc: end}
	ok, err := s.enqueue(ctx, keys.SyncJobKey(syncstate.SyncModeBackfill, userID, horizon), job, now)
	if err == nil && !ok && st == nil {
		// The key was claimed before, yet no sync state exists: a
		// revocation's purge deleted it (and the history); a reconnect
		// imports again, under a key of its own (one per minute).
		ok, err = s.enqueue(ctx, keys.SyncJobKey(ReimportKeyMode, userID, now.Truncate(time.Minute)), job, now)
	}
	if ok {
		s.log.InfoContext(ctx, "backfill enqueued", "userId", userID, "athleteId", athleteID, "reason", reason,
			"horizonUtc", horizon.Format(time.RFC3339))
	}
	return ok, err
}

// ReimportKeyMode is the mode segment of the outbox key of a backfill that
// imports a history again after a revocation deleted it.
const ReimportKeyMode = "reimport"

// Restart enqueues an operator's restart of the user's sync (a unique key):
// it takes over the unfinished job and its cursor (a failed or stuck
// backfill resumes where it stopped), or, when nothing is unfinished,
// ensures the backfill. It returns ErrNotFound without a usable connection.
func (s *Scheduler) Restart(ctx context.Context, userID string) error {
	athleteID, needsReauth, err := s.store.Connections.ConnectionStatus(ctx, userID)
	if err == nil && needsReauth {
		err = fmt.Errorf("athlete must reconnect: %w", model.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("restart sync of user %s: %w", userID, err)
	}
	st, err := s.store.States.SyncState(ctx, userID)
	if errors.Is(err, model.ErrNotFound) || (err == nil && (st.State == syncstate.SyncIdle || st.JobKey == "")) {
		_, err := s.EnsureBackfill(ctx, userID, "operator restart")
		return err
	}
	if err != nil {
		return fmt.Errorf("restart sync of user %s: %w", userID, err)
	}
	now := s.Now()
	job := ingest.SyncJob{UserID: userID, AthleteID: athleteID, Mode: st.Mode, FromUtc: st.WindowFromUtc, Resume: true}
	if job.Mode == "" {
		job.Mode = syncstate.SyncModeBackfill
	}
	if job.FromUtc.IsZero() {
		if job.FromUtc, err = s.Horizon(ctx, userID, now); err != nil {
			return err
		}
	}
	if _, err := s.enqueue(ctx, keys.SyncRestartKey(userID, now), job, now); err != nil {
		return fmt.Errorf("restart sync of user %s: %w", userID, err)
	}
	return nil
}

// enqueue claims the job's outbox item and hands it off; false when the key
// was claimed before (nothing new). A failed hand-off is left to the
// sweeper (the item is received with a lease).
func (s *Scheduler) enqueue(ctx context.Context, key string, sj ingest.SyncJob, now time.Time) (bool, error) {
	return s.enqueueAfter(ctx, key, sj, now, 0)
}

// enqueueAfter is enqueue for a job that waits first: with wait > 0 it is
// not handed off, and its first lease (wait) holds it from the sweeper
// until then.
func (s *Scheduler) enqueueAfter(ctx context.Context, key string, sj ingest.SyncJob, now time.Time, wait time.Duration) (bool, error) {
	corr := model.NewID()
	job := ingest.Job{
		Event:         ingest.Event{ObjectType: ingest.ObjectSync, AspectType: sj.Mode, OwnerID: sj.AthleteID, EventTime: now.Unix()},
		CorrelationID: corr, IdempotencyKey: key, ReceivedAtUtc: now.UTC(), Sync: &sj,
	}
	payload, err := json.Marshal(job)
	if err != nil {
		return false, fmt.Errorf("enqueue %s: encode: %w", key, err)
	}
	lease := s.Lease
	if lease <= 0 {
		lease = ingest.DefaultLease
	}
	if wait > 0 {
		lease = wait
	}
	if _, err := s.store.Outbox.ClaimOutboxItem(ctx, key, corr, string(payload), now, lease, ingest.IdempotencyTTL); err != nil {
		if errors.Is(err, model.ErrConflict) {
			return false, nil
		}
		return false, fmt.Errorf("enqueue %s: %w", key, err)
	}
	if s.dispatch != nil && wait <= 0 {
		if err := s.dispatch.Dispatch(ctx, job); err != nil {
			s.log.WarnContext(ctx, "sync job hand-off failed; the sweeper dispatches it after the lease",
				"idempotencyKey", key, "userId", sj.UserID, "error", err)
		}
	}
	return true, nil
}
