package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
)

// Guard holds the user guard (GUARD#USER#{id}) and the check every guarded writer runs after its write.
type Guard struct {
	*DB
}

// The user guard (model.UserGuard): every writer of user data that may be in
// flight while the user is deleted or deauthorized (the worker, the sync, a
// tombstone write) writes first and then reads the guard with a consistent
// read (write-then-check). The deletion and the deauthorization set the
// guard first and then sweep the user's items; so a write either landed
// before the guard was set (the sweep that follows finds it) or its check
// sees the guard (and the writer removes what it wrote). One consistent GetItem per write, no transaction.

// ErrUserDeleted is returned (wrapped, matching model.ErrConflict) by a
// guarded write that landed after the user's account was deleted: the item
// it wrote has been removed again.
var ErrUserDeleted = fmt.Errorf("user deleted: %w", model.ErrConflict)

// ErrStravaRevoked is returned (wrapped, matching model.ErrConflict) by a
// write of Strava data that landed after the athlete revoked the grant: the
// item has been removed again.
var ErrStravaRevoked = fmt.Errorf("strava grant revoked: %w", model.ErrConflict)

// checkGuard is the check after a write of the user's Strava data item k
// (a workout): when the account was deleted it deletes k and returns
// ErrUserDeleted; when a confirmed deauthorization revoked the grant it
// deletes k (unless a reconnect cleared the revocation) and returns
// ErrStravaRevoked. A user without a guard passes.
func (s *Guard) checkGuard(ctx context.Context, userID string, k model.Key) error {
	return s.afterWrite(ctx, userID, k, true)
}

// checkDeleted is checkGuard for an item that is not Strava data (the sync
// state, a milestone): only a deletion counts.
func (s *Guard) checkDeleted(ctx context.Context, userID string, k model.Key) error {
	return s.afterWrite(ctx, userID, k, false)
}

func (s *Guard) afterWrite(ctx context.Context, userID string, k model.Key, stravaData bool) error {
	g, err := s.UserGuard(ctx, userID)
	switch {
	case errors.Is(err, model.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("check guard after writing %s: %w", k, err)
	case g.Deleted():
		if err := s.Delete(ctx, s.t.Main, k); err != nil {
			return fmt.Errorf("remove %s written after the user's deletion: %w", k, err)
		}
		return fmt.Errorf("write %s: %w", k, ErrUserDeleted)
	case stravaData && g.Revoked():
		if err := s.deleteIfStillRevoked(ctx, userID, k, g); err != nil {
			return fmt.Errorf("remove %s written after a deauthorization: %w", k, err)
		}
		return fmt.Errorf("write %s: %w", k, ErrStravaRevoked)
	}
	return nil
}

// deleteIfStillRevoked deletes k in a transaction with a check that the
// guard still holds g's revocation: a reconnect that cleared it after our
// read wins (its backfill may have written k). A failed condition is not an
// error.
func (s *Guard) deleteIfStillRevoked(ctx context.Context, userID string, k model.Key, g *model.UserGuard) error {
	del := types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(s.t.Main), Key: s.t.keyAV(s.t.Main, k)}}
	cex, err := expression.NewBuilder().WithCondition(
		expression.Name(attrStravaRevokedAtUtc).Equal(expression.Value(g.StravaRevokedAtUtc.UTC()))).Build()
	if err != nil {
		return fmt.Errorf("build guard check: %w", err)
	}
	check := types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName: aws.String(s.t.Main), Key: s.t.keyAV(s.t.Main, keys.UserGuardKey(userID)), ConditionExpression: cex.Condition(),
		ExpressionAttributeNames: cex.Names(), ExpressionAttributeValues: cex.Values(),
	}}
	if err := s.Transact(ctx, []types.TransactWriteItem{del, check}, ""); err != nil && !isConflict(err) {
		return err
	}
	return nil
}

// UserGuard reads the user's guard. It returns ErrNotFound when the user has
// none (no restriction).
func (s *Guard) UserGuard(ctx context.Context, userID string) (*model.UserGuard, error) {
	var g model.UserGuard
	if err := s.Get(ctx, s.t.Main, keys.UserGuardKey(userID), &g); err != nil {
		return nil, fmt.Errorf("read guard of user %s: %w", userID, err)
	}
	return &g, nil
}

// MarkUserDeleted sets the user's guard as deleted at now (kept, the first
// value wins) and lets it expire UserGuardRetentionDays later. Everything a
// writer in flight lands afterwards is removed by its own check; call it
// before sweeping the user's items.
func (s *Guard) MarkUserDeleted(ctx context.Context, userID string, now time.Time) error {
	g := &model.UserGuard{UserID: userID}
	g.Stamp()
	now = now.UTC()
	del := expression.Name("deletedAtUtc")
	upd := expression.Set(expression.Name("entityType"), expression.Value(g.EntityType)).
		Set(expression.Name("schemaVersion"), expression.Value(g.SchemaVersion)).
		Set(expression.Name("userId"), expression.Value(userID)).
		Set(del, expression.IfNotExists(del, expression.Value(now))).
		Set(expression.Name("updatedAtUtc"), expression.Value(now)).
		Set(expression.Name("expiresAt"), expression.Value(now.Add(model.UserGuardRetentionDays*24*time.Hour).Unix()))
	if err := s.update(ctx, g.ItemKey(), upd); err != nil {
		return fmt.Errorf("mark user %s deleted: %w", userID, err)
	}
	return nil
}
