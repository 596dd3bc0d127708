package strava_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/strava"
	"github.com/commitcollect/backend/test/dynamolocal"
)

// A rotated application secret is the operator's problem: the refresh
// fails with ErrAppCredentials (retryable), nobody is flagged, and the same
// connection refreshes once the secret is right again.
func TestRefresherRotatedSecretFlagsNobody(t *testing.T) {
	t.Parallel()
	sim, s := newSim(t), dynamolocal.NewStore(t)
	ctx := context.Background()
	seed(t, s, "u1", sim.IssueTokens(1, -time.Minute), 1)
	r := refresher(sim, s)
	good := sim.ClientSecret()
	sim.RotateClientSecret("rotated-at-strava")
	_, err := r.AccessToken(ctx, "u1")
	if !errors.Is(err, strava.ErrAppCredentials) || !errors.Is(err, model.ErrRetryable) || errors.Is(err, model.ErrUnauthorized) {
		t.Fatalf("got %v, want ErrAppCredentials (retryable, not the athlete's)", err)
	}
	if c, _ := s.Connections.StravaConnection(ctx, "u1"); c.NeedsReauth {
		t.Fatal("the athlete was flagged for the application's credentials")
	}
	sim.RotateClientSecret(good)
	if tok, err := r.AccessToken(ctx, "u1"); err != nil || !sim.AccessTokenValid(tok) {
		t.Fatalf("after the secret is right: got %q, %v; want a fresh token", tok, err)
	}
}

// Verify asks Strava even when the connection was flagged before: a flag
// set for a reason that no longer holds is cleared by Strava's answer, and
// only Strava's refusal now is ErrUnauthorized.
func TestRefresherVerifyIgnoresAnEarlierFlag(t *testing.T) {
	t.Parallel()
	sim, s := newSim(t), dynamolocal.NewStore(t)
	ctx := context.Background()
	seed(t, s, "u1", sim.IssueTokens(1, time.Hour), 1)
	if err := s.Connections.MarkNeedsReauth(ctx, "u1", time.Now()); err != nil {
		t.Fatal(err)
	}
	r := refresher(sim, s)
	if _, err := r.AccessToken(ctx, "u1"); !errors.Is(err, model.ErrUnauthorized) {
		t.Fatalf("AccessToken of a flagged connection: got %v, want ErrUnauthorized", err)
	}
	before := sim.Stats().TokenRefreshes
	tok, err := r.Verify(ctx, "u1")
	if err != nil || !sim.AccessTokenValid(tok.AccessToken) || sim.Stats().TokenRefreshes != before+1 {
		t.Fatalf("Verify: got %+v, %v; want one refresh and a valid token", tok, err)
	}
	if c, _ := s.Connections.StravaConnection(ctx, "u1"); c.NeedsReauth {
		t.Fatal("Strava honoured the grant, yet the flag stayed")
	}
	sim.RevokeAthlete(1)
	if _, err := r.Verify(ctx, "u1"); !errors.Is(err, model.ErrUnauthorized) {
		t.Fatalf("Verify after the athlete revoked: got %v, want ErrUnauthorized", err)
	}
}

// Strava's token answers are read exactly: expires_at sets the expiry when
// expires_in is missing, and an athlete id above 2^53 keeps its digits.
func TestTokenAnswerReadExactly(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"token_type":"Bearer","access_token":"at","refresh_token":"rt","expires_at":1893456000,` +
			`"athlete":{"id":9007199254740993,"firstname":"Ada","lastname":"L"}}`))
	}))
	t.Cleanup(srv.Close)
	c := &strava.OAuthClient{Config: strava.OAuthConfig(srv.URL, "cid", "secret", "")}
	tok, err := c.Exchange(context.Background(), "code")
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Unix(1893456000, 0); !tok.Expiry.Equal(want) {
		t.Fatalf("exchange expiry %v, want expires_at %v", tok.Expiry, want)
	}
	a, err := strava.AthleteFromToken(tok)
	if err != nil || a.ID != 9007199254740993 || a.Firstname != "Ada" {
		t.Fatalf("athlete %+v, %v; want id 9007199254740993 exactly", a, err)
	}
	tok, err = c.Refresh(context.Background(), "rt")
	if err != nil || !tok.Expiry.Equal(time.Unix(1893456000, 0)) {
		t.Fatalf("refresh expiry %v, %v; want expires_at", tok.Expiry, err)
	}
}
