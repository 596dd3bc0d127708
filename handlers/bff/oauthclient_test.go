package bff_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/bff"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/strava"
	"github.com/commitcollect/backend/test/stravasim"
)

func TestOAuthClientClassifiesTokenFailures(t *testing.T) {
	t.Parallel()
	sim := stravasim.New(stravasim.Options{})
	t.Cleanup(sim.Close)
	sim.AddAthlete(stravasim.Athlete{ID: 5})
	c := &bff.OAuthClient{Config: strava.OAuthConfig(sim.URL, sim.ClientID(), sim.ClientSecret(), "http://127.0.0.1/auth/strava/callback"),
		Deauthorizer: strava.NewClient(sim.URL, nil)}
	ctx := context.Background()

	issued := sim.IssueTokens(5, time.Hour)
	tok, err := c.Refresh(ctx, issued.RefreshToken)
	if err != nil || tok.AccessToken == "" || tok.RefreshToken == issued.RefreshToken || !sim.AccessTokenValid(tok.AccessToken) {
		t.Fatalf("Refresh = %+v, %v; want a fresh, rotated token", tok, err)
	}
	if err := c.Deauthorize(ctx, tok.AccessToken); err != nil || sim.AccessTokenValid(tok.AccessToken) {
		t.Fatalf("Deauthorize: %v, token still valid %v", err, sim.AccessTokenValid(tok.AccessToken))
	}
	tests := []struct {
		name  string
		given func() error
		want  error
	}{
		{"revoked refresh token", func() error { _, err := c.Refresh(ctx, tok.RefreshToken); return err }, model.ErrUnauthorized},
		{"deauthorize a revoked token", func() error { return c.Deauthorize(ctx, tok.AccessToken) }, model.ErrUnauthorized},
		{"token endpoint down", func() error {
			sim.FailNext(stravasim.EndpointToken, 503, 1)
			_, err := c.Refresh(ctx, sim.IssueTokens(5, time.Hour).RefreshToken)
			return err
		}, model.ErrRetryable},
		{"unknown code", func() error { _, err := c.Exchange(ctx, "no-such-code"); return err }, model.ErrUnauthorized},
		{"no deauthorizer wired", func() error { return (&bff.OAuthClient{Config: c.Config}).Deauthorize(ctx, "at") }, model.ErrInvalid},
	}
	for _, tt := range tests {
		if got := tt.given(); !errors.Is(got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
	unreachable := &bff.OAuthClient{Config: strava.OAuthConfig("http://127.0.0.1:1", "cid", "secret", "")}
	if _, err := unreachable.Refresh(ctx, "rt"); !errors.Is(err, model.ErrRetryable) {
		t.Errorf("unreachable Strava: got %v, want ErrRetryable", err)
	}
}

func TestAccountDeletionRevokesStravaAccess(t *testing.T) {
	t.Parallel()
	e, sim := oauthEnv(t)
	sim.AddAthlete(stravasim.Athlete{ID: 321, Firstname: "Expired"})
	// The stored access token expired an hour ago: deletion refreshes it
	// (the refresh token rotates), then revokes.
	tok := sim.IssueTokens(321, -time.Hour)
	now := e.clock.Now()
	p := &model.Profile{UserID: "u1", AthleteID: 321, DisplayName: "x", CreatedAtUtc: now}
	c := &model.StravaConnection{UserID: "u1", AthleteID: 321, AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken,
		ExpiresAtUtc: tok.ExpiresAt, Scopes: tok.Scope, TokenVersion: 1, UpdatedAtUtc: now}
	if err := e.st.CreateUser(context.Background(), p, c); err != nil {
		t.Fatal(err)
	}
	sid := e.session("u1")
	var rep bff.DeletionReport
	r := e.do(http.MethodDelete, "/v1/me", sid, nil)
	r.json(t, &rep)
	if r.status != http.StatusAccepted || rep.Status != "deleted" {
		t.Fatalf("DELETE /v1/me: %d %s", r.status, r.body)
	}
	if s := sim.Stats(); s.TokenRefreshes != 1 || s.Deauthorizations != 1 {
		t.Fatalf("simulator stats %+v, want one refresh and one deauthorization", s)
	}
	if sim.RefreshTokenValid(tok.RefreshToken) {
		t.Fatal("the old refresh token still works after deletion")
	}
}
