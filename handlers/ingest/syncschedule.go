package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/store"
)

// SyncSchedulerStore is the persistence the sync scheduler needs
// (implemented by model/store.Store).
type SyncSchedulerStore interface {
	// SyncState reads the user's sync state; ErrNotFound when none.
	SyncState(ctx context.Context, userID string) (*model.SyncState, error)
	// ConnectionStatus says whose athlete the user is and whether the
	// athlete must reconnect; ErrNotFound without a connection.
	ConnectionStatus(ctx context.Context, userID string) (int64, bool, error)
	// UserMilestones reads the user's milestones (strongly consistent).
	UserMilestones(ctx context.Context, userID string) (store.UserMilestones, error)
	// ListUsers pages through one shard of the sparse users index.
	ListUsers(ctx context.Context, shard int, after string, limit int) (store.UsersPage, error)
	// ClaimOutboxItem records a job as received with a lease; ErrConflict
	// when the key is already claimed (an idempotent enqueue).
	ClaimOutboxItem(ctx context.Context, key, correlationID, job string, now time.Time, lease, ttl time.Duration) (*model.IdempotencyRecord, error)
}

var _ SyncSchedulerStore = (*store.Store)(nil)

// SyncScheduler enqueues sync jobs on the outbox: a backfill when an
// athlete connects or a milestone reaches before what was imported, a
// reconciliation per active athlete per interval slot, an operator's
// restart. Keys are deterministic (model.SyncJobKey), so enqueueing twice
// claims once. The api (BFF hooks), the sweeper (reconciliation) and
// scripts/syncs use it.
type SyncScheduler struct {
	store    SyncSchedulerStore
	dispatch Dispatcher
	log      *slog.Logger
	// Now is the clock; tests may replace it.
	Now func() time.Time
	// Settings shape the jobs (defaults when zero).
	Settings SyncSettings
	// Lease is the lease of a fresh job (DefaultLease when zero): the
	// sweeper dispatches it again once it lapses.
	Lease time.Duration
}

// NewSyncScheduler builds a scheduler that hands new jobs to d (nil: the
// sweeper dispatches them once their lease lapses).
func NewSyncScheduler(st SyncSchedulerStore, d Dispatcher, log *slog.Logger) *SyncScheduler {
	return &SyncScheduler{store: st, dispatch: d, log: log, Now: func() time.Time { return time.Now().UTC() }}
}

// Horizon is how far back a user's history should be imported at now: the
// earliest period start of the user's active milestones, but at most
// MaxDays back (also the horizon without any milestone), at UTC day
// granularity so that the same day yields the same backfill key.
func (s *SyncScheduler) Horizon(ctx context.Context, userID string, now time.Time) (time.Time, error) {
	cfg := s.Settings.WithDefaults()
	floor := now.UTC().AddDate(0, 0, -cfg.MaxDays).Truncate(24 * time.Hour)
	ms, err := s.store.UserMilestones(ctx, userID)
	if err != nil {
		return time.Time{}, fmt.Errorf("sync horizon of user %s: %w", userID, err)
	}
	var earliest time.Time
	for _, m := range ms.Milestones {
		if m.Status != model.StatusActive {
			continue
		}
		if start := m.PeriodStartAtUtc.UTC(); earliest.IsZero() || start.Before(earliest) {
			earliest = start
		}
	}
	if earliest.IsZero() || earliest.Before(floor) {
		return floor, nil
	}
	return earliest.Truncate(24 * time.Hour), nil
}

// EnsureBackfill enqueues a backfill of the user's history to its Horizon
// unless what was imported (or a running backfill) already reaches it. It
// is called on every Strava connect and every milestone creation; reason
// is logged. It reports whether a job was enqueued; a user without a
// usable connection has nothing to sync (false, nil).
func (s *SyncScheduler) EnsureBackfill(ctx context.Context, userID, reason string) (bool, error) {
	athleteID, needsReauth, err := s.store.ConnectionStatus(ctx, userID)
	if errors.Is(err, model.ErrNotFound) || (err == nil && needsReauth) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("ensure backfill of user %s: %w", userID, err)
	}
	now := s.Now()
	horizon, err := s.Horizon(ctx, userID, now)
	if err != nil {
		return false, err
	}
	st, err := s.store.SyncState(ctx, userID)
	if err != nil && !errors.Is(err, model.ErrNotFound) {
		return false, fmt.Errorf("ensure backfill of user %s: %w", userID, err)
	}
	if st != nil {
		covered := st.ImportedFromUtc
		if st.Running() && st.Mode == model.SyncModeBackfill && (covered.IsZero() || st.WindowFromUtc.Before(covered)) {
			covered = st.WindowFromUtc
		}
		if !covered.IsZero() && !horizon.Before(covered) {
			return false, nil
		}
	}
	job := SyncJob{UserID: userID, AthleteID: athleteID, Mode: model.SyncModeBackfill, FromUtc: horizon}
	ok, err := s.enqueue(ctx, model.SyncJobKey(model.SyncModeBackfill, userID, horizon), job, now)
	if ok {
		s.log.InfoContext(ctx, "backfill enqueued", "userId", userID, "athleteId", athleteID, "reason", reason,
			"horizonUtc", horizon.Format(time.RFC3339))
	}
	return ok, err
}

// ReconcileResult counts what one reconciliation round did.
type ReconcileResult struct {
	// Users listed in the users index.
	Users int
	// Enqueued reconciliation jobs (new keys for this slot).
	Enqueued int
	// Already had this slot's job.
	Already int
	// Skipped users without a usable Strava connection.
	Skipped int
}

// ReconcileAll enqueues one reconciliation (the last ReconcileDays) for
// every user with a usable Strava connection, listed through the sparse
// users index (never a Scan), keyed per user per ReconcileInterval slot: a
// round repeated in the same slot enqueues nothing more. A failure on one
// user is logged and the round goes on; the error reports the first one.
func (s *SyncScheduler) ReconcileAll(ctx context.Context) (ReconcileResult, error) {
	cfg := s.Settings.WithDefaults()
	now := s.Now()
	slot := now.Truncate(cfg.ReconcileInterval)
	from := now.AddDate(0, 0, -cfg.ReconcileDays)
	var (
		res   ReconcileResult
		first error
	)
	for shard := range model.UserListShards {
		after := ""
		for {
			page, err := s.store.ListUsers(ctx, shard, after, 0)
			if err != nil {
				return res, fmt.Errorf("reconcile: %w", err)
			}
			for _, userID := range page.UserIDs {
				res.Users++
				athleteID, needsReauth, err := s.store.ConnectionStatus(ctx, userID)
				if errors.Is(err, model.ErrNotFound) || (err == nil && needsReauth) {
					res.Skipped++
					continue
				}
				if err == nil {
					job := SyncJob{UserID: userID, AthleteID: athleteID, Mode: model.SyncModeReconcile, FromUtc: from}
					var ok bool
					ok, err = s.enqueue(ctx, model.SyncJobKey(model.SyncModeReconcile, userID, slot), job, now)
					if ok {
						res.Enqueued++
					} else if err == nil {
						res.Already++
					}
				}
				if err != nil {
					s.log.WarnContext(ctx, "reconciliation not enqueued", "userId", userID, "error", err)
					if first == nil {
						first = fmt.Errorf("reconcile user %s: %w", userID, err)
					}
				}
			}
			if !page.More {
				break
			}
			after = page.Next
		}
	}
	return res, first
}

// Restart enqueues an operator's restart of the user's sync (a unique key):
// it takes over the unfinished job and its cursor (a failed or stuck
// backfill resumes where it stopped), or, when nothing is unfinished,
// ensures the backfill. It returns ErrNotFound without a usable connection.
func (s *SyncScheduler) Restart(ctx context.Context, userID string) error {
	athleteID, needsReauth, err := s.store.ConnectionStatus(ctx, userID)
	if err == nil && needsReauth {
		err = fmt.Errorf("athlete must reconnect: %w", model.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("restart sync of user %s: %w", userID, err)
	}
	st, err := s.store.SyncState(ctx, userID)
	if errors.Is(err, model.ErrNotFound) || (err == nil && (st.State == model.SyncIdle || st.JobKey == "")) {
		_, err := s.EnsureBackfill(ctx, userID, "operator restart")
		return err
	}
	if err != nil {
		return fmt.Errorf("restart sync of user %s: %w", userID, err)
	}
	now := s.Now()
	job := SyncJob{UserID: userID, AthleteID: athleteID, Mode: st.Mode, FromUtc: st.WindowFromUtc, Resume: true}
	if job.Mode == "" {
		job.Mode = model.SyncModeBackfill
	}
	if job.FromUtc.IsZero() {
		if job.FromUtc, err = s.Horizon(ctx, userID, now); err != nil {
			return err
		}
	}
	if _, err := s.enqueue(ctx, model.SyncRestartKey(userID, now), job, now); err != nil {
		return fmt.Errorf("restart sync of user %s: %w", userID, err)
	}
	return nil
}

// enqueue claims the job's outbox item and hands it off; false when the key
// was claimed before (nothing new). A failed hand-off is left to the
// sweeper (the item is received with a lease).
func (s *SyncScheduler) enqueue(ctx context.Context, key string, sj SyncJob, now time.Time) (bool, error) {
	corr := model.NewID()
	job := Job{
		Event:         Event{ObjectType: ObjectSync, AspectType: sj.Mode, OwnerID: sj.AthleteID, EventTime: now.Unix()},
		CorrelationID: corr, IdempotencyKey: key, ReceivedAtUtc: now.UTC(), Sync: &sj,
	}
	payload, err := json.Marshal(job)
	if err != nil {
		return false, fmt.Errorf("enqueue %s: encode: %w", key, err)
	}
	lease := s.Lease
	if lease <= 0 {
		lease = DefaultLease
	}
	if _, err := s.store.ClaimOutboxItem(ctx, key, corr, string(payload), now, lease, IdempotencyTTL); err != nil {
		if errors.Is(err, model.ErrConflict) {
			return false, nil
		}
		return false, fmt.Errorf("enqueue %s: %w", key, err)
	}
	if s.dispatch != nil {
		if err := s.dispatch.Dispatch(ctx, job); err != nil {
			s.log.WarnContext(ctx, "sync job hand-off failed; the sweeper dispatches it after the lease",
				"idempotencyKey", key, "userId", sj.UserID, "error", err)
		}
	}
	return true, nil
}
