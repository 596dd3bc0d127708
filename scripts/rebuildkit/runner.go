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
	"github.com/commitcollect/backend/model/ports"
	"github.com/commitcollect/backend/model/store"
)

// UserLister enumerates users through the sparse users index (*store.Users
// implements it).
type UserLister interface {
	// ListUsers returns a page of one shard after a user-id cursor.
	ListUsers(ctx context.Context, shard int, after string, limit int) (ports.UsersPage, error)
	// CountUsers counts every listed user (for progress and ETA).
	CountUsers(ctx context.Context) (int, error)
}

var _ UserLister = (*store.Users)(nil)

// Reporter shows a run's progress (the commands draw a bar or print lines).
type Reporter interface {
	// Start is called once: total users, of which alreadyDone were done by
	// earlier runs.
	Start(total, alreadyDone int)
	// Update is called after each user.
	Update(processed, errors, changed int)
	// Finish is called once with the summary.
	Finish(sum Summary)
}

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
	Progress Reporter
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
	p, err := r.newPass(ctx, target)
	if err != nil {
		return Summary{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p.collect(ctx, cancel, p.start(ctx, cancel))
	p.sum.Skipped = p.skipped
	if target.All {
		// The shard cursors skip earlier runs' users without listing them.
		p.sum.Skipped = p.previously
	}
	SortDrift(p.sum.Drift)
	if r.Progress != nil {
		r.Progress.Finish(p.sum)
	}
	if err := p.save(); err != nil {
		return p.sum, err
	}
	switch {
	case p.saveErr != nil:
		return p.sum, p.saveErr
	case p.listErr != nil && !errors.Is(p.listErr, context.Canceled):
		return p.sum, p.listErr
	}
	return p.sum, context.Cause(ctx)
}

// pass is one Run: its target, its state and what it found.
type pass struct {
	r          *Runner
	target     Target
	tr         *tracker
	now        func() time.Time
	log        *slog.Logger
	previously int // users completed by earlier runs
	sum        Summary
	// listErr and skipped are the producer's, read once the results end.
	listErr error
	skipped int
	saveErr error
}

// newPass checks the target and the runner, loads the state file and
// starts the progress report.
func (r *Runner) newPass(ctx context.Context, target Target) (*pass, error) {
	if err := target.Validate(); err != nil {
		return nil, err
	}
	if r.Recompute == nil {
		return nil, fmt.Errorf("run: no recompute: %w", model.ErrInvalid)
	}
	if target.All && r.Users == nil {
		return nil, fmt.Errorf("run: --all needs a users index: %w", model.ErrInvalid)
	}
	p := &pass{r: r, target: target, now: r.Now, log: r.Logger}
	if p.now == nil {
		p.now = time.Now
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	st := &State{Target: target.Key(), Shards: map[int]ShardState{}, Failed: map[string]string{}}
	if r.StatePath != "" {
		var err error
		if st, err = LoadState(r.StatePath, target); err != nil {
			return nil, err
		}
	}
	p.tr, p.previously = newTracker(st), st.Completed
	if r.Progress == nil {
		return p, nil
	}
	total, done := len(target.UserIDs), 0
	if target.All {
		n, err := r.Users.CountUsers(ctx)
		if err != nil {
			return nil, fmt.Errorf("count users: %w", err)
		}
		total, done = n, st.Completed
	} else {
		for _, u := range target.UserIDs {
			if p.tr.isDone(u) {
				done++
			}
		}
	}
	r.Progress.Start(total, done)
	return p, nil
}

// start runs the producer and the workers; the results end when both are
// done.
func (p *pass) start(ctx context.Context, cancel context.CancelFunc) <-chan result {
	r := p.r
	conc := max(r.Concurrency, 1)
	if r.Concurrency == 0 {
		conc = 4
	}
	jobs := make(chan job)
	results := make(chan result)
	go func() {
		defer close(jobs)
		p.listErr = r.produce(ctx, p.target, p.tr, jobs, &p.skipped)
		if p.listErr != nil {
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
	return results
}

// save writes the state file, if the run has one.
func (p *pass) save() error {
	if p.r.StatePath == "" {
		return nil
	}
	return p.tr.snapshot().Save(p.r.StatePath, p.now())
}

// collect tallies the results, reports progress and saves the state at
// most every SaveEvery.
func (p *pass) collect(ctx context.Context, cancel context.CancelFunc, results <-chan result) {
	r := p.r
	saveEvery := r.SaveEvery
	if saveEvery == 0 {
		saveEvery = time.Second
	}
	lastSave := p.now()
	for res := range results {
		switch {
		case res.err == nil:
			if res.out.UserID == "" {
				res.out.UserID = res.user
			}
			p.sum.add(res.out, r.DryRun)
			p.tr.complete(res.shard, res.user)
		case ctx.Err() != nil:
			// Interrupted, not failed: the user stays pending and a re-run
			// processes it.
			continue
		default:
			p.sum.fail(res.user, res.err)
			p.tr.fail(res.shard, res.user, res.err)
			p.log.ErrorContext(ctx, "recompute failed", "userId", res.user, "error", res.err)
		}
		if r.Progress != nil {
			r.Progress.Update(p.sum.Users+p.sum.Errors, p.sum.Errors, p.sum.MilestonesChanged)
		}
		if t := p.now(); t.Sub(lastSave) >= saveEvery && p.saveErr == nil {
			lastSave = t
			if p.saveErr = p.save(); p.saveErr != nil {
				cancel() // without a state file the run would not be resumable
			}
		}
	}
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
