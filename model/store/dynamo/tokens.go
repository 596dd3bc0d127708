package dynamo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/secrets"
)

// ErrNoSealer is returned when a token must be sealed or opened and the
// store has no Sealer: tokens are never written in plain text.
//
// Strava tokens never reach a table in plain text: every write of a
// connection seals the pair (model/secrets envelope encryption) and every
// read opens it. The context is the item's key, never its attributes: the
// user parsed from the PK (keys.ParseKey) + strava-tokens, and the whole
// key in the additional data (secrets.SealedFormatV2), so a connection item
// copied whole under another user's key does not open, whether or not its
// userId attribute was edited. Format 1 pairs (sealed under the userId
// attribute, which equals the key's user for every genuine item) are opened
// under the key's user; connections written before sealing (schema version
// 1) are still read; store.Connections.SealConnection (scripts/sealtokens) rewrites both as
// format 2.
var ErrNoSealer = errors.New("store has no token sealer (CC_TOKEN_KEY or CC_TOKEN_KMS_KEY)")

// tokenPair is the plaintext sealed into a connection.
type tokenPair struct {
	Access  string `json:"a"`
	Refresh string `json:"r"`
}

// tokenContext is the context of the tokens held by the connection item at
// k: the user parsed from k's PK and k itself. It returns ErrInvalid when k
// is not a connection's key.
func tokenContext(k model.Key) (secrets.Context, error) {
	p, err := keys.ParseKey(k)
	if err != nil {
		return secrets.Context{}, fmt.Errorf("token context of %s: %w", k, err)
	}
	if p.Kind != keys.KindStravaConnection {
		return secrets.Context{}, fmt.Errorf("token context of %s: not a strava connection key: %w", k, model.ErrInvalid)
	}
	return secrets.Context{UserID: p.UserID, Purpose: model.PurposeStravaTokens, Item: k.String()}, nil
}

// sealTokens seals the pair for the connection item at k (format 2).
func (s *DB) sealTokens(ctx context.Context, k model.Key, access, refresh string) (*model.SealedSecret, error) {
	if s.Secrets == nil {
		return nil, ErrNoSealer
	}
	ec, err := tokenContext(k)
	if err != nil {
		return nil, err
	}
	pt, err := json.Marshal(tokenPair{Access: access, Refresh: refresh})
	if err != nil {
		return nil, err
	}
	sealed, err := s.Secrets.Seal(ctx, ec, pt)
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

// SealConnectionTokens seals c's tokens into SealedTokens and drops every plain
// text copy from what will be marshalled.
func (s *DB) SealConnectionTokens(ctx context.Context, c *model.StravaConnection) error {
	if c.AccessToken == "" && c.RefreshToken == "" {
		// No tokens in memory: a connection without tokens, or one read
		// without opening them (kept sealed as they are).
		c.PlainAccessToken, c.PlainRefreshToken = "", ""
		return nil
	}
	sealed, err := s.sealTokens(ctx, c.ItemKey(), c.AccessToken, c.RefreshToken)
	if err != nil {
		return fmt.Errorf("seal tokens of %s: %w", c.UserID, err)
	}
	c.SealedTokens, c.PlainAccessToken, c.PlainRefreshToken = sealed, "", ""
	return nil
}

// OpenConnectionTokens fills c's in-memory tokens from SealedTokens (a schema
// version 1 item was already filled by Normalize), under the context of k,
// the key the item was read at (never its attributes).
func (s *DB) OpenConnectionTokens(ctx context.Context, k model.Key, c *model.StravaConnection) error {
	if c.SealedTokens == nil {
		return nil
	}
	if s.Secrets == nil {
		return fmt.Errorf("open tokens of %s: %w", c.UserID, ErrNoSealer)
	}
	ec, err := tokenContext(k)
	if err != nil {
		return fmt.Errorf("open tokens at %s: %w", k, err)
	}
	pt, err := s.Secrets.Open(ctx, ec, *c.SealedTokens)
	if err != nil {
		return fmt.Errorf("open tokens at %s (sealed for another item: copied or moved?): %w", k, err)
	}
	var p tokenPair
	if err := json.Unmarshal(pt, &p); err != nil {
		return fmt.Errorf("open tokens of %s: %v: %w", c.UserID, err, model.ErrInvalid)
	}
	c.AccessToken, c.RefreshToken = p.Access, p.Refresh
	return nil
}

// SealedTokensUpdate sets a freshly sealed pair on a connection and removes
// any plain text pair, bringing the item to the current schema version.
func (s *DB) SealedTokensUpdate(ctx context.Context, userID, access, refresh string) (expression.UpdateBuilder, error) {
	sealed, err := s.sealTokens(ctx, keys.StravaConnectionKey(userID), access, refresh)
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
