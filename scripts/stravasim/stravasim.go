// Package stravasim is a Strava simulator: a real HTTP server speaking the
// parts of Strava that CommitCollect uses, for tests and the local stack.
//
// Endpoints (all relative to Server.URL, which plays STRAVA_BASE_URL):
//
//	GET  /oauth/authorize         redirects to redirect_uri with code, state and the granted scope
//	                              (or error=access_denied); see SetAuthorization
//	POST /oauth/token             authorization_code and refresh_token grants; refresh tokens
//	                              rotate (the old one stops working); client credentials in the form
//	POST /oauth/deauthorize       revokes every token of the athlete
//	GET  /api/v3/athlete          the token's athlete (Bearer auth; 401 once revoked or expired),
//	                              with the rate-limit headers and budget; scripted failures
//	                              (EndpointAthlete)
//	GET  /api/v3/activities/{id}  Bearer auth, Strava's JSON field names and error bodies,
//	                              X-RateLimit-* and X-ReadRateLimit-* headers
//	GET  /api/v3/athlete/activities  the token's athlete's activities (summary), before/after
//	                              (epoch seconds, exclusive), page (1-based), per_page (default 30,
//	                              400 beyond 200); newest first unless only after is given; the
//	                              same headers, budget, 429 and scripted failures (EndpointList)
//	POST /api/v3/push_subscriptions  registers the webhook callback after the
//	                              hub.challenge handshake (GET lists it, DELETE /{id} removes it)
//
// Tests drive it through its exported methods: AddAthlete, PutActivity,
// DeleteActivity, SetPrivate, IssueTokens, FailNext (scripted 401/404/429/500 answers),
// SetUsage, and Deliver / Publish / VerifyCallback to act as Strava's webhook
// sender.
// Stats counts what happened so tests can assert on it (refreshes, fetches,
// deliveries …). It imports nothing from CommitCollect, so every package can
// use it.
package stravasim

import (
	"cmp"
	"errors"
	"fmt"
	"github.com/commitcollect/backend/scripts/stravasim/webhook"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"
	_ "time/tzdata" // the zones of simulated activities, on machines without zoneinfo
)

// Defaults of Options.
const (
	DefaultClientID     = "1234"
	DefaultClientSecret = "sim-secret"
	DefaultTokenTTL     = 6 * time.Hour
	// Strava's per-application limits (overall and read).
	DefaultShortLimit     = 200
	DefaultDailyLimit     = 2000
	DefaultReadShortLimit = 100
	DefaultReadDailyLimit = 1000
)

// Options configures a simulator; zero values take the defaults.
type Options struct {
	ClientID     string
	ClientSecret string
	// TokenTTL is how long issued access tokens live.
	TokenTTL time.Duration
	// Now is the simulator's clock (token expiry, rate-limit windows).
	Now func() time.Time
	// Limits are the rate limits reported and enforced; zero fields take
	// Strava's defaults.
	Limits Limits
	// Window is the length of the short rate-limit window, aligned on
	// the clock like Strava's quarter hours (default 15 minutes; tests
	// shorten it together with the pipeline's CC_STRAVA_WINDOW).
	Window time.Duration
	// SubscriptionID is put into webhook events sent by Deliver helpers.
	SubscriptionID int64
	// DeliveryAttempts bounds how often an event is sent when the callback
	// does not answer 200 (Strava: 3). DeliveryBackoff is the pause between
	// attempts (default 50 ms; Strava waits longer).
	DeliveryAttempts int
	DeliveryBackoff  time.Duration
}

// Limits are 15-minute and daily request budgets.
type Limits struct {
	Short, Daily         int
	ReadShort, ReadDaily int
}

// Athlete is a simulated Strava athlete.
type Athlete struct {
	ID        int64  `json:"id"`
	Firstname string `json:"firstname"`
	Lastname  string `json:"lastname"`
}

// Activity is a simulated activity, served with Strava's field names.
type Activity struct {
	ID                 int64     `json:"id"`
	AthleteID          int64     `json:"-"`
	Name               string    `json:"name"`
	SportType          string    `json:"sport_type"`
	Distance           float64   `json:"distance"`
	TotalElevationGain float64   `json:"total_elevation_gain"`
	MovingTime         int64     `json:"moving_time"`
	ElapsedTime        int64     `json:"elapsed_time"`
	StartDate          time.Time `json:"start_date"`
	Private            bool      `json:"private"`
	// Manual, Trainer and Commute are Strava's marks: entered by hand,
	// recorded on an indoor trainer, flagged as a commute.
	Manual  bool `json:"manual"`
	Trainer bool `json:"trainer"`
	Commute bool `json:"commute"`
	// Zone is the IANA zone where the activity was recorded (empty: UTC):
	// start_date_local is the wall clock there (with Strava's misleading
	// "Z") and timezone names it as Strava does, with the offset of that
	// instant, so daylight saving shows.
	Zone string `json:"zone,omitempty"`
}

// local is Strava's start_date_local and timezone of a.
func (a Activity) local() (string, string) {
	loc, err := time.LoadLocation(a.Zone)
	if a.Zone == "" || err != nil {
		return a.StartDate.UTC().Format(time.RFC3339), "(GMT+00:00) Etc/UTC"
	}
	t := a.StartDate.In(loc)
	return t.Format("2006-01-02T15:04:05") + "Z", "(GMT" + t.Format("-07:00") + ") " + a.Zone
}

// Tokens is what the token endpoint (or IssueTokens) hands out.
type Tokens struct {
	AccessToken  string
	RefreshToken string
	ExpiresAt    time.Time
	Scope        []string
}

// Endpoint names a simulated endpoint for FailNext.
type Endpoint string

// The endpoints whose answers can be scripted.
const (
	EndpointActivity    Endpoint = "activity"
	EndpointList        Endpoint = "list"
	EndpointToken       Endpoint = "token"
	EndpointDeauthorize Endpoint = "deauthorize"
	EndpointAthlete     Endpoint = "athlete"
)

// Authorization decides what /oauth/authorize does.
type Authorization struct {
	// AthleteID is who logs in (default: the first athlete added).
	AthleteID int64
	// Scope is the granted scope, comma-separated as Strava sends it
	// (default: the requested scope).
	Scope string
	// Deny makes the athlete refuse: the redirect carries error=access_denied.
	Deny bool
}

// Stats counts what the simulator served.
type Stats struct {
	Authorizations    int64 // /oauth/authorize redirects (granted or denied)
	CodeExchanges     int64 // successful authorization_code grants
	TokenRefreshes    int64 // successful refresh_token grants
	RefusedTokens     int64 // token requests refused (bad client, code or refresh token)
	ActivityFetches   int64 // activity requests answered 200
	ActivityRequests  int64 // every activity request, whatever the answer
	Deauthorizations  int64 // successful /oauth/deauthorize calls
	ScriptedFailures  int64 // answers produced by FailNext or a Fault
	WebhookDeliveries int64 // webhook POST attempts made by Deliver
	ActivityInFlight  int64 // activity requests being answered now (a gauge)
	ListRequests      int64 // every list request, whatever the answer
	ListedActivities  int64 // activities served by list answers
	AthleteRequests   int64 // every GET /api/v3/athlete, whatever the answer
}

type tokenInfo struct {
	athlete int64
	expires time.Time
	scope   []string
}

type subscription struct {
	id       int64
	callback string
}

type failure struct {
	status int
	left   int
}

// Server is a running simulator. It is safe for concurrent use.
type Server struct {
	// URL is the base URL (plays STRAVA_BASE_URL).
	URL string

	opts   Options
	server *httptest.Server

	mu         sync.Mutex
	athletes   map[int64]Athlete
	order      []int64
	activities map[int64]Activity
	codes      map[string]tokenInfo
	access     map[string]tokenInfo
	refresh    map[string]tokenInfo
	fail       map[Endpoint][]failure
	authz      Authorization
	sub        subscription // the push subscription (Strava allows one per application)
	window     time.Time    // start of the current 15-minute window
	windowEnd  time.Time    // when set, the short windows reset then (SpendReadWindow)
	faults     []Fault      // scripted activity answers (AddFault)
	day        string
	usage      [4]int          // short, daily, readShort, readDaily
	issued     []string        // every access and refresh token handed out
	readsBy    map[int64]int64 // activity and list requests by the token's athlete

	stats struct {
		authorizations, codeExchanges, tokenRefreshes, refusedTokens, activityFetches,
		activityRequests, deauthorizations, scriptedFailures, webhookDeliveries, activityInFlight,
		listRequests, listedActivities, athleteRequests atomic.Int64
	}
}

// New starts a simulator on a free local port (httptest); Close stops it.
func New(opts Options) *Server {
	s := newServer(opts)
	s.server = httptest.NewServer(s.Handler())
	s.URL = s.server.URL
	return s
}

// Start runs a simulator on a fixed address (e.g. "127.0.0.1:8090"), as the
// local stack does. It returns an error when the address is taken.
func Start(addr string, opts Options) (*Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("stravasim listen %s: %w", addr, err)
	}
	s := newServer(opts)
	s.server = &httptest.Server{Listener: l, Config: &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}}
	s.server.Start()
	s.URL = s.server.URL
	return s, nil
}

func newServer(o Options) *Server {
	if o.ClientID == "" {
		o.ClientID = DefaultClientID
	}
	if o.ClientSecret == "" {
		o.ClientSecret = DefaultClientSecret
	}
	if o.TokenTTL == 0 {
		o.TokenTTL = DefaultTokenTTL
	}
	if o.Now == nil {
		o.Now = func() time.Time { return time.Now().UTC() }
	}
	l := &o.Limits
	l.Short, l.Daily = cmp.Or(l.Short, DefaultShortLimit), cmp.Or(l.Daily, DefaultDailyLimit)
	l.ReadShort, l.ReadDaily = cmp.Or(l.ReadShort, DefaultReadShortLimit), cmp.Or(l.ReadDaily, DefaultReadDailyLimit)
	if o.Window <= 0 {
		o.Window = 15 * time.Minute
	}
	if o.DeliveryAttempts == 0 {
		o.DeliveryAttempts = 3
	}
	if o.DeliveryBackoff == 0 {
		o.DeliveryBackoff = 50 * time.Millisecond
	}
	return &Server{
		opts: o, athletes: map[int64]Athlete{}, activities: map[int64]Activity{},
		codes: map[string]tokenInfo{}, access: map[string]tokenInfo{}, refresh: map[string]tokenInfo{},
		fail: map[Endpoint][]failure{},
	}
}

// Close stops the server.
func (s *Server) Close() { s.server.Close() }

// ClientID and ClientSecret are the credentials the simulator accepts.
func (s *Server) ClientID() string { return s.opts.ClientID }

// ClientSecret returns the accepted client secret.
func (s *Server) ClientSecret() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opts.ClientSecret
}

// RotateClientSecret makes Strava accept only secret from now on, as when an
// operator rotates the application's secret on Strava's settings page: a
// token request still carrying the old one is refused with Strava's
// Application fault (400) until the deployment has the new one.
func (s *Server) RotateClientSecret(secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.ClientSecret = secret
}

// appCredentials reports whether id and secret are the application's.
func (s *Server) appCredentials(id, secret string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return id == s.opts.ClientID && secret == s.opts.ClientSecret
}

// Handler returns the simulator's routes (for mounting elsewhere).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	o, a, p := oauthRoutes{s}, apiRoutes{s}, pushRoutes{s}
	mux.HandleFunc("GET /oauth/authorize", o.authorize)
	mux.HandleFunc("POST /oauth/token", o.token)
	mux.HandleFunc("POST /oauth/deauthorize", o.deauthorize)
	mux.HandleFunc("GET /api/v3/athlete", a.athlete)
	mux.HandleFunc("GET /api/v3/activities/{id}", a.activity)
	mux.HandleFunc("GET /api/v3/athlete/activities", a.list)
	mux.HandleFunc("POST /api/v3/push_subscriptions", p.createSubscription)
	mux.HandleFunc("GET /api/v3/push_subscriptions", p.listSubscriptions)
	mux.HandleFunc("DELETE /api/v3/push_subscriptions/{id}", p.deleteSubscription)
	controlRoutes{s}.register(mux)
	return mux
}

// AddAthlete registers an athlete (the first one is who /oauth/authorize logs
// in by default).
func (s *Server) AddAthlete(a Athlete) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.athletes[a.ID]; !ok {
		s.order = append(s.order, a.ID)
	}
	s.athletes[a.ID] = a
}

// PutActivity creates or replaces an activity.
func (s *Server) PutActivity(a Activity) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.activities[a.ID] = a
}

// UpdateActivity changes an existing activity in place; it returns false
// when the activity does not exist.
func (s *Server) UpdateActivity(id int64, change func(*Activity)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.activities[id]
	if ok {
		change(&a)
		s.activities[id] = a
	}
	return ok
}

// DeleteActivity removes an activity; later fetches answer 404.
func (s *Server) DeleteActivity(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.activities, id)
}

// SetPrivate makes an activity private (true) or public again (false); it
// returns false when the activity does not exist. A private activity is
// invisible to a grant without activity:read_all: its fetch answers 404
// (as for a deleted one) and lists leave it out.
func (s *Server) SetPrivate(id int64, private bool) bool {
	return s.UpdateActivity(id, func(a *Activity) { a.Private = private })
}

// --- OAuth -----------------------------------------------------------------

// --- API -------------------------------------------------------------------

// --- Webhooks --------------------------------------------------------------

// ErrNotDelivered means no attempt was answered 200.
var ErrNotDelivered = webhook.ErrNotDelivered

// ErrNoSubscription means Publish was called before a push subscription
// was registered.
var ErrNoSubscription = errors.New("stravasim: no push subscription")
