// Package migratekit moves a deployment onto the main table with LSI1, the
// workouts' date-ordered index (keys.WorkoutDateSK). A local secondary
// index can only be created with its table, so existing deployments create
// a new table set (Terraform, another table prefix) and copy their items
// over; this package does the copy and the backfill, and
// scripts/migrate-lsi wires it to flags.
//
// Copy walks users through the sparse users index (GSI2, never a Scan),
// copies each user's partition (one paginated Query per user), setting
// LSI1SK on every workout with a start date, then the items outside user
// partitions that can be found by key: each user's athlete → user mapping,
// the model catalog's partitions, the Strava rate-limit counter and the
// parked records. With Newer, an item is written only when the destination
// lacks it or holds an older one (updatedAtUtc), one conditional PutItem
// each: the catch-up pass after the cut-over. Backfill sets LSI1SK in place
// on workouts that lack it (e.g. written by an older build after the copy).
// Both are idempotent; the projections are rebuilt afterwards
// (scripts/rebuild --all) so they follow the new log reader.
package migratekit

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynamo"
)

// Summary counts what a run did.
type Summary struct {
	Users int `json:"users"`
	// Items written to the destination (Copy) or updated in place (Backfill).
	Items int `json:"items"`
	// Keyed is how many workouts got LSI1SK.
	Keyed int `json:"keyed"`
	// Skipped: items the destination already held in a newer state (Newer).
	Skipped int `json:"skipped"`
}

// String renders the summary for operators.
func (s Summary) String() string {
	return fmt.Sprintf("users=%d items=%d workoutsKeyed=%d skipped=%d", s.Users, s.Items, s.Keyed, s.Skipped)
}

// Options shape a run.
type Options struct {
	// Newer copies an item only if the destination lacks it or holds an
	// older updatedAtUtc (conditional puts); otherwise items are written
	// with BatchWriteItem.
	Newer bool
	// ModelIDs are the catalog's model partitions to copy.
	ModelIDs []string
	// Progress, when set, is called after each user.
	Progress func(userID string, s Summary)
}

// HasDateIndex reports whether the store's main table has LSI1 (the
// destination of a copy must; DescribeTable).
func HasDateIndex(ctx context.Context, st *store.Adapters) (bool, error) {
	out, err := st.DB.Client().DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(st.DB.Tables().Main)})
	if err != nil {
		return false, fmt.Errorf("describe table %s: %w", st.DB.Tables().Main, err)
	}
	for _, l := range out.Table.LocalSecondaryIndexes {
		if aws.ToString(l.IndexName) == dynamo.IndexLSI1 {
			return true, nil
		}
	}
	return false, nil
}

// Copy copies every user's items, and what hangs off them, from src to dst
// (see the package doc). It returns ErrInvalid when dst has no LSI1 or is
// src, and fails closed (ErrUnsupportedSchema) on a workout written by a
// newer schema.
func Copy(ctx context.Context, src, dst *store.Adapters, o Options) (Summary, error) {
	var sum Summary
	if src.DB.Tables().Main == dst.DB.Tables().Main {
		return sum, fmt.Errorf("copy %s onto itself: %w", src.DB.Tables().Main, model.ErrInvalid)
	}
	if ok, err := HasDateIndex(ctx, dst); err != nil {
		return sum, err
	} else if !ok {
		return sum, fmt.Errorf("copy to %s: the table has no %s (create it with Terraform first): %w", dst.DB.Tables().Main, dynamo.IndexLSI1, model.ErrInvalid)
	}
	athletes := map[int64]bool{}
	err := eachUser(ctx, src, func(userID string) error {
		items, err := partition(ctx, src, keys.UserPK(userID))
		if err != nil {
			return err
		}
		for _, it := range items {
			if a, ok := athleteOf(it); ok {
				athletes[a] = true
			}
		}
		if err := write(ctx, dst, items, o, &sum); err != nil {
			return fmt.Errorf("copy user %s: %w", userID, err)
		}
		sum.Users++
		if o.Progress != nil {
			o.Progress(userID, sum)
		}
		return nil
	})
	if err != nil {
		return sum, err
	}
	var rest []dynamo.Item
	for a := range athletes {
		it, err := get(ctx, src, keys.AthleteOwnerKey(a))
		if err != nil {
			return sum, err
		}
		if it != nil {
			rest = append(rest, it)
		}
	}
	pks := append(keys.ParkedPartitions(keys.ParkSourceProjector), keys.ParkedPartitions(keys.ParkSourceWorker)...)
	for _, id := range o.ModelIDs {
		pks = append(pks, keys.ModelPK(id))
	}
	for _, pk := range pks {
		items, err := partition(ctx, src, pk)
		if err != nil {
			return sum, err
		}
		rest = append(rest, items...)
	}
	if it, err := get(ctx, src, keys.RateLimitKey()); err != nil {
		return sum, err
	} else if it != nil {
		rest = append(rest, it)
	}
	if err := write(ctx, dst, rest, o, &sum); err != nil {
		return sum, fmt.Errorf("copy shared items: %w", err)
	}
	return sum, nil
}

// Backfill sets LSI1SK on every workout of every user of st that lacks it
// (conditional updates: a workout rewritten meanwhile keeps its own key).
func Backfill(ctx context.Context, st *store.Adapters, o Options) (Summary, error) {
	var sum Summary
	err := eachUser(ctx, st, func(userID string) error {
		items, err := partition(ctx, st, keys.UserPK(userID))
		if err != nil {
			return err
		}
		for _, it := range items {
			if _, has := it[dynamo.AttrLSI1SK]; has {
				continue
			}
			sk, ok, err := dateKey(it)
			if err != nil {
				return fmt.Errorf("backfill user %s: %w", userID, err)
			}
			if !ok {
				continue
			}
			cond := expression.AttributeNotExists(expression.Name(dynamo.AttrLSI1SK)).
				And(expression.Name("startDateUtc").Equal(expression.Value(it["startDateUtc"])))
			ex, err := expression.NewBuilder().WithCondition(cond).
				WithUpdate(expression.Set(expression.Name(dynamo.AttrLSI1SK), expression.Value(sk))).Build()
			if err != nil {
				return fmt.Errorf("backfill user %s: build update: %w", userID, err)
			}
			_, err = st.DB.Client().UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: aws.String(st.DB.Tables().Main), Key: dynamo.Item{"PK": it["PK"], "SK": it["SK"]},
				UpdateExpression: ex.Update(), ConditionExpression: ex.Condition(),
				ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
			})
			var ccf *types.ConditionalCheckFailedException
			if errors.As(err, &ccf) {
				sum.Skipped++
				continue
			}
			if err != nil {
				return fmt.Errorf("backfill user %s: %w", userID, err)
			}
			sum.Items++
			sum.Keyed++
		}
		sum.Users++
		if o.Progress != nil {
			o.Progress(userID, sum)
		}
		return nil
	})
	return sum, err
}

// eachUser calls f for every user of the sparse users index, shard by shard.
func eachUser(ctx context.Context, st *store.Adapters, f func(userID string) error) error {
	for shard := range keys.UserListShards {
		after := ""
		for {
			page, err := st.Users.ListUsers(ctx, shard, after, 0)
			if err != nil {
				return err
			}
			for _, id := range page.UserIDs {
				if err := f(id); err != nil {
					return err
				}
			}
			if !page.More {
				break
			}
			after = page.Next
		}
	}
	return nil
}

// partition reads every item of one partition (strongly consistent, all
// pages: a copy is not bounded by the projector's guardrail).
func partition(ctx context.Context, st *store.Adapters, pk string) ([]dynamo.Item, error) {
	ex, err := expression.NewBuilder().WithKeyCondition(expression.Key("PK").Equal(expression.Value(pk))).Build()
	if err != nil {
		return nil, fmt.Errorf("read partition %s: build query: %w", pk, err)
	}
	p := dynamodb.NewQueryPaginator(st.DB.Client(), &dynamodb.QueryInput{
		TableName: aws.String(st.DB.Tables().Main), KeyConditionExpression: ex.KeyCondition(),
		ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(), ConsistentRead: aws.Bool(true),
	})
	var out []dynamo.Item
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("read partition %s: %w", pk, err)
		}
		out = append(out, page.Items...)
	}
	return out, nil
}

func get(ctx context.Context, st *store.Adapters, k model.Key) (dynamo.Item, error) {
	out, err := st.DB.Client().GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(st.DB.Tables().Main), ConsistentRead: aws.Bool(true),
		Key: dynamo.Item{"PK": &types.AttributeValueMemberS{Value: k.PK}, "SK": &types.AttributeValueMemberS{Value: k.SK}},
	})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", k, err)
	}
	return out.Item, nil
}

// athleteOf returns the athlete id a user's Strava connection names.
func athleteOf(it dynamo.Item) (int64, bool) {
	sk, ok := it["SK"].(*types.AttributeValueMemberS)
	if !ok || sk.Value != keys.SKStravaConnection {
		return 0, false
	}
	var c struct {
		AthleteID int64 `dynamodbav:"athleteId"`
	}
	if attributevalue.UnmarshalMap(it, &c) != nil || c.AthleteID <= 0 {
		return 0, false
	}
	return c.AthleteID, true
}

// dateKey computes a workout item's LSI1SK; ok is false for items that are
// not workouts or have no start date (tombstones stay out of the index).
func dateKey(it dynamo.Item) (string, bool, error) {
	sk, isS := it["SK"].(*types.AttributeValueMemberS)
	if !isS || !strings.HasPrefix(sk.Value, keys.PrefixWorkoutStrava) {
		return "", false, nil
	}
	var w model.Workout
	if err := dynamo.Unmarshal(it, &w); err != nil {
		return "", false, err
	}
	if w.StartDateUtc.IsZero() {
		return "", false, nil
	}
	w.Stamp()
	return w.DateSK, true, nil
}

// write stores items in dst, keying workouts on the way.
func write(ctx context.Context, dst *store.Adapters, items []dynamo.Item, o Options, sum *Summary) error {
	var batch []dynamo.Item
	for _, it := range items {
		sk, ok, err := dateKey(it)
		if err != nil {
			return err
		}
		if ok {
			it[dynamo.AttrLSI1SK] = &types.AttributeValueMemberS{Value: sk}
			sum.Keyed++
		}
		if !o.Newer {
			batch = append(batch, it)
			continue
		}
		cond := expression.AttributeNotExists(expression.Name("PK"))
		if v, has := it["updatedAtUtc"]; has {
			cond = cond.Or(expression.Name("updatedAtUtc").LessThan(expression.Value(v)))
		}
		ex, err := expression.NewBuilder().WithCondition(cond).Build()
		if err != nil {
			return fmt.Errorf("build condition: %w", err)
		}
		_, err = dst.DB.Client().PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(dst.DB.Tables().Main), Item: it, ConditionExpression: ex.Condition(),
			ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
		})
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			sum.Skipped++
			continue
		}
		if err != nil {
			return fmt.Errorf("put %v: %w", it["SK"], err)
		}
		sum.Items++
	}
	if err := dst.DB.BatchPutItems(ctx, dst.DB.Tables().Main, batch); err != nil {
		return err
	}
	sum.Items += len(batch)
	return nil
}
