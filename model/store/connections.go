package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/secrets"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/dynerr"
)

// Connections holds Strava connections: sealed tokens, refresh leases, grants and their revocation.
type Connections struct {
	DB    *dynamo.DB
	Guard *Guard
}

// A confirmed Strava deauthorization and a reconnect:
//
//   - RevokeStravaConnection deletes the connection (only the grant that was
//     confirmed revoked: a reconnect racing in wins) and records the
//     revocation in the user guard, in one transaction; from then on a write
//     of Strava data landing for the user removes itself (its guard check).
//   - PurgeStravaData (model/store/purge) then deletes what came from
//     Strava, the sync state first, leaving a keyed-hash mapping of the
//     athlete for a reconnect.
//   - A reconnect reclaims the user through that mapping
//     (ReclaimRevokedAthlete), clears the guard's revocation
//     (ClearStravaRevocation), which stops a purge still running, and its
//     backfill imports the history again (no sync state is left once any
//     workout was deleted).
//
// The purge is idempotent and resumable: the worker keeps the
// deauthorization's outbox item pending until it has finished.

// SaveLoginTokens stores the tokens of a fresh login on the user's
// connection (creating it if it is gone), bumping tokenVersion with a
// conditional write so a worker refreshing at the same moment cannot be
// overwritten blindly: on a conflict it re-reads and retries up to
// LoginTokenRetries times, then returns an error matching model.ErrConflict.
// c.TokenVersion is set to the stored value. A login is a new grant: the
// item's grantedAtUtc is c.GrantedAtUtc, else c.UpdatedAtUtc. The write is
// checked against the user guard (write-then-check): written after the
// account's deletion began, it is removed and the error matches
// model.ErrUserDeleted.
func (s *Connections) SaveLoginTokens(ctx context.Context, c *model.StravaConnection) error {
	if c.GrantedAtUtc == nil {
		g := c.UpdatedAtUtc
		c.GrantedAtUtc = &g
	}
	for attempt := 0; ; attempt++ {
		var cur model.StravaConnection
		err := s.DB.Get(ctx, s.DB.Tables().Main, keys.StravaConnectionKey(c.UserID), &cur)
		var cond expression.ConditionBuilder
		switch {
		case errors.Is(err, model.ErrNotFound):
			c.TokenVersion = 1
			cond = expression.AttributeNotExists(expression.Name("PK"))
		case err != nil:
			return fmt.Errorf("save login tokens %s: %w", c.UserID, err)
		default:
			c.TokenVersion = cur.TokenVersion + 1
			cond = expression.Name("tokenVersion").Equal(expression.Value(cur.TokenVersion))
		}
		err = s.DB.PutIf(ctx, s.DB.Tables().Main, c, cond)
		if err == nil {
			// A login racing an account deletion must not leave tokens
			// behind its sweep: the write is checked against the guard.
			return s.Guard.CheckDeleted(ctx, c.UserID, keys.StravaConnectionKey(c.UserID))
		}
		if !isConflict(err) || attempt >= LoginTokenRetries {
			return fmt.Errorf("save login tokens %s: %w", c.UserID, err)
		}
	}
}

// StravaConnection reads a user's Strava connection (consistent read),
// opening its tokens under the item's key (tokens.go). It returns
// ErrNotFound when the user has none, and an error matching ErrInvalid when
// the tokens do not open there (an item copied from another user's key).
func (s *Connections) StravaConnection(ctx context.Context, userID string) (*model.StravaConnection, error) {
	var c model.StravaConnection
	k := keys.StravaConnectionKey(userID)
	if err := s.DB.Get(ctx, s.DB.Tables().Main, k, &c); err != nil {
		return nil, fmt.Errorf("read strava connection of %s: %w", userID, err)
	}
	if err := s.DB.OpenConnectionTokens(ctx, k, &c); err != nil {
		return nil, fmt.Errorf("read strava connection of %s: %w", userID, err)
	}
	return &c, nil
}

// AcquireTokenRefreshLease marks a refresh of the user's token as in flight
// until `until`, only if the token is still at version and no other lease is
// live at now. It returns ErrConflict when another worker holds the lease or
// the token already moved on (or the connection is gone).
func (s *Connections) AcquireTokenRefreshLease(ctx context.Context, userID string, version int64, now, until time.Time) error {
	lease := expression.Name(attrRefreshLeaseUntil)
	cond := expression.Name(attrTokenVersion).Equal(expression.Value(version)).And(
		expression.Or(expression.AttributeNotExists(lease), lease.LessThan(expression.Value(now.Unix()))))
	upd := expression.Set(lease, expression.Value(until.Unix()))
	if err := s.DB.Update(ctx, keys.StravaConnectionKey(userID), upd, cond); err != nil {
		return fmt.Errorf("acquire token refresh lease of %s at version %d: %w", userID, version, err)
	}
	return nil
}

// ReleaseTokenRefreshLease drops a refresh lease taken at version (after a
// refresh that failed transiently) so the next worker need not wait for it
// to lapse. A lease that is gone or belongs to a newer version is left alone.
func (s *Connections) ReleaseTokenRefreshLease(ctx context.Context, userID string, version int64) error {
	cond := expression.Name(attrTokenVersion).Equal(expression.Value(version))
	upd := expression.Remove(expression.Name(attrRefreshLeaseUntil))
	if err := s.DB.Update(ctx, keys.StravaConnectionKey(userID), upd, cond); err != nil && !isConflict(err) {
		return fmt.Errorf("release token refresh lease of %s at version %d: %w", userID, version, err)
	}
	return nil
}

// SaveRefreshedToken persists a rotated token pair only if the connection is
// still at expectedVersion, bumps tokenVersion, clears the refresh lease and
// any re-authorization flag, and returns the new version. It returns
// ErrConflict when another writer got there first.
func (s *Connections) SaveRefreshedToken(ctx context.Context, userID string, expectedVersion int64, access, refresh string, expiresAt, now time.Time) (int64, error) {
	cond := expression.Name(attrTokenVersion).Equal(expression.Value(expectedVersion))
	upd, err := s.DB.SealedTokensUpdate(ctx, userID, access, refresh)
	if err != nil {
		return 0, fmt.Errorf("save refreshed token at version %d: %w", expectedVersion, err)
	}
	upd = upd.Set(expression.Name("expiresAtUtc"), expression.Value(expiresAt.UTC())).
		Set(expression.Name("updatedAtUtc"), expression.Value(now.UTC())).
		Set(expression.Name(attrTokenVersion), expression.Value(expectedVersion+1)).
		Set(expression.Name("needsReauth"), expression.Value(false)).
		Remove(expression.Name(attrRefreshLeaseUntil))
	if err := s.DB.Update(ctx, keys.StravaConnectionKey(userID), upd, cond); err != nil {
		return 0, fmt.Errorf("save refreshed token of %s at version %d: %w", userID, expectedVersion, err)
	}
	return expectedVersion + 1, nil
}

// MarkNeedsReauth flags the user's connection as needing re-authorization
// (Strava refused its tokens) at now (needsReauthAtUtc) and drops any
// refresh lease. It leaves updatedAtUtc, which only logins and successful
// refreshes move (the grant time of connections written before grantedAtUtc
// existed, model.StravaConnection.GrantTime). It returns ErrNotFound when
// the connection is gone.
func (s *Connections) MarkNeedsReauth(ctx context.Context, userID string, now time.Time) error {
	cond := expression.AttributeExists(expression.Name("PK"))
	upd := expression.Set(expression.Name("needsReauth"), expression.Value(true)).
		Set(expression.Name("needsReauthAtUtc"), expression.Value(now.UTC())).
		Remove(expression.Name(attrRefreshLeaseUntil))
	if err := s.DB.Update(ctx, keys.StravaConnectionKey(userID), upd, cond); err != nil {
		if isConflict(err) {
			err = model.ErrNotFound
		}
		return fmt.Errorf("mark connection of %s as needing reauth: %w", userID, err)
	}
	return nil
}

// StravaConnectionGrant reads the user's connection without opening its
// tokens (they stay sealed; AccessToken and RefreshToken are empty): what a
// deauthorization compares with (GrantTime, TokenVersion). It returns
// ErrNotFound when the user has none.
func (s *Connections) StravaConnectionGrant(ctx context.Context, userID string) (*model.StravaConnection, error) {
	var c model.StravaConnection
	if err := s.DB.Get(ctx, s.DB.Tables().Main, keys.StravaConnectionKey(userID), &c); err != nil {
		return nil, fmt.Errorf("read strava grant of %s: %w", userID, err)
	}
	return &c, nil
}

// RevokeStravaConnection applies a confirmed deauthorization of the grant c
// (as read by StravaConnectionGrant) in one transaction: it deletes the
// user's connection only if its tokenVersion and grantedAtUtc are still c's
// (a login since is a new grant and wins), and records the revocation in the
// user guard (stravaRevokedAtUtc = revokedAt, the event's time;
// stravaDataExpiresAt = dataExpiresAt), so every workout written from now on
// gets that expiry. The athlete → user owner mapping is kept. It returns an
// error matching ErrConflict when the connection moved or is gone.
func (s *Connections) RevokeStravaConnection(ctx context.Context, c *model.StravaConnection, revokedAt, dataExpiresAt, now time.Time) error {
	grant := expression.Name(attrGrantedAtUtc)
	sameGrant := expression.AttributeNotExists(grant)
	if c.GrantedAtUtc != nil {
		sameGrant = grant.Equal(expression.Value(c.GrantedAtUtc.UTC()))
	}
	cond := expression.And(expression.AttributeExists(expression.Name("PK")),
		expression.Name(attrTokenVersion).Equal(expression.Value(c.TokenVersion)), sameGrant)
	ex, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return fmt.Errorf("revoke strava connection of %s: build condition: %w", c.UserID, err)
	}
	del := types.TransactWriteItem{Delete: &types.Delete{
		TableName: aws.String(s.DB.Tables().Main), Key: s.DB.Tables().KeyAV(s.DB.Tables().Main, keys.StravaConnectionKey(c.UserID)),
		ConditionExpression: ex.Condition(), ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
	}}
	g := &model.UserGuard{UserID: c.UserID}
	g.Stamp()
	upd := expression.Set(expression.Name("entityType"), expression.Value(g.EntityType)).
		Set(expression.Name("schemaVersion"), expression.Value(g.SchemaVersion)).
		Set(expression.Name("userId"), expression.Value(c.UserID)).
		Set(expression.Name(attrStravaRevokedAtUtc), expression.Value(revokedAt.UTC())).
		Set(expression.Name(attrStravaDataExpires), expression.Value(dataExpiresAt.Unix())).
		Set(expression.Name(attrUpdatedAtUtc), expression.Value(now.UTC()))
	gex, err := expression.NewBuilder().WithUpdate(upd).Build()
	if err != nil {
		return fmt.Errorf("revoke strava connection of %s: build guard update: %w", c.UserID, err)
	}
	guard := dynamo.TransactUpdate(&dynamodb.UpdateItemInput{
		TableName: aws.String(s.DB.Tables().Main), Key: s.DB.Tables().KeyAV(s.DB.Tables().Main, g.ItemKey()), UpdateExpression: gex.Update(),
		ExpressionAttributeNames: gex.Names(), ExpressionAttributeValues: gex.Values(),
	})
	if err := s.DB.Transact(ctx, []types.TransactWriteItem{del, guard}, ""); err != nil {
		return fmt.Errorf("revoke strava connection of %s at version %d: %w", c.UserID, c.TokenVersion, err)
	}
	return nil
}

// ClearStravaRevocation removes the revocation recorded at revokedAt from
// the user's guard (a reconnect) at now. It returns an error matching ErrConflict
// when the guard no longer holds that revocation (cleared by another login,
// or replaced by a newer one).
func (s *Connections) ClearStravaRevocation(ctx context.Context, userID string, revokedAt, now time.Time) error {
	cond := expression.Name(attrStravaRevokedAtUtc).Equal(expression.Value(revokedAt.UTC()))
	upd := expression.Remove(expression.Name(attrStravaRevokedAtUtc)).
		Remove(expression.Name(attrStravaDataExpires)).
		Set(expression.Name(attrUpdatedAtUtc), expression.Value(now.UTC()))
	if err := s.DB.Update(ctx, keys.UserGuardKey(userID), upd, cond); err != nil {
		return fmt.Errorf("clear strava revocation of %s at %s: %w", userID, revokedAt.UTC().Format(time.RFC3339), err)
	}
	return nil
}

// LoginTokenRetries bounds how often SaveLoginTokens re-reads a connection
// whose tokenVersion moved under it.
const LoginTokenRetries = 5

// ConnectionStatus reads what a sync needs to know of a user's Strava
// connection without opening its tokens (a projected, strongly consistent
// GetItem): the athlete and whether the athlete must reconnect. It returns
// ErrNotFound when the user has no connection.
func (s *Connections) ConnectionStatus(ctx context.Context, userID string) (athleteID int64, needsReauth bool, err error) {
	ex, err := expression.NewBuilder().WithProjection(expression.NamesList(
		expression.Name("athleteId"), expression.Name("needsReauth"), expression.Name("entityType"),
		expression.Name("schemaVersion"))).Build()
	if err != nil {
		return 0, false, fmt.Errorf("read connection status of %s: build projection: %w", userID, err)
	}
	out, err := s.DB.Client().GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.DB.Tables().Main), Key: s.DB.Tables().KeyAV(s.DB.Tables().Main, keys.StravaConnectionKey(userID)),
		ConsistentRead: aws.Bool(true), ProjectionExpression: ex.Projection(), ExpressionAttributeNames: ex.Names(),
	})
	if err != nil {
		return 0, false, fmt.Errorf("read connection status of %s: %w", userID, dynerr.Translate(err))
	}
	if out.Item == nil {
		return 0, false, fmt.Errorf("read connection status of %s: %w", userID, model.ErrNotFound)
	}
	var c struct {
		model.Meta
		AthleteID   int64 `dynamodbav:"athleteId"`
		NeedsReauth bool  `dynamodbav:"needsReauth"`
	}
	if err := attributevalue.UnmarshalMap(out.Item, &c); err != nil {
		return 0, false, fmt.Errorf("read connection status of %s: %v: %w", userID, err, model.ErrInvalid)
	}
	if err := model.CheckSchema(c.Meta, model.EntityStravaConnection); err != nil {
		return 0, false, fmt.Errorf("read connection status of %s: %w", userID, err)
	}
	return c.AthleteID, c.NeedsReauth, nil
}

// SealConnection rewrites a user's connection whose tokens are not sealed
// in the current format: held in plain text (schema version 1) or sealed
// in format 1 (bound to the userId attribute, not the key). The pair is
// resealed in format 2 (bound to the item's key), only if tokenVersion has
// not moved meanwhile (a concurrent refresh writes a format 2 pair anyway).
// A format 1 pair is opened under the key's user first: one that does not
// open there (an item copied from another key) is an error, not rewritten.
// It reports whether it rewrote the item; a user without a connection, or
// whose connection is current, is not an error. It is safe to re-run.
func (s *Connections) SealConnection(ctx context.Context, userID string, now time.Time) (bool, error) {
	k := keys.StravaConnectionKey(userID)
	var c model.StravaConnection
	err := s.DB.Get(ctx, s.DB.Tables().Main, k, &c)
	switch {
	case errors.Is(err, model.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("seal connection of %s: %w", userID, err)
	}
	var cond expression.ConditionBuilder
	access, refresh := c.PlainAccessToken, c.PlainRefreshToken
	switch {
	case access != "" || refresh != "":
		cond = expression.AttributeExists(expression.Name("accessToken"))
	case c.SealedTokens != nil && c.SealedTokens.Format == secrets.SealedFormatV1:
		if err := s.DB.OpenConnectionTokens(ctx, k, &c); err != nil {
			return false, fmt.Errorf("seal connection of %s: %w", userID, err)
		}
		access, refresh = c.AccessToken, c.RefreshToken
		cond = expression.Name("sealedTokens.v").Equal(expression.Value(secrets.SealedFormatV1))
	default:
		return false, nil
	}
	upd, err := s.DB.SealedTokensUpdate(ctx, userID, access, refresh)
	if err != nil {
		return false, err
	}
	upd = upd.Set(expression.Name(attrUpdatedAtUtc), expression.Value(now.UTC()))
	if c.GrantedAtUtc == nil && !c.UpdatedAtUtc.IsZero() {
		// The grant time of an item written before grantedAtUtc existed is
		// its updatedAtUtc (GrantTime): keep it as the item's grant.
		upd = upd.Set(expression.Name(attrGrantedAtUtc), expression.Value(c.UpdatedAtUtc.UTC()))
	}
	cond = expression.Name(attrTokenVersion).Equal(expression.Value(c.TokenVersion)).And(cond)
	if err := s.DB.Update(ctx, k, upd, cond); err != nil {
		if isConflict(err) {
			return false, nil // rewritten (sealed) by a refresh or a login meanwhile
		}
		return false, fmt.Errorf("seal connection of %s: %w", userID, err)
	}
	return true, nil
}

// DeleteStravaConnection removes the user's Strava connection (its tokens);
// a missing one is not an error.
func (s *Connections) DeleteStravaConnection(ctx context.Context, userID string) error {
	if err := s.DB.Delete(ctx, s.DB.Tables().Main, keys.StravaConnectionKey(userID)); err != nil {
		return fmt.Errorf("delete strava connection of %s: %w", userID, err)
	}
	return nil
}
