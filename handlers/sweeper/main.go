// Command sweeper is the commitcollect-sweeper Lambda, invoked once a minute
// by a schedule: it re-dispatches outbox items (accepted webhook events)
// whose hand-off was lost or whose deferral ended, by async-invoking the
// worker, sweeping again at once while a sweep leaves due work (Drain), and writes the sweep's figures as CloudWatch metrics (the backlog
// alarm). A second schedule invokes it with {"task":"reconcile"} every
// minute: one step of the reconciliation's resumable enumeration, which
// comes to each user once per CC_RECONCILE_INTERVAL and enqueues a
// reconciliation for those that can change something
// (handlers/ingest/syncjobs.SyncScheduler.ReconcileStep). Wiring only; the
// logic is handlers/ingest/handoff (the sweep) and handlers/ingest/syncjobs.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/handlers/config"
	"github.com/commitcollect/backend/handlers/ingest/handoff"
)

// TaskReconcile is the schedule input ({"task":"reconcile"}) that runs a
// reconciliation step instead of a sweep.
const TaskReconcile = "reconcile"

// drainSpare is what a draining invocation leaves of its timeout (60 s by
// default): the last sweep's dispatches and the metrics line.
const drainSpare = 20 * time.Second

func main() {
	cfg, err := config.Load(context.Background(), config.Need{Worker: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	log := cfg.Logger()
	awsCfg, err := cfg.AWS(context.Background())
	if err != nil {
		log.Error("aws config", "error", err)
		os.Exit(1)
	}
	db, _ := cfg.DynamoDB(awsCfg)
	st, err := cfg.Store(db, awsCfg)
	if err != nil {
		log.Error("store", "error", err)
		os.Exit(1)
	}
	st.AuditMetrics = os.Stdout // AuditWritesDropped (EMF), alarmed
	dispatcher := handoff.NewLambdaDispatcher(awslambda.NewFromConfig(awsCfg), cfg.WorkerFunction)
	sw := app.SweeperOf(cfg, st, dispatcher, log)
	sched := app.SchedulerOf(cfg, st, dispatcher, log)
	lambda.Start(func(ctx context.Context, in json.RawMessage) (any, error) {
		var task struct {
			Task string `json:"task"`
		}
		if json.Unmarshal(in, &task) == nil && task.Task == TaskReconcile {
			res, err := sched.ReconcileStep(ctx)
			log.InfoContext(ctx, "reconciliation step", append(res.LogArgs(), "error", err)...)
			return res, err
		}
		// A backlog past one sweep's limit drains within this invocation,
		// leaving its timeout a margin.
		res, sweeps, err := sw.Drain(ctx, drainSpare)
		log.InfoContext(ctx, "sweeps", "sweeps", sweeps, "due", res.Due, "dispatched", res.Dispatched, "more", res.More)
		if merr := res.WriteEMF(os.Stdout, sw.Now()); merr != nil {
			log.WarnContext(ctx, "sweep metrics not written", "error", merr)
		}
		return res, err
	})
}
