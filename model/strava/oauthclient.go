package strava

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"golang.org/x/oauth2"

	"github.com/commitcollect/backend/model"
)

// Deauthorizer revokes an athlete's grant (Strava's POST /oauth/deauthorize;
// Client implements it). It returns an error matching
// model.ErrUnauthorized when the token is not valid any more.
type Deauthorizer interface {
	Deauthorize(ctx context.Context, accessToken string) error
}

// OAuthClient is the client of Strava's OAuth endpoints (the BFF's login and
// account deletion) with golang.org/x/oauth2 (Config is
// strava.OAuthConfig(base, id, secret, publicURL+"/auth/strava/callback")) and
// a Deauthorizer.
type OAuthClient struct {
	Config       *oauth2.Config
	Deauthorizer Deauthorizer
	// HTTPClient is used for token requests (http.DefaultClient when nil).
	HTTPClient *http.Client
}

// AuthCodeURL is Strava's authorize URL carrying state.
func (c *OAuthClient) AuthCodeURL(state string) string { return c.Config.AuthCodeURL(state) }

// Exchange trades an authorization code for a token; a refused code matches model.ErrUnauthorized.
func (c *OAuthClient) Exchange(ctx context.Context, code string) (*oauth2.Token, error) {
	tok, err := tokenCall(ctx, c.HTTPClient, func(ctx context.Context) (*oauth2.Token, error) {
		return c.Config.Exchange(ctx, code)
	})
	if err != nil {
		return nil, fmt.Errorf("exchange strava code: %w", classifyTokenError(err))
	}
	return tok, nil
}

// Refresh trades a refresh token for a new one; a refused one matches
// model.ErrUnauthorized.
func (c *OAuthClient) Refresh(ctx context.Context, refreshToken string) (*oauth2.Token, error) {
	tok, err := tokenCall(ctx, c.HTTPClient, func(ctx context.Context) (*oauth2.Token, error) {
		return c.Config.TokenSource(ctx, &oauth2.Token{RefreshToken: refreshToken}).Token()
	})
	if err != nil {
		return nil, fmt.Errorf("refresh strava token: %w", classifyTokenError(err))
	}
	return tok, nil
}

// Deauthorize revokes the grant of accessToken (through Deauthorizer).
func (c *OAuthClient) Deauthorize(ctx context.Context, accessToken string) error {
	if c.Deauthorizer == nil {
		return fmt.Errorf("deauthorize: no Strava client configured: %w", model.ErrInvalid)
	}
	return c.Deauthorizer.Deauthorize(ctx, accessToken)
}

// ErrAppCredentials means Strava's token endpoint refused the application
// itself (a fault on resource "Application": a wrong or rotated client id or
// secret). It is the operator's problem, never evidence about an athlete:
// errors carrying it also match model.ErrRetryable, and the work waits
// until the credentials are right.
var ErrAppCredentials = errors.New("strava refused the application's client credentials")

// classifyTokenError maps an oauth2 failure onto model's vocabulary by what
// Strava's error body names (see Fault): a fault on "Application" is
// ErrAppCredentials (and retryable); one on the athlete's own grant
// ("RefreshToken", "AuthorizationCode") is model.ErrUnauthorized; 429, 5xx
// and transport failures are retryable. Any other refusal names nobody, so
// it flags nobody: it is retryable too (and parked by the outbox if it
// persists), with Strava's answer in the error.
func classifyTokenError(err error) error {
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.Response == nil {
		// Transport failures (no response) are transient.
		return fmt.Errorf("%w: %w", model.ErrRetryable, err)
	}
	var body struct {
		Errors []Fault `json:"errors"`
	}
	_ = json.Unmarshal(re.Body, &body)
	for _, f := range body.Errors {
		if f.Resource == "Application" {
			return fmt.Errorf("%w: %w: %w", ErrAppCredentials, model.ErrRetryable, err)
		}
	}
	s := re.Response.StatusCode
	for _, f := range body.Errors {
		if (f.Resource == "RefreshToken" || f.Resource == "AuthorizationCode") && s >= 400 && s < 500 && s != http.StatusTooManyRequests {
			return fmt.Errorf("%w: %w", model.ErrUnauthorized, err)
		}
	}
	return fmt.Errorf("%w: strava token endpoint answered %d: %w", model.ErrRetryable, s, err)
}
