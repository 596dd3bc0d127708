package store

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
)

// MaxUsersPage bounds one ListUsers page.
const MaxUsersPage = 1000

// UsersPage is one page of a users-index shard, in ascending user id order.
type UsersPage struct {
	// UserIDs are the users of the page.
	UserIDs []string
	// Next is the cursor for the following page: the last user id returned
	// (pass it as after). It is empty when the page is empty.
	Next string
	// More is false once the shard has been read to its end.
	More bool
}

// ListUsers reads up to limit user ids (default and maximum MaxUsersPage) of
// one shard of the sparse users index (GSI2, UserListShardPK(shard)) whose id
// sorts after after ("" starts at the beginning). The cursor is a user id, so
// callers can persist it and resume a listing in another process; listing
// every user means walking shards 0..model.UserListShards-1 until More is
// false. It never scans. The index is eventually consistent: a profile
// written a moment ago may not be listed yet. It returns ErrInvalid for a
// shard out of range.
func (s *Store) ListUsers(ctx context.Context, shard int, after string, limit int) (UsersPage, error) {
	if shard < 0 || shard >= model.UserListShards {
		return UsersPage{}, fmt.Errorf("list users of shard %d: shard out of range 0..%d: %w", shard, model.UserListShards-1, model.ErrInvalid)
	}
	if limit <= 0 || limit > MaxUsersPage {
		limit = MaxUsersPage
	}
	kc := expression.Key("GSI2PK").Equal(expression.Value(model.UserListShardPK(shard)))
	if after != "" {
		kc = kc.And(expression.Key("GSI2SK").GreaterThan(expression.Value(after)))
	}
	ex, err := expression.NewBuilder().WithKeyCondition(kc).
		WithProjection(expression.NamesList(expression.Name("GSI2SK"))).Build()
	if err != nil {
		return UsersPage{}, fmt.Errorf("list users of shard %d: build expression: %w", shard, err)
	}
	in := &dynamodb.QueryInput{
		TableName: aws.String(s.t.Main), IndexName: aws.String(IndexGSI2),
		KeyConditionExpression: ex.KeyCondition(), ProjectionExpression: ex.Projection(),
		ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
	}
	var page UsersPage
	for {
		// One more than wanted tells whether the shard goes on.
		in.Limit = aws.Int32(int32(limit - len(page.UserIDs) + 1))
		out, err := s.db.Query(ctx, in)
		if err != nil {
			return UsersPage{}, fmt.Errorf("list users of shard %d after %q: %w", shard, after, translate(err))
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
func (s *Store) CountUsers(ctx context.Context) (int, error) {
	total := 0
	for shard := range model.UserListShards {
		kc := expression.Key("GSI2PK").Equal(expression.Value(model.UserListShardPK(shard)))
		ex, err := expression.NewBuilder().WithKeyCondition(kc).Build()
		if err != nil {
			return 0, fmt.Errorf("count users of shard %d: build expression: %w", shard, err)
		}
		in := &dynamodb.QueryInput{
			TableName: aws.String(s.t.Main), IndexName: aws.String(IndexGSI2), Select: types.SelectCount,
			KeyConditionExpression: ex.KeyCondition(), ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
		}
		for {
			out, err := s.db.Query(ctx, in)
			if err != nil {
				return 0, fmt.Errorf("count users of shard %d: %w", shard, translate(err))
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
