// Package bff is the backend-for-frontend the api Lambda serves: Strava
// login with a server-side session cookie, the model catalog, logout, the
// export and account deletion here; milestones (handlers/bff/milestones)
// and the collection of awards (handlers/bff/collection) in rooms of their
// own, mounted behind the same session check. It is a library:
// handlers/app wires it (config → clients → New → Register on the same
// *http.ServeMux that carries the webhook routes).
//
// Every /v1/* route needs a valid session (cookie cc_session backed by the
// sessions table) and answers 401 JSON without one. Errors are JSON
// {"error":{"code","message"}}. The routes and their shapes are in
// openapi.yaml, which a test compares with what Register puts on the mux;
// design notes open auth.go, account.go, exportroute.go and cors.go.
package bff

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/commitcollect/backend/handlers/bff/collection"
	"github.com/commitcollect/backend/handlers/bff/deletion"
	"github.com/commitcollect/backend/handlers/bff/export"
	"github.com/commitcollect/backend/handlers/bff/link"
	"github.com/commitcollect/backend/handlers/bff/milestones"
	"github.com/commitcollect/backend/handlers/bff/timeline"
	"github.com/commitcollect/backend/handlers/bff/workouts"
	"github.com/commitcollect/backend/model/catalog"
)

// Stores are the BFF's ports to its tables, one per resource, each
// declared in the file that uses it. handlers/app hands the DynamoDB adapter
// to every one of them.
type Stores struct {
	Sessions    SessionStore            // auth.go: login states and sessions
	Profiles    ProfileStore            // account.go: the profile
	Connections ConnectionStore         // account.go, handlers/bff/link: the Strava connection
	Athletes    link.AthleteStore       // handlers/bff/link: who owns an athlete, a new user
	Guards      link.GuardStore         // handlers/bff/link: the user guard
	Revoked     link.RevokedAthletes    // handlers/bff/link: what a revocation or a deletion left
	Audits      link.Auditor            // handlers/bff/link: the audit trail
	Milestones  milestones.Store        // handlers/bff/milestones
	Periods     milestones.PeriodReader // handlers/bff/milestones: a series' periods, a page at a time
	Removals    milestones.Deleter      // handlers/bff/milestones: a milestone deleted, its awards kept
	Collection  collection.Store        // handlers/bff/collection
	Deletions   deletion.Stores         // account.go: account deletion's steps
	Syncs       SyncStateStore          // syncstatus.go
	Exports     ExportStore             // exportroute.go: the athlete's data, streamed
	PeriodLog   workouts.Log            // handlers/bff/workouts: a period's workouts, paged
	Zones       milestones.Zones        // handlers/bff/milestones: where the athlete is (a streak's today, a pace)
}

func (s Stores) missing() []string {
	var out []string
	for name, ok := range map[string]bool{"Sessions": s.Sessions != nil, "Profiles": s.Profiles != nil, "Connections": s.Connections != nil,
		"Athletes": s.Athletes != nil, "Guards": s.Guards != nil, "Revoked": s.Revoked != nil, "Audits": s.Audits != nil,
		"Milestones": s.Milestones != nil, "Periods": s.Periods != nil, "Removals": s.Removals != nil, "Collection": s.Collection != nil, "Deletions": s.Deletions.Guard != nil, "Syncs": s.Syncs != nil, "Exports": s.Exports != nil,
		"PeriodLog": s.PeriodLog != nil, "Zones": s.Zones != nil} {
		if !ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Strava is what the BFF needs from Strava's OAuth endpoints. strava.OAuthClient
// implements it with golang.org/x/oauth2.
type Strava interface {
	// AuthCodeURL is Strava's authorize URL carrying state.
	AuthCodeURL(state string) string
	// Exchange trades an authorization code for a token whose extra fields
	// carry the athlete summary.
	Exchange(ctx context.Context, code string) (*oauth2.Token, error)
	// Refresh trades a refresh token for a new token. It returns an error
	// matching model.ErrUnauthorized when Strava refuses the refresh token
	// (access already revoked).
	Refresh(ctx context.Context, refreshToken string) (*oauth2.Token, error)
	// Deauthorize revokes the application's access for the athlete owning
	// accessToken. It returns an error matching model.ErrUnauthorized when
	// the token is no longer valid (access already revoked) and one matching
	// model.ErrRetryable for a transient failure.
	Deauthorize(ctx context.Context, accessToken string) error
}

// Cookie names.
const (
	SessionCookie = "cc_session"
	StateCookie   = "cc_oauth_state"
)

// Defaults for Config.
const (
	DefaultSessionTTL = 14 * 24 * time.Hour
	DefaultStateTTL   = 10 * time.Minute
)

// Config holds the BFF's settings (from handlers/config in the api).
type Config struct {
	// PublicURL is where athletes reach the API (CC_PUBLIC_URL). Cookies are
	// Secure unless it is plain http on a loopback host; plain http anywhere
	// else is refused.
	PublicURL string
	// CORSOrigins lists the origins allowed to call /v1/* with credentials;
	// empty disables CORS.
	CORSOrigins []string
	// SessionTTL is how long a session lives (DefaultSessionTTL when 0).
	SessionTTL time.Duration
	// StateTTL is how long a login may take between the redirect to Strava and
	// the callback (DefaultStateTTL when 0).
	StateTTL time.Duration
}

// Deps are the BFF's collaborators.
type Deps struct {
	Stores  Stores
	Strava  Strava
	Catalog *catalog.Catalog
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Log receives JSON logs (slog.Default when nil).
	Log *slog.Logger
	// Sync, when set, starts a backfill on connect and on a milestone
	// reaching before the imported history.
	Sync SyncTrigger
}

// Handler serves the BFF routes. It is safe for concurrent use.
type Handler struct {
	cfg      Config
	sessions SessionStore
	links    *link.Linker
	profiles ProfileStore
	// connections read the user's Strava connection.
	connections ConnectionStore
	milestones  *milestones.Handler
	collection  *collection.Handler
	workouts    *workouts.Handler
	timeline    *timeline.Handler
	// readMilestones reads milestones for the export and the page, and
	// periods their series' periods.
	readMilestones milestones.Store
	periods        milestones.PeriodReader
	// readAwards reads the collection for the export.
	readAwards collection.Store
	zones      milestones.Zones
	periodLog  workouts.Log
	syncs      SyncStateStore
	exports    ExportStore
	// exportPageBytes bounds an export page's body (export.PageBytes).
	exportPageBytes int
	strava          Strava
	cat             *catalog.Catalog
	now             func() time.Time
	log             *slog.Logger
	secureCookie    bool
	origins         map[string]bool
	sync            SyncTrigger
	deleter         *deletion.Deleter
}

// New validates cfg and deps and returns a Handler. It returns an error
// naming every problem (a missing dependency, an unusable PublicURL).
func New(cfg Config, d Deps) (*Handler, error) {
	var errs []error
	if m := d.Stores.missing(); len(m) > 0 {
		errs = append(errs, fmt.Errorf("bff: Stores %s required", strings.Join(m, ", ")))
	}
	if d.Strava == nil {
		errs = append(errs, errors.New("bff: Strava is required"))
	}
	if d.Catalog == nil {
		errs = append(errs, errors.New("bff: Catalog is required"))
	}
	secure, err := cookieSecure(cfg.PublicURL)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.StateTTL <= 0 {
		cfg.StateTTL = DefaultStateTTL
	}
	h := &Handler{cfg: cfg, sessions: d.Stores.Sessions, profiles: d.Stores.Profiles, connections: d.Stores.Connections,
		readMilestones: d.Stores.Milestones, periods: d.Stores.Periods, readAwards: d.Stores.Collection, zones: d.Stores.Zones, periodLog: d.Stores.PeriodLog, syncs: d.Stores.Syncs, exports: d.Stores.Exports, strava: d.Strava, cat: d.Catalog, now: d.Now, log: d.Log,
		secureCookie: secure, origins: map[string]bool{}, sync: d.Sync, exportPageBytes: export.PageBytes}
	if h.now == nil {
		h.now = time.Now
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	for _, o := range cfg.CORSOrigins {
		h.origins[strings.TrimRight(o, "/")] = true
	}
	h.links = link.New(link.Stores{Athletes: d.Stores.Athletes, Connections: d.Stores.Connections, Guards: d.Stores.Guards,
		Revoked: d.Stores.Revoked, Audits: d.Stores.Audits, Profiles: d.Stores.Profiles}, h.log, h.now)
	h.milestones = milestones.New(d.Stores.Milestones, milestones.Deps{Deleter: d.Stores.Removals, Periods: d.Stores.Periods, Zones: d.Stores.Zones, Now: h.now,
		PublicURL: cfg.PublicURL, Backfill: h.ensureBackfill})
	h.collection = collection.New(d.Stores.Collection, d.Stores.Milestones, d.Catalog, cfg.PublicURL)
	h.workouts = workouts.New(d.Stores.Milestones, d.Stores.PeriodLog, d.Stores.Zones, h.now, cfg.PublicURL)
	h.timeline = timeline.New(d.Stores.Milestones, d.Stores.PeriodLog, d.Stores.Zones, h.now)
	h.deleter = deletion.New(d.Stores.Deletions, d.Strava, h.log)
	h.deleter.Now = h.now
	return h, nil
}

// cookieSecure decides the Secure flag from the public URL: false only for
// plain http on a loopback host (local development).
func cookieSecure(publicURL string) (bool, error) {
	u, err := url.Parse(publicURL)
	if publicURL == "" || err != nil || u.Host == "" {
		return false, fmt.Errorf("bff: PublicURL %q is not an absolute URL", publicURL)
	}
	switch u.Scheme {
	case "https":
		return true, nil
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
			return false, nil
		}
		return false, fmt.Errorf("bff: PublicURL %q is plain http on a non-loopback host: session cookies must be Secure", publicURL)
	}
	return false, fmt.Errorf("bff: PublicURL %q: scheme must be http or https", publicURL)
}

type route struct {
	pattern string
	handler func(h *Handler) http.HandlerFunc
}

// routes is the one table Register and Routes read.
var routes = []route{
	{"GET /auth/strava/login", func(h *Handler) http.HandlerFunc { return h.login }},
	{"GET /auth/strava/callback", func(h *Handler) http.HandlerFunc { return h.callback }},
	{"POST /auth/logout", func(h *Handler) http.HandlerFunc { return h.logout }},
	{"GET /v1/me", func(h *Handler) http.HandlerFunc { return h.authed(h.me) }},
	{"DELETE /v1/me", func(h *Handler) http.HandlerFunc { return h.authed(h.deleteMe) }},
	{"GET /v1/me/export", func(h *Handler) http.HandlerFunc { return h.authed(h.export) }},
	{"GET /v1/models", func(h *Handler) http.HandlerFunc { return h.authed(h.models) }},
	{"POST /v1/milestones", func(h *Handler) http.HandlerFunc { return h.authed(h.milestones.Create) }},
	{"GET /v1/milestones", func(h *Handler) http.HandlerFunc { return h.authed(h.milestones.List) }},
	{"GET /v1/milestones/{milestoneId}", func(h *Handler) http.HandlerFunc { return h.authed(h.milestones.Get) }},
	{"DELETE /v1/milestones/{milestoneId}", func(h *Handler) http.HandlerFunc { return h.authed(h.milestones.Delete) }},
	{"GET /v1/milestones/{milestoneId}/periods", func(h *Handler) http.HandlerFunc { return h.authed(h.milestones.Periods) }},
	{"GET /v1/milestones/{milestoneId}/workouts", func(h *Handler) http.HandlerFunc { return h.authed(h.workouts.Serve) }},
	{"GET /v1/milestones/{milestoneId}/timeline", func(h *Handler) http.HandlerFunc { return h.authed(h.timeline.Serve) }},
	{"GET /v1/awards", func(h *Handler) http.HandlerFunc { return h.authed(h.collection.Awards) }},
	{"GET /v1/collection", func(h *Handler) http.HandlerFunc { return h.authed(h.collection.Collection) }},
	{"OPTIONS /v1/{path...}", func(h *Handler) http.HandlerFunc { return h.preflight }},
}

// Routes returns the patterns Register adds to a mux, in registration order.
func Routes() []string {
	out := make([]string, len(routes))
	for i, r := range routes {
		out[i] = r.pattern
	}
	return out
}

// Register adds the BFF routes (Go 1.22 method patterns, see Routes) to mux.
// It panics, as http.ServeMux does, if a pattern conflicts with one already
// registered.
func (h *Handler) Register(mux *http.ServeMux) {
	for _, r := range routes {
		mux.Handle(r.pattern, h.withCORS(r.handler(h)))
	}
}
