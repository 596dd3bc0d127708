package ingest

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/commitcollect/backend/handlers/config"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/strava"
)

// SyncSettingsFrom are the backfill and reconciliation settings of cfg
// (CC_SYNC_*, CC_RECONCILE_*): the one mapping the worker, the sweeper,
// `make syncs` and the local stack share.
func SyncSettingsFrom(cfg config.Config) SyncSettings {
	return SyncSettings{MaxDays: cfg.SyncMaxDays, BudgetShare: cfg.SyncBudgetShare,
		ReconcileDays: cfg.ReconcileDays, ReconcileInterval: cfg.ReconcileInterval, ReconcileIdle: cfg.ReconcileIdle}
}

// The DynamoDB store implements every persistence interface of this package
// and the refresher's.
var (
	_ IdempotencyStore  = (*store.Store)(nil)
	_ WorkerStore       = (*store.Store)(nil)
	_ OutboxStore       = (*store.Store)(nil)
	_ strava.TokenStore = (*store.Store)(nil)
)

// StravaSettings locate Strava (or the simulator) and the API application.
type StravaSettings struct {
	// AthleteReadsPerWindow caps Strava reads per athlete per 15 minutes
	// (CC_ATHLETE_READS_PER_WINDOW; 0: no cap).
	AthleteReadsPerWindow int
	// RateWindow is Strava's short rate-limit window (CC_STRAVA_WINDOW; 0:
	// 15 minutes) and RetryBase the first backoff after a failure
	// (CC_RETRY_BASE; 0: DefaultRetryBase).
	RateWindow, RetryBase time.Duration
	// BaseURL hangs /oauth/* and /api/v3/* (STRAVA_BASE_URL).
	BaseURL      string
	ClientID     string
	ClientSecret string
	// HTTPClient carries every Strava call (nil: strava.DefaultTimeout).
	HTTPClient *http.Client
	// Sync shapes backfill and reconciliation jobs (CC_SYNC_*,
	// CC_RECONCILE_*; defaults when zero).
	Sync SyncSettings
}

// NewStravaWorker wires a Worker over the store: a Strava REST client and an
// oauth2 token refresher that persists rotated tokens in st. It is what the
// worker Lambda and the local stack run.
func NewStravaWorker(st *store.Store, s StravaSettings, log *slog.Logger) *Worker {
	client := strava.NewClient(s.BaseURL, s.HTTPClient)
	refresher := strava.NewRefresher(strava.OAuthConfig(s.BaseURL, s.ClientID, s.ClientSecret, ""), st, client.HTTPClient())
	w := NewWorker(st, refresher, client, log)
	w.AthleteReadsPerWindow = s.AthleteReadsPerWindow
	if s.RateWindow > 0 {
		w.RateWindow = s.RateWindow
	}
	if s.RetryBase > 0 {
		w.RetryBase = s.RetryBase
	}
	w.Sync = NewSyncer(st, refresher, client, log)
	w.Sync.Settings, w.Sync.RateWindow, w.Sync.MaxFailures = s.Sync, w.RateWindow, w.MaxFailures
	w.Sync.rate = &w.rate // one rate-limit cache per instance (cache.go)
	return w
}
