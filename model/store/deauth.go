package store

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
)

// A confirmed Strava deauthorization and a reconnect within the retention
// window (model.StravaDataRetentionDays):
//
//   - RevokeStravaConnection deletes the connection (only the grant that was
//     confirmed revoked: a reconnect racing in wins) and records the
//     revocation in the user guard, in one transaction; the athlete → user
//     owner mapping stays, so a later login reattaches the same user.
//   - ExpireStravaWorkouts then sets the guard's expiry on every Strava
//     workout; a write landing meanwhile gets it from its guard check.
//   - A reconnect clears the guard's revocation (ClearStravaRevocation), then
//     removes the expiry again (UnexpireStravaWorkouts).
//
// Both loops are idempotent and resumable: the worker keeps the
// deauthorization's outbox item pending until its loop has finished, the
// login answers an error until its loop has.

const (
	attrGrantedAtUtc       = "grantedAtUtc"
	attrUpdatedAtUtc       = "updatedAtUtc"
	attrStravaRevokedAtUtc = "stravaRevokedAtUtc"
	attrStravaDataExpires  = "stravaDataExpiresAt"
)

// StravaConnectionGrant reads the user's connection without opening its
// tokens (they stay sealed; AccessToken and RefreshToken are empty): what a
// deauthorization compares with (GrantTime, TokenVersion). It returns
// ErrNotFound when the user has none.
func (s *Store) StravaConnectionGrant(ctx context.Context, userID string) (*model.StravaConnection, error) {
	var c model.StravaConnection
	if err := s.Get(ctx, s.t.Main, model.StravaConnectionKey(userID), &c); err != nil {
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
func (s *Store) RevokeStravaConnection(ctx context.Context, c *model.StravaConnection, revokedAt, dataExpiresAt, now time.Time) error {
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
		TableName: aws.String(s.t.Main), Key: s.keyAV(s.t.Main, model.StravaConnectionKey(c.UserID)),
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
	guard := TransactUpdate(&dynamodb.UpdateItemInput{
		TableName: aws.String(s.t.Main), Key: s.keyAV(s.t.Main, g.ItemKey()), UpdateExpression: gex.Update(),
		ExpressionAttributeNames: gex.Names(), ExpressionAttributeValues: gex.Values(),
	})
	if err := s.Transact(ctx, []types.TransactWriteItem{del, guard}, ""); err != nil {
		return fmt.Errorf("revoke strava connection of %s at version %d: %w", c.UserID, c.TokenVersion, err)
	}
	return nil
}

// ClearStravaRevocation removes the revocation recorded at revokedAt from
// the user's guard (a reconnect) at now. It returns an error matching ErrConflict
// when the guard no longer holds that revocation (cleared by another login,
// or replaced by a newer one).
func (s *Store) ClearStravaRevocation(ctx context.Context, userID string, revokedAt, now time.Time) error {
	cond := expression.Name(attrStravaRevokedAtUtc).Equal(expression.Value(revokedAt.UTC()))
	upd := expression.Remove(expression.Name(attrStravaRevokedAtUtc)).
		Remove(expression.Name(attrStravaDataExpires)).
		Set(expression.Name(attrUpdatedAtUtc), expression.Value(now.UTC()))
	if err := s.update(ctx, model.UserGuardKey(userID), upd, cond); err != nil {
		return fmt.Errorf("clear strava revocation of %s at %s: %w", userID, revokedAt.UTC().Format(time.RFC3339), err)
	}
	return nil
}

// ExpireStravaWorkouts sets expiresAt (TTL) on every Strava workout of the
// user that does not carry that value yet (all pages, keys only), returning
// how many it changed. It never creates an item (one removed meanwhile stays
// removed) and is safe to re-run after a failure midway.
func (s *Store) ExpireStravaWorkouts(ctx context.Context, userID string, expiresAt time.Time) (int, error) {
	exp := expression.Name(attrExpiresAt)
	v := expression.Value(expiresAt.Unix())
	differs := expression.Or(expression.AttributeNotExists(exp), exp.NotEqual(v))
	cond := expression.And(expression.AttributeExists(expression.Name("PK")), differs)
	n, err := s.eachStravaWorkout(ctx, userID, differs, expression.Set(exp, v), cond)
	if err != nil {
		return n, fmt.Errorf("expire workouts of %s: %w", userID, err)
	}
	return n, nil
}

// UnexpireStravaWorkouts removes expiresAt from every Strava workout of the
// user that carries one (a reconnect within the retention window), returning
// how many it changed. It is safe to re-run after a failure midway.
func (s *Store) UnexpireStravaWorkouts(ctx context.Context, userID string) (int, error) {
	exp := expression.Name(attrExpiresAt)
	n, err := s.eachStravaWorkout(ctx, userID, expression.AttributeExists(exp), expression.Remove(exp), expression.AttributeExists(exp))
	if err != nil {
		return n, fmt.Errorf("cancel expiry of workouts of %s: %w", userID, err)
	}
	return n, nil
}

// eachStravaWorkout applies upd under cond to every WORKOUT#STRAVA# item of
// the user that matches filter (consistent query, keys only: the items
// already as wanted cost reads, no writes) and counts the items changed; a
// failed condition skips the item.
func (s *Store) eachStravaWorkout(ctx context.Context, userID string, filter expression.ConditionBuilder, upd expression.UpdateBuilder, cond expression.ConditionBuilder) (int, error) {
	kc := expression.Key("PK").Equal(expression.Value(model.UserPK(userID))).
		And(expression.Key("SK").BeginsWith(model.PrefixWorkoutStrava))
	ex, err := expression.NewBuilder().WithKeyCondition(kc).WithFilter(filter).
		WithProjection(expression.NamesList(expression.Name("PK"), expression.Name("SK"))).Build()
	if err != nil {
		return 0, fmt.Errorf("build query: %w", err)
	}
	p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
		TableName: aws.String(s.t.Main), KeyConditionExpression: ex.KeyCondition(),
		FilterExpression: ex.Filter(), ProjectionExpression: ex.Projection(), ExpressionAttributeNames: ex.Names(),
		ExpressionAttributeValues: ex.Values(), ConsistentRead: aws.Bool(true),
	})
	n := 0
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return n, translate(err)
		}
		for _, it := range page.Items {
			k, err := itemKey(it)
			if err != nil {
				continue
			}
			err = s.update(ctx, k, upd, cond)
			switch {
			case isConflict(err):
				continue
			case err != nil:
				return n, err
			}
			n++
		}
	}
	return n, nil
}
