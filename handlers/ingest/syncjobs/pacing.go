package syncjobs

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/budget"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
)

// checkBudget defers when sync jobs may not read now: when they have spent
// their share of a Strava budget (they keep 1-BudgetShare of every budget
// free for webhooks), or when the paced share of the window so far is
// taken (pace). A deferral to a window's reset is due SyncResetDelay after
// it, ordered by the job's priority, so webhooks deferred to the reset run
// first. The shared reading comes from the instance's rate cache.
func (s *Syncer) checkBudget(ctx context.Context, cfg SyncSettings, now time.Time, job ingest.Job) error {
	st, err := s.Rate.Current(ctx, s.store.Pacing.RateLimitState, now)
	if err != nil {
		return fmt.Errorf("check strava budget: %w", err)
	}
	if st == nil {
		return nil
	}
	reserve := 1 - cfg.BudgetShare
	if why := budget.ExhaustedIn(st, now, reserve, s.rateWindow()); why != "" {
		until, _ := budget.NextResetIn(st, now, reserve, s.rateWindow())
		return &ingest.DeferError{Until: s.afterReset(until, job, now), Reason: fmt.Sprintf("sync share %.0f%% of the strava budget spent: %s", cfg.BudgetShare*100, why)}
	}
	return s.pace(ctx, cfg, st, now, job)
}

// pace takes one sync read of the paced allowance of the short window and
// of the day (SyncReads counters, one conditional write each; a read the
// day refuses stays counted in the short window, erring on less): sync
// jobs may have taken at most PacedAllowance reads by now, so their share
// spreads over the window instead of going at its start; a reconciliation
// on half of it (budget.SyncShareOf: first imports find the rest). A job
// refused waits for the instant its allowance grows past what is taken
// (spread by its priority), or for the next window.
func (s *Syncer) pace(ctx context.Context, cfg SyncSettings, st *ops.RateLimitState, now time.Time, job ingest.Job) error {
	short, share := s.rateWindow(), budget.SyncShareOf(cfg.BudgetShare, job.Sync.Reconciles())
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
			// The day's head start: one short window's worth, unless set.
			h = max(short, time.Duration(cfg.DayHeadStart*float64(b.window)))
		}
		allowed := budget.PacedAllowance(b.limit, share, now, b.window, h)
		shards := 1
		if b.window > short {
			// A day of sync reads at raised limits is not one
			// partition's: the daily count is split, each job starting
			// from its own shard.
			shards = keys.SyncReadsShardsFor(budget.ShareCap(b.limit, cfg.BudgetShare))
		}
		err := s.store.Pacing.TakeSyncRead(ctx, now, b.window, allowed, shards, pickOf(job, now))
		if errors.Is(err, model.ErrConflict) {
			until := budget.NextPacingSlot(b.limit, share, allowed, now, b.window, h)
			if until.Equal(now.UTC().Truncate(b.window).Add(b.window)) {
				until = s.afterReset(until, job, now)
			} else {
				until = until.Add(time.Duration(priorityOf(job, now) * float64(b.window) / float64(max(budget.ShareCap(b.limit, cfg.BudgetShare), 1))))
			}
			return &ingest.DeferError{Until: until, Reason: fmt.Sprintf("sync paced: %d of the %s read budget's sync share taken so far in the window", allowed, b.name)}
		}
		if err != nil {
			return fmt.Errorf("pace sync reads: %w", err)
		}
	}
	return nil
}

// pickOf spreads jobs over the daily counter's shards: a hash of the job
// and the instant, so one job's pages do not all land on one shard.
func pickOf(job ingest.Job, now time.Time) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(job.IdempotencyKey))
	_, _ = h.Write([]byte(strconv.FormatInt(now.UnixNano(), 10)))
	return h.Sum64()
}

// priorityOf places job among waiting sync jobs, in [0, 1]: 0 for a
// milestone ending now (or past), growing with the time left (a week left
// is 0.5), 1 without a milestone. Deferred jobs are due in its order.
func priorityOf(job ingest.Job, now time.Time) float64 {
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
func (s *Syncer) afterReset(reset time.Time, job ingest.Job, now time.Time) time.Time {
	w := float64(s.rateWindow())
	return reset.Add(time.Duration(w * SyncResetDelay * (1 + priorityOf(job, now))))
}

func (s *Syncer) rateWindow() time.Duration {
	if s.RateWindow > 0 {
		return s.RateWindow
	}
	return keys.AthleteReadsWindow
}
