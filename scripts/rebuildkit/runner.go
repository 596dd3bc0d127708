package rebuildkit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store"
)

// UserLister enumerates users through the sparse users index (*store.Store
// implements it).
type UserLister interface {
	// ListUsers returns a page of one shard after a user-id cursor.
	ListUsers(ctx context.Context, shard int, after string, limit int) (model.UsersPage, error)
	// CountUsers counts every listed user (for progress and ETA).
	CountUsers(ctx context.Context) (int, error)
}

var _ UserLister = (*store.Store)(nil)

// Runner recomputes many users: concurrently, at a bounded rate, with
// progress, optionally resumable through a state file.
type Runner struct {
	// Recompute is the projector's recompute (required).
	Recompute Recompute
	// Users lists users for an --all target.
	Users UserLister
	// DryRun writes nothing and collects drift (verify).
	DryRun bool
	// Concurrency is how many users are recomputed at once (default 4).
	Concurrency int
	// Limiter paces recomputes (nil: unlimited).
	Limiter *rate.Limiter
	// StatePath makes the run resumable: completed users and shard cursors
	// are saved there and skipped by a re-run (empty: not resumable).
	StatePath string
	// SaveEvery bounds how often the state file is rewritten (default 1s;
	// it is always written when the run ends, cancelled or not).
	SaveEvery time.Duration
	// PageSize is the ListUsers page size (default 100).
	PageSize int
	// Progress reports progress (nil: silent).
	Progress *Progress
	// Logger receives per-user failures (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

type job struct {
	shard int
	user  string
}

type result struct {
	job
	out Outcome
	err error
}

// Run recomputes every user of target. Users that fail are counted in the
// summary (Errors, Failures) and recorded in the state file for the next run;
// Run itself returns an error only when it cannot go on: a target or state
// file problem, a users-index read failure, or ctx ending (then the summary
// holds what was done and the state file, if any, says where to resume).
func (r *Runner) Run(ctx context.Context, target Target) (Summary, error) {
	if err := target.Validate(); err != nil {
		return Summary{}, err
	}
	if r.Recompute == nil {
		return Summary{}, fmt.Errorf("run: no recompute: %w", model.ErrInvalid)
	}
	if target.All && r.Users == nil {
		return Summary{}, fmt.Errorf("run: --all needs a users index: %w", model.ErrInvalid)
	}
	conc := max(r.Concurrency, 1)
	if r.Concurrency == 0 {
		conc = 4
	}
	now := r.Now
	if now == nil {
		now = time.Now
	}
	log := r.Logger
	if log == nil {
		log = slog.Default()
	}
	st := &State{Target: target.Key(), Shards: map[int]ShardState{}, Failed: map[string]string{}}
	if r.StatePath != "" {
		var err error
		if st, err = LoadState(r.StatePath, target); err != nil {
			return Summary{}, err
		}
	}
	tr := newTracker(st)
	previously := st.Completed
	var sum Summary

	if r.Progress != nil {
		total, done := len(target.UserIDs), 0
		if target.All {
			n, err := r.Users.CountUsers(ctx)
			if err != nil {
				return Summary{}, fmt.Errorf("count users: %w", err)
			}
			total, done = n, st.Completed
		} else {
			for _, u := range target.UserIDs {
				if tr.isDone(u) {
					done++
				}
			}
		}
		r.Progress.Start(total, done)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan job)
	results := make(chan result)
	var listErr error
	var skipped int
	go func() {
		defer close(jobs)
		listErr = r.produce(ctx, target, tr, jobs, &skipped)
		if listErr != nil {
			cancel()
		}
	}()
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				res := result{job: j}
				if res.err = wait(ctx, r.Limiter); res.err == nil {
					res.out, res.err = r.Recompute(ctx, j.user, r.DryRun)
				}
				results <- res
			}
		}()
	}
	go func() { wg.Wait(); close(results) }()

	save := func() error {
		if r.StatePath == "" {
			return nil
		}
		return tr.snapshot().Save(r.StatePath, now())
	}
	saveEvery := r.SaveEvery
	if saveEvery == 0 {
		saveEvery = time.Second
	}
	lastSave := now()
	var saveErr error
	for res := range results {
		switch {
		case res.err == nil:
			if res.out.UserID == "" {
				res.out.UserID = res.user
			}
			sum.add(res.out, r.DryRun)
			tr.complete(res.shard, res.user)
		case ctx.Err() != nil:
			// Interrupted, not failed: the user stays pending and a re-run
			// processes it.
			continue
		default:
			sum.fail(res.user, res.err)
			tr.fail(res.shard, res.user, res.err)
			log.ErrorContext(ctx, "recompute failed", "userId", res.user, "error", res.err)
		}
		if r.Progress != nil {
			r.Progress.Update(sum.Users+sum.Errors, sum.Errors, sum.MilestonesChanged)
		}
		if t := now(); t.Sub(lastSave) >= saveEvery && saveErr == nil {
			lastSave = t
			if saveErr = save(); saveErr != nil {
				cancel() // without a state file the run would not be resumable
			}
		}
	}
	sum.Skipped = skipped
	if target.All {
		// The shard cursors skip earlier runs' users without listing them.
		sum.Skipped = previously
	}
	SortDrift(sum.Drift)
	if r.Progress != nil {
		r.Progress.Finish(sum)
	}
	if err := save(); err != nil {
		return sum, err
	}
	switch {
	case saveErr != nil:
		return sum, saveErr
	case listErr != nil && !errors.Is(listErr, context.Canceled):
		return sum, listErr
	}
	return sum, context.Cause(ctx)
}

// produce sends the users to process: first the users a previous run
// failed, then the list or the users index shard by shard.
func (r *Runner) produce(ctx context.Context, target Target, tr *tracker, jobs chan<- job, skipped *int) error {
	send := func(j job) error {
		select {
		case jobs <- j:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if !target.All {
		for _, u := range target.UserIDs {
			if tr.isDone(u) {
				*skipped++
				continue
			}
			if err := send(job{listShard, u}); err != nil {
				return err
			}
		}
		return nil
	}
	for _, u := range tr.previouslyFailed() {
		if err := send(job{listShard, u}); err != nil {
			return err
		}
	}
	pageSize := r.PageSize
	if pageSize <= 0 {
		pageSize = 100
	}
	for shard := range keys.UserListShards {
		ss := tr.shard(shard)
		if ss.Done {
			continue
		}
		after := ss.Cursor
		for {
			page, err := r.Users.ListUsers(ctx, shard, after, pageSize)
			if err != nil {
				return fmt.Errorf("list users: %w", err)
			}
			for _, u := range page.UserIDs {
				if !tr.list(shard, u) {
					*skipped++
					continue
				}
				if err := send(job{shard, u}); err != nil {
					return err
				}
			}
			if !page.More {
				break
			}
			after = page.Next
		}
		tr.listed(shard)
	}
	return nil
}
