package syncjobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ports"
	"github.com/commitcollect/backend/model/syncstate"
)

// SyncSchedulerStore is the persistence the sync scheduler needs
// (implemented by model/store.Store), by use case: what a user's sync
// decision reads, the enqueue, and the reconciliation's enumeration.
type SyncSchedulerStore interface {
	SyncView
	// ClaimOutboxItem records a job as received with a lease; ErrConflict
	// when the key is already claimed (an idempotent enqueue).
	ClaimOutboxItem(ctx context.Context, key, correlationID, job string, now time.Time, lease, ttl time.Duration) (*model.IdempotencyRecord, error)
	UserEnumeration
}

// SyncView is what deciding a user's sync reads: the sync state, the
// connection, the milestones and the stored log.
type SyncView interface {
	// SyncState reads the user's sync state; ErrNotFound when none.
	SyncState(ctx context.Context, userID string) (*syncstate.SyncState, error)
	// ConnectionStatus says whose athlete the user is and whether the
	// athlete must reconnect; ErrNotFound without a connection.
	ConnectionStatus(ctx context.Context, userID string) (int64, bool, error)
	// UserMilestones reads the user's milestones (strongly consistent).
	UserMilestones(ctx context.Context, userID string) (ports.UserMilestones, error)
	// WorkoutLog reads the user's workouts started in windows (LSI1).
	WorkoutLog(ctx context.Context, userID string, windows []model.Window) (ports.WorkoutLog, error)
}

// UserEnumeration is the reconciliation's resumable walk of the users
// index.
type UserEnumeration interface {
	// ListUsers pages through one shard of the sparse users index.
	ListUsers(ctx context.Context, shard int, after string, limit int) (ports.UsersPage, error)
	// CountUsers counts the users index (once per reconciliation cycle).
	CountUsers(ctx context.Context) (int, error)
	// ReconcileCursor reads the enumeration cursor; ErrNotFound before the
	// first cycle.
	ReconcileCursor(ctx context.Context) (*syncstate.ReconcileCursor, error)
	// SaveReconcileCursor writes it conditioned on its version;
	// ErrConflict when another run moved it.
	SaveReconcileCursor(ctx context.Context, c *syncstate.ReconcileCursor) error
}

// SyncScheduler enqueues sync jobs on the outbox: a backfill when an
// athlete connects or a milestone reaches before what was imported, a
// reconciliation per active athlete per interval slot, an operator's
// restart. Keys are deterministic (keys.SyncJobKey), so enqueueing twice
// claims once. The api (BFF hooks), the sweeper (reconciliation) and
// scripts/syncs use it.
type SyncScheduler struct {
	store    SyncSchedulerStore
	dispatch ingest.Dispatcher
	log      *slog.Logger
	// Now is the clock; tests may replace it.
	Now func() time.Time
	// Settings shape the jobs (defaults when zero).
	Settings SyncSettings
	// Lease is the lease of a fresh job (ingest.DefaultLease when zero): the
	// sweeper dispatches it again once it lapses.
	Lease time.Duration
}

// NewSyncScheduler builds a scheduler that hands new jobs to d (nil: the
// sweeper dispatches them once their lease lapses).
func NewSyncScheduler(st SyncSchedulerStore, d ingest.Dispatcher, log *slog.Logger) *SyncScheduler {
	return &SyncScheduler{store: st, dispatch: d, log: log, Now: func() time.Time { return time.Now().UTC() }}
}

// Horizon is how far back a user's history should be imported at now: the
// earliest period start of the user's active milestones, but at most
// MaxDays back (also the horizon without any milestone), at UTC day
// granularity so that the same day yields the same backfill key.
func (s *SyncScheduler) Horizon(ctx context.Context, userID string, now time.Time) (time.Time, error) {
	h, _, err := s.horizon(ctx, userID, now)
	return h, err
}

// horizon is Horizon and the end of the soonest-ending active milestone
// (the job's priority; zero without one).
func (s *SyncScheduler) horizon(ctx context.Context, userID string, now time.Time) (time.Time, time.Time, error) {
	cfg := s.Settings.WithDefaults()
	floor := now.UTC().AddDate(0, 0, -cfg.MaxDays).Truncate(24 * time.Hour)
	ms, err := s.store.UserMilestones(ctx, userID)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("sync horizon of user %s: %w", userID, err)
	}
	_, end := ActiveMilestoneEnd(ms.Milestones, now, now)
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
	horizon, end, err := s.horizon(ctx, userID, now)
	if err != nil {
		return false, err
	}
	st, err := s.store.SyncState(ctx, userID)
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

// ReconcileResult counts what one reconciliation run did.
type ReconcileResult struct {
	// Users the run came to in the users index.
	Users int
	// Enqueued reconciliation jobs (new keys for this cycle).
	Enqueued int
	// Already had this cycle's job.
	Already int
	// Skipped users without a usable Strava connection.
	Skipped int
	// NoMilestone: users without an active milestone overlapping the
	// reconcile window (nothing a reconciliation could change counts).
	NoMilestone int
	// NoUpload: users with one but no upload since their last
	// reconciliation, which is younger than ReconcileIdle.
	NoUpload int
	// Running: users whose sync job runs or waits (it lists anyway).
	Running int
}

// LogArgs are the result's counts as slog key-value pairs, for the
// "reconciliation step" line the sweeper and the local stack write.
func (r ReconcileResult) LogArgs() []any {
	return []any{"users", r.Users, "enqueued", r.Enqueued, "already", r.Already, "skipped", r.Skipped,
		"noMilestone", r.NoMilestone, "noUpload", r.NoUpload, "running", r.Running}
}

func (r *ReconcileResult) add(o reconcileOutcome) {
	r.Users++
	switch o {
	case outcomeEnqueued:
		r.Enqueued++
	case outcomeAlready:
		r.Already++
	case outcomeNoConnection:
		r.Skipped++
	case outcomeNoMilestone:
		r.NoMilestone++
	case outcomeNoUpload:
		r.NoUpload++
	case outcomeRunning:
		r.Running++
	}
}

type reconcileOutcome int

const (
	outcomeEnqueued reconcileOutcome = iota
	outcomeAlready
	outcomeNoConnection
	outcomeNoMilestone
	outcomeNoUpload
	outcomeRunning
)

// ReconcileDue decides whether a user whose slot came up is reconciled at
// now: never while its sync job runs or waits; when its last
// reconciliation (st.ReconciledAtUtc; zero: never) is ReconcileIdle old;
// else only when a workout of the reconcile window that is not a
// tombstone has an activity id above the highest that reconciliation
// listed (Strava's ids grow with uploads: the athlete uploaded since).
// st may be nil (no sync yet). The caller has checked the milestone.
func ReconcileDue(st *syncstate.SyncState, window []model.Workout, now time.Time, idle time.Duration) bool {
	if st != nil && st.Running() {
		return false
	}
	if st == nil || st.ReconciledAtUtc.IsZero() || now.Sub(st.ReconciledAtUtc) >= idle {
		return true
	}
	for _, w := range window {
		if !w.IsDeleted && w.ActivityID > st.ReconciledActivityID {
			return true
		}
	}
	return false
}

// reconcileUser comes to one user at now: checks (cheapest first, nothing
// written) that a reconciliation can change something that counts, and
// enqueues it under the cycle's key. force skips the milestone and upload
// checks (ReconcileAll).
func (s *SyncScheduler) reconcileUser(ctx context.Context, cfg SyncSettings, userID string, now, cycle time.Time, force bool) (reconcileOutcome, error) {
	from := now.AddDate(0, 0, -cfg.ReconcileDays)
	ms, err := s.store.UserMilestones(ctx, userID)
	if err != nil {
		return 0, err
	}
	active, end := ActiveMilestoneEnd(ms.Milestones, from, now)
	if !force {
		if !active {
			return outcomeNoMilestone, nil
		}
		st, err := s.store.SyncState(ctx, userID)
		if errors.Is(err, model.ErrNotFound) {
			st, err = nil, nil
		}
		if err != nil {
			return 0, err
		}
		var window []model.Workout
		if st != nil && !st.Running() && !st.ReconciledAtUtc.IsZero() && now.Sub(st.ReconciledAtUtc) < cfg.ReconcileIdle {
			lg, err := s.store.WorkoutLog(ctx, userID, []model.Window{{From: from}})
			if err != nil {
				return 0, err
			}
			window = lg.Workouts
		}
		if !ReconcileDue(st, window, now, cfg.ReconcileIdle) {
			if st != nil && st.Running() {
				return outcomeRunning, nil
			}
			return outcomeNoUpload, nil
		}
	}
	athleteID, needsReauth, err := s.store.ConnectionStatus(ctx, userID)
	if errors.Is(err, model.ErrNotFound) || (err == nil && needsReauth) {
		return outcomeNoConnection, nil
	}
	if err != nil {
		return 0, err
	}
	job := ingest.SyncJob{UserID: userID, AthleteID: athleteID, Mode: syncstate.SyncModeReconcile, FromUtc: from, MilestoneEndUtc: end}
	ok, err := s.enqueue(ctx, keys.SyncJobKey(syncstate.SyncModeReconcile, userID, cycle), job, now)
	if err != nil {
		return 0, err
	}
	if ok {
		return outcomeEnqueued, nil
	}
	return outcomeAlready, nil
}

// reconcileStopMargin is how much of a run's deadline ReconcileStep leaves
// unused: it saves its cursor and stops before it.
const reconcileStopMargin = 10 * time.Second

// ReconcileStep is one run of the reconciliation scheduler (the sweeper
// Lambda's {"task":"reconcile"} schedule, every minute; the local stack's
// loop). A cycle walks the users index once per ReconcileInterval, at the
// pace of ceil(users × elapsed / interval): each run comes to the users
// whose slot has come since the last one (at most ReconcileBatch, and
// never past its deadline), page by page, saving the cursor
// (syncstate.ReconcileCursor) after each page, so a run that dies resumes from
// its last page and every user comes up once per interval (a page redone
// claims the same keys: at most one job per user per cycle). A cycle that
// ends early waits for the interval; one that lags catches up, a batch per
// run. Each user it comes to is checked as reconcileUser says; a failure
// on one user is logged and the run goes on (the error reports the first).
// A concurrent run that moved the cursor first wins; this one stops.
//
// Reconciliation scheduling (SyncScheduler.ReconcileStep; the sweeper
// Lambda invoked with {"task":"reconcile"} every minute by Terraform's
// reconcile rule, the local stack's loop every ReconcileTick). Each user
// has a slot once per CC_RECONCILE_INTERVAL (default 168 h): a cycle walks
// the sparse users index (ListUsers over keys.UserListShards, never a
// Scan) in user id order at the pace ceil(users × elapsed / interval),
// users counted once per cycle (CountUsers). A step comes only to the
// users whose slot came since the last step (at most
// DefaultReconcileBatch, stopping before its deadline) and saves the
// cursor (syncstate.ReconcileCursor, RECONCILE#STRAVA / CURSOR, version-checked)
// after every page: a step that dies resumes from its last saved page, a
// page redone claims the same keys (at most one job per user per cycle), a
// concurrent step that saved first wins. A cycle that ends early waits
// for the interval; one that lags catches up a batch per step. At its slot
// a user costs its checks, cheapest first, and nothing is written unless
// it is reconciled:
//
//   - no active milestone whose period overlaps [now − CC_RECONCILE_DAYS,
//     now] (one Query of the user's milestones): skipped; such athletes are
//     never reconciled (nothing a reconciliation changes counts);
//   - its sync job runs or waits (the sync state): skipped, it lists anyway;
//   - its last reconciliation (reconciledAtUtc) is CC_RECONCILE_IDLE
//     (default 672 h) old, or it never had one: reconciled (the slow
//     round-robin);
//   - else reconciled only when a stored workout of the window (one LSI1
//     Query) that is not a tombstone has an activity id above
//     reconciledActivityId: Strava's ids grow with uploads, so the athlete
//     uploaded since (no per-webhook write is needed to know it);
//   - then a usable connection (GetItem), and the job is claimed.
//
// Bound: an edit Strava never pushes, to an activity started within the
// last CC_RECONCILE_DAYS (14) days, of an athlete with an active milestone
// overlapping that window, is caught within CC_RECONCILE_INTERVAL (7 days)
// plus one rate window when the athlete uploaded anything in that time,
// otherwise within CC_RECONCILE_IDLE (28 days) while the activity is still
// inside the window (an edit to an activity that leaves the window first
// is not caught); athletes without an active milestone are not reconciled.
// When the sync share cannot cover every reconciliation due, the jobs wait
// in priority order (above) and the bound stretches by the wait, which
// SyncsWaiting and `make syncs` show. ReconcileAll is an operator's and the
// tools' full round: every connected user at once, without the cursor and
// without the milestone and upload checks, keyed per interval slot.
func (s *SyncScheduler) ReconcileStep(ctx context.Context) (ReconcileResult, error) {
	cfg := s.Settings.WithDefaults()
	now := s.Now()
	var res ReconcileResult
	cur, err := s.store.ReconcileCursor(ctx)
	if errors.Is(err, model.ErrNotFound) {
		cur, err = &syncstate.ReconcileCursor{Done: true}, nil
	}
	if err != nil {
		return res, fmt.Errorf("reconcile step: %w", err)
	}
	if cur.Done {
		if !cur.CycleStartedAtUtc.IsZero() && now.Before(cur.CycleStartedAtUtc.Add(cfg.ReconcileInterval)) {
			return res, nil
		}
		n, err := s.store.CountUsers(ctx)
		if err != nil {
			return res, fmt.Errorf("reconcile step: %w", err)
		}
		cur.CycleStartedAtUtc, cur.CycleUsers, cur.Visited, cur.Shard, cur.After, cur.Done = now, n, 0, 0, "", false
		if err := s.store.SaveReconcileCursor(ctx, cur); err != nil {
			return res, s.cursorLost(ctx, err)
		}
	}
	todo := ReconcilePace(cur.CycleUsers, now.Sub(cur.CycleStartedAtUtc), cfg.ReconcileInterval) - cur.Visited
	todo = min(todo, cfg.ReconcileBatch)
	var first error
	for todo > 0 && !cur.Done {
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < reconcileStopMargin {
			break
		}
		page, err := s.store.ListUsers(ctx, cur.Shard, cur.After, min(todo, 100))
		if err != nil {
			return res, fmt.Errorf("reconcile step: %w", err)
		}
		first = s.reconcilePage(ctx, cfg, page.UserIDs, now, cur.CycleStartedAtUtc, false, &res, first)
		cur.Visited += len(page.UserIDs)
		todo -= len(page.UserIDs)
		cur.After = page.Next
		if !page.More {
			cur.Shard, cur.After = cur.Shard+1, ""
			cur.Done = cur.Shard >= keys.UserListShards
		}
		if err := s.store.SaveReconcileCursor(ctx, cur); err != nil {
			return res, s.cursorLost(ctx, err)
		}
	}
	return res, first
}

// cursorLost ends a run whose cursor save failed: another run moved it
// (nil: that one carries on) or the write failed.
func (s *SyncScheduler) cursorLost(ctx context.Context, err error) error {
	if errors.Is(err, model.ErrConflict) {
		s.log.InfoContext(ctx, "reconciliation cursor moved by another run; this run stops")
		return nil
	}
	return fmt.Errorf("reconcile step: %w", err)
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

// ReconcileAll is an operator's (and the tools') full round: it comes to
// every user of the users index at once, without the cursor, the
// milestone and the upload checks, and enqueues a reconciliation for each
// one with a usable connection, keyed per ReconcileInterval slot (a round
// repeated in the same slot enqueues nothing more). The schedule runs
// ReconcileStep instead. A failure on one user is logged and the round
// goes on; the error reports the first one.
func (s *SyncScheduler) ReconcileAll(ctx context.Context) (ReconcileResult, error) {
	cfg := s.Settings.WithDefaults()
	now := s.Now()
	slot := now.Truncate(cfg.ReconcileInterval)
	var (
		res   ReconcileResult
		first error
	)
	err := s.eachUsersPage(ctx, func(users []string) {
		first = s.reconcilePage(ctx, cfg, users, now, slot, true, &res, first)
	})
	if err != nil {
		return res, fmt.Errorf("reconcile: %w", err)
	}
	return res, first
}

// eachUsersPage calls fn with every page of the users index, shard by
// shard (never a Scan).
func (s *SyncScheduler) eachUsersPage(ctx context.Context, fn func(users []string)) error {
	for shard := range keys.UserListShards {
		for after := ""; ; {
			page, err := s.store.ListUsers(ctx, shard, after, 0)
			if err != nil {
				return err
			}
			fn(page.UserIDs)
			if !page.More {
				break
			}
			after = page.Next
		}
	}
	return nil
}

// reconcilePage runs reconcileUser for each user of a users-index page,
// adding the outcomes to res; a user that fails is logged and counted, and
// the first such error is returned (first, when it is already set).
func (s *SyncScheduler) reconcilePage(ctx context.Context, cfg SyncSettings, users []string, now, cycle time.Time, force bool, res *ReconcileResult, first error) error {
	for _, userID := range users {
		o, err := s.reconcileUser(ctx, cfg, userID, now, cycle, force)
		if err != nil {
			s.log.WarnContext(ctx, "reconciliation not enqueued", "userId", userID, "error", err)
			if first == nil {
				first = fmt.Errorf("reconcile user %s: %w", userID, err)
			}
			res.Users++
			continue
		}
		res.add(o)
	}
	return first
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
func (s *SyncScheduler) enqueue(ctx context.Context, key string, sj ingest.SyncJob, now time.Time) (bool, error) {
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
	if _, err := s.store.ClaimOutboxItem(ctx, key, corr, string(payload), now, lease, ingest.IdempotencyTTL); err != nil {
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
