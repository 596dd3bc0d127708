package rebuildkit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/retry"
	"github.com/commitcollect/backend/model/streams"
)

// RecordKey reads the primary key of a stream record. It returns an error
// matching model.ErrInvalid when the record has no string PK and SK.
func RecordKey(rec events.DynamoDBEventRecord) (model.Key, error) {
	str := func(name string) (string, bool) {
		av, ok := rec.Change.Keys[name]
		if !ok || av.DataType() != events.DataTypeString {
			return "", false
		}
		return av.String(), true
	}
	pk, ok1 := str("PK")
	sk, ok2 := str("SK")
	if !ok1 || !ok2 {
		return model.Key{}, fmt.Errorf("stream record %s: no string PK/SK keys: %w", rec.Change.SequenceNumber, model.ErrInvalid)
	}
	return model.Key{PK: pk, SK: sk}, nil
}

// TriggerUser returns the user whose milestones rec can change (a workout or
// a milestone item of a user), and false for every other record (awards,
// profiles, models, parked records…).
func TriggerUser(rec events.DynamoDBEventRecord) (string, bool) {
	k, err := RecordKey(rec)
	if err != nil {
		return "", false
	}
	p, err := keys.ParseKey(k)
	if err != nil || p.UserID == "" {
		return "", false
	}
	switch p.Kind {
	case keys.KindWorkout, keys.KindMilestone:
		return p.UserID, true
	}
	return "", false
}

// RecordUser returns the user a record belongs to (any item under USER#…),
// and false when it belongs to none.
func RecordUser(rec events.DynamoDBEventRecord) (string, bool) {
	k, err := RecordKey(rec)
	if err != nil {
		return "", false
	}
	p, err := keys.ParseKey(k)
	if err != nil || p.UserID == "" {
		return "", false
	}
	return p.UserID, true
}

// AffectedUsers returns, sorted and once each, the users whose milestones
// the records can change.
func AffectedUsers(recs []events.DynamoDBEventRecord) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range recs {
		if u, ok := TriggerUser(r); ok && !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	slices.Sort(out)
	return out
}

// ErrRangeGone means stream records asked for are no longer in the stream
// (older than its 24-hour retention, or the stream was replaced). It matches
// model.ErrNotFound.
var ErrRangeGone = fmt.Errorf("stream records no longer retained (a stream keeps 24 hours): %w", model.ErrNotFound)

// ReadRange reads the records of one shard from start to end sequence
// number (inclusive), as Lambda would have delivered them. It returns an
// error matching ErrRangeGone when the range has been trimmed or the shard
// or stream no longer exists.
func ReadRange(ctx context.Context, api streams.API, b StreamBatch) ([]events.DynamoDBEventRecord, error) {
	it, err := api.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
		StreamArn: aws.String(b.StreamARN), ShardId: aws.String(b.ShardID),
		ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber, SequenceNumber: aws.String(b.StartSequenceNumber),
	})
	if err != nil {
		return nil, rangeErr(b, err)
	}
	var out []events.DynamoDBEventRecord
	iter := it.ShardIterator
	for empty, attempt := 0, 0; iter != nil && empty < 5; {
		page, err := api.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(1000)})
		if err != nil {
			var limit *types.LimitExceededException
			if errors.As(err, &limit) && attempt < 8 {
				attempt++
				if err := retry.Sleep(ctx, retry.Backoff(attempt, 100*time.Millisecond, 5*time.Second)); err != nil {
					return nil, err
				}
				continue
			}
			return nil, rangeErr(b, err)
		}
		attempt = 0
		if len(page.Records) == 0 {
			empty++
		}
		for _, r := range page.Records {
			seq := ""
			if r.Dynamodb != nil {
				seq = aws.ToString(r.Dynamodb.SequenceNumber)
			}
			if seqLess(b.EndSequenceNumber, seq) {
				return out, nil
			}
			lr, err := streams.ToLambdaRecord(r, b.StreamARN)
			if err != nil {
				return nil, fmt.Errorf("read shard %s: %w", b.ShardID, err)
			}
			out = append(out, lr)
		}
		iter = page.NextShardIterator
	}
	return out, nil
}

func rangeErr(b StreamBatch, err error) error {
	var (
		trimmed *types.TrimmedDataAccessException
		rnf     *types.ResourceNotFoundException
	)
	if errors.As(err, &trimmed) || errors.As(err, &rnf) {
		return fmt.Errorf("read shard %s from %s to %s: %w (%v)", b.ShardID, b.StartSequenceNumber, b.EndSequenceNumber, ErrRangeGone, err)
	}
	return fmt.Errorf("read shard %s from %s to %s: %w", b.ShardID, b.StartSequenceNumber, b.EndSequenceNumber, err)
}
