package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/commitcollect/backend/handlers/config"
	"github.com/commitcollect/backend/handlers/ingest/handoff"
	"github.com/commitcollect/backend/handlers/ingest/syncjobs/scheduler"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/metering"
	"github.com/commitcollect/backend/projections/consumer"
)

// The four Lambdas, each built from its environment here, so that a main
// reads: build, exit on error, start. test/terraform's IAM test builds them
// through the same functions.

// openLambda loads the configuration need asks for and opens its tables;
// the store's dropped audit writes are counted on stdout (EMF, alarmed).
func openLambda(ctx context.Context, need config.Need) (config.Config, *Conn, error) {
	cfg, err := config.Load(ctx, need)
	if err != nil {
		return config.Config{}, nil, err
	}
	conn, err := Open(ctx, cfg)
	if err != nil {
		return config.Config{}, nil, err
	}
	conn.Store.DB.AuditMetrics = os.Stdout
	return cfg, conn, nil
}

// APILambda builds the api Lambda's handler: NewAPI's routes, handing
// events to the worker Lambda, each request metered (Metered).
func APILambda(ctx context.Context) (http.Handler, error) {
	need := Need
	need.Worker = true
	cfg, conn, err := openLambda(ctx, need)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger()
	d := handoff.NewLambdaDispatcher(awslambda.NewFromConfig(conn.AWS), cfg.WorkerFunction)
	api, err := NewAPI(cfg, conn.Store, d, nil, log)
	if err != nil {
		return nil, err
	}
	return Metered(api, log), nil
}

// WorkerLambda builds the worker Lambda's service (WorkerOf), its metrics
// (StravaReads by class, AthleteReadsHeldBack, AthleteReadShare,
// SyncsWaiting) on stdout.
func WorkerLambda(ctx context.Context) (*Worker, error) {
	cfg, conn, err := openLambda(ctx, config.Need{Strava: true, Tokens: true})
	if err != nil {
		return nil, err
	}
	return WorkerOf(cfg, conn.Store, os.Stdout, cfg.Logger()), nil
}

// ProjectorLambda builds the stream-consumer Lambda's projector, its batch
// metrics on stdout.
func ProjectorLambda(ctx context.Context) (*consumer.Consumer, error) {
	cfg, conn, err := openLambda(ctx, config.Need{})
	if err != nil {
		return nil, err
	}
	return ProjectorOf(conn.Store, os.Stdout, cfg.Logger().With("service", "projector")), nil
}

// ProjectorOf builds the projector over st, one EMF line per batch to
// metrics: the one place the stream consumer is built, for the projector
// Lambda, the local stack and the rebuild command.
func ProjectorOf(st *store.Adapters, metrics io.Writer, log *slog.Logger) *consumer.Consumer {
	return consumer.New(ProjectorStores(st), consumer.Options{Logger: log, Metrics: metrics, Meter: BatchMeter})
}

// ProjectorStores hands the projector each DynamoDB adapter it uses, behind
// the consumer's ports.
func ProjectorStores(st *store.Adapters) consumer.Stores {
	ms := st.Milestones
	return consumer.Stores{Milestones: ms, Series: ms, Catalog: ms, Log: st.Workouts, Audits: st.Audits, Parked: st.Parked,
		Guard: st.Guard, Collection: st.Collection}
}

// BatchMeter counts a projector batch's DynamoDB calls with the store's
// meter (metering.StartMeter: a meter the caller's context carries, the
// local stack's, receives them too).
func BatchMeter(ctx context.Context) (context.Context, func() consumer.Cost) {
	ctx, m := metering.StartMeter(ctx)
	return ctx, func() consumer.Cost {
		s := m.Snapshot()
		return consumer.Cost{Requests: s.Requests, RCU: s.RCU, WCU: s.WCU, Log: s.Attr()}
	}
}

// SweeperLambda builds the sweeper Lambda's two scheduled tasks, both
// handing work to the worker Lambda.
func SweeperLambda(ctx context.Context) (*SweeperTasks, error) {
	cfg, conn, err := openLambda(ctx, config.Need{Worker: true})
	if err != nil {
		return nil, err
	}
	log := cfg.Logger()
	d := handoff.NewLambdaDispatcher(awslambda.NewFromConfig(conn.AWS), cfg.WorkerFunction)
	return &SweeperTasks{Sweeper: SweeperOf(cfg, conn.Store, d, log), Scheduler: SchedulerOf(cfg, conn.Store, d, log),
		Metrics: os.Stdout, Log: log}, nil
}

// TaskReconcile is the schedule input ({"task":"reconcile"}) that runs a
// reconciliation step instead of a sweep.
const TaskReconcile = "reconcile"

// DrainSpare is what a draining sweep leaves of the sweeper's timeout (60 s
// by default): the last sweep's dispatches and the metrics line.
const DrainSpare = 20 * time.Second

// SweeperTasks are the sweeper Lambda's scheduled tasks: once a minute a
// drain of the outbox (handoff.Sweeper.Drain), which re-dispatches the
// events whose hand-off was lost or whose deferral ended and sweeps again
// at once while due work is left, its figures as CloudWatch metrics (the
// backlog alarm); and, on {"task":"reconcile"}, one step of the
// reconciliation's resumable enumeration
// (scheduler.Scheduler.ReconcileStep).
type SweeperTasks struct {
	Sweeper   *handoff.Sweeper
	Scheduler *scheduler.Scheduler
	Metrics   io.Writer
	Log       *slog.Logger
}

// Handle runs the task in (a schedule's event).
func (t *SweeperTasks) Handle(ctx context.Context, in json.RawMessage) (any, error) {
	if IsReconcileTask(in) {
		res, err := t.Scheduler.ReconcileStep(ctx)
		t.Log.InfoContext(ctx, "reconciliation step", append(res.LogArgs(), "error", err)...)
		return res, err
	}
	res, sweeps, err := t.Sweeper.Drain(ctx, DrainSpare)
	t.Log.InfoContext(ctx, "sweeps", "sweeps", sweeps, "due", res.Due, "dispatched", res.Dispatched, "more", res.More)
	if merr := res.WriteEMF(t.Metrics, t.Sweeper.Now()); merr != nil {
		t.Log.WarnContext(ctx, "sweep metrics not written", "error", merr)
	}
	return res, err
}

// IsReconcileTask reports whether a sweeper invocation's input asks for a
// reconciliation step; anything else (the minutely schedule's event) is a
// sweep.
func IsReconcileTask(in json.RawMessage) bool {
	var task struct {
		Task string `json:"task"`
	}
	return json.Unmarshal(in, &task) == nil && task.Task == TaskReconcile
}

// Exit ends a Lambda's process when its build failed: the error as a JSON
// log line on stderr, exit status 1 (Lambda reports an init error). A nil
// err returns.
func Exit(err error) {
	if err == nil {
		return
	}
	slog.New(slog.NewJSONHandler(os.Stderr, nil)).Error("lambda init", "error", fmt.Errorf("build: %w", err))
	os.Exit(1)
}
