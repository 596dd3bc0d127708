// Package syncjobs imports and re-checks athletes' history: backfill on
// connect (and for a milestone reaching further back) and reconciliation,
// which catches the edits Strava never pushes. A sync job travels the outbox
// like a webhook event and runs one list page per run (syncer.go); the
// package scheduler beside it decides who is imported and reconciled when.
//
// Triggers: the BFF's OAuth callback and milestone creation call
// scheduler.Scheduler.EnsureBackfill (horizon: the earliest active milestone's
// period start, at most CC_SYNC_MAX_DAYS days, by UTC day; nothing when the
// imported history already reaches it); scripts/syncs lists failed,
// waiting and stuck syncs and restarts one (Restart: a unique key, Resume
// takes over the unfinished job and its cursor).
package syncjobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/budget"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/strava"
	"github.com/commitcollect/backend/model/syncstate"
)

// Sync defaults (the environment variables are read by handlers/config).
const (
	// DefaultSyncMaxDays bounds how far back a backfill imports
	// (CC_SYNC_MAX_DAYS).
	DefaultSyncMaxDays = 365
	// DefaultSyncBudgetShare is the share of each Strava budget window sync
	// jobs may spend (CC_SYNC_BUDGET_SHARE); webhooks use the rest.
	DefaultSyncBudgetShare = 0.5
	// DefaultReconcileDays is how many recent days a reconciliation
	// re-lists (CC_RECONCILE_DAYS).
	DefaultReconcileDays = 14
	// DefaultReconcileInterval is the period of each athlete's
	// reconciliation slot (CC_RECONCILE_INTERVAL): the scheduler comes to
	// every user once per interval.
	DefaultReconcileInterval = 7 * 24 * time.Hour
	// DefaultReconcileIdle is how long an athlete with an active milestone
	// but no upload goes without a reconciliation (CC_RECONCILE_IDLE): the
	// slow round-robin.
	DefaultReconcileIdle = 28 * 24 * time.Hour
	// DefaultReconcileBatch bounds the users one scheduler run comes to
	// (the sweeper Lambda has 60 s; a run also stops early near its
	// deadline).
	DefaultReconcileBatch = 500
	// DefaultSyncHeadStart is the pacing's head start, in short windows:
	// at a window's start sync jobs may already take this share of the
	// window's allowance.
	DefaultSyncHeadStart = 0.1
	// SyncResetDelay is how long after a budget window's reset a deferred
	// sync job is due at the earliest, as a share of the short window:
	// webhook jobs deferred to the reset go first. Jobs spread over the
	// next SyncResetDelay by priority (soonest-ending milestone first).
	SyncResetDelay = 0.1
	// DefaultSyncPageSize is the list page a sync job reads per run.
	DefaultSyncPageSize = strava.MaxPerPage
)

// SyncSettings shape backfill and reconciliation; zero fields take the
// defaults.
type SyncSettings struct {
	// MaxDays bounds a backfill's horizon (CC_SYNC_MAX_DAYS).
	MaxDays int
	// BudgetShare is the share of each Strava budget (15-minute and daily,
	// overall and read) sync jobs may spend (CC_SYNC_BUDGET_SHARE, 0..1].
	BudgetShare float64
	// ReconcileDays is the window a reconciliation re-lists
	// (CC_RECONCILE_DAYS).
	ReconcileDays int
	// ReconcileInterval is the period of each user's reconciliation slot
	// (CC_RECONCILE_INTERVAL): one cycle of the scheduler's enumeration.
	ReconcileInterval time.Duration
	// ReconcileIdle is how long a user with an active milestone but no
	// upload goes without a reconciliation (CC_RECONCILE_IDLE, at least
	// ReconcileInterval).
	ReconcileIdle time.Duration
	// ReconcileBatch bounds the users one ReconcileStep comes to.
	ReconcileBatch int
	// HeadStart is the pacing's head start in short windows
	// (DefaultSyncHeadStart when zero, none when negative).
	HeadStart float64
	// DayHeadStart is the daily pacing's head start as a part of the day
	// (0: one short window). Tests that drain many pages at any hour set 1,
	// so the wall clock's hour (just after midnight UTC the day's
	// allowance is small) does not decide their outcome.
	DayHeadStart float64
	// PageSize is the list page one run reads (at most strava.MaxPerPage).
	PageSize int
}

// WithDefaults fills the zero fields.
func (s SyncSettings) WithDefaults() SyncSettings {
	if s.MaxDays <= 0 {
		s.MaxDays = DefaultSyncMaxDays
	}
	if s.BudgetShare <= 0 || s.BudgetShare > 1 {
		s.BudgetShare = DefaultSyncBudgetShare
	}
	if s.ReconcileDays <= 0 {
		s.ReconcileDays = DefaultReconcileDays
	}
	if s.ReconcileInterval <= 0 {
		s.ReconcileInterval = DefaultReconcileInterval
	}
	if s.ReconcileIdle <= 0 {
		s.ReconcileIdle = DefaultReconcileIdle
	}
	s.ReconcileIdle = max(s.ReconcileIdle, s.ReconcileInterval)
	if s.ReconcileBatch <= 0 {
		s.ReconcileBatch = DefaultReconcileBatch
	}
	if s.HeadStart == 0 {
		s.HeadStart = DefaultSyncHeadStart
	}
	s.HeadStart = max(s.HeadStart, 0)
	if s.PageSize <= 0 || s.PageSize > strava.MaxPerPage {
		s.PageSize = DefaultSyncPageSize
	}
	return s
}

// Syncer runs sync jobs, one page per run (see the notes atop syncer.go, "Backfill
// and reconciliation"). The worker hands it every job that carries a
// ingest.SyncJob.
//
// Backfill and reconciliation (Syncer, scheduler.Scheduler).
//
// Sync jobs travel the outbox like webhook events: a Job whose Sync field
// (SyncJob: user, athlete, mode, FromUtc, MilestoneEndUtc) is set, claimed
// under a deterministic key (keys.SyncJobKey: backfill per user and
// horizon, reconciliation per user and enumeration cycle), so enqueueing
// twice claims once. The worker hands them to its Syncer, which runs ONE
// page per run:
//
//  1. decide (conditional write of USER#{id}/SYNC#STRAVA, syncstate.SyncState):
//     resume its own unfinished job; a backfill reaching further back than
//     a running one takes it over keeping its cursor; a new backfill lists
//     only what is older than what earlier backfills imported
//     (ImportedFromUtc); a reconciliation runs only when no job does; a job
//     whose key is no longer the state's (superseded) or that finished is
//     done without a Strava call.
//  2. budget: sync jobs keep 1-CC_SYNC_BUDGET_SHARE of every budget of the
//     shared rate-limit item free (webhooks keep budget.DefaultReserve), and
//     they are paced: a sync read is taken (one conditional write of the
//     window's SyncReads counter, keys.SyncReadsKey, for the 15-minute
//     window and for the UTC day, whose count is split over
//     keys.SyncReadsShardsFor(the day's sync cap) counters, up to 8 at
//     raised limits, so a day of sync reads is not one partition's:
//     Store.TakeSyncRead) only while the reads taken so far are
//     under PacedAllowance = the share's cap × (elapsed part of the window
//     + a head start of DefaultSyncHeadStart short windows). A job refused
//     waits (DeferError, state deferred with the reason, never failed)
//     for the instant the allowance grows past what is taken, spread by
//     its priority; a job that finds the share spent, or a Strava 429,
//     waits for the window's reset plus SyncResetDelay of the short window
//     (plus as much again by priority): webhook jobs deferred to a reset
//     are due AT it, so at every reset they run before any sync job.
//     Priority is the job's MilestoneEndUtc (the soonest-ending active
//     milestone when enqueued): sooner ends are due earlier, so when the
//     share cannot cover every due job the most valuable go first. Each
//     waiting job writes a SyncsWaiting EMF line (WorkerMetricsNamespace,
//     dimension Mode; SyncWaitSeconds: how far ahead); `make syncs` lists
//     who waits, why, the next attempt and the milestone end.
//  3. GET /api/v3/athlete/activities?before={cursor}&per_page=200, newest
//     first; a reconciliation also sends after={FromUtc} (and before= now
//     + 48 h on its first page: Strava lists oldest first when only after
//     is given), so an unchanged athlete costs one small page. Activities
//     older than FromUtc are ignored; each other one is
//     normalized (MapActivity, the same as a webhook fetch: a summary and
//     a detailed activity map to the same item) and compared
//     (WorkoutDiffers: sport type, distance, elevation, moving time, start)
//     with the stored workouts of the page's date range, read with ONE
//     strongly consistent LSI1 query. Only differing ones are written,
//     through UpsertWorkout with the list's fetchStartedAtNs (newest fetch
//     wins) and the job's key (syncJobKey: the projector leaves these
//     writes to the page's end). After the writes, one read of the user
//     guard for the whole page (CheckWrites) removes them again when the
//     account was deleted or the grant revoked meanwhile. A listed
//     activity whose stored workout is a tombstone counts as changed and is
//     written: a workout hidden by a 404 counts again once a list newer
//     than that 404 shows it. Absence from a list never deletes.
//  4. the cursor (the oldest start listed, plus one second so activities
//     sharing it are listed again and found unchanged) and the counts are
//     saved with a version check; an audit STRAVA_SYNC_PAGE (routine: no
//     index keys, so parallel syncs write no hot audit GSI2 partition) lists the
//     written ids. A crash between the writes and this save re-lists the
//     page, which writes nothing (and counts the workouts this job wrote
//     before as recovered). The job then defers to now (the sweeper runs
//     the next page) or, on a short page or one reaching FromUtc, ends:
//     state idle, lastSyncAtUtc, and for a backfill importedFromUtc =
//     horizonUtc = FromUtc; a reconciliation, or the first backfill (it
//     listed from now), also records reconciledAtUtc and
//     reconciledActivityId (the highest activity id it listed); audit
//     STRAVA_SYNC_COMPLETED.
//
// A failure is retried through the outbox (state keeps the reason); the
// one that parks the job marks the sync failed, as does a revoked token.
type Syncer struct {
	store  SyncerStores
	tokens TokenProvider
	strava ActivityLister
	log    *slog.Logger
	// Now is the clock; tests may replace it.
	Now func() time.Time
	// Settings shape the jobs (defaults when zero).
	Settings SyncSettings
	// RateWindow is Strava's short rate-limit window (see Worker).
	RateWindow time.Duration
	// MaxFailures is the worker's bound: the failure that reaches it marks
	// the sync failed (the job is parked).
	MaxFailures int
	// Rate is the instance's rate-limit reading: the fetcher's
	// when wired by handlers/app, else the syncer's own.
	Rate *budget.RateCache
	// Metrics receives a SyncsWaiting EMF line per job that waits for the
	// budget (the worker Lambda: stdout; nil: none).
	Metrics io.Writer
}

// NewSyncer builds the sync job runner.
func NewSyncer(st SyncerStores, tokens TokenProvider, lister ActivityLister, log *slog.Logger) *Syncer {
	return &Syncer{store: st, tokens: tokens, strava: countedLister{lister}, log: log, Now: func() time.Time { return time.Now().UTC() },
		RateWindow: keys.AthleteReadsWindow, MaxFailures: ingest.DefaultMaxFailures, Rate: new(budget.RateCache)}
}

// errSkip stops a job that has nothing to do (superseded, finished, covered).
var errSkip = errors.New("nothing to do")

// Process runs one page of a sync job. It returns nil when the job is
// finished (or has nothing to do: superseded by a newer job of the user,
// already finished, no usable connection), a *ingest.DeferError when the next
// page is due (Until now) or the sync share of the budget is spent or
// Strava answered 429 (Until the window reset), and any other error for a
// failure worth retrying (model.ErrInvalid for a poison job). The failure
// that will park the job marks the sync failed.
func (s *Syncer) Process(ctx context.Context, job ingest.Job) error {
	err := s.page(ctx, job)
	var de *ingest.DeferError
	if err == nil || errors.As(err, &de) || ctx.Err() != nil {
		return err
	}
	final := errors.Is(err, model.ErrInvalid)
	if !final && job.IdempotencyKey != "" {
		if rec, rerr := s.store.Outbox.OutboxItem(ctx, job.IdempotencyKey); rerr == nil && rec.Failures+1 >= max(s.MaxFailures, 1) {
			final = true
		}
	}
	s.record(ctx, job, func(cur *syncstate.SyncState) {
		if final {
			cur.State = syncstate.SyncFailed
			cur.DeferredReason = "failed: " + err.Error()
			return
		}
		cur.DeferredReason = "retrying after: " + err.Error()
	})
	return err
}

// record applies change to the user's sync state when job is still its
// job; a failure to record is logged (the job's outcome is in the outbox).
func (s *Syncer) record(ctx context.Context, job ingest.Job, change func(*syncstate.SyncState)) {
	_, err := s.store.States.UpdateSyncState(ctx, job.Sync.UserID, func(cur *syncstate.SyncState) error {
		if cur.JobKey != job.IdempotencyKey {
			return model.ErrSkipWrite
		}
		change(cur)
		cur.RequestProjection() // the job waits, fails or stops: project what it imported
		return nil
	})
	if err != nil {
		s.log.WarnContext(ctx, "sync state not recorded", "correlationId", job.CorrelationID, "userId", job.Sync.UserID, "error", err)
	}
}

func syncStatusOf(mode string) syncstate.SyncStatus {
	if mode == syncstate.SyncModeReconcile {
		return syncstate.SyncReconciling
	}
	return syncstate.SyncBackfilling
}

// decide takes the job on (or not) in the user's sync state: it resumes
// its own unfinished job, a backfill extends a running backfill to its
// earlier horizon (keeping the cursor) or starts anew (from what earlier
// backfills imported), a reconciliation runs only when no other job does.
// It returns errSkip when the job has nothing to do and model.ErrSkipWrite
// when it runs without changing the state.
func decide(cur *syncstate.SyncState, job ingest.Job, now time.Time) error {
	sj, key := job.Sync, job.IdempotencyKey
	switch {
	case cur.JobKey == key && cur.Running():
		return model.ErrSkipWrite
	case cur.JobKey == key:
		return errSkip // finished or failed: a repeated delivery
	case sj.Resume && cur.JobKey != "" && cur.State != syncstate.SyncIdle:
		cur.JobKey, cur.State, cur.DeferredReason = key, syncStatusOf(cur.Mode), ""
		return nil
	case sj.Mode == syncstate.SyncModeBackfill && cur.Running() && cur.Mode == syncstate.SyncModeBackfill:
		if !sj.FromUtc.Before(cur.WindowFromUtc) {
			return errSkip // the running backfill reaches as far back
		}
		cur.JobKey, cur.WindowFromUtc, cur.HorizonUtc = key, sj.FromUtc, sj.FromUtc
		return nil
	case sj.Mode == syncstate.SyncModeBackfill && !cur.ImportedFromUtc.IsZero() && !sj.FromUtc.Before(cur.ImportedFromUtc):
		return errSkip // imported already
	case sj.Mode == syncstate.SyncModeReconcile && cur.Running():
		return errSkip // a running job lists anyway; the next slot reconciles
	}
	cur.JobKey, cur.Mode, cur.AthleteID, cur.State = key, sj.Mode, sj.AthleteID, syncStatusOf(sj.Mode)
	cur.WindowFromUtc, cur.CursorBeforeUtc, cur.Pages, cur.Listed, cur.ListedMaxActivityID = sj.FromUtc, time.Time{}, 0, 0, 0
	cur.MilestoneEndUtc = sj.MilestoneEndUtc
	cur.JobStartedAtUtc, cur.DeferredReason, cur.NextSyncAtUtc = now, "", now
	if sj.Mode == syncstate.SyncModeBackfill {
		// Earlier backfills imported from ImportedFromUtc on (webhooks and
		// reconciliation keep the rest current): list only what is older.
		cur.CursorBeforeUtc, cur.HorizonUtc = cur.ImportedFromUtc, sj.FromUtc
	}
	return nil
}

// deferJob records the deferral on the state and returns it for the
// outbox (the job waits, received, until de.Until).
func (s *Syncer) deferJob(ctx context.Context, log *slog.Logger, job ingest.Job, err error) error {
	var de *ingest.DeferError
	if !errors.As(err, &de) {
		return err
	}
	log.InfoContext(ctx, "sync deferred", "writeStatus", "deferred", "notBefore", de.Until.UTC().Format(time.RFC3339), "reason", de.Reason)
	if err := budget.WriteWaitingEMF(s.Metrics, job.Sync.Mode, de.Until.Sub(s.Now()), s.Now()); err != nil {
		log.WarnContext(ctx, "sync waiting metric not written", "error", err)
	}
	s.record(ctx, job, func(cur *syncstate.SyncState) {
		cur.State, cur.DeferredReason, cur.NextSyncAtUtc = syncstate.SyncDeferred, de.Reason, de.Until.UTC()
	})
	return fmt.Errorf("sync %s: %w", job.IdempotencyKey, de)
}

// stop ends a job that cannot go on until the athlete acts (reconnects):
// the sync is marked failed with the reason and the job is done.
func (s *Syncer) stop(ctx context.Context, log *slog.Logger, job ingest.Job, reason string) error {
	log.WarnContext(ctx, "sync stopped", "writeStatus", "skipped", "reason", reason)
	s.record(ctx, job, func(cur *syncstate.SyncState) { cur.State, cur.DeferredReason = syncstate.SyncFailed, reason })
	return nil
}

func (s *Syncer) audit(ctx context.Context, log *slog.Logger, job ingest.Job, eventType string, details map[string]string) {
	details["athleteId"] = strconv.FormatInt(job.Sync.AthleteID, 10)
	details["mode"] = job.Sync.Mode
	details["jobKey"] = job.IdempotencyKey
	newEntry := model.NewAuditEntry
	if eventType == ingest.AuditSyncPage || (eventType == ingest.AuditSyncCompleted && job.Sync.Mode == syncstate.SyncModeReconcile) {
		// One per page of every sync, and one per reconciliation (every
		// athlete with a milestone, every interval): indexed, they would
		// write one audit GSI2 partition (EVENT#{type}#{month}) hot. A
		// backfill's completion (one per connect) stays indexed.
		newEntry = model.NewRoutineAuditEntry
	}
	s.store.Audits.Audit(ctx, log, newEntry(keys.UserPK(job.Sync.UserID), job.Sync.UserID, eventType, job.CorrelationID,
		model.NewID(), s.Now(), details))
}

// countedLister counts every ListActivities on the caller's context.
type countedLister struct{ ActivityLister }

func (c countedLister) ListActivities(ctx context.Context, token string, o strava.ListOptions) ([]strava.Activity, strava.RateLimit, error) {
	budget.CountRead(ctx)
	return c.ActivityLister.ListActivities(ctx, token, o)
}

// reconcileFutureMargin bounds a reconciliation's first page from above
// (before= now plus it).
const reconcileFutureMargin = 48 * time.Hour
