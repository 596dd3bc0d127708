package bff_test

import (
	"context"
	"errors"
	"testing"

	"github.com/commitcollect/backend/handlers/bff"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/strava"
)

func TestOAuthClientClassifiesTokenFailures(t *testing.T) {
	t.Parallel()
	fs := newFakeOAuthServer(t)
	c := &bff.OAuthClient{Config: strava.OAuthConfig(fs.URL, "cid", "secret", "http://127.0.0.1/auth/strava/callback")}
	ctx := context.Background()

	tok, err := c.Refresh(ctx, "rt-good")
	if err != nil || tok.AccessToken != "at-fresh" || tok.RefreshToken != "rt-rotated" {
		t.Fatalf("Refresh(good) = %+v, %v", tok, err)
	}
	tests := []struct {
		name  string
		given func() error
		want  error
	}{
		{"revoked refresh token", func() error { _, err := c.Refresh(ctx, "rt-revoked"); return err }, model.ErrUnauthorized},
		{"token endpoint down", func() error { _, err := c.Refresh(ctx, "rt-down"); return err }, model.ErrRetryable},
		{"unknown code", func() error { _, err := c.Exchange(ctx, "no-such-code"); return err }, model.ErrUnauthorized},
		{"no deauthorizer wired", func() error { return c.Deauthorize(ctx, "at") }, model.ErrInvalid},
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
