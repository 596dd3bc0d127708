package strava_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/strava"
	"github.com/commitcollect/backend/scripts/stravasim"
)

func TestOAuthClientClassifiesTokenFailures(t *testing.T) {
	t.Parallel()
	sim := stravasim.New(stravasim.Options{})
	t.Cleanup(sim.Close)
	sim.AddAthlete(stravasim.Athlete{ID: 5})
	c := &strava.OAuthClient{Config: strava.OAuthConfig(sim.URL, sim.ClientID(), sim.ClientSecret(), "http://127.0.0.1/auth/strava/callback"),
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
		{"rotated application secret", func() error {
			rotated := &strava.OAuthClient{Config: strava.OAuthConfig(sim.URL, sim.ClientID(), "old-secret", "")}
			_, err := rotated.Refresh(ctx, sim.IssueTokens(5, time.Hour).RefreshToken)
			if errors.Is(err, model.ErrUnauthorized) {
				return fmt.Errorf("the application's refusal taken for the athlete's: %v", err)
			}
			return err
		}, strava.ErrAppCredentials},
		{"unknown code", func() error { _, err := c.Exchange(ctx, "no-such-code"); return err }, model.ErrUnauthorized},
		{"no deauthorizer wired", func() error { return (&strava.OAuthClient{Config: c.Config}).Deauthorize(ctx, "at") }, model.ErrInvalid},
	}
	for _, tt := range tests {
		if got := tt.given(); !errors.Is(got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
	unreachable := &strava.OAuthClient{Config: strava.OAuthConfig("http://127.0.0.1:1", "cid", "secret", "")}
	if _, err := unreachable.Refresh(ctx, "rt"); !errors.Is(err, model.ErrRetryable) {
		t.Errorf("unreachable Strava: got %v, want ErrRetryable", err)
	}
}
