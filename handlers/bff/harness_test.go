package bff_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"golang.org/x/oauth2"

	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/handlers/bff"
	"github.com/commitcollect/backend/handlers/bff/milestones"
	"github.com/commitcollect/backend/handlers/bff/respond"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/catalog"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/sessions"
	"github.com/commitcollect/backend/model/strava"
	"github.com/commitcollect/backend/scripts/stravasim"
	"github.com/commitcollect/backend/test/dynamolocal"
)

func TestMain(m *testing.M) { dynamolocal.Main(m) }

// clock is a settable test clock. It starts at the real time: DynamoDB
// Local runs TTL deletion against the real clock, so items stamped with a
// clock in the past would vanish under the tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fakeStrava is a small in-memory implementation of bff.Strava for the
// tests that do not log in through redirects (our own interface, not the
// SDK's): it records deauthorizations and can be told to fail.
type fakeStrava struct {
	mu            sync.Mutex
	deauthorized  []string
	refreshed     []string
	deauthErr     error
	refreshErr    error
	refreshSerial int
}

func (f *fakeStrava) AuthCodeURL(state string) string {
	return "https://strava.invalid/oauth/authorize?state=" + state
}
func (f *fakeStrava) Exchange(context.Context, string) (*oauth2.Token, error) {
	return nil, errors.New("fakeStrava: exchange not used here")
}
func (f *fakeStrava) Refresh(_ context.Context, rt string) (*oauth2.Token, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refreshErr != nil {
		return nil, f.refreshErr
	}
	f.refreshSerial++
	f.refreshed = append(f.refreshed, rt)
	return &oauth2.Token{AccessToken: fmt.Sprintf("refreshed-%d", f.refreshSerial), RefreshToken: "rotated", Expiry: time.Now().Add(6 * time.Hour)}, nil
}
func (f *fakeStrava) Deauthorize(_ context.Context, at string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.deauthErr != nil {
		return f.deauthErr
	}
	f.deauthorized = append(f.deauthorized, at)
	return nil
}

// env is one BFF over fresh DynamoDB Local tables with the catalog seeded.
type env struct {
	t      *testing.T
	st     *store.Adapters
	ss     *sessions.Store // the sign-ins (st's DB)
	h      *bff.Handler
	mux    *http.ServeMux
	srv    *httptest.Server
	clock  *clock
	strava bff.Strava
}

type envOpts struct {
	strava    bff.Strava
	publicURL func(srvURL string) string
	cors      []string
	// dynamoHTTP, when set, carries the store's DynamoDB calls (fault
	// injection in front of DynamoDB Local).
	dynamoHTTP *http.Client
	// tables says which DynamoDB Local holds the tables and whether the main
	// table has its stream: one choice, so no two options can disagree.
	tables tablesKind
}

// tablesKind is where a test's tables live.
type tablesKind int

const (
	// sharedTables: the package's DynamoDB Local, no stream (dynamolocal.NewStore).
	sharedTables tablesKind = iota
	// privateTables: a DynamoDB Local of the test's own
	// (dynamolocal.NewPrivateStore), for a test of tens of thousands of items.
	privateTables
	// streamedTables: the package's DynamoDB Local, the main table with its
	// stream (dynamolocal.NewStreamed), for a test that hands the projector
	// what was written.
	streamedTables
)

func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	var st *store.Adapters
	switch o.tables {
	case sharedTables:
		st = dynamolocal.NewStore(t)
	case privateTables:
		st = dynamolocal.NewPrivateStore(t)
	case streamedTables:
		st = dynamolocal.NewStreamed(t).Store
	default:
		t.Fatalf("envOpts.tables %d: no such kind", o.tables)
	}
	if o.dynamoHTTP != nil {
		if o.tables == privateTables {
			t.Fatal("envOpts: dynamoHTTP reaches the package's DynamoDB Local, not a private one")
		}
		db := dynamodb.NewFromConfig(dynamolocal.Config(dynamolocal.Endpoint(t)), func(opt *dynamodb.Options) { opt.HTTPClient = o.dynamoHTTP })
		faulty := store.New(db, st.DB.Tables())
		faulty.DB.Secrets = st.DB.Secrets
		st = faulty
	}
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := catalog.Seed(context.Background(), st.Milestones, cat); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, st: st, ss: sessions.New(st.DB), mux: http.NewServeMux(), clock: &clock{t: time.Now().UTC().Truncate(time.Second)}}
	e.srv = httptest.NewServer(e.mux)
	t.Cleanup(e.srv.Close)
	if o.strava == nil {
		o.strava = &fakeStrava{}
	}
	e.strava = o.strava
	public := e.srv.URL
	if o.publicURL != nil {
		public = o.publicURL(e.srv.URL)
	}
	e.h, err = bff.New(bff.Config{PublicURL: public, CORSOrigins: o.cors}, bff.Deps{Stores: app.BFFStores(st), Strava: o.strava, Catalog: cat, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	e.h.Register(e.mux)
	return e
}

// user creates a user with a connection and a session directly in the store
// and returns the session cookie value.
func (e *env) user(userID string, athleteID int64) string {
	e.t.Helper()
	ctx := context.Background()
	now := e.clock.Now()
	p := &model.Profile{UserID: userID, AthleteID: athleteID, DisplayName: "Ath " + userID, CreatedAtUtc: now}
	c := &model.StravaConnection{UserID: userID, AthleteID: athleteID, AccessToken: "access-" + userID, RefreshToken: "refresh-" + userID,
		ExpiresAtUtc: now.Add(6 * time.Hour), Scopes: []string{"read", "activity:read_all"}, TokenVersion: 1, UpdatedAtUtc: now}
	if err := e.st.Users.CreateUser(ctx, p, c); err != nil {
		e.t.Fatal(err)
	}
	return e.session(userID)
}

func (e *env) session(userID string) string {
	e.t.Helper()
	now := e.clock.Now()
	cookie := model.NewID()
	s := &model.Session{SessionID: keys.SessionHash(cookie), UserID: userID, CreatedAtUtc: now, ExpiresAtUtc: now.Add(24 * time.Hour).Unix()}
	if err := e.ss.CreateSession(context.Background(), s); err != nil {
		e.t.Fatal(err)
	}
	return cookie
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// refusal is a body POST /v1/milestones must refuse, and the fields its
// 400 names, in order.
type refusal struct {
	name string
	body any
	want []string
}

// checkRefusals posts each body for the session sid, wants a 400 naming
// exactly its fields, then that the user has kept milestones still:
// nothing was created.
func (e *env) checkRefusals(t *testing.T, sid string, rs []refusal, kept int) {
	t.Helper()
	for _, rf := range rs {
		r := e.do(http.MethodPost, "/v1/milestones", sid, rf.body)
		var eb respond.ErrorBody
		r.json(t, &eb)
		var got []string
		for _, f := range eb.Error.Fields {
			got = append(got, f.Field)
		}
		if r.status != http.StatusBadRequest || !reflect.DeepEqual(got, rf.want) {
			t.Errorf("%s: %d %v (%s), want 400 naming %v", rf.name, r.status, got, r.body, rf.want)
		}
	}
	var list struct{ Milestones []milestones.MilestoneJSON }
	e.do(http.MethodGet, "/v1/milestones", sid, nil).json(t, &list)
	if len(list.Milestones) != kept {
		t.Fatalf("%d milestones after the refusals, want the %d created before", len(list.Milestones), kept)
	}
}

func (r response) errorCode(t *testing.T) string {
	t.Helper()
	var b respond.ErrorBody
	r.json(t, &b)
	return b.Error.Code
}

// do sends a request to the BFF with an optional session cookie.
func (e *env) do(method, path, cookie string, body any, header ...string) response {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		switch b := body.(type) {
		case string:
			rd = strings.NewReader(b)
		default:
			raw, err := json.Marshal(b)
			if err != nil {
				e.t.Fatal(err)
			}
			rd = strings.NewReader(string(raw))
		}
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: bff.SessionCookie, Value: cookie})
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, raw}
}

// oauthEnv is an env whose Strava is the real OAuthClient (x/oauth2 and the
// model/strava REST client) against the Strava simulator.
func oauthEnv(t *testing.T) (*env, *stravasim.Server) {
	t.Helper()
	return oauthEnvWith(t, envOpts{})
}

// oauthEnvWith is oauthEnv with options (its strava is replaced).
func oauthEnvWith(t *testing.T, o envOpts) (*env, *stravasim.Server) {
	t.Helper()
	sim := stravasim.New(stravasim.Options{})
	t.Cleanup(sim.Close)
	client := &strava.OAuthClient{Deauthorizer: strava.NewClient(sim.URL, nil)}
	o.strava = client
	e := newEnv(t, o)
	client.Config = strava.OAuthConfig(sim.URL, sim.ClientID(), sim.ClientSecret(), e.srv.URL+"/auth/strava/callback")
	return e, sim
}

// browser is an HTTP client with a cookie jar that follows redirects until
// it would leave for the app's landing page.
func (e *env) browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if req.URL.Path == "/" {
			return http.ErrUseLastResponse
		}
		return nil
	}}
}

// login runs the real redirect chain: /auth/strava/login → Strava authorize
// → /auth/strava/callback. It returns the callback's answer.
func (e *env) login(b *http.Client) response {
	e.t.Helper()
	resp, err := b.Get(e.srv.URL + "/auth/strava/login")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, raw}
}

func sessionFrom(t *testing.T, b *http.Client, base string) string {
	t.Helper()
	u, _ := url.Parse(base)
	for _, c := range b.Jar.Cookies(u) {
		if c.Name == bff.SessionCookie {
			return c.Value
		}
	}
	return ""
}
