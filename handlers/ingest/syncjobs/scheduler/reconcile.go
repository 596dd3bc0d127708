package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/syncjobs"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/syncstate"
)

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

// reconcileUser comes to one user at now: checks (cheapest first, nothing
// written) that a reconciliation can change something that counts, and
// enqueues it under the cycle's key. force skips the milestone and upload
// checks (ReconcileAll).
func (s *Scheduler) reconcileUser(ctx context.Context, cfg syncjobs.SyncSettings, userID string, now, cycle time.Time, force bool) (reconcileOutcome, error) {
	from := now.AddDate(0, 0, -cfg.ReconcileDays)
	ms, err := s.store.Milestones.UserMilestones(ctx, userID)
	if err != nil {
		return 0, err
	}
	active, end := syncstate.ActiveMilestoneEnd(ms.Milestones, from, now)
	if !force {
		if !active {
			return outcomeNoMilestone, nil
		}
		st, err := s.store.States.SyncState(ctx, userID)
		if errors.Is(err, model.ErrNotFound) {
			st, err = nil, nil
		}
		if err != nil {
			return 0, err
		}
		var window []model.Workout
		if st != nil && !st.Running() && !syncstate.IdleReconcileDue(st, now, cfg.ReconcileIdle, cfg.ReconcileInterval) {
			lg, err := s.store.Log.WorkoutLog(ctx, userID, []model.Window{{From: from}})
			if err != nil {
				return 0, err
			}
			window = lg.Workouts
		}
		if !syncstate.ReconcileDue(st, window, now, cfg.ReconcileIdle, cfg.ReconcileInterval) {
			if st != nil && st.Running() {
				return outcomeRunning, nil
			}
			return outcomeNoUpload, nil
		}
	}
	athleteID, needsReauth, err := s.store.Connections.ConnectionStatus(ctx, userID)
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
// Reconciliation scheduling (Scheduler.ReconcileStep; the sweeper
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
//   - its last reconciliation (reconciledAtUtc) would be CC_RECONCILE_IDLE
//     (default 672 h) old by its next slot, or it never had one:
//     reconciled (the slow round-robin, at the last slot before idle);
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
func (s *Scheduler) ReconcileStep(ctx context.Context) (ReconcileResult, error) {
	cfg := s.Settings.WithDefaults()
	now := s.Now()
	var res ReconcileResult
	cur, err := s.store.Cursor.ReconcileCursor(ctx)
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
		n, err := s.store.Users.CountUsers(ctx)
		if err != nil {
			return res, fmt.Errorf("reconcile step: %w", err)
		}
		cur.CycleStartedAtUtc, cur.CycleUsers, cur.Visited, cur.Shard, cur.After, cur.Done = now, n, 0, 0, "", false
		if err := s.store.Cursor.SaveReconcileCursor(ctx, cur); err != nil {
			return res, s.cursorLost(ctx, err)
		}
	}
	todo := syncstate.ReconcilePace(cur.CycleUsers, now.Sub(cur.CycleStartedAtUtc), cfg.ReconcileInterval) - cur.Visited
	todo = min(todo, cfg.ReconcileBatch)
	var first error
	for todo > 0 && !cur.Done {
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < reconcileStopMargin {
			break
		}
		page, err := s.store.Users.ListUsers(ctx, cur.Shard, cur.After, min(todo, 100))
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
		if err := s.store.Cursor.SaveReconcileCursor(ctx, cur); err != nil {
			return res, s.cursorLost(ctx, err)
		}
	}
	return res, first
}

// cursorLost ends a run whose cursor save failed: another run moved it
// (nil: that one carries on) or the write failed.
func (s *Scheduler) cursorLost(ctx context.Context, err error) error {
	if errors.Is(err, model.ErrConflict) {
		s.log.InfoContext(ctx, "reconciliation cursor moved by another run; this run stops")
		return nil
	}
	return fmt.Errorf("reconcile step: %w", err)
}

// ReconcileAll is an operator's (and the tools') full round: it comes to
// every user of the users index at once, without the cursor, the
// milestone and the upload checks, and enqueues a reconciliation for each
// one with a usable connection, keyed per ReconcileInterval slot (a round
// repeated in the same slot enqueues nothing more). The schedule runs
// ReconcileStep instead. A failure on one user is logged and the round
// goes on; the error reports the first one.
func (s *Scheduler) ReconcileAll(ctx context.Context) (ReconcileResult, error) {
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
func (s *Scheduler) eachUsersPage(ctx context.Context, fn func(users []string)) error {
	for shard := range keys.UserListShards {
		for after := ""; ; {
			page, err := s.store.Users.ListUsers(ctx, shard, after, 0)
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
func (s *Scheduler) reconcilePage(ctx context.Context, cfg syncjobs.SyncSettings, users []string, now, cycle time.Time, force bool, res *ReconcileResult, first error) error {
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
