package strava

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"golang.org/x/oauth2"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/retry"
)

// TokenStore is the persistence the refresher needs (implemented by
// model/store.Adapters).
type TokenStore interface {
	// StravaConnection reads the user's connection; ErrNotFound when absent.
	StravaConnection(ctx context.Context, userID string) (*model.StravaConnection, error)
	// AcquireTokenRefreshLease marks a refresh in flight until `until`;
	// ErrConflict when another holder is live or the version moved.
	AcquireTokenRefreshLease(ctx context.Context, userID string, version int64, now, until time.Time) error
	// SaveRefreshedToken persists a rotated pair if the version is still
	// expectedVersion; ErrConflict otherwise.
	SaveRefreshedToken(ctx context.Context, userID string, expectedVersion int64, access, refresh string, expiresAt, now time.Time) (int64, error)
	// ReleaseTokenRefreshLease drops our lease after a transient failure.
	ReleaseTokenRefreshLease(ctx context.Context, userID string, version int64) error
	// MarkNeedsReauth flags the connection as refused by Strava.
	MarkNeedsReauth(ctx context.Context, userID string, now time.Time) error
}

// Refresher hands out valid Strava access tokens for users, refreshing them
// through golang.org/x/oauth2 when they are near expiry. Refresh tokens
// rotate, so every refresh is persisted with a conditional write on the
// connection's TokenVersion; across processes a short lease on the
// connection makes one worker refresh while the others wait for its result,
// and a worker that still loses a race re-reads and uses the winner's token.
type Refresher struct {
	oauth *oauth2.Config
	store TokenStore
	http  *http.Client
	// Now is the clock; tests may replace it.
	Now func() time.Time
	// Skew refreshes tokens this long before they expire (default 5 min).
	Skew time.Duration
	// Lease bounds how long one refresh may hold the lease (default 30 s).
	Lease time.Duration
	// Wait bounds how long a worker waits for another's refresh (default 10 s).
	Wait time.Duration
}

// NewRefresher builds a refresher for the oauth2 config (see OAuthConfig)
// over store; httpClient (nil: http.DefaultClient) carries the token calls.
func NewRefresher(cfg *oauth2.Config, store TokenStore, httpClient *http.Client) *Refresher {
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	return &Refresher{
		oauth: cfg, store: store, http: httpClient,
		Now:  func() time.Time { return time.Now().UTC() },
		Skew: 5 * time.Minute, Lease: 30 * time.Second, Wait: 10 * time.Second,
	}
}

// AccessToken returns a valid access token for the user, refreshing (and
// persisting the rotated refresh token) when it expires within Skew. Errors
// match model.ErrNotFound (no connection), model.ErrUnauthorized (the
// connection needs re-authorization: flagged before, or Strava refused the
// refresh token now, in which case it is flagged) or model.ErrRetryable
// (Strava or DynamoDB unavailable, another worker's refresh did not land in
// time, or ErrAppCredentials: Strava refused the application itself, and
// nobody is flagged).
func (r *Refresher) AccessToken(ctx context.Context, userID string) (string, error) {
	t, err := r.Token(ctx, userID)
	return t.AccessToken, err
}

// Token is an access token with what a cache needs to know about it.
type Token struct {
	AccessToken string
	// ExpiresAt is when Strava stops honouring it.
	ExpiresAt time.Time
	// AthleteID is the athlete of the connection it was read from.
	AthleteID int64
}

// Token is AccessToken with the token's expiry and athlete (same errors).
func (r *Refresher) Token(ctx context.Context, userID string) (Token, error) {
	return r.token(ctx, userID, false)
}

// Verify asks Strava now whether the user's grant is alive: it refreshes
// the token even when the stored one is fresh or the connection was
// flagged before (a refresh made by another worker after Verify started
// also counts). So model.ErrUnauthorized from Verify is evidence obtained
// now, from Strava's refusal of this athlete's refresh token; never a flag
// set earlier, perhaps for a reason that no longer holds. A success clears
// the flag. Errors match as for AccessToken, and ErrAppCredentials when
// Strava refused the application itself.
func (r *Refresher) Verify(ctx context.Context, userID string) (Token, error) {
	return r.token(ctx, userID, true)
}

func (r *Refresher) token(ctx context.Context, userID string, verify bool) (Token, error) {
	deadline := r.Now().Add(r.Wait)
	startVersion := int64(-1)
	for attempt := 0; ; attempt++ {
		conn, err := r.store.StravaConnection(ctx, userID)
		if err != nil {
			return Token{}, fmt.Errorf("access token for %s: %w", userID, err)
		}
		if startVersion < 0 {
			startVersion = conn.TokenVersion
		}
		if conn.NeedsReauth && !verify {
			return Token{}, fmt.Errorf("access token for %s: connection needs re-authorization: %w", userID, model.ErrUnauthorized)
		}
		now := r.Now()
		refreshedSince := conn.TokenVersion != startVersion && !conn.NeedsReauth
		if conn.AccessToken != "" && conn.ExpiresAtUtc.After(now.Add(r.Skew)) && (!verify || refreshedSince) {
			return Token{AccessToken: conn.AccessToken, ExpiresAt: conn.ExpiresAtUtc, AthleteID: conn.AthleteID}, nil
		}
		err = r.store.AcquireTokenRefreshLease(ctx, userID, conn.TokenVersion, now, now.Add(r.Lease))
		switch {
		case err == nil:
			return r.refresh(ctx, conn)
		case !errors.Is(err, model.ErrConflict):
			return Token{}, fmt.Errorf("access token for %s: %w", userID, err)
		}
		// Someone else is refreshing (or just did): wait and re-read.
		if r.Now().After(deadline) {
			return Token{}, fmt.Errorf("access token for %s: another refresh did not finish within %s: %w", userID, r.Wait, model.ErrRetryable)
		}
		d := min(time.Duration(1<<min(attempt, 6))*25*time.Millisecond, time.Second)
		d = d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
		if err := retry.Sleep(ctx, d); err != nil {
			return Token{}, fmt.Errorf("access token for %s: %w", userID, err)
		}
	}
}

// refresh runs the refresh_token grant for conn (whose lease we hold) and
// persists the result.
func (r *Refresher) refresh(ctx context.Context, conn *model.StravaConnection) (Token, error) {
	// An expired token makes the oauth2 token source use the refresh grant.
	tok, err := tokenCall(ctx, r.http, func(ctx context.Context) (*oauth2.Token, error) {
		return r.oauth.TokenSource(ctx, &oauth2.Token{RefreshToken: conn.RefreshToken, Expiry: time.Unix(1, 0)}).Token()
	})
	now := r.Now()
	if err != nil {
		err = classifyTokenError(err)
		if !errors.Is(err, model.ErrUnauthorized) {
			// The application's credentials, Strava's availability, or an
			// answer that names nobody: no athlete is flagged.
			r.release(ctx, conn)
			return Token{}, fmt.Errorf("refresh token of %s: %w", conn.UserID, err)
		}
		// If another worker rotated the token meanwhile (our lease
		// lapsed), Strava refused the old one: use the winner's.
		if cur, rerr := r.store.StravaConnection(ctx, conn.UserID); rerr == nil &&
			cur.TokenVersion != conn.TokenVersion && !cur.NeedsReauth && cur.AccessToken != "" {
			return Token{AccessToken: cur.AccessToken, ExpiresAt: cur.ExpiresAtUtc, AthleteID: cur.AthleteID}, nil
		}
		// Strava refused this athlete's refresh token: only the athlete can
		// fix this.
		if merr := r.store.MarkNeedsReauth(ctx, conn.UserID, now); merr != nil {
			return Token{}, fmt.Errorf("refresh token of %s: %w (and %w)", conn.UserID, err, merr)
		}
		return Token{}, fmt.Errorf("refresh token of %s: strava refused it: %w", conn.UserID, err)
	}
	if tok.AccessToken == "" || tok.RefreshToken == "" {
		r.release(ctx, conn)
		return Token{}, fmt.Errorf("refresh token of %s: response lacks a token: %w", conn.UserID, model.ErrRetryable)
	}
	expiry := tok.Expiry
	if expiry.IsZero() {
		expiry = now.Add(6 * time.Hour) // Strava's access tokens live six hours
	}
	_, err = r.store.SaveRefreshedToken(ctx, conn.UserID, conn.TokenVersion, tok.AccessToken, tok.RefreshToken, expiry, now)
	if errors.Is(err, model.ErrConflict) {
		// Our lease lapsed and someone else persisted first: theirs is the
		// token Strava now honours, so use it.
		winner, rerr := r.store.StravaConnection(ctx, conn.UserID)
		if rerr != nil {
			return Token{}, fmt.Errorf("refresh token of %s: re-read after lost race: %w", conn.UserID, rerr)
		}
		if winner.NeedsReauth || winner.AccessToken == "" {
			return Token{}, fmt.Errorf("refresh token of %s: lost race to a refused refresh: %w", conn.UserID, model.ErrUnauthorized)
		}
		return Token{AccessToken: winner.AccessToken, ExpiresAt: winner.ExpiresAtUtc, AthleteID: winner.AthleteID}, nil
	}
	if err != nil {
		return Token{}, fmt.Errorf("refresh token of %s: %w: %w", conn.UserID, model.ErrRetryable, err)
	}
	return Token{AccessToken: tok.AccessToken, ExpiresAt: expiry, AthleteID: conn.AthleteID}, nil
}

// release gives up our lease so the next attempt need not wait for it to
// lapse; failing to release only costs that wait.
func (r *Refresher) release(ctx context.Context, conn *model.StravaConnection) {
	_ = r.store.ReleaseTokenRefreshLease(context.WithoutCancel(ctx), conn.UserID, conn.TokenVersion)
}
