// Package app is where the services are wired: each Lambda from its
// environment (APILambda, WorkerLambda, ProjectorLambda, SweeperLambda, which
// the mains call), the tables through Open, and the services themselves
// (NewAPI, WorkerOf, ProjectorOf, SweeperOf, SchedulerOf), which the local
// stack (scripts/runkit) and the operator commands build the same way, so
// what runs locally is what runs in AWS.
package app

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/commitcollect/backend/handlers/bff"
	"github.com/commitcollect/backend/handlers/config"
	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/intake"
	"github.com/commitcollect/backend/model/catalog"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/outbox"
	"github.com/commitcollect/backend/model/strava"
)

// CallbackPath is where Strava sends the athlete back after login; the
// redirect URI is CC_PUBLIC_URL + CallbackPath.
const CallbackPath = "/auth/strava/callback"

// Need is what NewAPI requires from the configuration.
var Need = config.Need{Strava: true, Webhook: true, PublicURL: true, Tokens: true}

// API is the api's http.Handler: its routes, every answer carrying the
// headers of SecureHeaders.
type API struct {
	// Routes is the mux the routes are registered on (route checks).
	Routes *http.ServeMux
	secure http.Handler
}

// ServeHTTP serves r through the routes, with the security headers.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.secure.ServeHTTP(w, r) }

// NewAPI returns the api's handler: the webhook handing new events to d,
// and the BFF's routes, every answer with the headers a browser needs
// (SecureHeaders). httpClient carries calls to Strava (nil: the Strava
// client's default timeout). It returns an error naming every unusable
// setting.
func NewAPI(cfg config.Config, st *store.Adapters, d ingest.Dispatcher, httpClient *http.Client, log *slog.Logger) (*API, error) {
	cat, err := catalog.Default()
	if err != nil {
		return nil, fmt.Errorf("load model catalog: %w", err)
	}
	client := strava.NewClient(cfg.StravaBaseURL, httpClient)
	sched := SchedulerOf(cfg, st, d, log)
	h, err := bff.New(bff.Config{PublicURL: cfg.PublicURL, CORSOrigins: cfg.CORSOrigins}, bff.Deps{
		Stores: BFFStores(st),
		Strava: &strava.OAuthClient{
			Config:       strava.OAuthConfig(cfg.StravaBaseURL, cfg.StravaClientID, cfg.StravaClientSecret, cfg.PublicURL+CallbackPath),
			HTTPClient:   client.HTTPClient(),
			Deauthorizer: client,
		},
		Catalog: cat,
		Log:     log,
		Sync:    sched,
	})
	if err != nil {
		return nil, fmt.Errorf("build bff: %w", err)
	}
	mux := http.NewServeMux()
	intake.NewWebhook(intake.WebhookConfig{
		VerifyToken: cfg.StravaVerifyToken, SubscriptionID: cfg.StravaSubscriptionID, PathSecrets: cfg.WebhookPathSecrets, Lease: cfg.OutboxLease,
		Gather: true, RateWindow: cfg.StravaWindow,
	}, st.Outbox, outbox.NewDrops(st.DB), d, log).Mount(mux)
	h.Register(mux)
	h.RegisterPage(mux)
	return &API{Routes: mux, secure: SecureHeaders(mux, cfg.PublicURL)}, nil
}
