package syncjobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/budget"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/counting"
	"github.com/commitcollect/backend/model/strava"
	"github.com/commitcollect/backend/model/syncstate"
)

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
		switch err := s.store.Guard.CheckWrites(ctx, sj.UserID, res.keys); {
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
	st, err = s.store.States.UpdateSyncState(ctx, sj.UserID, func(cur *syncstate.SyncState) error { return decide(cur, job, now) })
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
			if rerr := s.store.Pacing.RecordRateLimit(ctx, rst); rerr != nil {
				log.WarnContext(ctx, "rate limit not recorded", "error", rerr)
			}
		}
	}
	switch {
	case refused:
		n := s.Now()
		until, why := budget.AfterRefusal(rl, n, s.rateWindow())
		return nil, false, s.deferJob(ctx, log, job, &ingest.DeferError{Until: s.afterReset(until, job, n), Reason: "strava 429: " + why})
	case errors.Is(err, model.ErrUnauthorized):
		if merr := s.store.Connections.MarkNeedsReauth(ctx, sj.UserID, s.Now()); merr != nil && !errors.Is(merr, model.ErrNotFound) {
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
	_, err = s.store.States.UpdateSyncState(ctx, job.Sync.UserID, func(cur *syncstate.SyncState) error {
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
	lg, err := s.store.Workouts.WorkoutLog(ctx, sj.UserID, []model.Window{{From: lo, To: &to}})
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
		if old, ok := stored[w.ActivityID]; ok && !old.IsDeleted && !counting.Differs(old, w) {
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
		err := s.store.Workouts.UpsertWorkout(ctx, w)
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
