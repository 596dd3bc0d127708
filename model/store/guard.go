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
	"github.com/commitcollect/backend/model/store/dynamo"
)

// Guard holds the user guard (USER#{id} / GUARD) and what a writer does when
// it finds its writes guarded.
type Guard struct {
	DB *dynamo.DB
}

// The user guard (model.UserGuard) is written first by a deletion or a
// deauthorization, which then sweep the user's items; every write that may
// be in flight meanwhile is followed by a consistent read of the guard
// (write-then-check), so it either landed before the sweep or is removed.
// No write pays its own read: the projector checks a webhook's workout (the
// guard comes with its milestone read, keys.GuardAndMilestones; the stream
// hands it every write once landed), a sync page checks once for all its
// workouts (CheckWrites), the sync state and a milestone check themselves.

// CheckWrites is the check after writes of the user's Strava data items ks
// (a sync page's workouts): one consistent read of the guard; when it holds,
// RemoveGuarded removes ks and it returns model.ErrUserDeleted or
// model.ErrStravaRevoked. A user without a guard passes.
func (s *Guard) CheckWrites(ctx context.Context, userID string, ks []model.Key) error {
	return s.afterWrites(ctx, userID, ks, true)
}

// CheckDeleted is the check after writing item k of the user that is not
// Strava data (the sync state, a milestone): only a deletion counts.
func (s *Guard) CheckDeleted(ctx context.Context, userID string, k model.Key) error {
	return s.afterWrites(ctx, userID, []model.Key{k}, false)
}

func (s *Guard) afterWrites(ctx context.Context, userID string, ks []model.Key, stravaData bool) error {
	g, err := s.UserGuard(ctx, userID)
	switch {
	case errors.Is(err, model.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("check guard after writing %d items: %w", len(ks), err)
	case !g.Deleted() && !(stravaData && g.Revoked()):
		return nil
	}
	if _, err := s.RemoveGuarded(ctx, g, ks); err != nil {
		return err
	}
	if g.Deleted() {
		return fmt.Errorf("write %d items of user %s: %w", len(ks), userID, model.ErrUserDeleted)
	}
	return fmt.Errorf("write %d items of user %s: %w", len(ks), userID, model.ErrStravaRevoked)
}

// RemoveGuarded removes the user's items ks written while g held (read after
// their writes): every one when the account was deleted; when the grant was
// revoked, each unless a reconnect cleared the revocation since
// (deleteIfStillRevoked). It returns how many it removed (or found gone).
func (s *Guard) RemoveGuarded(ctx context.Context, g *model.UserGuard, ks []model.Key) (int, error) {
	for i, k := range ks {
		var err error
		switch {
		case g.Deleted():
			err = s.DB.Delete(ctx, s.DB.Tables().Main, k)
		case g.Revoked():
			err = s.deleteIfStillRevoked(ctx, g.UserID, k, g)
		default:
			return i, nil
		}
		if err != nil {
			return i, fmt.Errorf("remove %s written while user %s was guarded: %w", k, g.UserID, err)
		}
	}
	return len(ks), nil
}

// deleteIfStillRevoked deletes k in a transaction with a check that the
// guard still holds g's revocation: a reconnect that cleared it after our
// read wins (its backfill may have written k). A failed condition is not an
// error.
func (s *Guard) deleteIfStillRevoked(ctx context.Context, userID string, k model.Key, g *model.UserGuard) error {
	del := types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(s.DB.Tables().Main), Key: s.DB.Tables().KeyAV(s.DB.Tables().Main, k)}}
	check, err := StillRevoked(s.DB.Tables(), userID, g.StravaRevokedAtUtc)
	if err != nil {
		return err
	}
	if err := s.DB.Transact(ctx, []types.TransactWriteItem{del, check}, ""); err != nil && !isConflict(err) {
		return err
	}
	return nil
}

// StillRevoked is a transaction item that fails unless the user's guard
// still holds the revocation recorded at revokedAt: a step written with it
// loses to a reconnect that cleared the revocation.
func StillRevoked(t dynamo.Tables, userID string, revokedAt time.Time) (types.TransactWriteItem, error) {
	cex, err := expression.NewBuilder().WithCondition(
		expression.Name(attrStravaRevokedAtUtc).Equal(expression.Value(revokedAt.UTC()))).Build()
	if err != nil {
		return types.TransactWriteItem{}, fmt.Errorf("build guard check: %w", err)
	}
	return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName: aws.String(t.Main), Key: t.KeyAV(t.Main, keys.UserGuardKey(userID)), ConditionExpression: cex.Condition(),
		ExpressionAttributeNames: cex.Names(), ExpressionAttributeValues: cex.Values(),
	}}, nil
}

// UserGuard reads the user's guard. It returns ErrNotFound when the user has
// none (no restriction).
func (s *Guard) UserGuard(ctx context.Context, userID string) (*model.UserGuard, error) {
	var g model.UserGuard
	if err := s.DB.Get(ctx, s.DB.Tables().Main, keys.UserGuardKey(userID), &g); err != nil {
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
	if err := s.DB.Update(ctx, g.ItemKey(), upd); err != nil {
		return fmt.Errorf("mark user %s deleted: %w", userID, err)
	}
	return nil
}
