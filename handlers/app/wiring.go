package app

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/commitcollect/backend/handlers/config"
	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/budget"
	"github.com/commitcollect/backend/handlers/ingest/deauth"
	"github.com/commitcollect/backend/handlers/ingest/fetch"
	"github.com/commitcollect/backend/handlers/ingest/handoff"
	"github.com/commitcollect/backend/handlers/ingest/runner"
	"github.com/commitcollect/backend/handlers/ingest/syncjobs"
	"github.com/commitcollect/backend/handlers/ingest/syncjobs/scheduler"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/grantcheck"
	"github.com/commitcollect/backend/model/store/limits"
	"github.com/commitcollect/backend/model/store/purge"
	"github.com/commitcollect/backend/model/strava"
)

// SyncSettingsFrom are the backfill and reconciliation settings of cfg
// (CC_SYNC_*, CC_RECONCILE_*): the one mapping the worker, the sweeper,
// `make syncs` and the local stack share.
func SyncSettingsFrom(cfg config.Config) syncjobs.SyncSettings {
	return syncjobs.SyncSettings{MaxDays: cfg.SyncMaxDays, BudgetShare: cfg.SyncBudgetShare, DayHeadStart: cfg.SyncDayHeadStart,
		ReconcileDays: cfg.ReconcileDays, ReconcileInterval: cfg.ReconcileInterval, ReconcileIdle: cfg.ReconcileIdle}
}

// The DynamoDB store implements every persistence port of ingestion and
// the refresher's; Strava's REST client and the refresher, the Strava ports.
var (
	_ deauth.GrantChecks      = grantcheck.Checks{}
	_ deauth.Budget           = (*budget.Reads)(nil)
	_ fetch.UnseenRechecks    = (*scheduler.Scheduler)(nil)
	_ fetch.TokenProvider     = (*strava.Refresher)(nil)
	_ fetch.TokenSource       = (*strava.Refresher)(nil)
	_ syncjobs.TokenProvider  = (*strava.Refresher)(nil)
	_ fetch.ActivityFetcher   = (*strava.Client)(nil)
	_ syncjobs.ActivityLister = (*strava.Client)(nil)
	_ handoff.LambdaInvoker   = (*lambda.Client)(nil)
	_ ingest.Dispatcher       = (*handoff.Queue)(nil)
	_ ingest.Dispatcher       = (*handoff.LambdaDispatcher)(nil)
	_ runner.Processor        = (*syncjobs.Syncer)(nil)
	_ runner.Processor        = (*fetch.Fetcher)(nil)
	_ runner.Handler          = (*fetch.Bursts)(nil)
	_ fetch.ActivityLister    = (*strava.Client)(nil)
)

// StravaSettings locate Strava (or the simulator) and the API application.
type StravaSettings struct {
	// AthleteReadsPerWindow caps Strava reads per athlete per 15 minutes
	// (CC_ATHLETE_READS_PER_WINDOW; 0: no cap).
	AthleteReadsPerWindow int
	// AthleteReadsPerDay caps Strava reads per athlete per UTC day
	// (CC_ATHLETE_READS_PER_DAY; 0: no cap).
	AthleteReadsPerDay int
	// RateWindow is Strava's short rate-limit window (CC_STRAVA_WINDOW; 0:
	// 15 minutes) and RetryBase the first backoff after a failure
	// (CC_RETRY_BASE; 0: runner.DefaultRetryBase).
	RateWindow, RetryBase time.Duration
	// BaseURL hangs /oauth/* and /api/v3/* (STRAVA_BASE_URL).
	BaseURL      string
	ClientID     string
	ClientSecret string
	// HTTPClient carries every Strava call (nil: strava.DefaultTimeout).
	HTTPClient *http.Client
	// Sync shapes backfill and reconciliation jobs (CC_SYNC_*,
	// CC_RECONCILE_*; defaults when zero).
	Sync syncjobs.SyncSettings
}

// Worker is the worker Lambda's service: the outbox runner (Run, Handle)
// over the fetcher, which takes event jobs, the bursts, which take burst
// jobs, and the syncer, which takes sync jobs (nil: they are refused as
// poison).
type Worker struct {
	Runner *runner.Runner
	Fetch  *fetch.Fetcher
	Bursts *fetch.Bursts
	Sync   *syncjobs.Syncer
}

// Run runs job and settles its outbox item (runner.Runner.Run): a local
// queue's ProcessFunc.
func (w *Worker) Run(ctx context.Context, job ingest.Job) error { return w.Runner.Run(ctx, job) }

// Handle is the worker Lambda's entry point (runner.Runner.Handle).
func (w *Worker) Handle(ctx context.Context, raw json.RawMessage) error {
	return w.Runner.Handle(ctx, raw)
}

// StravaTokens is what a worker asks of the refresher: tokens for its
// fetches, and a refresh made now for a deauthorization's confirmation
// (strava.Refresher).
type StravaTokens interface {
	fetch.TokenProvider
	Verify(ctx context.Context, userID string) (strava.Token, error)
}

// StravaReads is what a worker reads from Strava: activities, and the
// token's athlete for a deauthorization's confirmation (strava.Client).
type StravaReads interface {
	fetch.ActivityFetcher
	GetAthlete(ctx context.Context, accessToken string) (strava.Athlete, strava.RateLimit, error)
}

// NewWorker wires a Worker without a syncer over st, tokens and fetcher.
func NewWorker(st *store.Adapters, tokens StravaTokens, fetcher StravaReads, log *slog.Logger) *Worker {
	lim := limits.New(st)
	fs := fetch.Stores{Athletes: st.Users, Workouts: st.Workouts, Connections: st.Connections, Audits: st.Audits}
	w := &Worker{Fetch: fetch.NewFetcher(fs, budget.NewReads(lim, lim, log), tokens, fetcher, log)}
	w.Fetch.Deauth = deauth.New(deauth.Stores{Connections: st.Connections, Guards: st.Guard, Purger: purge.New(st), Checks: grantcheck.New(st),
		Audits: st.Audits}, deauth.Strava{Tokens: tokens, Athletes: fetcher}, w.Fetch.Reads)
	w.Bursts = fetch.NewBursts(w.Fetch, nil)
	w.Runner = runner.NewRunner(runner.Stores{Outbox: st.Outbox, Parked: st.Parked, Athletes: st.Users, Audits: st.Audits, Bursts: st.Outbox},
		w.kinds(), log)
	return w
}

// kinds is the worker's table of job kinds: the one place a kind of work
// is registered, a line each (a kind's handler lives in its own package).
func (w *Worker) kinds() runner.Kinds {
	return runner.Kinds{
		ingest.JobEvent: runner.One(w.Fetch),
		ingest.JobBurst: w.Bursts,
		ingest.JobSync:  runner.One(syncs{w}),
	}
}

// syncs runs a sync job with the worker's syncer at the time; without one,
// sync jobs are poison.
type syncs struct{ w *Worker }

func (s syncs) Process(ctx context.Context, job ingest.Job) error {
	if s.w.Sync == nil {
		return fmt.Errorf("process %s: sync job but no syncer configured: %w", job.CorrelationID, model.ErrInvalid)
	}
	return s.w.Sync.Process(ctx, job)
}

// Process does job's work with its kind's handler, without settling its
// outbox item (runner.Runner.Process).
func (w *Worker) Process(ctx context.Context, job ingest.Job) error {
	return w.Runner.Process(ctx, job)
}

// NewStravaWorker wires a Worker over the store: a Strava REST client, an
// oauth2 token refresher that persists rotated tokens in st, and a syncer
// that shares the fetcher's rate-limit cache. It is what the worker Lambda
// and the local stack run.
func NewStravaWorker(st *store.Adapters, s StravaSettings, log *slog.Logger) *Worker {
	client := strava.NewClient(s.BaseURL, s.HTTPClient)
	refresher := strava.NewRefresher(strava.OAuthConfig(s.BaseURL, s.ClientID, s.ClientSecret, ""), st.Connections, client.HTTPClient())
	w := NewWorker(st, refresher, client, log)
	w.Fetch.Reads.PerWindow, w.Fetch.Reads.PerDay = s.AthleteReadsPerWindow, s.AthleteReadsPerDay
	w.Bursts.Lister, w.Fetch.Gather = client, true // bursts of creates are served from list pages
	if s.RateWindow > 0 {
		w.Fetch.Reads.RateWindow = s.RateWindow
	}
	if s.RetryBase > 0 {
		w.Runner.RetryBase = s.RetryBase
	}
	// A burst's recheck of what it settled unseen waits its hour in the
	// outbox; the sweeper hands it off then.
	w.Bursts.Rechecks = scheduler.New(SchedulerStores(st), nil, log)
	w.Sync = syncjobs.NewSyncer(SyncerStores(st), refresher, client, log)
	w.Sync.Settings, w.Sync.RateWindow, w.Sync.MaxFailures = s.Sync, w.Fetch.Reads.Window(), w.Runner.MaxFailures
	w.Sync.Rate = w.Fetch.Reads.Cache // one rate-limit cache per instance
	return w
}
