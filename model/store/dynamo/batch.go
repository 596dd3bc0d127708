package dynamo

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/retry"
	"github.com/commitcollect/backend/model/store/dynerr"
)

// BatchWriteRetries bounds how many times unprocessed items are resent.
const BatchWriteRetries = 8

// batchGetMax is BatchGetItem's limit of keys per request.
const batchGetMax = 100

// BatchPut writes entities in chunks of 25, resending UnprocessedItems with
// jittered exponential backoff.
func (s *DB) BatchPut(ctx context.Context, table string, es []model.Entity) error {
	reqs := make([]types.WriteRequest, 0, len(es))
	for _, e := range es {
		item, err := Marshal(e)
		if err != nil {
			return err
		}
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
	}
	return s.batchWrite(ctx, table, reqs)
}

// BatchPutItems writes raw items (already rendered, e.g. copied from
// another table by a migration) in chunks of 25, like BatchPut.
func (s *DB) BatchPutItems(ctx context.Context, table string, items []Item) error {
	reqs := make([]types.WriteRequest, len(items))
	for i, it := range items {
		reqs[i] = types.WriteRequest{PutRequest: &types.PutRequest{Item: it}}
	}
	return s.batchWrite(ctx, table, reqs)
}

// BatchDelete deletes keys in chunks of 25, resending UnprocessedItems with
// jittered exponential backoff. Missing items are not an error.
func (s *DB) BatchDelete(ctx context.Context, table string, keys []model.Key) error {
	reqs := make([]types.WriteRequest, 0, len(keys))
	for _, k := range keys {
		reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: s.t.KeyAV(table, k)}})
	}
	return s.batchWrite(ctx, table, reqs)
}

func (s *DB) batchWrite(ctx context.Context, table string, reqs []types.WriteRequest) error {
	for start := 0; start < len(reqs); start += model.BatchWriteChunk {
		pending := map[string][]types.WriteRequest{table: reqs[start:min(start+model.BatchWriteChunk, len(reqs))]}
		err := resendUnprocessed(ctx, func() (int, error) {
			out, err := s.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
			if err != nil {
				return 0, err
			}
			pending = out.UnprocessedItems
			return len(pending[table]), nil
		})
		if err != nil {
			return fmt.Errorf("batch write %s: %w", table, err)
		}
	}
	return nil
}

// BatchGet reads the items at keys of table (strongly consistent,
// BatchGetItem a hundred at a time) and hands each found one to each, in no
// particular order; a missing key is skipped.
func (s *DB) BatchGet(ctx context.Context, table string, keys []model.Key, each func(Item) error) error {
	for start := 0; start < len(keys); start += batchGetMax {
		ks := make([]Item, 0, batchGetMax)
		for _, k := range keys[start:min(start+batchGetMax, len(keys))] {
			ks = append(ks, s.t.KeyAV(table, k))
		}
		pending := map[string]types.KeysAndAttributes{table: {Keys: ks, ConsistentRead: aws.Bool(true)}}
		err := resendUnprocessed(ctx, func() (int, error) {
			out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: pending})
			if err != nil {
				return 0, err
			}
			for _, it := range out.Responses[table] {
				if err := each(it); err != nil {
					return 0, err
				}
			}
			pending = out.UnprocessedKeys
			return len(pending[table].Keys), nil
		})
		if err != nil {
			return fmt.Errorf("batch get %d keys of %s: %w", len(keys), table, err)
		}
	}
	return nil
}

// resendUnprocessed calls send, which reports how many requests DynamoDB
// left unprocessed, until none are left, with jittered exponential backoff
// (50 ms to 5 s) before each resend. More than BatchWriteRetries resends
// is model.ErrRetryable; a failed call is returned translated (dynerr).
func resendUnprocessed(ctx context.Context, send func() (left int, err error)) error {
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if err := retry.Sleep(ctx, retry.Backoff(attempt, 50*time.Millisecond, 5*time.Second)); err != nil {
				return err
			}
		}
		left, err := send()
		if err != nil {
			return dynerr.Translate(err)
		}
		if left == 0 {
			return nil
		}
		if attempt >= BatchWriteRetries {
			return fmt.Errorf("%d still unprocessed after %d retries: %w", left, BatchWriteRetries, model.ErrRetryable)
		}
	}
}
