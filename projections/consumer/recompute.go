package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/retry"
	"github.com/commitcollect/backend/projections"
)

// RecomputeUser re-projects every milestone of userID from the workout log,
// exactly as the stream path does. With dryRun it writes nothing and
// returns the per-milestone differences between stored and recomputed
// state; otherwise it writes them (version-checked, awards minted in a
// transaction, audited), retrying version conflicts. It returns an error
// wrapping model.ErrConflict when conflicts persist past MaxAttempts,
// model.ErrUnsupportedSchema when the log holds a workout written by newer
// code, and the store's errors otherwise.
//
// # The 3000-workout guardrail
//
// One recompute reads at most model.MaxWorkoutsToInspect (3000) workouts,
// and only those started inside the user's milestone periods (a milestone
// without an end reads to today), from LSI1 newest first, strongly
// consistent (see package store). So a new activity always counts, and
// whatever the guardrail leaves out is older than everything it keeps. A
// milestone whose period reaches back past that cut gets truncated = true and
// exactFromUtc (its value counts the workouts started from then on); the
// consumer logs a warning, writes PROJECTION_TRUNCATED and emits
// MilestonesTruncated, which Terraform alarms on. Example: an athlete with
// 8000 workouts gets exact monthly and yearly totals; a lifetime milestone
// counts the newest 3000 and is marked truncated.
//
// # Optimistic version
//
// Each milestone carries version. The write is conditioned on the version
// that was read and sets version + 1 (store.WriteProjection). On ErrConflict
// (another recompute got there first) or ErrRetryable (transaction conflict,
// throttling) the consumer re-reads and recomputes the whole user, up to 8
// attempts with full-jitter backoff (20 ms … 1 s), then reports the user's
// records failed.
func (c *Consumer) RecomputeUser(ctx context.Context, userID string, dryRun bool) (projections.UserReport, error) {
	return c.recompute(ctx, userID, "", nil, projections.Touched{All: true}, dryRun)
}

// recompute re-projects the user; written are the activity ids of the
// webhook workout writes that triggered it (removed again when the user's
// guard holds, see once), t the days and weeks the triggers concern.
func (c *Consumer) recompute(ctx context.Context, userID, correlationID string, written []int64, t projections.Touched, dryRun bool) (projections.UserReport, error) {
	log := c.o.Logger.With("userId", userID)
	var lastErr error
	for attempt := 0; attempt < c.o.MaxAttempts; attempt++ {
		if attempt > 0 {
			c.stats.conflicts.Add(1)
			d := retry.Backoff(attempt-1, c.o.BackoffBase, c.o.BackoffMax)
			log.InfoContext(ctx, "conflict, re-reading", "attempt", attempt, "backoff", d.String(), "error", lastErr)
			if err := retry.Sleep(ctx, d); err != nil {
				return projections.UserReport{UserID: userID, Attempts: attempt}, fmt.Errorf("project user %s: %w", userID, err)
			}
		}
		rep, err := c.once(ctx, userID, correlationID, written, t, dryRun)
		if errors.Is(err, errWholePeriods) && !t.WholePeriods {
			// Not a conflict: the same round, reading whole periods.
			log.InfoContext(ctx, "reading whole periods", "reason", err)
			t.WholePeriods = true
			rep, err = c.once(ctx, userID, correlationID, written, t, dryRun)
		}
		rep.Attempts = attempt + 1
		if err == nil {
			c.stats.users.Add(1)
			return rep, nil
		}
		if !errors.Is(err, model.ErrConflict) && !errors.Is(err, model.ErrRetryable) {
			return rep, fmt.Errorf("project user %s: %w", userID, err)
		}
		lastErr = err
	}
	return projections.UserReport{UserID: userID, Attempts: c.o.MaxAttempts},
		fmt.Errorf("project user %s: gave up after %d attempts: %w", userID, c.o.MaxAttempts, lastErr)
}

// removeGuarded removes the webhook workout writes of a user whose guard
// holds (an account deletion, or a confirmed deauthorization no reconnect
// cleared): the write-then-check of the user guard (model/store/guard.go),
// made here because the read of the milestones already read the guard and
// the stream hands over every write after it landed.
func (c *Consumer) removeGuarded(ctx context.Context, g *model.UserGuard, written []int64, correlationID string) error {
	ks := make([]model.Key, len(written))
	for i, id := range written {
		ks[i] = keys.WorkoutKey(g.UserID, id)
	}
	n, err := c.st.Guard.RemoveGuarded(ctx, g, ks)
	if err != nil {
		return fmt.Errorf("remove workouts written for guarded user %s: %w", g.UserID, err)
	}
	c.o.Logger.InfoContext(ctx, "workouts written after the user's deletion or deauthorization removed", "userId", g.UserID,
		"removed", n, "deleted", g.Deleted(), "correlationId", correlationID)
	return nil
}

// once is one read-compute-write round. Milestones are read before the log:
// a concurrent projection that wrote after our milestone read makes our
// write conflict, and one that wrote before it read a log no newer than
// ours, so the last successful write always reflects every workout written
// before it (no lost progress).
func (c *Consumer) once(ctx context.Context, userID, correlationID string, written []int64, t projections.Touched, dryRun bool) (projections.UserReport, error) {
	rep := projections.UserReport{UserID: userID}
	um, err := c.st.Milestones.UserMilestones(ctx, userID)
	if err != nil {
		return rep, err
	}
	if g := um.Guard; g != nil && (g.Deleted() || g.Revoked()) && len(written) > 0 && !dryRun {
		if err := c.removeGuarded(ctx, g, written, correlationID); err != nil {
			return rep, err
		}
	}
	for _, u := range um.Unreadable {
		rep.Unreadable = append(rep.Unreadable, fmt.Sprintf("%s: %v", u.Key, u.Err))
		c.o.Logger.WarnContext(ctx, "milestone item left alone: unreadable", "userId", userID, "key", u.Key.String(), "error", u.Err)
	}
	if len(um.Milestones) == 0 {
		return rep, nil // nothing to project: skip reading the log
	}
	// Only workouts inside a milestone's period can count: read just those
	// (the union of the periods, newest first, up to the guardrail). Every
	// projected milestone contributes its period, completed ones included:
	// their value still follows the log (awards never go back).
	now := c.o.Now()
	var windows []model.Window
	for i := range um.Milestones {
		if m := &um.Milestones[i]; m.Recurrence == "" && m.ValidateProjectable() == nil {
			windows = append(windows, t.Windows(m)...)
		}
	}
	// A series is projected period by period, only those the triggers
	// touch (series.go).
	periods, periodWindows, err := seriesPeriods(ctx, c.st.Series, userID, um.Milestones, t, now)
	if err != nil {
		return rep, err
	}
	windows = append(windows, periodWindows...)
	wl, err := c.st.Log.WorkoutLog(ctx, userID, windows)
	if err != nil {
		return rep, err
	}
	if wl.Truncated && t.LogWeeks() != nil {
		// Weeks cut by the guardrail are not whole: read whole periods.
		return rep, errWholePeriods
	}
	rep.Workouts, rep.Truncated, rep.ExactFrom = len(wl.Workouts), wl.Truncated, wl.ExactFrom
	if c.o.BeforeWrite != nil && !dryRun {
		c.o.BeforeWrite(ctx, userID)
	}
	lg := projections.Log{Workouts: wl.Workouts, Truncated: wl.Truncated, ExactFrom: wl.ExactFrom, ReadWeeks: t.LogWeeks(), ReadDays: t.LogDays()}
	parts := map[string]map[int]model.ModelPart{}
	for i := range um.Milestones {
		if um.Milestones[i].Recurrence != "" {
			continue // its periods follow
		}
		tg := target{m: &um.Milestones[i], existing: um.Awards[um.Milestones[i].MilestoneID]}
		mr, err := c.milestone(ctx, tg, lg, now, correlationID, dryRun, parts)
		rep.Milestones = append(rep.Milestones, mr)
		if err != nil {
			return rep, err
		}
	}
	for i := range periods {
		mr, err := c.milestone(ctx, periods[i], lg, now, correlationID, dryRun, parts)
		rep.Milestones = append(rep.Milestones, mr)
		if err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// milestone re-projects one milestone (or series period) from the log
// and, unless dryRun or nothing changed (and the write moves no series
// item), mints its newly earned awards and writes it: project, mint,
// write, report.
func (c *Consumer) milestone(ctx context.Context, tg target, lg projections.Log,
	now time.Time, correlationID string, dryRun bool, partCache map[string]map[int]model.ModelPart) (projections.MilestoneReport, error) {
	m, existing := tg.m, tg.existing
	log := c.o.Logger.With("userId", m.UserID, "milestoneId", m.MilestoneID)
	mr, res, held, err := c.project(ctx, log, m, existing, lg, now, correlationID)
	if err == nil && res.ReachedInSums(mr.Minted) {
		return mr, errWholePeriods
	}
	if err == nil && !dryRun {
		err = c.collect(ctx, existing)
	}
	if err != nil || mr.Skipped != "" || dryRun || (!res.Changed && len(mr.Minted) == 0 && !tg.moving) {
		return mr, err
	}
	if m.PeriodOf != "" && m.Current == nil && m.Version == 0 {
		// A period's own item written for the first time, before its
		// audits are keyed: a period another projector started first
		// lends m its createdAtUtc.
		if err := c.st.Series.StartPeriod(ctx, m); err != nil {
			return mr, err
		}
	}
	awards, audits, err := c.minter.mint(ctx, log, m, res, held, mr.Minted, now, correlationID, partCache)
	if err != nil {
		return mr, err
	}
	if err := c.write(ctx, log, tg, res, awards, audits, &mr); err != nil {
		return mr, err
	}
	log.InfoContext(ctx, "milestone projected", "version", mr.Version, "progressValue", res.Projection.ProgressValue,
		"awardedParts", res.Projection.AwardedParts, "status", res.Projection.Status, "minted", mr.Minted, "correlationId", correlationID)
	c.recorder.projection(ctx, m, res, mr.Version, len(lg.Workouts), len(awards), now, correlationID)
	return mr, nil
}

// collect files the milestone's awards minted before the collection
// existed: once per award, on the first recompute that reads it.
func (c *Consumer) collect(ctx context.Context, existing map[int]model.Award) error {
	var legacy []model.Award
	for _, a := range existing {
		if !a.Collected {
			legacy = append(legacy, a)
		}
	}
	if len(legacy) == 0 {
		return nil
	}
	slices.SortFunc(legacy, func(a, b model.Award) int { return a.PartIndex - b.PartIndex })
	return c.st.Collection.CollectAwards(ctx, legacy)
}

// project computes the milestone's projection from the log, reading its
// award audits only when a claim is unjustified or a part is to be minted,
// and reports what it found. A definition that cannot be projected is
// reported Skipped, not failed.
func (c *Consumer) project(ctx context.Context, log *slog.Logger, m *model.Milestone, existing map[int]model.Award, lg projections.Log,
	now time.Time, correlationID string) (projections.MilestoneReport, projections.Result, projections.Held, error) {
	mr := projections.MilestoneReport{MilestoneID: m.MilestoneID, Stored: m.Projection, Recomputed: m.Projection, Version: m.Version}
	held := projections.Held{Minted: make(map[int]time.Time, len(existing))}
	for i, a := range existing {
		held.Minted[i] = a.AwardedAtUtc
	}
	res, err := projections.ProjectWith(m.MilestoneDefinition, m.Projection, held, lg, now)
	if err != nil {
		mr.Skipped = err.Error()
		log.WarnContext(ctx, "milestone not projected: invalid definition", "error", err)
		return mr, res, held, nil
	}
	// The AWARD_MINTED entries matter only for a claim the log does not
	// justify, or for a part about to be minted (its entry exists already
	// when only its award item was lost): read them then, not on every
	// recompute.
	if len(res.Unjustified) > 0 || len(unminted(res.Projection.AwardedParts, m.PartCount, existing)) > 0 {
		if held.Audited, err = c.st.Milestones.AwardAudits(ctx, m.UserID, keys.AwardOwnerID(m.MilestoneID, m.PeriodOf), m.CreatedAtUtc); err != nil {
			return mr, res, held, err
		}
		if res, err = projections.ProjectWith(m.MilestoneDefinition, m.Projection, held, lg, now); err != nil {
			return mr, res, held, err
		}
	}
	if found, err := c.recorder.legacyAudits(ctx, m, res.Unjustified, held); err != nil {
		return mr, res, held, err
	} else if found {
		if res, err = projections.ProjectWith(m.MilestoneDefinition, m.Projection, held, lg, now); err != nil {
			return mr, res, held, err
		}
	}
	mr.Recomputed, mr.Changed, mr.NewParts = res.Projection, res.Changed, res.NewParts
	mr.Unjustified, mr.Justified, mr.Earned = res.Unjustified, res.Projection.AwardedParts, res.Earned
	if p := res.Projection; p.Truncated {
		log.WarnContext(ctx, "milestone truncated by the guardrail: older workouts of its period were not read",
			"exactFromUtc", projections.FormatInstant(p.ExactFromUtc), "periodFromUtc", m.Window().From.Format(time.RFC3339),
			"workoutsInspected", len(lg.Workouts), "limit", model.MaxWorkoutsToInspect, "correlationId", correlationID)
	}
	for i := 0; i < min(m.AwardedParts, res.Projection.AwardedParts); i++ {
		if _, ok := existing[i]; !ok {
			mr.MissingAwards = append(mr.MissingAwards, i)
		}
	}
	mr.Minted = unminted(res.Projection.AwardedParts, m.PartCount, existing)
	if len(res.Unjustified) > 0 {
		log.WarnContext(ctx, "stored awards not justified by the log or an audited award: not minted, not counted",
			"storedAwardedParts", m.AwardedParts, "justified", res.Projection.AwardedParts, "earned", res.Earned,
			"unjustifiedParts", res.Unjustified, "correlationId", correlationID)
	}
	return mr, res, held, nil
}

// unminted lists the parts below awarded (and partCount) without an award
// item, ascending: what a write must mint.
func unminted(awarded, partCount int, existing map[int]model.Award) []int {
	var out []int
	for i := 0; i < min(awarded, partCount); i++ {
		if _, ok := existing[i]; !ok {
			out = append(out, i)
		}
	}
	return out
}

// errWholePeriods asks for the round again with every period read whole:
// the weeks read were cut by the guardrail, or a part to be minted was
// reached in a week taken from stored sums (its workout is not known).
var errWholePeriods = errors.New("read the periods whole")
