package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/commitcollect/backend/model"
)

// Strava tokens never reach a table in plain text: every write of a
// connection seals the pair (model/secrets envelope encryption, context
// userId + strava-tokens) and every read opens it. Connections written
// before sealing (schema version 1) are still read; SealPlainConnection
// (scripts/sealtokens) rewrites them.

// Sealer seals and opens secrets bound to a context (model/secrets.Sealer).
type Sealer interface {
	Seal(ctx context.Context, ec model.SecretContext, plaintext []byte) (model.SealedSecret, error)
	Open(ctx context.Context, ec model.SecretContext, sealed model.SealedSecret) ([]byte, error)
}

// ErrNoSealer is returned when a token must be sealed or opened and the
// store has no Sealer: tokens are never written in plain text.
var ErrNoSealer = errors.New("store has no token sealer (CC_TOKEN_KEY or CC_TOKEN_KMS_KEY)")

// tokenPair is the plaintext sealed into a connection.
type tokenPair struct {
	Access  string `json:"a"`
	Refresh string `json:"r"`
}

func tokenContext(userID string) model.SecretContext {
	return model.SecretContext{UserID: userID, Purpose: model.PurposeStravaTokens}
}

func (s *Store) sealTokens(ctx context.Context, userID, access, refresh string) (*model.SealedSecret, error) {
	if s.Secrets == nil {
		return nil, ErrNoSealer
	}
	pt, err := json.Marshal(tokenPair{Access: access, Refresh: refresh})
	if err != nil {
		return nil, err
	}
	sealed, err := s.Secrets.Seal(ctx, tokenContext(userID), pt)
	if err != nil {
		return nil, err
	}
	return &sealed, nil
}

// unsealedTokens refuses a connection whose in-memory tokens were not sealed
// (transaction puts have no context to seal with: callers seal first).
func unsealedTokens(e model.Entity) error {
	if c, ok := e.(*model.StravaConnection); ok && c.SealedTokens == nil && (c.AccessToken != "" || c.RefreshToken != "") {
		return fmt.Errorf("put %s: tokens not sealed: %w", e.ItemKey(), ErrNoSealer)
	}
	return nil
}

// sealConnection seals c's tokens into SealedTokens and drops every plain
// text copy from what will be marshalled.
func (s *Store) sealConnection(ctx context.Context, c *model.StravaConnection) error {
	if c.AccessToken == "" && c.RefreshToken == "" {
		// No tokens in memory: a connection without tokens, or one read
		// without opening them (kept sealed as they are).
		c.PlainAccessToken, c.PlainRefreshToken = "", ""
		return nil
	}
	sealed, err := s.sealTokens(ctx, c.UserID, c.AccessToken, c.RefreshToken)
	if err != nil {
		return fmt.Errorf("seal tokens of %s: %w", c.UserID, err)
	}
	c.SealedTokens, c.PlainAccessToken, c.PlainRefreshToken = sealed, "", ""
	return nil
}

// openConnection fills c's in-memory tokens from SealedTokens (a schema
// version 1 item was already filled by Normalize).
func (s *Store) openConnection(ctx context.Context, c *model.StravaConnection) error {
	if c.SealedTokens == nil {
		return nil
	}
	if s.Secrets == nil {
		return fmt.Errorf("open tokens of %s: %w", c.UserID, ErrNoSealer)
	}
	pt, err := s.Secrets.Open(ctx, tokenContext(c.UserID), *c.SealedTokens)
	if err != nil {
		return fmt.Errorf("open tokens of %s: %w", c.UserID, err)
	}
	var p tokenPair
	if err := json.Unmarshal(pt, &p); err != nil {
		return fmt.Errorf("open tokens of %s: %v: %w", c.UserID, err, model.ErrInvalid)
	}
	c.AccessToken, c.RefreshToken = p.Access, p.Refresh
	return nil
}

// sealedTokensUpdate sets a freshly sealed pair on a connection and removes
// any plain text pair, bringing the item to the current schema version.
func (s *Store) sealedTokensUpdate(ctx context.Context, userID, access, refresh string) (expression.UpdateBuilder, error) {
	sealed, err := s.sealTokens(ctx, userID, access, refresh)
	if err != nil {
		return expression.UpdateBuilder{}, fmt.Errorf("seal tokens of %s: %w", userID, err)
	}
	av, err := attributevalue.Marshal(sealed)
	if err != nil {
		return expression.UpdateBuilder{}, fmt.Errorf("seal tokens of %s: %w", userID, err)
	}
	return expression.Set(expression.Name("sealedTokens"), expression.Value(av)).
		Set(expression.Name("schemaVersion"), expression.Value(model.SchemaVersions[model.EntityStravaConnection])).
		Remove(expression.Name("accessToken")).
		Remove(expression.Name("refreshToken")), nil
}

// SealPlainConnection rewrites a user's connection that still holds its
// tokens in plain text (schema version 1) with the tokens sealed, only if
// its tokenVersion has not moved meanwhile (a concurrent refresh writes a
// sealed pair anyway). It reports whether it rewrote the item; a user
// without a connection, or whose connection is already sealed, is not an
// error. It is safe to re-run.
func (s *Store) SealPlainConnection(ctx context.Context, userID string, now time.Time) (bool, error) {
	var c model.StravaConnection
	err := s.Get(ctx, s.t.Main, model.StravaConnectionKey(userID), &c)
	switch {
	case errors.Is(err, model.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("seal connection of %s: %w", userID, err)
	case c.PlainAccessToken == "" && c.PlainRefreshToken == "":
		return false, nil
	}
	upd, err := s.sealedTokensUpdate(ctx, userID, c.PlainAccessToken, c.PlainRefreshToken)
	if err != nil {
		return false, err
	}
	upd = upd.Set(expression.Name(attrUpdatedAtUtc), expression.Value(now.UTC()))
	if c.GrantedAtUtc == nil && !c.UpdatedAtUtc.IsZero() {
		// The grant time of an item written before grantedAtUtc existed is
		// its updatedAtUtc (GrantTime): keep it as the item's grant.
		upd = upd.Set(expression.Name(attrGrantedAtUtc), expression.Value(c.UpdatedAtUtc.UTC()))
	}
	cond := expression.Name(attrTokenVersion).Equal(expression.Value(c.TokenVersion)).
		And(expression.AttributeExists(expression.Name("accessToken")))
	if err := s.update(ctx, model.StravaConnectionKey(userID), upd, cond); err != nil {
		if isConflict(err) {
			return false, nil // rewritten (sealed) by a refresh or a login meanwhile
		}
		return false, fmt.Errorf("seal connection of %s: %w", userID, err)
	}
	return true, nil
}
