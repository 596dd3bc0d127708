package wire

import (
	"log/slog"

	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/handlers/config"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/scripts/rebuildkit"
)

// worker wires the ingestion worker in process (for redriving parked worker
// jobs locally) when the Strava application's credentials are configured;
// otherwise it returns nil and redrive says to use --invoke-worker.
func worker(cfg config.Config, st *store.Adapters, log *slog.Logger) rebuildkit.ProcessJob {
	if cfg.StravaClientID == "" || cfg.StravaClientSecret == "" {
		return nil
	}
	w := app.NewStravaWorker(st, app.StravaSettings{
		BaseURL: cfg.StravaBaseURL, ClientID: cfg.StravaClientID, ClientSecret: cfg.StravaClientSecret,
		AthleteReadsPerWindow: cfg.AthleteReadsPerWindow, AthleteReadsPerDay: cfg.AthleteReadsPerDay, RateWindow: cfg.StravaWindow, RetryBase: cfg.RetryBase,
	}, log)
	return w.Handle
}
