package app

import (
	"io"
	"log/slog"
	"net/http"

	"github.com/commitcollect/backend/handlers/config"
	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/handoff"
	"github.com/commitcollect/backend/handlers/ingest/syncjobs/scheduler"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/outbox"
)

// The services the Lambdas and the local stack (scripts/runkit) run, built
// from the configuration in this one place, so what runs locally is what
// runs in AWS.

// WorkerOf builds the worker from cfg: Strava at cfg's address with its
// rate caps, window, retry base, call timeout and sync settings, its
// CloudWatch EMF lines (StravaReads, AthleteReadsHeldBack,
// AthleteReadShare, SyncsWaiting) to metrics (nil: none).
func WorkerOf(cfg config.Config, st *store.Adapters, metrics io.Writer, log *slog.Logger) *Worker {
	var httpClient *http.Client
	if cfg.StravaTimeout > 0 {
		httpClient = &http.Client{Timeout: cfg.StravaTimeout}
	}
	w := NewStravaWorker(st, StravaSettings{
		BaseURL: cfg.StravaBaseURL, ClientID: cfg.StravaClientID, ClientSecret: cfg.StravaClientSecret, HTTPClient: httpClient,
		AthleteReadsPerWindow: cfg.AthleteReadsPerWindow, AthleteReadsPerDay: cfg.AthleteReadsPerDay,
		RateWindow: cfg.StravaWindow, RetryBase: cfg.RetryBase, Sync: SyncSettingsFrom(cfg),
	}, log)
	w.Runner.Metrics, w.Fetch.Reads.Metrics, w.Sync.Metrics = metrics, metrics, metrics
	return w
}

// SweeperOf builds the outbox sweeper over d with cfg's lease.
func SweeperOf(cfg config.Config, st *store.Adapters, d ingest.Dispatcher, log *slog.Logger) *handoff.Sweeper {
	sw := handoff.NewSweeper(SweeperStores(st), d, log)
	if cfg.OutboxLease > 0 {
		sw.Lease = cfg.OutboxLease
	}
	if cfg.SweepRead > 0 {
		sw.Read = cfg.SweepRead
	}
	return sw
}

// SweeperStores hands the sweeper each DynamoDB adapter it uses: the
// pending index, the outbox's leases and burst leases, and the set-aside.
func SweeperStores(st *store.Adapters) handoff.Stores {
	return handoff.Stores{Due: st.Pending, Outbox: st.Outbox, Bursts: st.Outbox, Asides: outbox.NewAsides(st.DB)}
}

// SchedulerOf builds the sync scheduler over d with cfg's sync settings and
// lease.
func SchedulerOf(cfg config.Config, st *store.Adapters, d ingest.Dispatcher, log *slog.Logger) *scheduler.Scheduler {
	sched := scheduler.New(SchedulerStores(st), d, log)
	sched.Settings = SyncSettingsFrom(cfg)
	if cfg.OutboxLease > 0 {
		sched.Lease = cfg.OutboxLease
	}
	return sched
}
