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
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
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
	mux.HandleFunc("GET /oauth/authorize", s.authorize)
	mux.HandleFunc("POST /oauth/token", s.token)
	mux.HandleFunc("POST /oauth/deauthorize", s.deauthorize)
	mux.HandleFunc("GET /api/v3/athlete", s.athlete)
	mux.HandleFunc("GET /api/v3/activities/{id}", s.activity)
	mux.HandleFunc("GET /api/v3/athlete/activities", s.list)
	mux.HandleFunc("POST /api/v3/push_subscriptions", s.createSubscription)
	mux.HandleFunc("GET /api/v3/push_subscriptions", s.listSubscriptions)
	mux.HandleFunc("DELETE /api/v3/push_subscriptions/{id}", s.deleteSubscription)
	s.control(mux)
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

// SetAuthorization decides what later /oauth/authorize requests do.
func (s *Server) SetAuthorization(a Authorization) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.authz = a
}

// IssueTokens mints tokens for an athlete directly (as if the OAuth dance
// had happened), with the given lifetime (<= 0: Options.TokenTTL) and scopes
// (none: read and activity:read_all). A negative ttl issues an already
// expired access token.
func (s *Server) IssueTokens(athleteID int64, ttl time.Duration, scope ...string) Tokens {
	if len(scope) == 0 {
		scope = []string{"read", "activity:read_all"}
	}
	if ttl == 0 {
		ttl = s.opts.TokenTTL
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.issueLocked(athleteID, ttl, scope)
}

func (s *Server) issueLocked(athleteID int64, ttl time.Duration, scope []string) Tokens {
	exp := s.opts.Now().Add(ttl).Truncate(time.Second)
	t := Tokens{AccessToken: "sim-access-" + randHex(), RefreshToken: "sim-refresh-" + randHex(), ExpiresAt: exp, Scope: scope}
	s.access[t.AccessToken] = tokenInfo{athlete: athleteID, expires: exp, scope: scope}
	s.refresh[t.RefreshToken] = tokenInfo{athlete: athleteID, scope: scope}
	s.issued = append(s.issued, t.AccessToken, t.RefreshToken)
	return t
}

// IssuedTokens returns every access and refresh token the simulator has
// handed out, revoked or not (for tests that check none is stored).
func (s *Server) IssuedTokens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.issued...)
}

// RefreshTokenValid reports whether refresh would be accepted now.
func (s *Server) RefreshTokenValid(refresh string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.refresh[refresh]
	return ok
}

// AccessTokenValid reports whether access would be accepted now.
func (s *Server) AccessTokenValid(access string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ti, ok := s.access[access]
	return ok && s.opts.Now().Before(ti.expires)
}

// RevokeAthlete invalidates every token of the athlete (as if they
// disconnected the app on strava.com).
func (s *Server) RevokeAthlete(athleteID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revokeLocked(athleteID)
}

func (s *Server) revokeLocked(athleteID int64) {
	for k, v := range s.access {
		if v.athlete == athleteID {
			delete(s.access, k)
		}
	}
	for k, v := range s.refresh {
		if v.athlete == athleteID {
			delete(s.refresh, k)
		}
	}
}

// FailNext makes the next n requests to endpoint answer status (401, 404,
// 429, 500 …) with Strava's error body, before any other check.
func (s *Server) FailNext(endpoint Endpoint, status, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[endpoint] = append(s.fail[endpoint], failure{status: status, left: n})
}

// SetUsage sets the current window's usage counters (e.g. to bring the read
// budget close to its limit).
func (s *Server) SetUsage(short, daily, readShort, readDaily int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rollLocked()
	s.usage = [4]int{short, daily, readShort, readDaily}
}

// Stats returns the counters.
func (s *Server) Stats() Stats {
	return Stats{
		Authorizations: s.stats.authorizations.Load(), CodeExchanges: s.stats.codeExchanges.Load(),
		TokenRefreshes: s.stats.tokenRefreshes.Load(), RefusedTokens: s.stats.refusedTokens.Load(),
		ActivityFetches: s.stats.activityFetches.Load(), ActivityRequests: s.stats.activityRequests.Load(),
		Deauthorizations: s.stats.deauthorizations.Load(), ScriptedFailures: s.stats.scriptedFailures.Load(),
		WebhookDeliveries: s.stats.webhookDeliveries.Load(), ActivityInFlight: s.stats.activityInFlight.Load(),
		ListRequests: s.stats.listRequests.Load(), ListedActivities: s.stats.listedActivities.Load(),
		AthleteRequests: s.stats.athleteRequests.Load(),
	}
}

// takeFailure pops one scripted failure for endpoint (0 when none).
func (s *Server) takeFailure(e Endpoint) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.fail[e]
	for len(q) > 0 && q[0].left <= 0 {
		q = q[1:]
	}
	if len(q) == 0 {
		s.fail[e] = nil
		return 0
	}
	q[0].left--
	s.fail[e] = q
	s.stats.scriptedFailures.Add(1)
	return q[0].status
}

// --- OAuth -----------------------------------------------------------------

func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("client_id") != s.opts.ClientID {
		writeError(w, http.StatusBadRequest, "Bad Request", fault{"Application", "client_id", "invalid"})
		return
	}
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || redirect.Scheme == "" || redirect.Host == "" {
		writeError(w, http.StatusBadRequest, "Bad Request", fault{"Application", "redirect_uri", "invalid"})
		return
	}
	if q.Get("response_type") != "code" {
		writeError(w, http.StatusBadRequest, "Bad Request", fault{"Application", "response_type", "invalid"})
		return
	}
	s.stats.authorizations.Add(1)
	s.mu.Lock()
	az := s.authz
	athlete := az.AthleteID
	if athlete == 0 && len(s.order) > 0 {
		athlete = s.order[0]
	}
	back := redirect.Query()
	back.Set("state", q.Get("state"))
	if az.Deny || athlete == 0 {
		back.Set("error", "access_denied")
	} else {
		scope := az.Scope
		if scope == "" {
			scope = q.Get("scope")
		}
		code := "sim-code-" + randHex()
		s.codes[code] = tokenInfo{athlete: athlete, scope: splitScope(scope)}
		back.Set("code", code)
		back.Set("scope", scope)
	}
	s.mu.Unlock()
	redirect.RawQuery = back.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if st := s.takeFailure(EndpointToken); st != 0 {
		writeStatus(w, st)
		return
	}
	if err := r.ParseForm(); err != nil {
		writeError(w, http.StatusBadRequest, "Bad Request", fault{"Application", "body", "invalid"})
		return
	}
	refuse := func(status int, f fault) {
		s.stats.refusedTokens.Add(1)
		writeError(w, status, "Bad Request", f)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.PostForm.Get("client_id") != s.opts.ClientID || r.PostForm.Get("client_secret") != s.opts.ClientSecret {
		// Strava answers a wrong or rotated client id or secret with 400 and
		// a fault on the Application, whatever the grant.
		refuse(http.StatusBadRequest, fault{"Application", "client_id", "invalid"})
		return
	}
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		code := r.PostForm.Get("code")
		ti, ok := s.codes[code]
		if !ok {
			refuse(http.StatusBadRequest, fault{"AuthorizationCode", "code", "invalid"})
			return
		}
		delete(s.codes, code) // codes are single use
		t := s.issueLocked(ti.athlete, s.opts.TokenTTL, ti.scope)
		s.stats.codeExchanges.Add(1)
		writeJSON(w, http.StatusOK, map[string]any{
			"token_type": "Bearer", "access_token": t.AccessToken, "refresh_token": t.RefreshToken,
			"expires_at": t.ExpiresAt.Unix(), "expires_in": int64(s.opts.TokenTTL.Seconds()),
			"athlete": s.athletes[ti.athlete],
		})
	case "refresh_token":
		old := r.PostForm.Get("refresh_token")
		ti, ok := s.refresh[old]
		if !ok {
			refuse(http.StatusBadRequest, fault{"RefreshToken", "refresh_token", "invalid"})
			return
		}
		delete(s.refresh, old) // rotation: the old refresh token stops working
		t := s.issueLocked(ti.athlete, s.opts.TokenTTL, ti.scope)
		s.stats.tokenRefreshes.Add(1)
		// As in answers public clients recorded: expires_at (the instant on
		// Strava's clock) and no expires_in.
		writeJSON(w, http.StatusOK, map[string]any{
			"token_type": "Bearer", "access_token": t.AccessToken, "refresh_token": t.RefreshToken,
			"expires_at": t.ExpiresAt.Unix(),
		})
	default:
		refuse(http.StatusBadRequest, fault{"Application", "grant_type", "invalid"})
	}
}

func (s *Server) deauthorize(w http.ResponseWriter, r *http.Request) {
	if st := s.takeFailure(EndpointDeauthorize); st != 0 {
		writeStatus(w, st)
		return
	}
	_ = r.ParseForm()
	tok := r.PostForm.Get("access_token")
	if tok == "" {
		tok = bearer(r)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ti, ok := s.access[tok]
	if !ok || !s.opts.Now().Before(ti.expires) {
		writeError(w, http.StatusUnauthorized, "Authorization Error", fault{"Athlete", "access_token", "invalid"})
		return
	}
	s.revokeLocked(ti.athlete)
	s.stats.deauthorizations.Add(1)
	writeJSON(w, http.StatusOK, map[string]any{"access_token": tok})
}

// --- API -------------------------------------------------------------------

// athlete answers GET /api/v3/athlete: the token's athlete, 401 for a token
// that is unknown (revoked) or expired. It spends a read of the budget.
func (s *Server) athlete(w http.ResponseWriter, r *http.Request) {
	s.stats.athleteRequests.Add(1)
	if s.refuseRead(w, EndpointAthlete, 0) {
		return
	}
	s.mu.Lock()
	ti, ok := s.access[bearer(r)]
	valid := ok && s.opts.Now().Before(ti.expires)
	a, known := s.athletes[ti.athlete]
	s.mu.Unlock()
	if !valid {
		writeError(w, http.StatusUnauthorized, "Authorization Error", fault{"Athlete", "access_token", "invalid"})
		return
	}
	if !known {
		a = Athlete{ID: ti.athlete}
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": a.ID, "firstname": a.Firstname, "lastname": a.Lastname, "resource_state": 2})
}

// countReadOf counts a read request (an activity or a list) for the
// athlete whose token made it (ReadsOf).
func (s *Server) countReadOf(r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ti, ok := s.access[bearer(r)]; ok {
		if s.readsBy == nil {
			s.readsBy = map[int64]int64{}
		}
		s.readsBy[ti.athlete]++
	}
}

// ReadsOf counts the activity and list requests made with the athlete's
// tokens, whatever the answer: what one athlete's events cost the
// application's read budget.
func (s *Server) ReadsOf(athleteID int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.readsBy[athleteID]
}

func (s *Server) activity(w http.ResponseWriter, r *http.Request) {
	s.countReadOf(r)
	s.stats.activityRequests.Add(1)
	s.stats.activityInFlight.Add(1)
	defer s.stats.activityInFlight.Add(-1)
	id, idErr := strconv.ParseInt(r.PathValue("id"), 10, 64)
	f := s.takeFault(id)
	// The answer is decided now and written after the fault's delay.
	rec := httptest.NewRecorder()
	s.answerActivity(rec, r, id, idErr, f.Status)
	answerLater(w, r, rec, f.Delay, f.Gate)
}

// spendRead counts one read request against every budget, sets the
// rate-limit headers and reports whether a budget is exceeded (429).
func (s *Server) spendRead(h http.Header) (over bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rollLocked()
	for i := range s.usage {
		s.usage[i]++
	}
	s.setRateHeadersLocked(h)
	return s.usage[0] > s.opts.Limits.Short || s.usage[1] > s.opts.Limits.Daily ||
		s.usage[2] > s.opts.Limits.ReadShort || s.usage[3] > s.opts.Limits.ReadDaily
}

// refuseRead spends one read of the rate budget (its headers go on w) and
// answers the read with an error instead when a scripted failure, a fault
// or the spent budget says so; it reports whether it did.
func (s *Server) refuseRead(w http.ResponseWriter, e Endpoint, faultStatus int) bool {
	over := s.spendRead(w.Header())
	st := s.takeFailure(e)
	if st == 0 {
		st = faultStatus
	}
	if st == 0 && over {
		st = http.StatusTooManyRequests
	}
	if st != 0 {
		writeStatus(w, st)
	}
	return st != 0
}

func (s *Server) answerActivity(w http.ResponseWriter, r *http.Request, id int64, idErr error, faultStatus int) {
	if s.refuseRead(w, EndpointActivity, faultStatus) {
		return
	}
	if idErr != nil {
		writeStatus(w, http.StatusNotFound)
		return
	}
	s.mu.Lock()
	ti, ok := s.access[bearer(r)]
	valid := ok && s.opts.Now().Before(ti.expires)
	a, found := s.activities[id]
	s.mu.Unlock()
	switch {
	case !valid:
		writeStatus(w, http.StatusUnauthorized)
		return
	case !hasScope(ti.scope, "activity:read") && !hasScope(ti.scope, "activity:read_all"):
		writeError(w, http.StatusUnauthorized, "Authorization Error", fault{"AccessToken", "activity:read_permission", "missing"})
		return
	case !found || a.AthleteID != ti.athlete || (a.Private && !hasScope(ti.scope, "activity:read_all")):
		writeStatus(w, http.StatusNotFound)
		return
	}
	s.stats.activityFetches.Add(1)
	writeJSON(w, http.StatusOK, activityJSON(a))
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	s.countReadOf(r)
	s.stats.listRequests.Add(1)
	f := s.takeEndpointFault(EndpointList, 0)
	rec := httptest.NewRecorder()
	s.answerList(rec, r, f.Status)
	answerLater(w, r, rec, f.Delay, f.Gate)
}

func (s *Server) answerList(w http.ResponseWriter, r *http.Request, faultStatus int) {
	if s.refuseRead(w, EndpointList, faultStatus) {
		return
	}
	q := r.URL.Query()
	num := func(name string, def int64) (int64, bool) {
		v := q.Get(name)
		if v == "" {
			return def, true
		}
		n, err := strconv.ParseInt(v, 10, 64)
		return n, err == nil && n >= 0
	}
	before, ok1 := num("before", 0)
	after, ok2 := num("after", 0)
	page, ok3 := num("page", 1)
	perPage, ok4 := num("per_page", 30)
	switch {
	case !ok1 || !ok2:
		writeError(w, http.StatusBadRequest, "Bad Request", fault{"Activity", "before/after", "invalid"})
		return
	case !ok3 || page < 1:
		writeError(w, http.StatusBadRequest, "Bad Request", fault{"Activity", "page", "invalid"})
		return
	case !ok4 || perPage < 1 || perPage > 200:
		writeError(w, http.StatusBadRequest, "Bad Request", fault{"Activity", "per_page", "invalid"})
		return
	}
	s.mu.Lock()
	ti, ok := s.access[bearer(r)]
	valid := ok && s.opts.Now().Before(ti.expires)
	var out []Activity
	if valid {
		for _, a := range s.activities {
			start := a.StartDate.Unix()
			if a.AthleteID != ti.athlete || (a.Private && !hasScope(ti.scope, "activity:read_all")) ||
				(q.Get("before") != "" && start >= before) || (q.Get("after") != "" && start <= after) {
				continue
			}
			out = append(out, a)
		}
	}
	s.mu.Unlock()
	switch {
	case !valid:
		writeStatus(w, http.StatusUnauthorized)
		return
	case !hasScope(ti.scope, "activity:read") && !hasScope(ti.scope, "activity:read_all"):
		writeError(w, http.StatusUnauthorized, "Authorization Error", fault{"AccessToken", "activity:read_permission", "missing"})
		return
	}
	ascending := q.Get("after") != "" && q.Get("before") == ""
	slices.SortFunc(out, func(a, b Activity) int {
		c := a.StartDate.Compare(b.StartDate)
		if c == 0 {
			c = cmp.Compare(a.ID, b.ID)
		}
		if !ascending {
			c = -c
		}
		return c
	})
	lo := min(int64(len(out)), (page-1)*perPage)
	hi := min(int64(len(out)), lo+perPage)
	body := make([]map[string]any, 0, hi-lo)
	for _, a := range out[lo:hi] {
		j := activityJSON(a)
		j["resource_state"] = 2 // summary
		body = append(body, j)
	}
	s.stats.listedActivities.Add(hi - lo)
	writeJSON(w, http.StatusOK, body)
}

func activityJSON(a Activity) map[string]any {
	local, zone := a.local()
	return map[string]any{
		"resource_state": 3, "id": a.ID, "athlete": map[string]any{"id": a.AthleteID, "resource_state": 1},
		"name": a.Name, "sport_type": a.SportType, "type": a.SportType, "distance": a.Distance,
		"total_elevation_gain": a.TotalElevationGain, "moving_time": a.MovingTime, "elapsed_time": a.ElapsedTime,
		"start_date": a.StartDate.UTC().Format(time.RFC3339), "start_date_local": local,
		"timezone": zone, "private": a.Private, "manual": false,
	}
}

// rollLocked resets usage at quarter-hour (Options.Window) and UTC-midnight
// boundaries, as Strava does.
func (s *Server) rollLocked() {
	now := s.opts.Now().UTC()
	w := now.Truncate(s.opts.Window)
	if !w.Equal(s.window) || (!s.windowEnd.IsZero() && !now.Before(s.windowEnd)) {
		s.window, s.windowEnd, s.usage[0], s.usage[2] = w, time.Time{}, 0, 0
	}
	if d := now.Format(time.DateOnly); d != s.day {
		s.day, s.usage[1], s.usage[3] = d, 0, 0
	}
}

func (s *Server) setRateHeadersLocked(h http.Header) {
	l := s.opts.Limits
	h.Set("X-RateLimit-Limit", fmt.Sprintf("%d,%d", l.Short, l.Daily))
	h.Set("X-RateLimit-Usage", fmt.Sprintf("%d,%d", s.usage[0], s.usage[1]))
	h.Set("X-ReadRateLimit-Limit", fmt.Sprintf("%d,%d", l.ReadShort, l.ReadDaily))
	h.Set("X-ReadRateLimit-Usage", fmt.Sprintf("%d,%d", s.usage[2], s.usage[3]))
}

// --- Webhooks --------------------------------------------------------------

// Event is a webhook event as Strava posts it.
type Event struct {
	ObjectType     string            `json:"object_type"`
	ObjectID       int64             `json:"object_id"`
	AspectType     string            `json:"aspect_type"`
	Updates        map[string]string `json:"updates"`
	OwnerID        int64             `json:"owner_id"`
	SubscriptionID int64             `json:"subscription_id"`
	EventTime      int64             `json:"event_time"`
}

// ActivityEvent builds an activity event (aspect create, update or delete)
// for the activity's owner, stamped now with the subscription id
// (Options.SubscriptionID, else the registered subscription's).
func (s *Server) ActivityEvent(aspect string, activityID, ownerID int64, updates map[string]string) Event {
	if updates == nil {
		updates = map[string]string{}
	}
	return Event{ObjectType: "activity", ObjectID: activityID, AspectType: aspect, Updates: updates,
		OwnerID: ownerID, SubscriptionID: s.subscriptionID(), EventTime: s.opts.Now().Unix()}
}

func (s *Server) subscriptionID() int64 {
	if s.opts.SubscriptionID != 0 {
		return s.opts.SubscriptionID
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sub.id
}

// DeauthorizationEvent builds the athlete event Strava sends when an athlete
// revokes access.
func (s *Server) DeauthorizationEvent(athleteID int64) Event {
	return Event{ObjectType: "athlete", ObjectID: athleteID, AspectType: "update",
		Updates: map[string]string{"authorized": "false"}, OwnerID: athleteID,
		SubscriptionID: s.subscriptionID(), EventTime: s.opts.Now().Unix()}
}

// Wire is the event as Strava's pushes render it, in the shapes public
// clients have recorded, so a receiver is held to all of them: an event
// with an odd object_id carries subscription_id as a numeric string (Strava's
// own 2017 example and stravalib's recorded payload do), an event without
// updates omits the key (deletes), and every event carries a field Strava
// documents nowhere (a reader must ignore what it does not know).
func (e Event) Wire() map[string]any {
	m := map[string]any{
		"object_type": e.ObjectType, "object_id": e.ObjectID, "aspect_type": e.AspectType,
		"owner_id": e.OwnerID, "subscription_id": e.SubscriptionID, "event_time": e.EventTime,
		"resource_state": 2,
	}
	if e.ObjectID%2 == 1 {
		m["subscription_id"] = strconv.FormatInt(e.SubscriptionID, 10)
	}
	if len(e.Updates) > 0 {
		m["updates"] = e.Updates
	}
	return m
}

// Delivery reports what happened to one event.
type Delivery struct {
	Attempts int   // POSTs made
	Statuses []int // answer of each attempt (0 for a transport failure)
	// Answer is the body of the last answer (at most 4 KiB), e.g.
	// {"status":"accepted",…} from CommitCollect's webhook.
	Answer string
}

// ErrNotDelivered means no attempt was answered 200.
var ErrNotDelivered = errors.New("stravasim: webhook event not acknowledged")

// Deliver POSTs ev to callbackURL the way Strava does: JSON body, and the
// same event sent again (up to Options.DeliveryAttempts in all) while the
// answer is not 200. It returns ErrNotDelivered when every attempt failed.
func (s *Server) Deliver(ctx context.Context, callbackURL string, ev Event) (Delivery, error) {
	body, err := json.Marshal(ev.Wire())
	if err != nil {
		return Delivery{}, fmt.Errorf("stravasim: encode event: %w", err)
	}
	var d Delivery
	client := &http.Client{Timeout: 2 * time.Second} // Strava wants an answer within 2 s
	for d.Attempts < s.opts.DeliveryAttempts {
		if d.Attempts > 0 {
			select {
			case <-ctx.Done():
				return d, ctx.Err()
			case <-time.After(s.opts.DeliveryBackoff):
			}
		}
		d.Attempts++
		s.stats.webhookDeliveries.Add(1)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, callbackURL, strings.NewReader(string(body)))
		if err != nil {
			return d, fmt.Errorf("stravasim: %w", err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			d.Statuses = append(d.Statuses, 0)
			continue
		}
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		_ = resp.Body.Close()
		d.Answer = strings.TrimSpace(string(raw))
		d.Statuses = append(d.Statuses, resp.StatusCode)
		if resp.StatusCode == http.StatusOK {
			return d, nil
		}
	}
	return d, ErrNotDelivered
}

// ErrNoSubscription means Publish was called before a push subscription
// was registered.
var ErrNoSubscription = errors.New("stravasim: no push subscription")

// Subscribe registers the push subscription as POST
// /api/v3/push_subscriptions does: it validates the callback with the
// handshake first and returns the subscription id (Options.SubscriptionID
// when set, else 1). A second subscription is refused.
func (s *Server) Subscribe(ctx context.Context, callbackURL, verifyToken string) (int64, error) {
	s.mu.Lock()
	exists := s.sub.id != 0
	s.mu.Unlock()
	if exists {
		return 0, errors.New("stravasim: subscription already exists")
	}
	if err := s.VerifyCallback(ctx, callbackURL, verifyToken); err != nil {
		return 0, err
	}
	id := s.opts.SubscriptionID
	if id == 0 {
		id = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sub = subscription{id: id, callback: callbackURL}
	return id, nil
}

// Subscription returns the registered push subscription, if any.
func (s *Server) Subscription() (id int64, callbackURL string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sub.id, s.sub.callback, s.sub.id != 0
}

// Publish delivers ev to the registered subscription's callback (see
// Deliver). It returns ErrNoSubscription when none is registered.
func (s *Server) Publish(ctx context.Context, ev Event) (Delivery, error) {
	_, cb, ok := s.Subscription()
	if !ok {
		return Delivery{}, ErrNoSubscription
	}
	return s.Deliver(ctx, cb, ev)
}

func (s *Server) createSubscription(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeStatus(w, http.StatusBadRequest)
		return
	}
	f := r.Form
	if !s.appCredentials(f.Get("client_id"), f.Get("client_secret")) {
		writeError(w, http.StatusUnauthorized, "Authorization Error", fault{"Application", "client_id", "invalid"})
		return
	}
	id, err := s.Subscribe(r.Context(), f.Get("callback_url"), f.Get("verify_token"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "Bad Request", fault{"PushSubscription", "callback url", err.Error()})
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"id": id})
}

func (s *Server) listSubscriptions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !s.appCredentials(q.Get("client_id"), q.Get("client_secret")) {
		writeError(w, http.StatusUnauthorized, "Authorization Error", fault{"Application", "client_id", "invalid"})
		return
	}
	out := []map[string]any{}
	if id, cb, ok := s.Subscription(); ok {
		out = append(out, map[string]any{"id": id, "application_id": s.opts.ClientID, "callback_url": cb})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteSubscription(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !s.appCredentials(q.Get("client_id"), q.Get("client_secret")) {
		writeError(w, http.StatusUnauthorized, "Authorization Error", fault{"Application", "client_id", "invalid"})
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == 0 || id != s.sub.id {
		writeError(w, http.StatusNotFound, "Record Not Found", fault{"PushSubscription", "id", "invalid"})
		return
	}
	s.sub = subscription{}
	w.WriteHeader(http.StatusNoContent)
}

// VerifyCallback performs the subscription handshake against callbackURL
// (GET with hub.mode=subscribe, hub.verify_token and hub.challenge) and
// checks that the challenge is echoed as {"hub.challenge": …}.
func (s *Server) VerifyCallback(ctx context.Context, callbackURL, verifyToken string) error {
	challenge := randHex()
	u, err := url.Parse(callbackURL)
	if err != nil {
		return fmt.Errorf("stravasim: callback url: %w", err)
	}
	q := u.Query()
	q.Set("hub.mode", "subscribe")
	q.Set("hub.verify_token", verifyToken)
	q.Set("hub.challenge", challenge)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("stravasim: %w", err)
	}
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("stravasim: handshake: %w", err)
	}
	defer resp.Body.Close()
	var got map[string]string
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("stravasim: handshake answered %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || got["hub.challenge"] != challenge {
		return fmt.Errorf("stravasim: handshake did not echo the challenge (got %v, %v)", got, err)
	}
	return nil
}

// --- helpers ---------------------------------------------------------------

type fault struct{ Resource, Field, Code string }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, message string, f fault) {
	writeJSON(w, status, map[string]any{
		"message": message,
		"errors":  []map[string]string{{"resource": f.Resource, "field": f.Field, "code": f.Code}},
	})
}

// writeStatus answers status with the body Strava uses for it.
func writeStatus(w http.ResponseWriter, status int) {
	switch status {
	case http.StatusUnauthorized:
		writeError(w, status, "Authorization Error", fault{"Athlete", "access_token", "invalid"})
	case http.StatusNotFound:
		writeError(w, status, "Record Not Found", fault{"Activity", "id", "invalid"})
	case http.StatusTooManyRequests:
		writeError(w, status, "Rate Limit Exceeded", fault{"Application", "rate limit", "exceeded"})
	case http.StatusBadRequest:
		writeError(w, status, "Bad Request", fault{"Application", "request", "invalid"})
	default:
		writeJSON(w, status, map[string]any{"message": "error", "errors": []any{}})
	}
}

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if t, ok := strings.CutPrefix(h, "Bearer "); ok {
		return strings.TrimSpace(t)
	}
	return ""
}

func splitScope(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func hasScope(scopes []string, want string) bool {
	for _, s := range scopes {
		if s == want {
			return true
		}
	}
	return false
}

func randHex() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
