// Package outbox holds the outbox (the idempotency table): the idempotency
// item of an accepted webhook event is also the durable hand-off to the
// worker (ops.IdempotencyRecord). Claiming records it as received with
// the job and a lease; the worker settles it as done or parked, or defers
// it (a not-before time); the sweeper re-dispatches received items that
// are due, found through the sparse pending index (dynamo.IndexPending,
// read by model/store/pending), never a Scan. Its consumers
// (handlers/ingest) declare the interfaces. Burst leases (burstlease.go)
// hold an athlete's bursts of one sweep.
//
// Lifetime: an item's TTL (expiresAt) always lies ttl after the item's last
// activity, never before it is due. The claim records ttl (ttlSeconds) and
// every claim, lease and deferral pushes expiresAt to ttl after the new lease
// end or not-before time; the settle sets it to ttl after the settle. So a
// received item never expires while pending, however long it is deferred
// (a sync share spent for days), and a settled one is kept ttl for
// duplicate detection. Items claimed before ttlSeconds existed use
// DefaultOutboxTTL.
package outbox

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
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/dynerr"
)

// Outbox holds the outbox (CommitCollectIdempotency): claims, leases, settles and the Pending index.
type Outbox struct {
	DB *dynamo.DB
}

// Attribute names of the outbox item used in expressions.
const (
	attrIdempotencyKey = "IdempotencyKey"
	attrStatus         = "status"
	attrLeaseUntil     = "leaseUntil"
	attrNotBefore      = "notBefore"
	attrPendingPK      = "PendingPK"
	attrPendingSK      = "PendingSK"
	attrExpiresAt      = "expiresAt"
	attrTTLSeconds     = "ttlSeconds"
	attrParkedRecord   = "parkedRecord"
)

// DefaultOutboxTTL is how long an outbox item is kept after its last
// activity when the item does not record its own ttl (model.OutboxTTL).
const DefaultOutboxTTL = model.OutboxTTL

// expiresAfter sets expiresAt to the item's ttl (ttlSeconds, else
// DefaultOutboxTTL) after at: a pending item never expires before it is due.
func expiresAfter(upd expression.UpdateBuilder, at time.Time) expression.UpdateBuilder {
	ttl := expression.IfNotExists(expression.Name(attrTTLSeconds), expression.Value(int64(DefaultOutboxTTL/time.Second)))
	return upd.Set(expression.Name(attrExpiresAt), expression.Plus(ttl, expression.Value(at.Unix())))
}

// dueCondition holds when a received item may be leased at now: its
// lease has lapsed and its not-before time has passed.
func dueCondition(now time.Time) expression.ConditionBuilder {
	ms := expression.Value(now.UnixMilli())
	return expression.Name(attrStatus).Equal(expression.Value(ops.OutboxReceived)).
		And(expression.Or(expression.AttributeNotExists(expression.Name(attrLeaseUntil)), expression.Name(attrLeaseUntil).LessThanEqual(ms))).
		And(expression.Or(expression.AttributeNotExists(expression.Name(attrNotBefore)), expression.Name(attrNotBefore).LessThanEqual(ms)))
}

// reclaimCondition holds when a redelivered event may take its received
// item again at now: the item was handed off (it has no not-before time)
// and that hand-off's lease has lapsed, so the hand-off may have been lost.
// An item with a not-before time is the sweeper's until it is settled: held
// at the claim (HoldOutboxItem) or deferred by the worker, it may be due
// and in flight in a burst, which leases the athlete (burstlease.go), not
// the item; a redelivery taking it then would run its job twice.
func reclaimCondition(now time.Time) expression.ConditionBuilder {
	return expression.AttributeNotExists(expression.Name(attrNotBefore)).And(dueCondition(now))
}

// ClaimOutboxItem records an accepted event as received with its job and a
// lease until now+lease, to be handed off now, and returns the stored item.
// A new key is created and records ttl (its TTL is ttl after the lease end,
// pushed on by every lease and deferral, see Lifetime above); a key whose
// hand-off lease has lapsed (reclaimCondition: the hand-off was lost) is
// claimed again, keeping the original job and correlation id, and so is a
// dropped one (StatusDropped: the same event under another subscription
// id). It returns
// ErrConflict (a duplicate) when the item is done, parked, still leased, or
// the sweeper's (held or deferred); the returned item is then the stored
// one when DynamoDB reported it.
func (s *Outbox) ClaimOutboxItem(ctx context.Context, key, correlationID, job string, now time.Time, lease, ttl time.Duration) (*ops.IdempotencyRecord, error) {
	now = now.UTC()
	rec, err := s.claim(ctx, key, correlationID, job, now, attrLeaseUntil, now.Add(lease), ttl)
	if err != nil {
		return rec, fmt.Errorf("claim outbox item %s: %w", key, err)
	}
	return rec, nil
}

// HoldOutboxItem records an accepted event as received with its job but
// not handed off: the sweeper dispatches it once due (a create gathered
// for a burst at the next gather tick). It is claimed as ClaimOutboxItem
// claims, but with a not-before time in place of a lease, so a redelivery
// is a duplicate however late it comes, until the item is settled.
func (s *Outbox) HoldOutboxItem(ctx context.Context, key, correlationID, job string, now, due time.Time, ttl time.Duration) (*ops.IdempotencyRecord, error) {
	rec, err := s.claim(ctx, key, correlationID, job, now.UTC(), attrNotBefore, due, ttl)
	if err != nil {
		return rec, fmt.Errorf("hold outbox item %s until %s: %w", key, due.UTC().Format(time.RFC3339), err)
	}
	return rec, nil
}

// claim records key as received with job, due at until through attribute
// when (attrLeaseUntil: a hand-off's lease; attrNotBefore: held for the
// sweeper), removing the other; see ClaimOutboxItem.
func (s *Outbox) claim(ctx context.Context, key, correlationID, job string, now time.Time, when string, until time.Time, ttl time.Duration) (*ops.IdempotencyRecord, error) {
	meta := &ops.IdempotencyRecord{}
	meta.Stamp()
	other := attrNotBefore
	if when == attrNotBefore {
		other = attrLeaseUntil
	}
	ifAbsent := func(name string, v any) expression.OperandBuilder {
		return expression.IfNotExists(expression.Name(name), expression.Value(v))
	}
	upd := expression.Set(expression.Name("entityType"), expression.Value(meta.EntityType)).
		Set(expression.Name("schemaVersion"), expression.Value(meta.SchemaVersion)).
		Set(expression.Name("correlationId"), ifAbsent("correlationId", correlationID)).
		Set(expression.Name("job"), ifAbsent("job", job)).
		Set(expression.Name("createdAtUtc"), ifAbsent("createdAtUtc", now)).
		Set(expression.Name(attrTTLSeconds), ifAbsent(attrTTLSeconds, int64(ttl/time.Second))).
		Set(expression.Name(attrStatus), expression.Value(ops.OutboxReceived)).
		Set(expression.Name(when), expression.Value(until.UnixMilli())).
		Set(expression.Name("updatedAtUtc"), expression.Value(now)).
		Set(expression.Name(attrPendingPK), expression.Value(keys.OutboxPendingPK(key, s.DB.OutboxShards))).
		Set(expression.Name(attrPendingSK), expression.Value(keys.OutboxPendingSK(until, key))).
		Add(expression.Name("dispatches"), expression.Value(1)).
		Remove(expression.Name(other))
	// The claim's own ttl, not ttlSeconds: the key may not exist yet.
	upd = upd.Set(expression.Name(attrExpiresAt), expression.Value(until.Add(ttl).Unix()))
	// A dropped item (the same event, posted under another subscription
	// id) is taken over, keeping the job it was dropped with: the event's.
	cond := expression.Or(expression.AttributeNotExists(expression.Name(attrIdempotencyKey)), reclaimCondition(now),
		expression.Name(attrStatus).Equal(expression.Value(StatusDropped)))
	return s.updateOutbox(ctx, key, upd, cond)
}

// LeaseOutboxItem is the sweeper's claim: it takes a fresh lease until
// now+lease on a received item that is due at now, counts the dispatch and
// pushes the item's TTL to its ttl after the lease end.
// It returns ErrConflict when the item is no longer due (settled, deferred,
// or claimed by someone else since it was listed) and ErrNotFound when it is
// gone.
func (s *Outbox) LeaseOutboxItem(ctx context.Context, key string, now time.Time, lease time.Duration) (*ops.IdempotencyRecord, error) {
	now = now.UTC()
	until := now.Add(lease)
	upd := expression.Set(expression.Name(attrLeaseUntil), expression.Value(until.UnixMilli())).
		Set(expression.Name("updatedAtUtc"), expression.Value(now)).
		Set(expression.Name(attrPendingPK), expression.Value(keys.OutboxPendingPK(key, s.DB.OutboxShards))).
		Set(expression.Name(attrPendingSK), expression.Value(keys.OutboxPendingSK(until, key))).
		Add(expression.Name("dispatches"), expression.Value(1)).
		Remove(expression.Name(attrNotBefore))
	upd = expiresAfter(upd, until)
	cond := expression.AttributeExists(expression.Name(attrIdempotencyKey)).And(dueCondition(now))
	rec, err := s.updateOutbox(ctx, key, upd, cond)
	if err != nil {
		if rec == nil && errors.Is(err, model.ErrConflict) {
			err = fmt.Errorf("%w: %w", model.ErrNotFound, err)
		}
		return rec, fmt.Errorf("lease outbox item %s: %w", key, err)
	}
	return rec, nil
}

// OutboxItem reads an outbox item (consistent read). It returns ErrNotFound
// when the key was never claimed (or has expired).
func (s *Outbox) OutboxItem(ctx context.Context, key string) (*ops.IdempotencyRecord, error) {
	var r ops.IdempotencyRecord
	if err := s.DB.Get(ctx, s.DB.Tables().Idempotency, model.Key{PK: key}, &r); err != nil {
		return nil, fmt.Errorf("read outbox item %s: %w", key, err)
	}
	return &r, nil
}

// SettleOutboxItem ends a received item's life as done or parked (with
// reason), takes it out of the pending index and sets its TTL to its ttl
// after now (kept that long for duplicate detection). It returns ErrConflict when
// the item was already settled (another run got there first) and
// ErrNotFound when it does not exist.
func (s *Outbox) SettleOutboxItem(ctx context.Context, key string, status ops.OutboxStatus, reason string, now time.Time) error {
	if status != ops.OutboxDone && status != ops.OutboxParked {
		return fmt.Errorf("settle outbox item %s as %q: %w", key, status, model.ErrInvalid)
	}
	upd := expression.Set(expression.Name(attrStatus), expression.Value(status)).
		Set(expression.Name("updatedAtUtc"), expression.Value(now.UTC())).
		Remove(expression.Name(attrPendingPK)).Remove(expression.Name(attrPendingSK))
	upd = expiresAfter(upd, now)
	if reason != "" {
		upd = upd.Set(expression.Name("reason"), expression.Value(reason))
	}
	if err := s.settle(ctx, key, upd); err != nil {
		return fmt.Errorf("settle outbox item %s as %s: %w", key, status, err)
	}
	return nil
}

// DeferOutboxItem keeps a received item received but not before notBefore
// (its lease is dropped, so the sweeper dispatches it once notBefore has
// passed), recording reason, and pushes its TTL to its ttl after notBefore
// (a pending item never expires before it is due). failure says whether this deferral is a retry
// after a failure (counted in failures, which are bounded) or a
// postponement that is not one (rate budget spent, per-athlete cap: counted
// in deferrals). It returns ErrConflict when the item was settled meanwhile
// and ErrNotFound when it does not exist.
func (s *Outbox) DeferOutboxItem(ctx context.Context, key string, notBefore time.Time, reason string, failure bool, now time.Time) error {
	counter := "deferrals"
	if failure {
		counter = "failures"
	}
	upd := expression.Set(expression.Name(attrNotBefore), expression.Value(notBefore.UnixMilli())).
		Set(expression.Name("reason"), expression.Value(reason)).
		Set(expression.Name("updatedAtUtc"), expression.Value(now.UTC())).
		Set(expression.Name(attrPendingPK), expression.Value(keys.OutboxPendingPK(key, s.DB.OutboxShards))).
		Set(expression.Name(attrPendingSK), expression.Value(keys.OutboxPendingSK(notBefore, key))).
		Add(expression.Name(counter), expression.Value(1)).
		Remove(expression.Name(attrLeaseUntil))
	upd = expiresAfter(upd, notBefore)
	if err := s.settle(ctx, key, upd); err != nil {
		return fmt.Errorf("defer outbox item %s until %s: %w", key, notBefore.UTC().Format(time.RFC3339), err)
	}
	return nil
}

// MarkOutboxParked records on an outbox item that its job is about to be
// parked (IdempotencyRecord.ParkedRecord), before the PARKED#WORKER record
// is written, so a later run that finishes the job knows to remove that
// record. It changes nothing else; ErrNotFound when the item does not exist.
func (s *Outbox) MarkOutboxParked(ctx context.Context, key string) error {
	upd := expression.Set(expression.Name(attrParkedRecord), expression.Value(true))
	cond := expression.AttributeExists(expression.Name(attrIdempotencyKey))
	if _, err := s.updateOutbox(ctx, key, upd, cond); err != nil {
		if errors.Is(err, model.ErrConflict) {
			err = fmt.Errorf("%w: %w", model.ErrNotFound, err)
		}
		return fmt.Errorf("mark outbox item %s parked: %w", key, err)
	}
	return nil
}

// settle applies upd to a received item; ErrConflict when it is no longer
// received, ErrNotFound when it does not exist.
func (s *Outbox) settle(ctx context.Context, key string, upd expression.UpdateBuilder) error {
	cond := expression.AttributeExists(expression.Name(attrIdempotencyKey)).
		And(expression.Name(attrStatus).Equal(expression.Value(ops.OutboxReceived)))
	rec, err := s.updateOutbox(ctx, key, upd, cond)
	if err != nil && errors.Is(err, model.ErrConflict) && rec == nil {
		return fmt.Errorf("%w: %w", model.ErrNotFound, err)
	}
	return err
}

// updateOutbox runs one UpdateItem on the idempotency table and returns the
// new item; when the condition fails, the error matches ErrConflict and the
// returned item is the stored one (nil when there is none).
func (s *Outbox) updateOutbox(ctx context.Context, key string, upd expression.UpdateBuilder, cond expression.ConditionBuilder) (*ops.IdempotencyRecord, error) {
	ex, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return nil, fmt.Errorf("build expression: %w", err)
	}
	out, err := s.DB.Client().UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.DB.Tables().Idempotency), Key: s.DB.Tables().KeyAV(s.DB.Tables().Idempotency, model.Key{PK: key}),
		UpdateExpression: ex.Update(), ConditionExpression: ex.Condition(),
		ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
		ReturnValues: types.ReturnValueAllNew, ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err != nil {
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) && len(ccf.Item) > 0 {
			var r ops.IdempotencyRecord
			if uerr := dynamo.Unmarshal(ccf.Item, &r); uerr == nil {
				return &r, dynerr.Translate(err)
			}
		}
		return nil, dynerr.Translate(err)
	}
	var r ops.IdempotencyRecord
	if err := dynamo.Unmarshal(out.Attributes, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
