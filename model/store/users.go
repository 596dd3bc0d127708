package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ports"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/dynerr"
)

// Users holds profiles, the athlete → user mapping, the users index, and a user's items at deletion.
type Users struct {
	DB    *dynamo.DB
	Guard *Guard
}

// MaxUsersPage bounds one ListUsers page.
const MaxUsersPage = 1000

// ListUsers reads up to limit user ids (default and maximum MaxUsersPage) of
// one shard of the sparse users index (GSI2, UserListShardPK(shard)) whose id
// sorts after after ("" starts at the beginning). The cursor is a user id, so
// callers can persist it and resume a listing in another process; listing
// every user means walking shards 0..keys.UserListShards-1 until More is
// false. It never scans. The index is eventually consistent: a profile
// written a moment ago may not be listed yet. It returns ErrInvalid for a
// shard out of range.
func (s *Users) ListUsers(ctx context.Context, shard int, after string, limit int) (ports.UsersPage, error) {
	if shard < 0 || shard >= keys.UserListShards {
		return ports.UsersPage{}, fmt.Errorf("list users of shard %d: shard out of range 0..%d: %w", shard, keys.UserListShards-1, model.ErrInvalid)
	}
	if limit <= 0 || limit > MaxUsersPage {
		limit = MaxUsersPage
	}
	kc := expression.Key("GSI2PK").Equal(expression.Value(keys.UserListShardPK(shard)))
	if after != "" {
		kc = kc.And(expression.Key("GSI2SK").GreaterThan(expression.Value(after)))
	}
	ex, err := expression.NewBuilder().WithKeyCondition(kc).
		WithProjection(expression.NamesList(expression.Name("GSI2SK"))).Build()
	if err != nil {
		return ports.UsersPage{}, fmt.Errorf("list users of shard %d: build expression: %w", shard, err)
	}
	in := &dynamodb.QueryInput{
		TableName: aws.String(s.DB.Tables().Main), IndexName: aws.String(dynamo.IndexGSI2),
		KeyConditionExpression: ex.KeyCondition(), ProjectionExpression: ex.Projection(),
		ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
	}
	var page ports.UsersPage
	for {
		// One more than wanted tells whether the shard goes on.
		in.Limit = aws.Int32(int32(limit - len(page.UserIDs) + 1))
		out, err := s.DB.Client().Query(ctx, in)
		if err != nil {
			return ports.UsersPage{}, fmt.Errorf("list users of shard %d after %q: %w", shard, after, dynerr.Translate(err))
		}
		for _, item := range out.Items {
			id, ok := item["GSI2SK"].(*types.AttributeValueMemberS)
			if !ok || id.Value == "" {
				continue // not a profile: the index is sparse, nothing else carries GSI2SK as a string
			}
			if len(page.UserIDs) == limit {
				page.More = true
				return page, nil
			}
			page.UserIDs = append(page.UserIDs, id.Value)
			page.Next = id.Value
		}
		if len(out.LastEvaluatedKey) == 0 {
			return page, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// CountUsers counts the profiles in the sparse users index (every shard),
// with COUNT queries that return no items. It never scans; the count is
// eventually consistent.
func (s *Users) CountUsers(ctx context.Context) (int, error) {
	total := 0
	for shard := range keys.UserListShards {
		kc := expression.Key("GSI2PK").Equal(expression.Value(keys.UserListShardPK(shard)))
		ex, err := expression.NewBuilder().WithKeyCondition(kc).Build()
		if err != nil {
			return 0, fmt.Errorf("count users of shard %d: build expression: %w", shard, err)
		}
		in := &dynamodb.QueryInput{
			TableName: aws.String(s.DB.Tables().Main), IndexName: aws.String(dynamo.IndexGSI2), Select: types.SelectCount,
			KeyConditionExpression: ex.KeyCondition(), ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
		}
		for {
			out, err := s.DB.Client().Query(ctx, in)
			if err != nil {
				return 0, fmt.Errorf("count users of shard %d: %w", shard, dynerr.Translate(err))
			}
			total += int(out.Count)
			if len(out.LastEvaluatedKey) == 0 {
				break
			}
			in.ExclusiveStartKey = out.LastEvaluatedKey
		}
	}
	return total, nil
}

// CreateUser writes a new user's profile, Strava connection and athlete
// owner mapping in one transaction, so an athlete can never be linked to two
// users. It returns an error matching model.ErrConflict (a
// *dynerr.TransactionError) when the athlete is already owned or the user id
// is taken; nothing is written then. The connection's grant time
// (grantedAtUtc) is c.GrantedAtUtc, else c.UpdatedAtUtc: the login's.
func (s *Users) CreateUser(ctx context.Context, p *model.Profile, c *model.StravaConnection) error {
	owner := &model.AthleteOwner{AthleteID: c.AthleteID, UserID: p.UserID, CreatedAtUtc: p.CreatedAtUtc}
	if c.GrantedAtUtc == nil {
		g := c.UpdatedAtUtc
		c.GrantedAtUtc = &g
	}
	if err := s.DB.SealConnectionTokens(ctx, c); err != nil {
		return fmt.Errorf("create user %s: %w", p.UserID, err)
	}
	var items []types.TransactWriteItem
	for _, e := range []model.Entity{owner, p, c} {
		it, err := s.DB.TransactPutIfAbsent(s.DB.Tables().Main, e)
		if err != nil {
			return fmt.Errorf("create user %s: %w", p.UserID, err)
		}
		items = append(items, it)
	}
	if err := s.DB.Transact(ctx, items, ""); err != nil {
		return fmt.Errorf("create user %s for athlete %d: %w", p.UserID, c.AthleteID, err)
	}
	return nil
}

// AthleteOwner reads the athlete → user mapping. It returns model.ErrNotFound
// when no user owns the athlete.
func (s *Users) AthleteOwner(ctx context.Context, athleteID int64) (model.AthleteOwner, error) {
	var o model.AthleteOwner
	if err := s.DB.Get(ctx, s.DB.Tables().Main, keys.AthleteOwnerKey(athleteID), &o); err != nil {
		return model.AthleteOwner{}, fmt.Errorf("athlete owner %d: %w", athleteID, err)
	}
	return o, nil
}

// Profile reads a user's profile; model.ErrNotFound when there is none.
func (s *Users) Profile(ctx context.Context, userID string) (model.Profile, error) {
	var p model.Profile
	if err := s.DB.Get(ctx, s.DB.Tables().Main, keys.ProfileKey(userID), &p); err != nil {
		return model.Profile{}, fmt.Errorf("profile %s: %w", userID, err)
	}
	return p, nil
}

// DeleteAthleteOwnerOf removes the athlete → user mapping only if it still
// points at userID, so re-running a deletion never unlinks the athlete from
// a user it has since joined. A missing mapping or one owned by another user
// is not an error.
func (s *Users) DeleteAthleteOwnerOf(ctx context.Context, athleteID int64, userID string) error {
	mine := expression.Name("userId").Equal(expression.Value(userID))
	err := s.DB.DeleteIf(ctx, s.DB.Tables().Main, keys.AthleteOwnerKey(athleteID), &mine)
	if err != nil && !isConflict(err) {
		return fmt.Errorf("delete owner of athlete %d for user %s: %w", athleteID, userID, err)
	}
	return nil
}

// DeleteRevokedAthleteOf removes the keyed-hash mapping a revocation left
// (keys.RevokedAthleteKey(hash)) only if it names userID: an account
// deletion, after which the athlete signs up as a new user. A missing
// mapping or one naming another user is not an error.
func (s *Users) DeleteRevokedAthleteOf(ctx context.Context, hash, userID string) error {
	mine := expression.Name("userId").Equal(expression.Value(userID))
	err := s.DB.DeleteIf(ctx, s.DB.Tables().Main, keys.RevokedAthleteKey(hash), &mine)
	if err != nil && !isConflict(err) {
		return fmt.Errorf("delete revoked-athlete mapping of user %s: %w", userID, err)
	}
	return nil
}

// DeleteUserItems deletes the items of a user's partition whose sort key
// begins with prefix (all of them when empty) and for which skip returns
// false, in batches of 25, page after page until none is left; the user
// guard always stays (it must outlive the deletion, guard.go). It returns how
// many it deleted; re-running it is harmless.
func (s *Users) DeleteUserItems(ctx context.Context, userID, prefix string, skip func(keys.ParsedKey) bool) (int, error) {
	deleted := 0
	for {
		res, err := s.DB.QueryPrefix(ctx, s.DB.Tables().Main, keys.UserPK(userID), prefix, dynamo.QueryOptions{Projection: []string{"PK", "SK"}})
		if err != nil {
			return deleted, fmt.Errorf("delete items of user %s: %w", userID, err)
		}
		var batch []model.Key
		for _, it := range res.Items {
			k, err := dynamo.KeyOf(it)
			if err != nil {
				return deleted, err
			}
			if p, err := keys.ParseKey(k); err == nil && (p.Kind == keys.KindUserGuard || skip != nil && skip(p)) {
				continue
			}
			batch = append(batch, k)
		}
		if err := s.DB.BatchDelete(ctx, s.DB.Tables().Main, batch); err != nil {
			return deleted, fmt.Errorf("delete items of user %s: %w", userID, err)
		}
		deleted += len(batch)
		if !res.Truncated || len(batch) == 0 {
			return deleted, nil
		}
	}
}

// ResolveAthlete returns the user a Strava athlete belongs to: the
// STRAVA#ATHLETE#{id}/OWNER item, else the connection found through GSI1.
// It returns ErrNotFound when the athlete is not linked.
func (s *Users) ResolveAthlete(ctx context.Context, athleteID int64) (string, error) {
	var o model.AthleteOwner
	err := s.DB.Get(ctx, s.DB.Tables().Main, keys.AthleteOwnerKey(athleteID), &o)
	if err == nil {
		return o.UserID, nil
	}
	if !errors.Is(err, model.ErrNotFound) {
		return "", fmt.Errorf("resolve athlete %d: %w", athleteID, err)
	}
	conns, _, err := dynamo.QueryEntities[model.StravaConnection](ctx, s.DB, s.DB.Tables().Main, keys.AthletePK(athleteID), "",
		dynamo.QueryOptions{Index: dynamo.IndexGSI1, Limit: 1})
	if err != nil {
		return "", fmt.Errorf("resolve athlete %d via %s: %w", athleteID, dynamo.IndexGSI1, err)
	}
	if len(conns) == 0 || conns[0].UserID == "" {
		return "", fmt.Errorf("resolve athlete %d: %w", athleteID, model.ErrNotFound)
	}
	return conns[0].UserID, nil
}

// EachWorkout calls fn with the user's stored workouts (tombstones
// included) in key order, starting after the workout of activity after (0:
// from the first), page after page (a consistent query of at most pageSize
// items each), until fn answers false or none is left. Keys never change,
// so a walk resumed after an activity neither repeats nor skips a workout
// stored when it began. An error from fn stops the walk and is returned.
func (s *Users) EachWorkout(ctx context.Context, userID string, after int64, pageSize int32, fn func(model.Workout) (bool, error)) error {
	kc := expression.Key("PK").Equal(expression.Value(keys.UserPK(userID))).And(expression.Key("SK").BeginsWith(keys.PrefixWorkoutStrava))
	ex, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return fmt.Errorf("workouts of %s: build query: %w", userID, err)
	}
	in := &dynamodb.QueryInput{TableName: aws.String(s.DB.Tables().Main),
		KeyConditionExpression: ex.KeyCondition(), ExpressionAttributeNames: ex.Names(),
		ExpressionAttributeValues: ex.Values(), ConsistentRead: aws.Bool(true), Limit: aws.Int32(pageSize)}
	if after > 0 {
		in.ExclusiveStartKey = s.DB.Tables().KeyAV(s.DB.Tables().Main, keys.WorkoutKey(userID, after))
	}
	p := dynamodb.NewQueryPaginator(s.DB.Client(), in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("workouts of %s after %d: %w", userID, after, dynerr.Translate(err))
		}
		for _, it := range page.Items {
			var w model.Workout
			if err := dynamo.Unmarshal(it, &w); err != nil {
				return fmt.Errorf("workouts of %s: decode: %w", userID, err)
			}
			more, err := fn(w)
			if err != nil || !more {
				return err
			}
		}
	}
	return nil
}
