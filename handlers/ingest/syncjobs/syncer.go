// Package syncjobs imports and re-checks athletes' history: backfill on
// connect (and for a milestone reaching further back) and reconciliation,
// which catches the edits Strava never pushes. A sync job travels the outbox
// like a webhook event and runs one list page per run (syncer.go); the
// scheduler decides who is reconciled when (scheduler.go).
//
// Triggers: the BFF's OAuth callback and milestone creation call
// SyncScheduler.EnsureBackfill (horizon: the earliest active milestone's
// period start, at most CC_SYNC_MAX_DAYS days, by UTC day; nothing when the
// imported history already reaches it); scripts/syncs lists failed,
// waiting and stuck syncs and restarts one (Restart: a unique key, Resume
// takes over the unfinished job and its cursor).
package syncjobs

// Backfill and reconciliation (Syncer, SyncScheduler).
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

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/budget"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/calendar"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ports"
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

// WorkoutDiffers reports whether fresh (normalized from Strava now) differs
// from stored in a field the projection reads: sport type, distance,
// elevation, moving time, start date or local day. The name is not compared: LSI1 does
// not project it and Strava pushes an update event for every title change.
// Sync jobs write only workouts that differ, so an unchanged activity costs
// no write and triggers no projection.
func WorkoutDiffers(stored, fresh *model.Workout) bool {
	if stored.SportType != fresh.SportType || !stored.StartDateUtc.Equal(fresh.StartDateUtc) || localDayDiffers(stored, fresh) {
		return true
	}
	for _, s := range model.MetricSpecs { // each metric's field (model.MilestoneWorkoutFields)
		if s.Of(*stored) != s.Of(*fresh) {
			return true
		}
	}
	return false
}

// localDayDiffers reports whether Strava now gives a local day the stored
// workout does not carry (in its date key, which a log read holds): a
// workout stored before local starts were kept is filled by the next list
// page that shows it, within the sync share.
func localDayDiffers(stored, fresh *model.Workout) bool {
	day, ok := calendar.LocalDay(fresh.StartDateLocal)
	if !ok {
		return false
	}
	have, ok := keys.WorkoutLocalDay(stored.DateSK)
	return !ok || have != day
}

// SyncStore is the persistence sync jobs need (implemented by
// model/store.Store), by use case: the sync state, the pages' workouts,
// the budget's pacing and the audit trail.
type SyncStore interface {
	SyncProgress
	PageWriter
	SyncPacing
	ingest.Auditor
}

// SyncProgress is a sync job's own state: its sync state and its outbox
// item.
type SyncProgress interface {
	// UpdateSyncState reads, decides and writes the user's sync state with
	// a version check (model.ErrSkipWrite from decide writes nothing).
	UpdateSyncState(ctx context.Context, userID string, decide func(*syncstate.SyncState) error) (*syncstate.SyncState, error)
	// OutboxItem reads the job's outbox item; ErrNotFound when none.
	OutboxItem(ctx context.Context, key string) (*model.IdempotencyRecord, error)
}

// PageWriter is what writing a list page's activities needs: the stored
// log to compare with, the ordered writes, the guard's check after them and
// the connection's flag when Strava refuses its token.
type PageWriter interface {
	// WorkoutLog reads the user's workouts started in windows (one
	// strongly consistent LSI1 query per window).
	WorkoutLog(ctx context.Context, userID string, windows []model.Window) (ports.WorkoutLog, error)
	// UpsertWorkout is the ordered conditional write (newest fetch wins,
	// a tombstone too, both ways); ErrConflict when the stored item wins.
	UpsertWorkout(ctx context.Context, w *model.Workout) error
	// CheckWrites reads the user guard once after a page's writes and
	// removes them when it holds (ErrUserDeleted, ErrStravaRevoked).
	CheckWrites(ctx context.Context, userID string, ks []model.Key) error
	// MarkNeedsReauth flags the connection; ErrNotFound when it is gone.
	MarkNeedsReauth(ctx context.Context, userID string, now time.Time) error
}

// SyncPacing is the shared budget's reading and the sync reads' counters
// (pacing.go).
type SyncPacing interface {
	budget.RateStore
	// TakeSyncRead counts a sync read in the window of length windowLen
	// containing now unless allowed were counted there (split over shards
	// counters, tried from pick); ErrConflict then.
	TakeSyncRead(ctx context.Context, now time.Time, windowLen time.Duration, allowed, shards int, pick uint64) error
}

// TokenProvider hands out valid access tokens (strava.Refresher).
type TokenProvider interface {
	// AccessToken returns a valid token; ErrUnauthorized when the athlete
	// must reconnect, ErrNotFound without a connection.
	AccessToken(ctx context.Context, userID string) (string, error)
}

// ActivityLister lists an athlete's activities (strava.Client).
type ActivityLister interface {
	// ListActivities reads one page; errors match ErrUnauthorized or
	// ErrRetryable (a 429 is a *strava.APIError).
	ListActivities(ctx context.Context, accessToken string, o strava.ListOptions) ([]strava.Activity, strava.RateLimit, error)
}

// Syncer runs sync jobs, one page per run (see the notes atop syncer.go, "Backfill
// and reconciliation"). The worker hands it every job that carries a
// ingest.SyncJob.
type Syncer struct {
	store  SyncStore
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
func NewSyncer(st SyncStore, tokens TokenProvider, lister ActivityLister, log *slog.Logger) *Syncer {
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
		if rec, rerr := s.store.OutboxItem(ctx, job.IdempotencyKey); rerr == nil && rec.Failures+1 >= max(s.MaxFailures, 1) {
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
	_, err := s.store.UpdateSyncState(ctx, job.Sync.UserID, func(cur *syncstate.SyncState) error {
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

// pageResult counts what one page did.
type pageResult struct {
	listed, written, unchanged, stale, rejected int
	// recovered counts unchanged workouts this job wrote in an earlier run
	// whose page was never recorded (a crash before the cursor was saved):
	// they count as imported now.
	recovered  int
	writtenIDs []string
	// recoveredIDs are the recovered workouts' activity ids: the page audit
	// lists them, so every write of a job is in one audit entry even when
	// the run that made it died before recording its page.
	recoveredIDs []string
	// keys of the written and recovered workouts: the page's guard check.
	keys []model.Key
}

func (s *Syncer) page(ctx context.Context, job ingest.Job) error {
	sj, key := job.Sync, job.IdempotencyKey
	cfg := s.Settings.WithDefaults()
	log := s.log.With("correlationId", job.CorrelationID, "userId", sj.UserID, "athleteId", sj.AthleteID,
		"syncMode", sj.Mode, "idempotencyKey", key)
	now := s.Now()
	st, token, ok, err := s.begin(ctx, log, cfg, job, now)
	if !ok {
		return err
	}
	cursor := st.CursorBeforeUtc
	fetchStarted := s.Now()
	acts, ok, err := s.list(ctx, log, cfg, job, st, token, now)
	if !ok {
		return err
	}
	res, oldest, err := s.apply(ctx, log, job, st.WindowFromUtc, cursor, acts, fetchStarted)
	if err != nil {
		return fmt.Errorf("sync %s: %w", key, err)
	}
	if len(res.keys) > 0 {
		// The page's write-then-check of the user guard: one read for the
		// whole page (model/store/guard.go).
		switch err := s.store.CheckWrites(ctx, sj.UserID, res.keys); {
		case errors.Is(err, model.ErrUserDeleted), errors.Is(err, model.ErrStravaRevoked):
			log.InfoContext(ctx, "sync page removed: the account was deleted or the grant revoked meanwhile", "writeStatus", "skipped",
				"removed", len(res.keys), "error", err)
			return nil
		case err != nil:
			return fmt.Errorf("sync %s: %w", key, err)
		}
	}
	done := len(acts) < cfg.PageSize || oldest.Before(st.WindowFromUtc)
	finished, err := s.advance(ctx, cfg, job, cursor, acts, res, nextCursor(cursor, oldest), done)
	if errors.Is(err, model.ErrUserDeleted) {
		log.InfoContext(ctx, "sync page not recorded: the account is deleted", "writeStatus", "skipped")
		return nil
	}
	if err != nil {
		return fmt.Errorf("sync %s: record page: %w", key, err)
	}
	s.report(ctx, log, job, st, cursor, res, done, finished)
	if done {
		return nil
	}
	return &ingest.DeferError{Until: s.Now(), Reason: "sync: next page"}
}

// begin decides whether the job runs a page now (the versioned sync state),
// takes a sync read of the budget and gets the athlete's token. When ok is
// false the page ends there, with err (nil: nothing to do).
func (s *Syncer) begin(ctx context.Context, log *slog.Logger, cfg SyncSettings, job ingest.Job, now time.Time) (st *syncstate.SyncState, token string, ok bool, err error) {
	sj, key := job.Sync, job.IdempotencyKey
	st, err = s.store.UpdateSyncState(ctx, sj.UserID, func(cur *syncstate.SyncState) error { return decide(cur, job, now) })
	if errors.Is(err, errSkip) {
		log.InfoContext(ctx, "sync job has nothing to do (superseded, finished or covered)", "writeStatus", "skipped")
		return nil, "", false, nil
	}
	if errors.Is(err, model.ErrUserDeleted) {
		log.InfoContext(ctx, "sync job dropped: the account is deleted", "writeStatus", "skipped")
		return nil, "", false, nil
	}
	if err != nil {
		return nil, "", false, fmt.Errorf("sync %s: %w", key, err)
	}
	if err := s.checkBudget(ctx, cfg, now, job); err != nil {
		return nil, "", false, s.deferJob(ctx, log, job, err)
	}
	token, err = s.tokens.AccessToken(ctx, sj.UserID)
	switch {
	case errors.Is(err, model.ErrUnauthorized), errors.Is(err, model.ErrNotFound):
		return nil, "", false, s.stop(ctx, log, job, "strava connection unusable: "+err.Error())
	case errors.Is(err, strava.ErrAppCredentials):
		// The operator's problem: the job waits, the athlete is not at fault.
		return nil, "", false, s.deferJob(ctx, log, job, ingest.DeferForAppCredentials(err, s.Now()))
	case err != nil:
		return nil, "", false, fmt.Errorf("sync %s: %w", key, err)
	}
	return st, token, true, nil
}

// list asks Strava for the page after the state's cursor and records what
// the answer says of the budget. When ok is false the page ends there, with
// err (a deferral at a 429, the stop at a refused token, or a failure).
func (s *Syncer) list(ctx context.Context, log *slog.Logger, cfg SyncSettings, job ingest.Job, st *syncstate.SyncState, token string, now time.Time) (acts []strava.Activity, ok bool, err error) {
	sj, key := job.Sync, job.IdempotencyKey
	opts := strava.ListOptions{Before: st.CursorBeforeUtc, PerPage: cfg.PageSize}
	if st.Mode == syncstate.SyncModeReconcile {
		// after= bounds the list to the window, so an unchanged athlete
		// costs one small page; before= keeps it newest first (Strava
		// lists oldest first when only after is given), and the margin
		// covers a device clock ahead of Strava's.
		opts.After = st.WindowFromUtc.Add(-time.Second)
		if opts.Before.IsZero() {
			opts.Before = now.Add(reconcileFutureMargin)
		}
	}
	acts, rl, err := s.strava.ListActivities(ctx, token, opts)
	var apiErr *strava.APIError
	refused := errors.As(err, &apiErr) && apiErr.Status == http.StatusTooManyRequests
	if rl.Valid() {
		// Through the instance's rate cache: written only when the reading
		// matters to the others (budget.RateCache.observed), never per page.
		if rst := budget.StateIn(rl, s.Now(), s.rateWindow()); s.Rate.Observed(rst, refused, budget.DefaultReserve) {
			if rerr := s.store.RecordRateLimit(ctx, rst); rerr != nil {
				log.WarnContext(ctx, "rate limit not recorded", "error", rerr)
			}
		}
	}
	switch {
	case refused:
		n := s.Now()
		until, why := budget.NextResetIn(budget.StateIn(rl, n, s.rateWindow()), n, 0, s.rateWindow())
		return nil, false, s.deferJob(ctx, log, job, &ingest.DeferError{Until: s.afterReset(until, job, n), Reason: "strava 429: " + why})
	case errors.Is(err, model.ErrUnauthorized):
		if merr := s.store.MarkNeedsReauth(ctx, sj.UserID, s.Now()); merr != nil && !errors.Is(merr, model.ErrNotFound) {
			return nil, false, fmt.Errorf("sync %s: %w", key, merr)
		}
		return nil, false, s.stop(ctx, log, job, "strava refused the athlete's token: "+err.Error())
	case err != nil:
		return nil, false, fmt.Errorf("sync %s: %w", key, err)
	}
	return acts, true, nil
}

// advance records the page in the sync state with a version check: the
// counts always (the writes happened), the cursor and the job's end only
// while the job still owns the cursor. finished says this run ended the job.
func (s *Syncer) advance(ctx context.Context, cfg SyncSettings, job ingest.Job, cursor time.Time, acts []strava.Activity, res pageResult, next time.Time, done bool) (finished bool, err error) {
	_, err = s.store.UpdateSyncState(ctx, job.Sync.UserID, func(cur *syncstate.SyncState) error {
		finished = false
		cur.ImportedCount += res.written + res.recovered // the writes happened, whoever runs now
		if cur.JobKey != job.IdempotencyKey || !cur.CursorBeforeUtc.Equal(cursor) {
			cur.RequestProjection() // no page of this run follows
			return nil              // superseded, or another run of this job moved on: it owns the cursor
		}
		if done || cur.ImportedCount-cur.ProjectedCount >= syncstate.ProjectEveryImported {
			cur.RequestProjection()
		}
		cur.Pages++
		cur.Listed += len(acts)
		for _, a := range acts {
			cur.ListedMaxActivityID = max(cur.ListedMaxActivityID, a.ID)
		}
		cur.CursorBeforeUtc = next
		cur.State, cur.DeferredReason, cur.NextSyncAtUtc = syncStatusOf(cur.Mode), "", s.Now()
		if done {
			finished = true
			finish(cur, s.Now(), cfg.ReconcileInterval)
		}
		return nil
	})
	return finished, err
}

// finish ends the job in its state at now: idle, the next sync an interval
// later, and what the job has seen (the reconciled window, the imported
// history).
func finish(cur *syncstate.SyncState, n time.Time, interval time.Duration) {
	cur.State, cur.LastSyncAtUtc = syncstate.SyncIdle, n
	cur.NextSyncAtUtc = n.Add(interval)
	// A reconciliation, or the first backfill (it listed from now),
	// has seen the recent window: the scheduler waits for an
	// upload with a higher id, or the idle interval.
	if cur.Mode == syncstate.SyncModeReconcile || cur.ImportedFromUtc.IsZero() {
		cur.ReconciledAtUtc, cur.ReconciledActivityID = n, max(cur.ReconciledActivityID, cur.ListedMaxActivityID)
	}
	if cur.Mode == syncstate.SyncModeBackfill {
		if cur.ImportedFromUtc.IsZero() || cur.WindowFromUtc.Before(cur.ImportedFromUtc) {
			cur.ImportedFromUtc = cur.WindowFromUtc
		}
		cur.HorizonUtc = cur.ImportedFromUtc
	}
}

// report logs the recorded page and writes its routine audit entry, and the
// job's completion when this run finished it.
func (s *Syncer) report(ctx context.Context, log *slog.Logger, job ingest.Job, st *syncstate.SyncState, cursor time.Time, res pageResult, done, finished bool) {
	log.InfoContext(ctx, "sync page", "writeStatus", "synced", "listed", res.listed, "written", res.written,
		"unchanged", res.unchanged, "stale", res.stale, "rejected", res.rejected, "done", done)
	s.audit(ctx, log, job, ingest.AuditSyncPage, map[string]string{
		"listed": strconv.Itoa(res.listed), "written": strconv.Itoa(res.written), "unchanged": strconv.Itoa(res.unchanged),
		"stale": strconv.Itoa(res.stale), "rejected": strconv.Itoa(res.rejected), "writtenIds": strings.Join(res.writtenIDs, ","),
		"recoveredIds":    strings.Join(res.recoveredIDs, ","),
		"cursorBeforeUtc": cursor.UTC().Format(time.RFC3339),
	})
	if finished {
		s.audit(ctx, log, job, ingest.AuditSyncCompleted, map[string]string{"fromUtc": st.WindowFromUtc.UTC().Format(time.RFC3339)})
	}
}

// nextCursor is where the page after one whose oldest activity started at
// oldest begins: before the second after it, so activities sharing that
// second are listed again (and found unchanged) rather than skipped; when
// that would not move the cursor (a page all within one second), before
// that second.
func nextCursor(cursor, oldest time.Time) time.Time {
	sec := oldest.UTC().Truncate(time.Second)
	if next := sec.Add(time.Second); cursor.IsZero() || next.Before(cursor) {
		return next
	}
	return sec
}

// apply normalizes the listed activities that started in the window and
// writes those that differ from the stored workouts (read for the page's
// date range with one strongly consistent LSI1 query) through the ordered
// conditional upsert. It returns the oldest start listed (zero for an empty
// page).
func (s *Syncer) apply(ctx context.Context, log *slog.Logger, job ingest.Job, from, cursor time.Time, acts []strava.Activity, fetchStarted time.Time) (pageResult, time.Time, error) {
	sj := job.Sync
	res := pageResult{listed: len(acts)}
	var (
		oldest time.Time
		fresh  []*model.Workout
	)
	for _, a := range acts {
		if oldest.IsZero() || a.StartDate.Before(oldest) {
			oldest = a.StartDate
		}
		if a.StartDate.Before(from) {
			continue
		}
		if a.Athlete.ID != 0 && a.Athlete.ID != sj.AthleteID {
			res.rejected++
			log.WarnContext(ctx, "listed activity of another athlete ignored", "activityId", a.ID, "listedAthleteId", a.Athlete.ID)
			continue
		}
		wo, err := ingest.MapActivity(a, sj.UserID, sj.AthleteID, job.CorrelationID, fetchStarted)
		if err != nil {
			res.rejected++
			log.WarnContext(ctx, "listed activity rejected", "activityId", a.ID, "writeStatus", "rejected", "error", err)
			s.audit(ctx, log, job, ingest.AuditEventRejected, map[string]string{"activityId": strconv.FormatInt(a.ID, 10), "reason": err.Error()})
			continue
		}
		fresh = append(fresh, wo)
	}
	if len(fresh) == 0 {
		return res, oldest, nil
	}
	lo, hi := fresh[0].StartDateUtc, fresh[0].StartDateUtc
	for _, w := range fresh {
		lo, hi = minTime(lo, w.StartDateUtc), maxTime(hi, w.StartDateUtc)
	}
	to := hi.Add(time.Nanosecond)
	lg, err := s.store.WorkoutLog(ctx, sj.UserID, []model.Window{{From: lo, To: &to}})
	if err != nil {
		return res, oldest, err
	}
	stored := make(map[int64]*model.Workout, len(lg.Workouts))
	for i := range lg.Workouts {
		stored[lg.Workouts[i].ActivityID] = &lg.Workouts[i]
	}
	for _, w := range fresh {
		// A stored tombstone of a listed activity is a change: Strava shows
		// it again (made public after a 404), so the ordered write revives
		// it unless its 404 was fetched after this list.
		if old, ok := stored[w.ActivityID]; ok && !old.IsDeleted && !WorkoutDiffers(old, w) {
			res.unchanged++ // unchanged costs no write
			// Written by this job, and not in the second the previous
			// (recorded) page overlaps with: its count was lost in a crash.
			if old.CorrelationID == job.CorrelationID && (cursor.IsZero() || w.StartDateUtc.Before(cursor.Add(-time.Second))) {
				res.recovered++
				res.recoveredIDs = append(res.recoveredIDs, strconv.FormatInt(w.ActivityID, 10))
				res.keys = append(res.keys, w.ItemKey())
			}
			continue
		}
		w.FetchStartedAtNs, w.SyncJobKey = fetchStarted.UnixNano(), job.IdempotencyKey
		err := s.store.UpsertWorkout(ctx, w)
		if errors.Is(err, model.ErrConflict) {
			res.stale++ // a later fetch (or 404) is stored
			continue
		}
		if err != nil {
			return res, oldest, err
		}
		res.written++
		res.writtenIDs = append(res.writtenIDs, strconv.FormatInt(w.ActivityID, 10))
		res.keys = append(res.keys, w.ItemKey())
	}
	slices.Sort(res.writtenIDs)
	slices.Sort(res.recoveredIDs)
	return res, oldest, nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
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
	s.store.Audit(ctx, log, newEntry(keys.UserPK(job.Sync.UserID), job.Sync.UserID, eventType, job.CorrelationID,
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
