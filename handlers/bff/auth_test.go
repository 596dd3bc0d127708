package bff_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/handlers/bff"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/catalog"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/scripts/stravasim"
)

func TestLoginThroughRedirects(t *testing.T) {
	t.Parallel()
	e, sim := oauthEnv(t)
	sim.AddAthlete(stravasim.Athlete{ID: 4242, Firstname: "Grace", Lastname: "Hopper"})
	ctx := context.Background()

	// The login redirect carries exactly what Strava needs.
	resp := e.do(http.MethodGet, "/auth/strava/login", "", nil)
	if resp.status != http.StatusFound {
		t.Fatalf("login: status %d, want 302", resp.status)
	}
	loc, _ := url.Parse(resp.header.Get("Location"))
	q := loc.Query()
	if loc.Path != "/oauth/authorize" || !strings.HasPrefix(loc.String(), sim.URL) || q.Get("client_id") != sim.ClientID() ||
		q.Get("redirect_uri") != e.srv.URL+"/auth/strava/callback" || q.Get("response_type") != "code" ||
		q.Get("scope") != "read,activity:read,activity:read_all" || len(q.Get("state")) != 32 {
		t.Fatalf("authorize redirect = %s", loc)
	}

	b := e.browser()
	cb := e.login(b)
	if cb.status != http.StatusFound || cb.header.Get("Location") != "/" {
		t.Fatalf("callback: status %d location %q body %s, want 302 to /", cb.status, cb.header.Get("Location"), cb.body)
	}
	var setCookie *http.Cookie
	for _, c := range (&http.Response{Header: cb.header}).Cookies() {
		if c.Name == bff.SessionCookie {
			setCookie = c
		}
	}
	if setCookie == nil || !setCookie.HttpOnly || setCookie.Secure || setCookie.SameSite != http.SameSiteLaxMode ||
		len(setCookie.Value) != 32 || setCookie.Path != "/" {
		t.Fatalf("session cookie = %+v, want HttpOnly, not Secure (http loopback), SameSite=Lax, 32-char opaque id", setCookie)
	}
	sid := sessionFrom(t, b, e.srv.URL)
	var me bff.MeJSON
	r := e.do(http.MethodGet, "/v1/me", sid, nil)
	r.json(t, &me)
	if r.status != http.StatusOK || me.AthleteID != 4242 || me.DisplayName != "Grace Hopper" || !me.Connected || me.UserID == "" ||
		me.ActivityScope != "activity:read_all" {
		t.Fatalf("GET /v1/me = %d %+v", r.status, me)
	}
	sess, err := e.ss.Session(ctx, keys.SessionHash(sid))
	if err != nil || sess.UserID != me.UserID || sess.ExpiresAtUtc != e.clock.Now().Add(bff.DefaultSessionTTL).Unix() {
		t.Fatalf("stored session = %+v, %v", sess, err)
	}
	conn, err := e.st.Connections.StravaConnection(ctx, me.UserID)
	if err != nil || conn.TokenVersion != 1 || !sim.AccessTokenValid(conn.AccessToken) || !sim.RefreshTokenValid(conn.RefreshToken) ||
		!conn.HasScope("activity:read_all") {
		t.Fatalf("connection after first login = %+v, %v", conn, err)
	}

	// A returning athlete gets the same user, new tokens and a new session.
	b2 := e.browser()
	if cb := e.login(b2); cb.status != http.StatusFound {
		t.Fatalf("second login: %d %s", cb.status, cb.body)
	}
	sid2 := sessionFrom(t, b2, e.srv.URL)
	var me2 bff.MeJSON
	e.do(http.MethodGet, "/v1/me", sid2, nil).json(t, &me2)
	if me2.UserID != me.UserID || sid2 == sid {
		t.Fatalf("returning athlete: user %s session %s, want user %s and a new session", me2.UserID, sid2, me.UserID)
	}
	conn2, _ := e.st.Connections.StravaConnection(ctx, me.UserID)
	if conn2.TokenVersion != 2 || conn2.AccessToken == conn.AccessToken || !sim.AccessTokenValid(conn2.AccessToken) {
		t.Fatalf("connection after second login = %+v, want tokenVersion 2 and a new token", conn2)
	}
	ids, _, _ := e.ss.UserSessionIDs(ctx, me.UserID)
	if len(ids) != 2 {
		t.Fatalf("session pointers = %v, want both sessions", ids)
	}
}

func TestConcurrentFirstLoginsLinkOneUser(t *testing.T) {
	t.Parallel()
	e, sim := oauthEnv(t)
	sim.AddAthlete(stravasim.Athlete{ID: 777, Firstname: "Concurrent"})
	const n = 4
	users := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := e.browser()
			resp, err := b.Get(e.srv.URL + "/auth/strava/login")
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			sid := sessionFrom(t, b, e.srv.URL)
			if s, err := e.ss.Session(context.Background(), keys.SessionHash(sid)); err == nil {
				users[i] = s.UserID
			}
		}()
	}
	wg.Wait()
	for i := range n {
		if users[i] == "" || users[i] != users[0] {
			t.Fatalf("users after concurrent first logins = %v, want one user", users)
		}
	}
	owner, err := e.st.Users.AthleteOwner(context.Background(), 777)
	if err != nil || owner.UserID != users[0] {
		t.Fatalf("owner = %+v, %v", owner, err)
	}
}

func TestCallbackRefusals(t *testing.T) {
	t.Parallel()
	e, sim := oauthEnv(t)
	sim.AddAthlete(stravasim.Athlete{ID: 99, Firstname: "Refuser"})
	sim.AddAthlete(stravasim.Athlete{ID: 100, Firstname: "Reader"})
	ctx := context.Background()
	nothingWritten := func(t *testing.T) {
		t.Helper()
		if _, err := e.st.Users.AthleteOwner(ctx, 99); !errors.Is(err, model.ErrNotFound) {
			t.Fatalf("athlete 99 was linked (%v), want nothing written", err)
		}
	}

	t.Run("access denied", func(t *testing.T) {
		sim.SetAuthorization(stravasim.Authorization{AthleteID: 99, Deny: true})
		b := e.browser()
		r := e.login(b)
		if r.status != http.StatusForbidden || !strings.Contains(string(r.body), "chose not to connect") || sessionFrom(t, b, e.srv.URL) != "" {
			t.Fatalf("access denied: %d %s", r.status, r.body)
		}
		nothingWritten(t)
	})
	t.Run("activity scope missing", func(t *testing.T) {
		sim.SetAuthorization(stravasim.Authorization{AthleteID: 99, Scope: "read"})
		r := e.login(e.browser())
		if r.status != http.StatusForbidden || !strings.Contains(string(r.body), "permission to read your activities") {
			t.Fatalf("scope read only: %d %s", r.status, r.body)
		}
		nothingWritten(t)
	})
	t.Run("activity:read is enough, and GET /v1/me says so", func(t *testing.T) {
		sim.SetAuthorization(stravasim.Authorization{AthleteID: 100, Scope: "read,activity:read"})
		b := e.browser()
		if r := e.login(b); r.status != http.StatusFound {
			t.Fatalf("activity:read: %d %s", r.status, r.body)
		}
		var me bff.MeJSON
		r := e.do(http.MethodGet, "/v1/me", sessionFrom(t, b, e.srv.URL), nil)
		r.json(t, &me)
		if !me.Connected || me.ActivityScope != "activity:read" {
			t.Fatalf("GET /v1/me = %+v, want connected with activityScope activity:read", me)
		}
	})

	// The remaining cases drive the callback by hand with a state from a
	// real login redirect.
	start := func(t *testing.T) (state, stateCookie string) {
		t.Helper()
		r := e.do(http.MethodGet, "/auth/strava/login", "", nil)
		loc, _ := url.Parse(r.header.Get("Location"))
		for _, c := range (&http.Response{Header: r.header}).Cookies() {
			if c.Name == bff.StateCookie {
				stateCookie = c.Value
			}
		}
		return loc.Query().Get("state"), stateCookie
	}
	callback := func(t *testing.T, state, cookie string) response {
		t.Helper()
		return e.do(http.MethodGet, "/auth/strava/callback?"+url.Values{"state": {state}, "code": {"code-x"}, "scope": {"read,activity:read_all"}}.Encode(),
			"", nil, "Cookie", bff.StateCookie+"="+cookie)
	}
	t.Run("forged state", func(t *testing.T) {
		forged := model.NewID()
		if r := callback(t, forged, forged); r.status != http.StatusBadRequest {
			t.Fatalf("forged state: %d %s", r.status, r.body)
		}
	})
	t.Run("state from another browser", func(t *testing.T) {
		state, _ := start(t)
		if r := callback(t, state, model.NewID()); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "another browser") {
			t.Fatalf("unbound state: %d %s", r.status, r.body)
		}
	})
	t.Run("state used twice", func(t *testing.T) {
		state, cookie := start(t)
		first := callback(t, state, cookie) // code-x is unknown to the simulator: 502, but the state is spent
		if first.status != http.StatusBadGateway {
			t.Fatalf("first use: %d %s", first.status, first.body)
		}
		if r := callback(t, state, cookie); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "already used") {
			t.Fatalf("second use: %d %s", r.status, r.body)
		}
	})
	t.Run("expired state", func(t *testing.T) {
		state, cookie := start(t)
		e.clock.Add(bff.DefaultStateTTL + time.Second)
		if r := callback(t, state, cookie); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "expired") {
			t.Fatalf("expired state: %d %s", r.status, r.body)
		}
	})
}

func TestCookieSecurityFollowsPublicURL(t *testing.T) {
	t.Parallel()
	cat, _ := catalog.Default()
	// New only checks that a store is given; it reads nothing at construction.
	deps := bff.Deps{Stores: app.BFFStores(new(store.Adapters)), Strava: &fakeStrava{}, Catalog: cat}
	tests := []struct {
		name    string
		given   string
		wantErr bool
	}{
		{"https", "https://api.commitcollect.example", false},
		{"http localhost", "http://localhost:8080", false},
		{"http 127.0.0.1", "http://127.0.0.1:8080", false},
		{"http ::1", "http://[::1]:8080", false},
		{"http elsewhere is refused", "http://api.example.com", true},
		{"empty", "", true},
		{"not a url", "commitcollect", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := bff.New(bff.Config{PublicURL: tt.given}, deps)
			if (err != nil) != tt.wantErr {
				t.Fatalf("New(PublicURL=%q) error = %v, want error %v", tt.given, err, tt.wantErr)
			}
		})
	}
}

func TestSecureCookieOverHTTPS(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{publicURL: func(string) string { return "https://api.commitcollect.example" }})
	r := e.do(http.MethodGet, "/auth/strava/login", "", nil)
	cs := (&http.Response{Header: r.header}).Cookies()
	if len(cs) != 1 || cs[0].Name != bff.StateCookie || !cs[0].Secure || !cs[0].HttpOnly || cs[0].SameSite != http.SameSiteLaxMode {
		t.Fatalf("state cookie over https = %+v, want Secure, HttpOnly, SameSite=Lax", cs)
	}
}
