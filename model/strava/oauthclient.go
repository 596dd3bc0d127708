package strava

import (
	"context"
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

func (c *OAuthClient) ctx(ctx context.Context) context.Context {
	if c.HTTPClient == nil {
		return ctx
	}
	return context.WithValue(ctx, oauth2.HTTPClient, c.HTTPClient)
}

// AuthCodeURL is Strava's authorize URL carrying state.
func (c *OAuthClient) AuthCodeURL(state string) string { return c.Config.AuthCodeURL(state) }

// Exchange trades an authorization code for a token; a refused code matches model.ErrUnauthorized.
func (c *OAuthClient) Exchange(ctx context.Context, code string) (*oauth2.Token, error) {
	tok, err := c.Config.Exchange(c.ctx(ctx), code)
	if err != nil {
		return nil, fmt.Errorf("exchange strava code: %w", classifyTokenError(err))
	}
	return tok, nil
}

// Refresh trades a refresh token for a new one; a refused one matches
// model.ErrUnauthorized.
func (c *OAuthClient) Refresh(ctx context.Context, refreshToken string) (*oauth2.Token, error) {
	tok, err := c.Config.TokenSource(c.ctx(ctx), &oauth2.Token{RefreshToken: refreshToken}).Token()
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

// classifyTokenError maps an oauth2 failure onto model's vocabulary: 400/401 from the
// token endpoint means the grant is gone, 429 and 5xx are worth retrying.
func classifyTokenError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil {
		switch s := re.Response.StatusCode; {
		case s == http.StatusBadRequest || s == http.StatusUnauthorized:
			return fmt.Errorf("%w: %w", model.ErrUnauthorized, err)
		case s == http.StatusTooManyRequests || s >= 500:
			return fmt.Errorf("%w: %w", model.ErrRetryable, err)
		}
		return err
	}
	// Transport failures (no response) are transient.
	return fmt.Errorf("%w: %w", model.ErrRetryable, err)
}
