package strava_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/strava"
	"github.com/commitcollect/backend/scripts/stravasim"
	"github.com/commitcollect/backend/test/dynamolocal"
)

func TestMain(m *testing.M) { dynamolocal.Main(m) }

var _ strava.TokenStore = (*store.Connections)(nil)

// seed stores a connection holding tokens the simulator issued, with
// TokenVersion 1.
func seed(t *testing.T, s *store.Adapters, user string, tok stravasim.Tokens, athlete int64) {
	t.Helper()
	c := &model.StravaConnection{UserID: user, AthleteID: athlete, AccessToken: tok.AccessToken,
		RefreshToken: tok.RefreshToken, ExpiresAtUtc: tok.ExpiresAt, Scopes: tok.Scope, TokenVersion: 1}
	if err := s.DB.Put(context.Background(), s.DB.Tables().Main, c); err != nil {
		t.Fatal(err)
	}
}

func refresher(sim *stravasim.Server, s *store.Adapters) *strava.Refresher {
	return strava.NewRefresher(strava.OAuthConfig(sim.URL, sim.ClientID(), sim.ClientSecret(), ""), s.Connections, nil)
}

func TestRefresherKeepsValidToken(t *testing.T) {
	t.Parallel()
	sim, s := newSim(t), dynamolocal.NewStore(t)
	tok := sim.IssueTokens(1, time.Hour)
	seed(t, s, "u1", tok, 1)
	got, err := refresher(sim, s).AccessToken(context.Background(), "u1")
	if err != nil || got != tok.AccessToken {
		t.Fatalf("got %q, %v; want the stored token", got, err)
	}
	if n := sim.Stats().TokenRefreshes; n != 0 {
		t.Fatalf("got %d refreshes, want 0", n)
	}
}

func TestRefresherRefreshesNearExpiryAndPersistsRotation(t *testing.T) {
	t.Parallel()
	sim, s := newSim(t), dynamolocal.NewStore(t)
	ctx := context.Background()
	tok := sim.IssueTokens(1, 2*time.Minute) // inside the 5-minute skew
	seed(t, s, "u1", tok, 1)
	got, err := refresher(sim, s).AccessToken(ctx, "u1")
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Connections.StravaConnection(ctx, "u1")
	if err != nil {
		t.Fatal(err)
	}
	if got == tok.AccessToken || got != c.AccessToken || c.TokenVersion != 2 {
		t.Fatalf("got token %q, stored %q at version %d; want a new token stored at version 2", got, c.AccessToken, c.TokenVersion)
	}
	if sim.RefreshTokenValid(tok.RefreshToken) || !sim.RefreshTokenValid(c.RefreshToken) {
		t.Fatal("want the old refresh token dead and the stored one live (rotation persisted)")
	}
	if !c.ExpiresAtUtc.After(time.Now().Add(5 * time.Hour)) {
		t.Fatalf("got expiry %v, want about six hours ahead", c.ExpiresAtUtc)
	}
}

func TestRefresherRaceRefreshesOnce(t *testing.T) {
	t.Parallel()
	sim, s := newSim(t), dynamolocal.NewStore(t)
	ctx := context.Background()
	tok := sim.IssueTokens(1, -time.Minute) // already expired
	seed(t, s, "u1", tok, 1)
	const workers = 6
	got := make([]string, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Separate refreshers: separate worker processes share only DynamoDB.
			got[i], errs[i] = refresher(sim, s).AccessToken(ctx, "u1")
		}()
	}
	wg.Wait()
	c, err := s.Connections.StravaConnection(ctx, "u1")
	if err != nil {
		t.Fatal(err)
	}
	for i := range workers {
		if errs[i] != nil || got[i] != c.AccessToken {
			t.Fatalf("worker %d got %q, %v; want the stored token %q", i, got[i], errs[i], c.AccessToken)
		}
	}
	if n := sim.Stats().TokenRefreshes; n != 1 {
		t.Fatalf("got %d refreshes, want 1", n)
	}
	if c.TokenVersion != 2 || !sim.RefreshTokenValid(c.RefreshToken) {
		t.Fatalf("got version %d, refresh token live %v; want version 2 and the rotated token stored",
			c.TokenVersion, sim.RefreshTokenValid(c.RefreshToken))
	}
	if !sim.AccessTokenValid(c.AccessToken) {
		t.Fatal("stored access token is not accepted by Strava")
	}
}

func TestRefresherRefusedRefreshMarksNeedsReauth(t *testing.T) {
	t.Parallel()
	sim, s := newSim(t), dynamolocal.NewStore(t)
	ctx := context.Background()
	tok := sim.IssueTokens(1, -time.Minute)
	seed(t, s, "u1", tok, 1)
	sim.RevokeAthlete(1)
	r := refresher(sim, s)
	if _, err := r.AccessToken(ctx, "u1"); !errors.Is(err, model.ErrUnauthorized) {
		t.Fatalf("got %v, want ErrUnauthorized", err)
	}
	c, _ := s.Connections.StravaConnection(ctx, "u1")
	if !c.NeedsReauth {
		t.Fatal("connection not flagged needsReauth")
	}
	before := sim.Stats().RefusedTokens
	if _, err := r.AccessToken(ctx, "u1"); !errors.Is(err, model.ErrUnauthorized) {
		t.Fatalf("second call: got %v, want ErrUnauthorized", err)
	}
	if after := sim.Stats().RefusedTokens; after != before {
		t.Fatalf("a flagged connection called Strava again (%d → %d refused)", before, after)
	}
}

func TestRefresherStrava5xxIsRetryable(t *testing.T) {
	t.Parallel()
	sim, s := newSim(t), dynamolocal.NewStore(t)
	ctx := context.Background()
	tok := sim.IssueTokens(1, -time.Minute)
	seed(t, s, "u1", tok, 1)
	sim.FailNext(stravasim.EndpointToken, 503, 1)
	r := refresher(sim, s)
	r.Wait = 0 // a lease left behind would fail the retry below at once
	if _, err := r.AccessToken(ctx, "u1"); !errors.Is(err, model.ErrRetryable) {
		t.Fatalf("got %v, want ErrRetryable", err)
	}
	// The failed refresh released its lease: the retry refreshes at once.
	got, err := r.AccessToken(ctx, "u1")
	if err != nil || got == tok.AccessToken {
		t.Fatalf("retry: got %q, %v; want a fresh token", got, err)
	}
	if _, err := r.AccessToken(ctx, "nobody"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("missing connection: got %v, want ErrNotFound", err)
	}
}

// raceStore lets the test interleave a competing writer between our
// refresh at Strava and our conditional save, as happens when a lease
// lapses mid-refresh.
type raceStore struct {
	*store.Connections
	beforeSave func()
}

func (r *raceStore) SaveRefreshedToken(ctx context.Context, userID string, v int64, access, refresh string, exp, now time.Time) (int64, error) {
	if r.beforeSave != nil {
		r.beforeSave()
	}
	return r.Connections.SaveRefreshedToken(ctx, userID, v, access, refresh, exp, now)
}

func TestRefresherLoserUsesWinnersToken(t *testing.T) {
	t.Parallel()
	sim, s := newSim(t), dynamolocal.NewStore(t)
	ctx := context.Background()
	tok := sim.IssueTokens(1, -time.Minute)
	seed(t, s, "u1", tok, 1)
	winner := sim.IssueTokens(1, time.Hour)
	rs := &raceStore{Connections: s.Connections, beforeSave: func() {
		if _, err := s.Connections.SaveRefreshedToken(ctx, "u1", 1, winner.AccessToken, winner.RefreshToken, winner.ExpiresAt, time.Now()); err != nil {
			t.Errorf("winner save: %v", err)
		}
	}}
	got, err := strava.NewRefresher(strava.OAuthConfig(sim.URL, sim.ClientID(), sim.ClientSecret(), ""), rs, nil).AccessToken(ctx, "u1")
	if err != nil || got != winner.AccessToken {
		t.Fatalf("got %q, %v; want the winner's token %q", got, err, winner.AccessToken)
	}
	c, _ := s.Connections.StravaConnection(ctx, "u1")
	if c.RefreshToken != winner.RefreshToken || c.TokenVersion != 2 {
		t.Fatalf("got %+v, want the winner's refresh token at version 2", c)
	}
}
