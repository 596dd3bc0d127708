package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/dynerr"
)

// ParkedRecords holds records set aside for redrive (PARKED#{source}#{shard}).
type ParkedRecords struct {
	DB *dynamo.DB
}

// Park sets a record aside for inspection and redrive (the local stand-in
// for a DLQ; in AWS the failure destinations are SQS queues). Parking the
// same record twice keeps the first. The record expires
// model.ParkedRetentionDays after parking unless r sets ExpiresAt (a record
// parked after its user's account deletion, by a job in flight that failed
// for good, is gone by then; the deletion removes those parked before).
func (s *ParkedRecords) Park(ctx context.Context, r *ops.ParkedRecord) error {
	if r.ParkedAtUtc.IsZero() {
		r.ParkedAtUtc = s.DB.Now()
	}
	if r.ExpiresAt == 0 {
		r.ExpiresAt = r.ParkedAtUtc.Add(model.ParkedRetentionDays * 24 * time.Hour).Unix()
	}
	err := s.DB.PutIfAbsent(ctx, s.DB.Tables().Main, r)
	if err != nil && !isConflict(err) {
		return fmt.Errorf("park %s record %s: %w", r.Source, r.RecordID, err)
	}
	return nil
}

// DeleteUserParked deletes the parked records (every source) that belong to
// a user: those naming userID, and those naming no user but athleteID (a
// worker job parked before its athlete was resolved; athleteID 0 skips
// them). It reads every partition of each source (keys.ParkedPartitions:
// the shards and the legacy unsharded one) whole with a filter (keys
// only): they hold only what failed for good and expire after
// model.ParkedRetentionDays, so they stay small; it is an account
// deletion's step, never a request path. It returns how many it deleted;
// re-running it is harmless.
func (s *ParkedRecords) DeleteUserParked(ctx context.Context, userID string, athleteID int64) (int, error) {
	mine := expression.Name("userId").Equal(expression.Value(userID))
	if athleteID != 0 {
		mine = mine.Or(expression.AttributeNotExists(expression.Name("userId")).
			And(expression.Name("athleteId").Equal(expression.Value(athleteID))))
	}
	n := 0
	for _, source := range []string{keys.ParkSourceProjector, keys.ParkSourceWorker} {
		for _, pk := range keys.ParkedPartitions(source) {
			m, err := s.deleteParkedIn(ctx, pk, mine)
			n += m
			if err != nil {
				return n, fmt.Errorf("delete parked records of user %s in %s: %w", userID, pk, err)
			}
		}
	}
	return n, nil
}

// deleteParkedIn deletes the records of partition pk that match filter.
func (s *ParkedRecords) deleteParkedIn(ctx context.Context, pk string, filter expression.ConditionBuilder) (int, error) {
	kc := expression.Key("PK").Equal(expression.Value(pk))
	ex, err := expression.NewBuilder().WithKeyCondition(kc).WithFilter(filter).
		WithProjection(expression.NamesList(expression.Name("PK"), expression.Name("SK"))).Build()
	if err != nil {
		return 0, fmt.Errorf("build query: %w", err)
	}
	p := dynamodb.NewQueryPaginator(s.DB.Client(), &dynamodb.QueryInput{
		TableName: aws.String(s.DB.Tables().Main), KeyConditionExpression: ex.KeyCondition(), FilterExpression: ex.Filter(),
		ProjectionExpression: ex.Projection(), ExpressionAttributeNames: ex.Names(),
		ExpressionAttributeValues: ex.Values(), ConsistentRead: aws.Bool(true),
	})
	n := 0
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return n, dynerr.Translate(err)
		}
		keys := make([]model.Key, 0, len(page.Items))
		for _, it := range page.Items {
			k, err := dynamo.KeyOf(it)
			if err != nil {
				return n, err
			}
			keys = append(keys, k)
		}
		if err := s.DB.BatchDelete(ctx, s.DB.Tables().Main, keys); err != nil {
			return n, err
		}
		n += len(keys)
	}
	return n, nil
}

// Parked lists the records parked by source (at most MaxWorkoutsToInspect
// in all), from every shard and the legacy unsharded partition, ordered by
// record id.
func (s *ParkedRecords) Parked(ctx context.Context, source string) ([]ops.ParkedRecord, error) {
	var out []ops.ParkedRecord
	for _, pk := range keys.ParkedPartitions(source) {
		left := model.MaxWorkoutsToInspect - len(out)
		if left <= 0 {
			break
		}
		recs, _, err := dynamo.QueryEntities[ops.ParkedRecord](ctx, s.DB, s.DB.Tables().Main, pk, "", dynamo.QueryOptions{Limit: left})
		if err != nil {
			return nil, fmt.Errorf("list parked %s (%s): %w", source, pk, err)
		}
		out = append(out, recs...)
	}
	// By record id, as one partition listed them before the shards.
	slices.SortFunc(out, func(a, b ops.ParkedRecord) int { return strings.Compare(a.SK, b.SK) })
	return out, nil
}

// RemoveParked removes the parked record of a job that turned out done (the
// worker, for a job done on a later dispatch than its first): one DeleteItem
// of the record's shard only. The unsharded legacy partition (records parked
// before the shards, gone with their 30-day TTL) is left to Unpark: a
// DeleteItem there for every re-dispatched job made PARKED#{source} one of
// the main table's busiest keys, and a redrive of such a record finds its
// job done and does not run it.
func (s *ParkedRecords) RemoveParked(ctx context.Context, source, recordID string) error {
	if err := s.DB.Delete(ctx, s.DB.Tables().Main, keys.ParkedKey(source, recordID)); err != nil {
		return fmt.Errorf("remove parked %s record %s: %w", source, recordID, err)
	}
	return nil
}

// Unpark removes a parked record once it has been redriven, wherever it
// was parked (its shard, or the legacy unsharded partition).
func (s *ParkedRecords) Unpark(ctx context.Context, source, recordID string) error {
	// Two DeleteItem calls (unconditional: a missing item is no error), not
	// a batch: the worker's role grants DeleteItem on the main table.
	for _, k := range []model.Key{keys.ParkedKey(source, recordID), keys.LegacyParkedKey(source, recordID)} {
		if err := s.DB.Delete(ctx, s.DB.Tables().Main, k); err != nil {
			return fmt.Errorf("unpark %s record %s: %w", source, recordID, err)
		}
	}
	return nil
}
