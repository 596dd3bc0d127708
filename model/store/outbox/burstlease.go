package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/store/dynamo"
)

// Burst leases. The sweeper hands an athlete's due activity events to the
// worker as bursts (handlers/ingest/handoff). Leasing each of their items
// would move each in the Pending index: 3 WCU an event, the largest part of
// a burst event's cost. Instead one lease holds for the athlete's bursts of
// one sweep (an item of its own in the idempotency table, outside Pending:
// 1 WCU, and 1 for each burst's release), the sweeper reads the items' jobs
// (OutboxItems) and leaves them as the claim wrote them, due in Pending,
// until the worker settles each. While the lease holds (until it ends, or
// until every burst it was taken for has released it), no other sweep
// dispatches a burst of the athlete. The worker renews it while a burst
// runs, so a lease as short as an item's (seconds locally) outlives a long
// burst; a burst that dies leaves it to lapse, like an item's lease: its
// items, still due, go out with the athlete's next bursts, under a new
// lease, and a burst of the older lease that starts or renews after that
// finds its lease gone (RenewBurst: ErrConflict) and stops, so the two
// never read the same pages (the lease is a fencing token).

// Attributes of the burst lease item.
const (
	attrBurstLeaseUntil = "leaseUntil" // the lease's end (Unix ms), renewed
	attrBurstLeaseID    = "leaseId"    // the lease's first end: its token
	attrBurstsInFlight  = "inFlight"   // its bursts not released yet
)

// LeaseBurst takes the athlete's burst lease for bursts bursts until
// now+lease and returns that end (ReleaseBurst's token). It returns
// ErrConflict while another lease holds: not lapsed, with a burst not
// released.
func (s *Outbox) LeaseBurst(ctx context.Context, athleteID int64, now time.Time, lease time.Duration, bursts int) (time.Time, error) {
	until := now.Add(lease).UTC().Truncate(time.Millisecond)
	held, inFlight := expression.Name(attrBurstLeaseUntil), expression.Name(attrBurstsInFlight)
	upd := expression.Set(held, expression.Value(until.UnixMilli())).
		Set(expression.Name(attrBurstLeaseID), expression.Value(until.UnixMilli())).
		Set(inFlight, expression.Value(max(bursts, 1))).
		Set(expression.Name(attrExpiresAt), expression.Value(until.Add(time.Hour).Unix()))
	cond := expression.Or(expression.AttributeNotExists(held), held.LessThanEqual(expression.Value(now.UnixMilli())),
		inFlight.LessThanEqual(expression.Value(0)))
	if err := s.DB.UpdateIn(ctx, s.DB.Tables().Idempotency, model.Key{PK: keys.BurstLeaseKey(athleteID)}, upd, cond); err != nil {
		return time.Time{}, fmt.Errorf("lease burst of athlete %d: %w", athleteID, err)
	}
	return until, nil
}

// RenewBurst extends the athlete's burst lease token (LeaseBurst's answer)
// to until. It returns ErrConflict when the lease is no longer that one
// (it lapsed and another sweep took the athlete's bursts: this burst is
// superseded) or every burst released it.
func (s *Outbox) RenewBurst(ctx context.Context, athleteID int64, token, until time.Time) error {
	upd := expression.Set(expression.Name(attrBurstLeaseUntil), expression.Value(until.UnixMilli())).
		Set(expression.Name(attrExpiresAt), expression.Value(until.Add(time.Hour).Unix()))
	cond := expression.Name(attrBurstLeaseID).Equal(expression.Value(token.UnixMilli())).
		And(expression.Name(attrBurstsInFlight).GreaterThan(expression.Value(0)))
	if err := s.DB.UpdateIn(ctx, s.DB.Tables().Idempotency, model.Key{PK: keys.BurstLeaseKey(athleteID)}, upd, cond); err != nil {
		return fmt.Errorf("renew burst lease of athlete %d: %w", athleteID, err)
	}
	return nil
}

// ReleaseBurst releases one burst of the athlete's burst lease token, if it
// is still that lease (a lapsed one may have been taken again since); the
// lease ends with its last burst's release.
func (s *Outbox) ReleaseBurst(ctx context.Context, athleteID int64, token time.Time) error {
	upd := expression.Add(expression.Name(attrBurstsInFlight), expression.Value(-1))
	cond := expression.Name(attrBurstLeaseID).Equal(expression.Value(token.UnixMilli()))
	err := s.DB.UpdateIn(ctx, s.DB.Tables().Idempotency, model.Key{PK: keys.BurstLeaseKey(athleteID)}, upd, cond)
	if err != nil && !errors.Is(err, model.ErrConflict) {
		return fmt.Errorf("release burst lease of athlete %d: %w", athleteID, err)
	}
	return nil
}

// OutboxItems reads the outbox items at keys (strongly consistent,
// BatchGetItem a hundred at a time); a key never claimed, or expired, is
// absent from the answer, whose order is not keys'. An item written by
// newer code fails the read (fail closed).
func (s *Outbox) OutboxItems(ctx context.Context, keyList []string) ([]ops.IdempotencyRecord, error) {
	ks := make([]model.Key, len(keyList))
	for i, k := range keyList {
		ks[i] = model.Key{PK: k}
	}
	var out []ops.IdempotencyRecord
	err := s.DB.BatchGet(ctx, s.DB.Tables().Idempotency, ks, func(it dynamo.Item) error {
		var r ops.IdempotencyRecord
		if err := dynamo.Unmarshal(it, &r); err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %d outbox items: %w", len(keyList), err)
	}
	return out, nil
}
