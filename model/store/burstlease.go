package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/retry"
	"github.com/commitcollect/backend/model/store/dynerr"
)

// Burst leases. The sweeper hands an athlete's due activity events to the
// worker as one burst (handlers/ingest/handoff). Leasing each of its items
// would move each in the Pending index: 3 WCU an event, the largest part of
// a burst event's cost. Instead one lease holds for the athlete's burst (an
// item of its own in the idempotency table, outside Pending: 1 WCU a
// burst), the sweeper reads the items' jobs (OutboxItems) and leaves them
// as the claim wrote them, due in Pending, until the worker settles each.
// While the lease holds, no other sweep dispatches a burst of the athlete;
// the worker releases it once the burst's outcomes are recorded, and a
// burst that dies leaves it to lapse, like an item's lease: its items,
// still due, go out with the athlete's next burst.

// attrBurstLeaseUntil is the burst lease item's lease end (Unix ms).
const attrBurstLeaseUntil = "leaseUntil"

// batchGetMax is BatchGetItem's limit of keys per request.
const batchGetMax = 100

// LeaseBurst takes the athlete's burst lease until now+lease and returns
// that end (ReleaseBurst's token). It returns ErrConflict while another
// lease holds.
func (s *Outbox) LeaseBurst(ctx context.Context, athleteID int64, now time.Time, lease time.Duration) (time.Time, error) {
	until := now.Add(lease).UTC().Truncate(time.Millisecond)
	held := expression.Name(attrBurstLeaseUntil)
	upd := expression.Set(held, expression.Value(until.UnixMilli())).
		Set(expression.Name(attrExpiresAt), expression.Value(until.Add(time.Hour).Unix()))
	cond := expression.Or(expression.AttributeNotExists(held), held.LessThanEqual(expression.Value(now.UnixMilli())))
	if err := s.UpdateIn(ctx, s.t.Idempotency, model.Key{PK: keys.BurstLeaseKey(athleteID)}, upd, cond); err != nil {
		return time.Time{}, fmt.Errorf("lease burst of athlete %d: %w", athleteID, err)
	}
	return until, nil
}

// ReleaseBurst ends the athlete's burst lease that LeaseBurst gave until,
// if it is still that lease (a lapsed one may have been taken again since).
func (s *Outbox) ReleaseBurst(ctx context.Context, athleteID int64, until time.Time) error {
	cond := expression.Name(attrBurstLeaseUntil).Equal(expression.Value(until.UnixMilli()))
	err := s.DeleteIf(ctx, s.t.Idempotency, model.Key{PK: keys.BurstLeaseKey(athleteID)}, &cond)
	if err != nil && !errors.Is(err, model.ErrConflict) {
		return fmt.Errorf("release burst lease of athlete %d: %w", athleteID, err)
	}
	return nil
}

// OutboxItems reads the outbox items at keys (strongly consistent,
// BatchGetItem a hundred at a time); a key never claimed, or expired, is
// absent from the answer, whose order is not keys'. An item written by
// newer code fails the read (fail closed).
func (s *Outbox) OutboxItems(ctx context.Context, keyList []string) ([]model.IdempotencyRecord, error) {
	var out []model.IdempotencyRecord
	for start := 0; start < len(keyList); start += batchGetMax {
		ks := make([]Item, 0, batchGetMax)
		for _, k := range keyList[start:min(start+batchGetMax, len(keyList))] {
			ks = append(ks, s.t.keyAV(s.t.Idempotency, model.Key{PK: k}))
		}
		pending := map[string]types.KeysAndAttributes{s.t.Idempotency: {Keys: ks, ConsistentRead: aws.Bool(true)}}
		for attempt := 0; len(pending) > 0; attempt++ {
			if attempt > BatchWriteRetries {
				return nil, fmt.Errorf("read %d outbox items: keys still unprocessed after %d retries: %w", len(keyList), BatchWriteRetries, model.ErrRetryable)
			}
			if attempt > 0 {
				if err := retry.Sleep(ctx, retry.Backoff(attempt, 50*time.Millisecond, 5*time.Second)); err != nil {
					return nil, fmt.Errorf("read %d outbox items: %w", len(keyList), err)
				}
			}
			res, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: pending})
			if err != nil {
				return nil, fmt.Errorf("read %d outbox items: %w", len(keyList), dynerr.Translate(err))
			}
			for _, it := range res.Responses[s.t.Idempotency] {
				var r model.IdempotencyRecord
				if err := Unmarshal(it, &r); err != nil {
					return nil, fmt.Errorf("read %d outbox items: %w", len(keyList), err)
				}
				out = append(out, r)
			}
			pending = res.UnprocessedKeys
		}
	}
	return out, nil
}
