package ingest

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/strava"
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

// Audit event types of sync jobs.
const (
	// AuditSyncPage records one listed page: what was written, unchanged,
	// dropped as stale and rejected (details writtenIds lists the writes;
	// recoveredIds the writes of an earlier run of the page that stopped
	// before recording it).
	AuditSyncPage = "STRAVA_SYNC_PAGE"
	// AuditSyncCompleted records a finished backfill or reconciliation.
	AuditSyncCompleted = "STRAVA_SYNC_COMPLETED"
)

// ObjectSync is the object_type a sync job's Event carries (for logs only).
const ObjectSync = "sync"

// SyncJob is what a sync job does: list the user's activities started from
// FromUtc on, page by page, newest first, and write what differs. The
// cursor lives in the user's model.SyncState, not in the job, so a job
// delivered again resumes where the last page ended.
type SyncJob struct {
	UserID    string `json:"userId"`
	AthleteID int64  `json:"athleteId"`
	// Mode is model.SyncModeBackfill or model.SyncModeReconcile.
	Mode string `json:"mode"`
	// FromUtc is the oldest start date listed: the backfill's horizon, or
	// the start of the reconciliation window.
	FromUtc time.Time `json:"fromUtc"`
	// Resume marks an operator's restart (scripts/syncs): it takes over the
	// state's unfinished job and cursor instead of starting anew.
	Resume bool `json:"resume,omitempty"`
	// MilestoneEndUtc is the end of the user's soonest-ending active
	// milestone when the job was enqueued: its priority when the sync
	// share cannot cover every job (sooner first; zero: last).
	MilestoneEndUtc time.Time `json:"milestoneEndUtc,omitzero"`
}

func (j *SyncJob) validate(v *model.ValidationError) {
	if j.UserID == "" {
		v.Add("sync.userId", "is required")
	}
	if j.AthleteID <= 0 {
		v.Add("sync.athleteId", "must be positive")
	}
	if j.Mode != model.SyncModeBackfill && j.Mode != model.SyncModeReconcile {
		v.Add("sync.mode", "unknown mode %q", j.Mode)
	}
	if j.FromUtc.IsZero() {
		v.Add("sync.fromUtc", "is required")
	}
}

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
// elevation, moving time or start date. The name is not compared: LSI1 does
// not project it and Strava pushes an update event for every title change.
// Sync jobs write only workouts that differ, so an unchanged activity costs
// no write and triggers no projection.
func WorkoutDiffers(stored, fresh *model.Workout) bool {
	return stored.SportType != fresh.SportType ||
		stored.DistanceMeters != fresh.DistanceMeters ||
		stored.TotalElevationGain != fresh.TotalElevationGain ||
		stored.MovingTimeSeconds != fresh.MovingTimeSeconds ||
		!stored.StartDateUtc.Equal(fresh.StartDateUtc)
}

// SyncStore is the persistence sync jobs need (implemented by
// model/store.Store).
type SyncStore interface {
	// UpdateSyncState reads, decides and writes the user's sync state with
	// a version check (store.ErrSkipWrite from decide writes nothing).
	UpdateSyncState(ctx context.Context, userID string, decide func(*model.SyncState) error) (*model.SyncState, error)
	// WorkoutLog reads the user's workouts started in windows (one
	// strongly consistent LSI1 query per window).
	WorkoutLog(ctx context.Context, userID string, windows []model.Window) (store.Log, error)
	// UpsertWorkout is the ordered conditional write (newest fetch wins,
	// a tombstone too, both ways); ErrConflict when the stored item wins.
	UpsertWorkout(ctx context.Context, w *model.Workout) error
	// MarkNeedsReauth flags the connection; ErrNotFound when it is gone.
	MarkNeedsReauth(ctx context.Context, userID string, now time.Time) error
	// RateLimitState reads the shared counter; ErrNotFound before the first reading.
	RateLimitState(ctx context.Context) (*model.RateLimitState, error)
	// RecordRateLimit stores a reading unless a newer one is stored.
	RecordRateLimit(ctx context.Context, r *model.RateLimitState) error
	// TakeSyncRead counts a sync read in the window of length windowLen
	// containing now unless allowed were counted there (split over shards
	// counters, tried from pick); ErrConflict then.
	TakeSyncRead(ctx context.Context, now time.Time, windowLen time.Duration, allowed, shards int, pick uint64) error
	// Audit writes an audit entry and never fails.
	Audit(ctx context.Context, log *slog.Logger, e *model.AuditEntry)
	// OutboxItem reads the job's outbox item; ErrNotFound when none.
	OutboxItem(ctx context.Context, key string) (*model.IdempotencyRecord, error)
}

// ActivityLister lists an athlete's activities (strava.Client).
type ActivityLister interface {
	// ListActivities reads one page; errors match ErrUnauthorized or
	// ErrRetryable (a 429 is a *strava.APIError).
	ListActivities(ctx context.Context, accessToken string, o strava.ListOptions) ([]strava.Activity, strava.RateLimit, error)
}

var (
	_ SyncStore      = (*store.Store)(nil)
	_ ActivityLister = (*strava.Client)(nil)
)

// Syncer runs sync jobs, one page per run (see the package doc, "Backfill
// and reconciliation"). The worker hands it every job that carries a
// SyncJob.
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
	// rate is the instance's rate-limit cache (cache.go): the worker's
	// when wired by NewStravaWorker, else the syncer's own.
	rate *rateCache
	// Metrics receives a SyncsWaiting EMF line per job that waits for the
	// budget (the worker Lambda: stdout; nil: none).
	Metrics io.Writer
}

// NewSyncer builds the sync job runner.
func NewSyncer(st SyncStore, tokens TokenProvider, lister ActivityLister, log *slog.Logger) *Syncer {
	return &Syncer{store: st, tokens: tokens, strava: countedLister{lister}, log: log, Now: func() time.Time { return time.Now().UTC() },
		RateWindow: model.AthleteReadsWindow, MaxFailures: DefaultMaxFailures, rate: new(rateCache)}
}

// processSync runs a sync job through the worker's Syncer.
func (w *Worker) processSync(ctx context.Context, job Job) error {
	if w.Sync == nil {
		return fmt.Errorf("process %s: sync job but no syncer configured: %w", job.CorrelationID, model.ErrInvalid)
	}
	return w.Sync.Process(ctx, job)
}

// errSkip stops a job that has nothing to do (superseded, finished, covered).
var errSkip = errors.New("nothing to do")

// Process runs one page of a sync job. It returns nil when the job is
// finished (or has nothing to do: superseded by a newer job of the user,
// already finished, no usable connection), a *DeferError when the next
// page is due (Until now) or the sync share of the budget is spent or
// Strava answered 429 (Until the window reset), and any other error for a
// failure worth retrying (model.ErrInvalid for a poison job). The failure
// that will park the job marks the sync failed.
func (s *Syncer) Process(ctx context.Context, job Job) error {
	err := s.page(ctx, job)
	var de *DeferError
	if err == nil || errors.As(err, &de) || ctx.Err() != nil {
		return err
	}
	final := errors.Is(err, model.ErrInvalid)
	if !final && job.IdempotencyKey != "" {
		if rec, rerr := s.store.OutboxItem(ctx, job.IdempotencyKey); rerr == nil && rec.Failures+1 >= max(s.MaxFailures, 1) {
			final = true
		}
	}
	s.record(ctx, job, func(cur *model.SyncState) {
		if final {
			cur.State = model.SyncFailed
			cur.DeferredReason = "failed: " + err.Error()
			return
		}
		cur.DeferredReason = "retrying after: " + err.Error()
	})
	return err
}

// record applies change to the user's sync state when job is still its
// job; a failure to record is logged (the job's outcome is in the outbox).
func (s *Syncer) record(ctx context.Context, job Job, change func(*model.SyncState)) {
	_, err := s.store.UpdateSyncState(ctx, job.Sync.UserID, func(cur *model.SyncState) error {
		if cur.JobKey != job.IdempotencyKey {
			return store.ErrSkipWrite
		}
		change(cur)
		return nil
	})
	if err != nil {
		s.log.WarnContext(ctx, "sync state not recorded", "correlationId", job.CorrelationID, "userId", job.Sync.UserID, "error", err)
	}
}

func syncStatusOf(mode string) model.SyncStatus {
	if mode == model.SyncModeReconcile {
		return model.SyncReconciling
	}
	return model.SyncBackfilling
}

// decide takes the job on (or not) in the user's sync state: it resumes
// its own unfinished job, a backfill extends a running backfill to its
// earlier horizon (keeping the cursor) or starts anew (from what earlier
// backfills imported), a reconciliation runs only when no other job does.
// It returns errSkip when the job has nothing to do and store.ErrSkipWrite
// when it runs without changing the state.
func decide(cur *model.SyncState, job Job, now time.Time) error {
	sj, key := job.Sync, job.IdempotencyKey
	switch {
	case cur.JobKey == key && cur.Running():
		return store.ErrSkipWrite
	case cur.JobKey == key:
		return errSkip // finished or failed: a repeated delivery
	case sj.Resume && cur.JobKey != "" && cur.State != model.SyncIdle:
		cur.JobKey, cur.State, cur.DeferredReason = key, syncStatusOf(cur.Mode), ""
		return nil
	case sj.Mode == model.SyncModeBackfill && cur.Running() && cur.Mode == model.SyncModeBackfill:
		if !sj.FromUtc.Before(cur.WindowFromUtc) {
			return errSkip // the running backfill reaches as far back
		}
		cur.JobKey, cur.WindowFromUtc, cur.HorizonUtc = key, sj.FromUtc, sj.FromUtc
		return nil
	case sj.Mode == model.SyncModeBackfill && !cur.ImportedFromUtc.IsZero() && !sj.FromUtc.Before(cur.ImportedFromUtc):
		return errSkip // imported already
	case sj.Mode == model.SyncModeReconcile && cur.Running():
		return errSkip // a running job lists anyway; the next slot reconciles
	}
	cur.JobKey, cur.Mode, cur.AthleteID, cur.State = key, sj.Mode, sj.AthleteID, syncStatusOf(sj.Mode)
	cur.WindowFromUtc, cur.CursorBeforeUtc, cur.Pages, cur.Listed, cur.ListedMaxActivityID = sj.FromUtc, time.Time{}, 0, 0, 0
	cur.MilestoneEndUtc = sj.MilestoneEndUtc
	cur.JobStartedAtUtc, cur.DeferredReason, cur.NextSyncAtUtc = now, "", now
	if sj.Mode == model.SyncModeBackfill {
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
}

func (s *Syncer) page(ctx context.Context, job Job) error {
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
	done := len(acts) < cfg.PageSize || oldest.Before(st.WindowFromUtc)
	finished, err := s.advance(ctx, cfg, job, cursor, acts, res, nextCursor(cursor, oldest), done)
	if errors.Is(err, store.ErrUserDeleted) {
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
	return &DeferError{Until: s.Now(), Reason: "sync: next page"}
}

// begin decides whether the job runs a page now (the versioned sync state),
// takes a sync read of the budget and gets the athlete's token. When ok is
// false the page ends there, with err (nil: nothing to do).
func (s *Syncer) begin(ctx context.Context, log *slog.Logger, cfg SyncSettings, job Job, now time.Time) (st *model.SyncState, token string, ok bool, err error) {
	sj, key := job.Sync, job.IdempotencyKey
	st, err = s.store.UpdateSyncState(ctx, sj.UserID, func(cur *model.SyncState) error { return decide(cur, job, now) })
	if errors.Is(err, errSkip) {
		log.InfoContext(ctx, "sync job has nothing to do (superseded, finished or covered)", "writeStatus", "skipped")
		return nil, "", false, nil
	}
	if errors.Is(err, store.ErrUserDeleted) {
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
	case err != nil:
		return nil, "", false, fmt.Errorf("sync %s: %w", key, err)
	}
	return st, token, true, nil
}

// list asks Strava for the page after the state's cursor and records what
// the answer says of the budget. When ok is false the page ends there, with
// err (a deferral at a 429, the stop at a refused token, or a failure).
func (s *Syncer) list(ctx context.Context, log *slog.Logger, cfg SyncSettings, job Job, st *model.SyncState, token string, now time.Time) (acts []strava.Activity, ok bool, err error) {
	sj, key := job.Sync, job.IdempotencyKey
	opts := strava.ListOptions{Before: st.CursorBeforeUtc, PerPage: cfg.PageSize}
	if st.Mode == model.SyncModeReconcile {
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
		// matters to the others (rateCache.observed), never per page.
		if rst := rateLimitState(rl, s.Now(), s.rateWindow()); s.rate.observed(rst, refused, DefaultBudgetReserve) {
			if rerr := s.store.RecordRateLimit(ctx, rst); rerr != nil {
				log.WarnContext(ctx, "rate limit not recorded", "error", rerr)
			}
		}
	}
	switch {
	case refused:
		n := s.Now()
		until, why := nextReset(rateLimitState(rl, n, s.rateWindow()), n, 0, s.rateWindow())
		return nil, false, s.deferJob(ctx, log, job, &DeferError{Until: s.afterReset(until, job, n), Reason: "strava 429: " + why})
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
func (s *Syncer) advance(ctx context.Context, cfg SyncSettings, job Job, cursor time.Time, acts []strava.Activity, res pageResult, next time.Time, done bool) (finished bool, err error) {
	_, err = s.store.UpdateSyncState(ctx, job.Sync.UserID, func(cur *model.SyncState) error {
		finished = false
		cur.ImportedCount += res.written + res.recovered // the writes happened, whoever runs now
		if cur.JobKey != job.IdempotencyKey || !cur.CursorBeforeUtc.Equal(cursor) {
			return nil // superseded, or another run of this job moved on: it owns the cursor
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
func finish(cur *model.SyncState, n time.Time, interval time.Duration) {
	cur.State, cur.LastSyncAtUtc = model.SyncIdle, n
	cur.NextSyncAtUtc = n.Add(interval)
	// A reconciliation, or the first backfill (it listed from now),
	// has seen the recent window: the scheduler waits for an
	// upload with a higher id, or the idle interval.
	if cur.Mode == model.SyncModeReconcile || cur.ImportedFromUtc.IsZero() {
		cur.ReconciledAtUtc, cur.ReconciledActivityID = n, max(cur.ReconciledActivityID, cur.ListedMaxActivityID)
	}
	if cur.Mode == model.SyncModeBackfill {
		if cur.ImportedFromUtc.IsZero() || cur.WindowFromUtc.Before(cur.ImportedFromUtc) {
			cur.ImportedFromUtc = cur.WindowFromUtc
		}
		cur.HorizonUtc = cur.ImportedFromUtc
	}
}

// report logs the recorded page and writes its routine audit entry, and the
// job's completion when this run finished it.
func (s *Syncer) report(ctx context.Context, log *slog.Logger, job Job, st *model.SyncState, cursor time.Time, res pageResult, done, finished bool) {
	log.InfoContext(ctx, "sync page", "writeStatus", "synced", "listed", res.listed, "written", res.written,
		"unchanged", res.unchanged, "stale", res.stale, "rejected", res.rejected, "done", done)
	s.audit(ctx, log, job, AuditSyncPage, map[string]string{
		"listed": strconv.Itoa(res.listed), "written": strconv.Itoa(res.written), "unchanged": strconv.Itoa(res.unchanged),
		"stale": strconv.Itoa(res.stale), "rejected": strconv.Itoa(res.rejected), "writtenIds": strings.Join(res.writtenIDs, ","),
		"recoveredIds":    strings.Join(res.recoveredIDs, ","),
		"cursorBeforeUtc": cursor.UTC().Format(time.RFC3339),
	})
	if finished {
		s.audit(ctx, log, job, AuditSyncCompleted, map[string]string{"fromUtc": st.WindowFromUtc.UTC().Format(time.RFC3339)})
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
func (s *Syncer) apply(ctx context.Context, log *slog.Logger, job Job, from, cursor time.Time, acts []strava.Activity, fetchStarted time.Time) (pageResult, time.Time, error) {
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
		wo, err := MapActivity(a, sj.UserID, sj.AthleteID, job.CorrelationID, fetchStarted)
		if err != nil {
			res.rejected++
			log.WarnContext(ctx, "listed activity rejected", "activityId", a.ID, "writeStatus", "rejected", "error", err)
			s.audit(ctx, log, job, AuditEventRejected, map[string]string{"activityId": strconv.FormatInt(a.ID, 10), "reason": err.Error()})
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
			}
			continue
		}
		w.FetchStartedAtNs = fetchStarted.UnixNano()
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

// reconcileFutureMargin bounds a reconciliation's first page from above
// (before= now plus it).
const reconcileFutureMargin = 48 * time.Hour

// checkBudget defers when sync jobs may not read now: when they have spent
// their share of a Strava budget (they keep 1-BudgetShare of every budget
// free for webhooks), or when the paced share of the window so far is
// taken (pace). A deferral to a window's reset is due SyncResetDelay after
// it, ordered by the job's priority, so webhooks deferred to the reset run
// first. The shared reading comes from the instance's rate cache.
func (s *Syncer) checkBudget(ctx context.Context, cfg SyncSettings, now time.Time, job Job) error {
	st, err := s.rate.current(ctx, s.store.RateLimitState, now)
	if err != nil {
		return fmt.Errorf("check strava budget: %w", err)
	}
	if st == nil {
		return nil
	}
	reserve := 1 - cfg.BudgetShare
	if why := budgetExhausted(st, now, reserve, s.rateWindow()); why != "" {
		until, _ := nextReset(st, now, reserve, s.rateWindow())
		return &DeferError{Until: s.afterReset(until, job, now), Reason: fmt.Sprintf("sync share %.0f%% of the strava budget spent: %s", cfg.BudgetShare*100, why)}
	}
	return s.pace(ctx, cfg, st, now, job)
}

// pace takes one sync read of the paced allowance of the short window and
// of the day (SyncReads counters, one conditional write each; a read the
// day refuses stays counted in the short window, erring on less): sync
// jobs may have taken at most PacedAllowance reads by now, so their share
// spreads over the window instead of going at its start. A job refused
// waits for the instant the allowance grows past what is taken (spread by
// its priority), or for the next window.
func (s *Syncer) pace(ctx context.Context, cfg SyncSettings, st *model.RateLimitState, now time.Time, job Job) error {
	short := s.rateWindow()
	head := time.Duration(cfg.HeadStart * float64(short))
	for _, b := range []struct {
		name   string
		window time.Duration
		limit  int
	}{{"15-minute", short, st.ReadShortLimit}, {"daily", 24 * time.Hour, st.ReadDailyLimit}} {
		if b.limit <= 0 {
			continue
		}
		h := head
		if b.window > short {
			h = short // the day's head start: one short window's worth
		}
		allowed := PacedAllowance(b.limit, cfg.BudgetShare, now, b.window, h)
		shards := 1
		if b.window > short {
			// A day of sync reads at raised limits is not one
			// partition's: the daily count is split, each job starting
			// from its own shard.
			shards = model.SyncReadsShardsFor(shareCap(b.limit, cfg.BudgetShare))
		}
		err := s.store.TakeSyncRead(ctx, now, b.window, allowed, shards, pickOf(job, now))
		if errors.Is(err, model.ErrConflict) {
			until := nextPacingSlot(b.limit, cfg.BudgetShare, allowed, now, b.window, h)
			if until.Equal(now.UTC().Truncate(b.window).Add(b.window)) {
				until = s.afterReset(until, job, now)
			} else {
				until = until.Add(time.Duration(priorityOf(job, now) * float64(b.window) / float64(max(shareCap(b.limit, cfg.BudgetShare), 1))))
			}
			return &DeferError{Until: until, Reason: fmt.Sprintf("sync paced: %d of the %s read budget's sync share taken so far in the window", allowed, b.name)}
		}
		if err != nil {
			return fmt.Errorf("pace sync reads: %w", err)
		}
	}
	return nil
}

// pickOf spreads jobs over the daily counter's shards: a hash of the job
// and the instant, so one job's pages do not all land on one shard.
func pickOf(job Job, now time.Time) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(job.IdempotencyKey))
	_, _ = h.Write([]byte(strconv.FormatInt(now.UnixNano(), 10)))
	return h.Sum64()
}

// shareCap is what sync jobs may read of a budget of limit in a window:
// the limit less the webhooks' part (1-share of it, at least one read).
func shareCap(limit int, share float64) int {
	return max(0, limit-reserveOf(limit, 1-share))
}

// PacedAllowance is how many reads sync jobs may have taken by now in the
// window of length window containing now, of a budget of limit with their
// share: the share cap times the elapsed part of the window plus head (a
// head start), at most the cap.
func PacedAllowance(limit int, share float64, now time.Time, window, head time.Duration) int {
	c := shareCap(limit, share)
	elapsed := now.UTC().Sub(now.UTC().Truncate(window)) + head
	if elapsed >= window {
		return c
	}
	return int(float64(c) * float64(elapsed) / float64(window))
}

// nextPacingSlot is when the allowance of the window grows past taken
// reads: the instant it reaches taken+1, or the window's end when the cap
// is reached within it.
func nextPacingSlot(limit int, share float64, taken int, now time.Time, window, head time.Duration) time.Time {
	start := now.UTC().Truncate(window)
	c := shareCap(limit, share)
	if taken+1 > c || c == 0 {
		return start.Add(window)
	}
	at := start.Add(time.Duration(math.Ceil(float64(taken+1)*float64(window)/float64(c))) - head)
	if !at.After(now) {
		at = now.Add(time.Second)
	}
	return at
}

// priorityOf places job among waiting sync jobs, in [0, 1]: 0 for a
// milestone ending now (or past), growing with the time left (a week left
// is 0.5), 1 without a milestone. Deferred jobs are due in its order.
func priorityOf(job Job, now time.Time) float64 {
	if job.Sync == nil || job.Sync.MilestoneEndUtc.IsZero() {
		return 1
	}
	left := job.Sync.MilestoneEndUtc.Sub(now)
	if left <= 0 {
		return 0
	}
	const half = 7 * 24 * time.Hour
	return float64(left) / float64(left+half)
}

// afterReset is when a sync job deferred to reset is due: SyncResetDelay
// of the short window after it, plus up to as much again by priority
// (soonest-ending milestone first), so webhook jobs deferred to the same
// reset are due before any sync job.
func (s *Syncer) afterReset(reset time.Time, job Job, now time.Time) time.Time {
	w := float64(s.rateWindow())
	return reset.Add(time.Duration(w * SyncResetDelay * (1 + priorityOf(job, now))))
}

// deferJob records the deferral on the state and returns it for the
// outbox (the job waits, received, until de.Until).
func (s *Syncer) deferJob(ctx context.Context, log *slog.Logger, job Job, err error) error {
	var de *DeferError
	if !errors.As(err, &de) {
		return err
	}
	log.InfoContext(ctx, "sync deferred", "writeStatus", "deferred", "notBefore", de.Until.UTC().Format(time.RFC3339), "reason", de.Reason)
	if err := writeWaitingEMF(s.Metrics, job.Sync.Mode, de.Until.Sub(s.Now()), s.Now()); err != nil {
		log.WarnContext(ctx, "sync waiting metric not written", "error", err)
	}
	s.record(ctx, job, func(cur *model.SyncState) {
		cur.State, cur.DeferredReason, cur.NextSyncAtUtc = model.SyncDeferred, de.Reason, de.Until.UTC()
	})
	return fmt.Errorf("sync %s: %w", job.IdempotencyKey, de)
}

// stop ends a job that cannot go on until the athlete acts (reconnects):
// the sync is marked failed with the reason and the job is done.
func (s *Syncer) stop(ctx context.Context, log *slog.Logger, job Job, reason string) error {
	log.WarnContext(ctx, "sync stopped", "writeStatus", "skipped", "reason", reason)
	s.record(ctx, job, func(cur *model.SyncState) { cur.State, cur.DeferredReason = model.SyncFailed, reason })
	return nil
}

func (s *Syncer) rateWindow() time.Duration {
	if s.RateWindow > 0 {
		return s.RateWindow
	}
	return model.AthleteReadsWindow
}

func (s *Syncer) audit(ctx context.Context, log *slog.Logger, job Job, eventType string, details map[string]string) {
	details["athleteId"] = strconv.FormatInt(job.Sync.AthleteID, 10)
	details["mode"] = job.Sync.Mode
	details["jobKey"] = job.IdempotencyKey
	newEntry := model.NewAuditEntry
	if eventType == AuditSyncPage || (eventType == AuditSyncCompleted && job.Sync.Mode == model.SyncModeReconcile) {
		// One per page of every sync, and one per reconciliation (every
		// athlete with a milestone, every interval): indexed, they would
		// write one audit GSI2 partition (EVENT#{type}#{month}) hot. A
		// backfill's completion (one per connect) stays indexed.
		newEntry = model.NewRoutineAuditEntry
	}
	s.store.Audit(ctx, log, newEntry(model.UserPK(job.Sync.UserID), job.Sync.UserID, eventType, job.CorrelationID,
		model.NewID(), s.Now(), details))
}
