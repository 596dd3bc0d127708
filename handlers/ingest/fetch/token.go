package fetch

import (
	"context"
	"errors"
	"time"

	"github.com/commitcollect/backend/handlers/ingest/fetch/warm"
	"github.com/commitcollect/backend/model/strava"
)

// accessToken returns the user's access token for athleteID and until when
// the athlete cache may keep it (zero: not at all): the cached one while it
// is fresh, else the provider's. With a cached mapping, a token of another
// athlete's connection returns errStaleCache.
func (w *Fetcher) accessToken(ctx context.Context, athleteID int64, userID string, cached *warm.Entry) (string, time.Time, error) {
	if cached != nil && cached.Token != "" {
		return cached.Token, cached.TokenUntil, nil
	}
	src, ok := w.tokens.(TokenSource)
	if !ok {
		token, err := w.tokens.AccessToken(ctx, userID)
		return token, time.Time{}, err
	}
	t, err := src.Token(ctx, userID)
	switch {
	case err != nil:
		return "", time.Time{}, err
	case t.AthleteID != 0 && t.AthleteID != athleteID && cached != nil:
		return "", time.Time{}, errStaleCache
	case t.AthleteID != 0 && t.AthleteID != athleteID:
		// The table's mapping and the connection disagree: not cached; the
		// fetched activity's owner check still guards the write.
		return t.AccessToken, time.Time{}, nil
	}
	return t.AccessToken, t.ExpiresAt.Add(-tokenSkew), nil
}

// confirmedEntry is what a successful write confirmed for the athlete
// cache: the athlete's user and, while fresh, its token (nil when
// tokenUntil is zero: the mapping is not cached either, nothing confirmed
// it). A cached entry keeps when it was resolved.
func confirmedEntry(userID, token string, tokenUntil time.Time, cached *warm.Entry, now time.Time) *warm.Entry {
	if tokenUntil.IsZero() {
		return nil
	}
	e := warm.Entry{UserID: userID, ResolvedAt: now, Token: token, TokenUntil: tokenUntil}
	if cached != nil {
		e.ResolvedAt = cached.ResolvedAt
	}
	return &e
}

// tokenSkew: a cached token is used only until this long before it
// expires.
const tokenSkew = 5 * time.Minute

// errStaleCache says a cached athlete entry was refused: process again
// from the table.
var errStaleCache = errors.New("cached athlete mapping or token refused")

// TokenSource is a TokenProvider that also says when the token expires and
// whose it is (strava.Refresher); the worker caches its tokens.
//
// Tokens (strava.Refresher, golang.org/x/oauth2 with credentials in the form
// body): a token expiring within 5 minutes is refreshed. One worker takes a
// short lease on the connection (conditional update on tokenVersion),
// refreshes and persists the rotated pair with tokenVersion = v → v+1; the
// others wait and re-read, so a race refreshes once. A worker that still
// loses the conditional write re-reads and uses the winner's token. A refresh
// token Strava refuses flags the connection needsReauth. Tokens are stored
// sealed (model/secrets; see the README's Security section).
type TokenSource interface {
	Token(ctx context.Context, userID string) (strava.Token, error)
}
