package stravasim

import (
	"net/http"
	"net/url"
	"time"

	"github.com/commitcollect/backend/model/strava"
	"github.com/commitcollect/backend/scripts/stravasim/wire"
)

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
	t := Tokens{AccessToken: "sim-access-" + wire.Token(), RefreshToken: "sim-refresh-" + wire.Token(), ExpiresAt: exp, Scope: scope}
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

// oauthRoutes serve Strava's OAuth endpoints: authorize, token, deauthorize.
type oauthRoutes struct{ Server *Server }

func (s oauthRoutes) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("client_id") != s.Server.opts.ClientID {
		wire.Error(w, http.StatusBadRequest, "Bad Request", wire.Fault{Resource: "Application", Field: "client_id", Code: "invalid"})
		return
	}
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || redirect.Scheme == "" || redirect.Host == "" {
		wire.Error(w, http.StatusBadRequest, "Bad Request", wire.Fault{Resource: "Application", Field: "redirect_uri", Code: "invalid"})
		return
	}
	if q.Get("response_type") != "code" {
		wire.Error(w, http.StatusBadRequest, "Bad Request", wire.Fault{Resource: "Application", Field: "response_type", Code: "invalid"})
		return
	}
	s.Server.stats.authorizations.Add(1)
	s.Server.mu.Lock()
	az := s.Server.authz
	athlete := az.AthleteID
	if athlete == 0 && len(s.Server.order) > 0 {
		athlete = s.Server.order[0]
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
		code := "sim-code-" + wire.Token()
		s.Server.codes[code] = tokenInfo{athlete: athlete, scope: strava.ParseScopes(scope)}
		back.Set("code", code)
		back.Set("scope", scope)
	}
	s.Server.mu.Unlock()
	redirect.RawQuery = back.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

func (s oauthRoutes) token(w http.ResponseWriter, r *http.Request) {
	if st := s.Server.takeFailure(EndpointToken); st != 0 {
		wire.Status(w, st)
		return
	}
	if err := r.ParseForm(); err != nil {
		wire.Error(w, http.StatusBadRequest, "Bad Request", wire.Fault{Resource: "Application", Field: "body", Code: "invalid"})
		return
	}
	refuse := func(status int, f wire.Fault) {
		s.Server.stats.refusedTokens.Add(1)
		wire.Error(w, status, "Bad Request", f)
	}
	s.Server.mu.Lock()
	defer s.Server.mu.Unlock()
	if r.PostForm.Get("client_id") != s.Server.opts.ClientID || r.PostForm.Get("client_secret") != s.Server.opts.ClientSecret {
		// Strava answers a wrong or rotated client id or secret with 400 and
		// a fault on the Application, whatever the grant.
		refuse(http.StatusBadRequest, wire.Fault{Resource: "Application", Field: "client_id", Code: "invalid"})
		return
	}
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		code := r.PostForm.Get("code")
		ti, ok := s.Server.codes[code]
		if !ok {
			refuse(http.StatusBadRequest, wire.Fault{Resource: "AuthorizationCode", Field: "code", Code: "invalid"})
			return
		}
		delete(s.Server.codes, code) // codes are single use
		t := s.Server.issueLocked(ti.athlete, s.Server.opts.TokenTTL, ti.scope)
		s.Server.stats.codeExchanges.Add(1)
		wire.JSON(w, http.StatusOK, map[string]any{
			"token_type": "Bearer", "access_token": t.AccessToken, "refresh_token": t.RefreshToken,
			"expires_at": t.ExpiresAt.Unix(), "expires_in": int64(s.Server.opts.TokenTTL.Seconds()),
			"athlete": s.Server.athletes[ti.athlete],
		})
	case "refresh_token":
		old := r.PostForm.Get("refresh_token")
		ti, ok := s.Server.refresh[old]
		if !ok {
			refuse(http.StatusBadRequest, wire.Fault{Resource: "RefreshToken", Field: "refresh_token", Code: "invalid"})
			return
		}
		delete(s.Server.refresh, old) // rotation: the old refresh token stops working
		t := s.Server.issueLocked(ti.athlete, s.Server.opts.TokenTTL, ti.scope)
		s.Server.stats.tokenRefreshes.Add(1)
		// As in answers public clients recorded: expires_at (the instant on
		// Strava's clock) and no expires_in.
		wire.JSON(w, http.StatusOK, map[string]any{
			"token_type": "Bearer", "access_token": t.AccessToken, "refresh_token": t.RefreshToken,
			"expires_at": t.ExpiresAt.Unix(),
		})
	default:
		refuse(http.StatusBadRequest, wire.Fault{Resource: "Application", Field: "grant_type", Code: "invalid"})
	}
}

func (s oauthRoutes) deauthorize(w http.ResponseWriter, r *http.Request) {
	if st := s.Server.takeFailure(EndpointDeauthorize); st != 0 {
		wire.Status(w, st)
		return
	}
	_ = r.ParseForm()
	tok := r.PostForm.Get("access_token")
	if tok == "" {
		tok = wire.Bearer(r)
	}
	s.Server.mu.Lock()
	defer s.Server.mu.Unlock()
	ti, ok := s.Server.access[tok]
	if !ok || !s.Server.opts.Now().Before(ti.expires) {
		wire.Error(w, http.StatusUnauthorized, "Authorization Error", wire.Fault{Resource: "Athlete", Field: "access_token", Code: "invalid"})
		return
	}
	s.Server.revokeLocked(ti.athlete)
	s.Server.stats.deauthorizations.Add(1)
	wire.JSON(w, http.StatusOK, map[string]any{"access_token": tok})
}
