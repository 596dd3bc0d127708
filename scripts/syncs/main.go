// Command syncs lists the Strava syncs (backfill, reconciliation) that need
// an operator — failed, deferred (waiting for the Strava budget: who waits,
// why, the next attempt and the milestone end that orders them; the
// worker's SyncsWaiting metric counts them), or stuck (running but not
// updated for -stuck-after) — and restarts one with -restart <userId>: a restart takes
// over the user's unfinished job from its cursor (or ensures the backfill
// when nothing is unfinished) on the outbox, so the worker carries it on.
//
//	make syncs                                  # failed, deferred and stuck syncs
//	make syncs ARGS="-all"                      # every user's sync
//	make syncs ARGS="-restart <userId>"         # restart one (locally the sweeper dispatches it)
//	make syncs ARGS="-restart <userId> -worker-function commitcollect-prod-worker"   # in AWS
//	make syncs ARGS="-reconcile-since 2026-11-25T08:00:00Z"   # after an outage: re-list every connected athlete since then
//	make syncs ARGS="-readers 20"               # the 20 athletes with the most Strava reads today (UTC)
//
// Users are listed through the sparse users index (never a Scan), one
// strongly consistent read of the sync state each. Exit status: 0 when
// nothing needs attention (or the restart was enqueued), 1 when a listed
// sync is failed or stuck, 2 on an error. Wiring only; the logic is
// handlers/ingest/syncjobs/scheduler and model/store.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/handlers/config"
	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/handoff"
	"github.com/commitcollect/backend/handlers/ingest/syncjobs/scheduler"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/store/limits"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, out, errOut io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("syncs", flag.ContinueOnError)
	fs.SetOutput(errOut)
	prefix := fs.String("table-prefix", getenv("CC_TABLE_PREFIX"), "prefix of the table names (CC_TABLE_PREFIX)")
	all := fs.Bool("all", false, "list every user's sync, not only those needing attention")
	stuckAfter := fs.Duration("stuck-after", DefaultStuckAfter, "a running sync not updated for this long is stuck")
	restart := fs.String("restart", "", "restart this user's sync (resumes an unfinished job from its cursor)")
	since := fs.String("reconcile-since", "", "after an outage: enqueue for every connected user a reconciliation listing activities since this RFC 3339 instant")
	readers := fs.Int("readers", 0, "list the N athletes with the most Strava reads today (UTC), from their daily read counters")
	workerFn := fs.String("worker-function", getenv("CC_WORKER_FUNCTION"), "AWS: hand the restarted job to this worker Lambda (else the sweeper dispatches it)")
	fs.Usage = func() {
		fmt.Fprintln(errOut, "usage: syncs [-all] [-stuck-after 30m] [-restart userId | -reconcile-since RFC3339 [-worker-function name] | -readers N] [-table-prefix p]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	cfg, err := config.FromEnv(config.LocalStackEnv(getenv), config.Need{})
	if err != nil {
		fmt.Fprintln(errOut, "syncs:", err)
		return 2
	}
	cfg.TablePrefix = *prefix
	conn, err := app.Open(ctx, cfg)
	if err != nil {
		fmt.Fprintln(errOut, "syncs:", err)
		return 2
	}
	lim, awsCfg := limits.New(conn.Store), conn.AWS
	if *readers > 0 {
		return heaviestReaders(ctx, lim, *readers, cfg.AthleteReadsPerDay, out, errOut)
	}
	var d ingest.Dispatcher
	if *workerFn != "" {
		d = handoff.NewLambdaDispatcher(awslambda.NewFromConfig(awsCfg), *workerFn)
	}
	sched := scheduler.New(app.SchedulerStores(conn.Store), d, cfg.Logger())
	sched.Settings = app.SyncSettingsFrom(cfg)
	// A short lease: without a dispatcher the sweeper runs it at once.
	sched.Lease = time.Second
	if *since != "" {
		return reconcileSince(ctx, sched, *since, out, errOut)
	}
	if *restart != "" {
		if err := sched.Restart(ctx, *restart); err != nil {
			fmt.Fprintln(errOut, "syncs:", err)
			return 2
		}
		fmt.Fprintf(out, "restart of user %s's sync enqueued\n", *restart)
		return 0
	}
	rows, err := List(ctx, Lister{Users: conn.Store.Users, States: lim}, time.Now().UTC(), *stuckAfter, *all)
	if err != nil {
		fmt.Fprintln(errOut, "syncs:", err)
		return 2
	}
	Print(out, rows)
	for _, r := range rows {
		if r.Attention == AttentionFailed || r.Attention == AttentionStuck {
			return 1
		}
	}
	return 0
}

// reconcileSince enqueues the outage reconciliations and says what it did.
func reconcileSince(ctx context.Context, sched *scheduler.Scheduler, since string, out, errOut io.Writer) int {
	at, err := time.Parse(time.RFC3339, since)
	if err != nil {
		fmt.Fprintf(errOut, "syncs: -reconcile-since %q is not an RFC 3339 instant (e.g. 2026-11-25T08:00:00Z)\n", since)
		return 2
	}
	res, err := sched.ReconcileSince(ctx, at)
	fmt.Fprintf(out, "reconciliation since %s: %d users, %d enqueued, %d already enqueued, %d without a usable connection\n",
		at.UTC().Format(time.RFC3339), res.Users, res.Enqueued, res.Already, res.Skipped)
	if err != nil {
		fmt.Fprintln(errOut, "syncs:", err)
		return 2
	}
	fmt.Fprintln(out, "the worker (locally: the running stack's sweeper) works them off within the sync share; `make syncs` shows them")
	return 0
}

// ReadersStore lists the day's heaviest Strava readers (model/store).
type ReadersStore interface {
	HeaviestReaders(ctx context.Context, day time.Time, limit int) ([]ops.AthleteDayReads, error)
}

// heaviestReaders prints the n athletes with the most Strava reads today,
// against the daily allowance. Only athletes that read past a worker
// instance's own allowance have a counter; the rest read a few at most.
func heaviestReaders(ctx context.Context, st ReadersStore, n, allowance int, out, errOut io.Writer) int {
	today := time.Now().UTC()
	rows, err := st.HeaviestReaders(ctx, today, n)
	if err != nil {
		fmt.Fprintln(errOut, "syncs:", err)
		return 2
	}
	fmt.Fprintf(out, "heaviest Strava readers on %s (daily allowance %d per athlete):\n", today.Format(time.DateOnly), allowance)
	if len(rows) == 0 {
		fmt.Fprintln(out, "  none: no athlete read past a worker's own allowance today")
	}
	for _, r := range rows {
		fmt.Fprintf(out, "  athlete %-12d reads %4d  (%3d%% of the allowance)\n", r.AthleteID, r.Reads, r.Reads*100/max(allowance, 1))
	}
	return 0
}
