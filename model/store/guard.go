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

// Guard holds the user guard (USER#{id} / GUARD) and what a writer does when
// it finds its writes guarded.
type Guard struct {
	*DB
}

// The user guard (model.UserGuard): every writer of user data that may be in
// flight while the user is deleted or deauthorized writes first and then
// reads the guard with a consistent read (write-then-check). The deletion and
// the deauthorization set the guard first and then sweep the user's items;
// so a write either landed before the guard was set (the sweep that follows
// finds it) or a check after it sees the guard (and what it wrote is
// removed). Who checks, so that no write pays a request of its own:
//
//   - a workout written for a webhook event: the projector. Its one read of
//     the user's milestones covers the guard (keys.GuardAndMilestones), and
//     the stream hands it every workout write after the write landed; a
//     guarded user's written workouts are removed there (RemoveGuarded).
//   - a sync page's workouts: the syncer, once per page (CheckWrites).
//   - the sync state and a milestone: their own write (checkDeleted).

// ErrUserDeleted is returned (wrapped, matching model.ErrConflict) by a
// guarded write that landed after the user's account was deleted: the item
// it wrote has been removed again.
var ErrUserDeleted = fmt.Errorf("user deleted: %w", model.ErrConflict)

// ErrStravaRevoked is returned (wrapped, matching model.ErrConflict) by a
// write of Strava data that landed after the athlete revoked the grant: the
// item has been removed again.
var ErrStravaRevoked = fmt.Errorf("strava grant revoked: %w", model.ErrConflict)

// CheckWrites is the check after writes of the user's Strava data items ks
// (a sync page's workouts): one consistent read of the guard, then, when the
// account was deleted, ks are deleted and it returns ErrUserDeleted; when a
// confirmed deauthorization revoked the grant, ks are deleted (unless a
// reconnect cleared the revocation) and it returns ErrStravaRevoked. A user
// without a guard passes.
func (s *Guard) CheckWrites(ctx context.Context, userID string, ks []model.Key) error {
	g, err := s.UserGuard(ctx, userID)
	switch {
	case errors.Is(err, model.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("check guard after writing %d items: %w", len(ks), err)
	}
	if _, err := s.RemoveGuarded(ctx, g, ks); err != nil {
		return err
	}
	switch {
	case g.Deleted():
		return fmt.Errorf("write %d items of user %s: %w", len(ks), userID, ErrUserDeleted)
	case g.Revoked():
		return fmt.Errorf("write %d items of user %s: %w", len(ks), userID, ErrStravaRevoked)
	}
	return nil
}

// RemoveGuarded removes the user's Strava data items ks written while g held
// (read after their writes): all of them when the account was deleted, each
// one unless a reconnect cleared the revocation since (deleteIfStillRevoked)
// when the grant was revoked; nothing otherwise. It returns how many it
// removed (or found already gone).
func (s *Guard) RemoveGuarded(ctx context.Context, g *model.UserGuard, ks []model.Key) (int, error) {
	n := 0
	for _, k := range ks {
		switch {
		case g.Deleted():
			if err := s.Delete(ctx, s.t.Main, k); err != nil {
				return n, fmt.Errorf("remove %s written after the user's deletion: %w", k, err)
			}
		case g.Revoked():
			if err := s.deleteIfStillRevoked(ctx, g.UserID, k, g); err != nil {
				return n, fmt.Errorf("remove %s written after a deauthorization: %w", k, err)
			}
		default:
			return n, nil
		}
		n++
	}
	return n, nil
}

// checkDeleted is the check after writing item k of the user that is not
// Strava data (the sync state, a milestone): when the account was deleted
// it deletes k and returns ErrUserDeleted.
func (s *Guard) checkDeleted(ctx context.Context, userID string, k model.Key) error {
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
