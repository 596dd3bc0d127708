package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/dynerr"
)

// StatusDropped is the status of an event of a subscription the webhook
// does not accept (a guess of the id, or a new subscription before the
// configuration names it): recorded with its job under the event's key,
// never dispatched. Our subscription's delivery of the same event takes
// the item over (ClaimOutboxItem); an operator can re-admit a
// subscription's dropped events (ReadmitOutboxItem).
const StatusDropped ops.OutboxStatus = "dropped"

// pendingIndex is the idempotency table's sparse index (model/store/pending).
const pendingIndex = "Pending"

// Drops records the webhook's dropped events and re-admits them: the
// outbox's items of subscriptions the webhook does not accept.
type Drops struct {
	DB *dynamo.DB
}

// NewDrops returns the dropped events of db's outbox.
func NewDrops(db *dynamo.DB) *Drops { return &Drops{DB: db} }

// DropOutboxItem records an event of subscriptionID, which the webhook
// does not accept, as dropped with its job, unless its key exists: one
// conditional write, as a claim is, so that a guess of the subscription id
// costs and answers what the right one does (a replay is a duplicate
// either way). It is listed under the subscription's partition of the
// pending index (keys.OutboxDroppedPK), which the sweeper never reads, and
// expires ttl after now. ErrConflict when the key exists (a duplicate).
func (s *Drops) DropOutboxItem(ctx context.Context, key, correlationID, job string, subscriptionID int64, now time.Time, ttl time.Duration) (*ops.IdempotencyRecord, error) {
	meta := &ops.IdempotencyRecord{}
	meta.Stamp()
	now = now.UTC()
	upd := expression.Set(expression.Name("entityType"), expression.Value(meta.EntityType)).
		Set(expression.Name("schemaVersion"), expression.Value(meta.SchemaVersion)).
		Set(expression.Name("correlationId"), expression.Value(correlationID)).
		Set(expression.Name("job"), expression.Value(job)).
		Set(expression.Name("createdAtUtc"), expression.Value(now)).
		Set(expression.Name("updatedAtUtc"), expression.Value(now)).
		Set(expression.Name(attrTTLSeconds), expression.Value(int64(ttl/time.Second))).
		Set(expression.Name(attrStatus), expression.Value(StatusDropped)).
		Set(expression.Name(attrPendingPK), expression.Value(keys.OutboxDroppedPK(subscriptionID))).
		Set(expression.Name(attrPendingSK), expression.Value(keys.OutboxPendingSK(now, key))).
		Set(expression.Name(attrExpiresAt), expression.Value(now.Add(ttl).Unix()))
	rec, err := (&Outbox{DB: s.DB}).updateOutbox(ctx, key, upd, expression.AttributeNotExists(expression.Name(attrIdempotencyKey)))
	if err != nil {
		return rec, fmt.Errorf("drop outbox item %s of subscription %d: %w", key, subscriptionID, err)
	}
	return rec, nil
}

// DroppedOutboxItems lists up to limit events dropped for subscriptionID,
// oldest first, as the index projects them (keys and creation; the index
// is eventually consistent: ReadmitOutboxItem checks each).
func (s *Drops) DroppedOutboxItems(ctx context.Context, subscriptionID int64, limit int) ([]ops.IdempotencyRecord, error) {
	ex, err := expression.NewBuilder().WithKeyCondition(
		expression.Key(attrPendingPK).Equal(expression.Value(keys.OutboxDroppedPK(subscriptionID)))).Build()
	if err != nil {
		return nil, fmt.Errorf("build dropped query: %w", err)
	}
	out, err := s.DB.Client().Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(s.DB.Tables().Idempotency), IndexName: aws.String(pendingIndex),
		KeyConditionExpression: ex.KeyCondition(), ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
		Limit: aws.Int32(int32(max(1, min(limit, 1000)))),
	})
	if err != nil {
		return nil, fmt.Errorf("list events dropped for subscription %d: %w", subscriptionID, dynerr.Translate(err))
	}
	recs := make([]ops.IdempotencyRecord, 0, len(out.Items))
	for _, it := range out.Items {
		var r ops.IdempotencyRecord
		if err := dynamo.Unmarshal(it, &r); err != nil {
			return nil, fmt.Errorf("list events dropped for subscription %d: %w", subscriptionID, err)
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// ReadmitOutboxItem makes an event dropped for subscriptionID received,
// due at now and held for the sweeper (a not-before time), with the job it
// was dropped with: once the configuration accepts the subscription, its
// events dropped meanwhile run as if they had been accepted. ErrConflict
// when the item is no longer one of the subscription's dropped events
// (taken over by a delivery, or re-admitted already).
func (s *Drops) ReadmitOutboxItem(ctx context.Context, key string, subscriptionID int64, now time.Time) (*ops.IdempotencyRecord, error) {
	now = now.UTC()
	upd := expression.Set(expression.Name(attrStatus), expression.Value(ops.OutboxReceived)).
		Set(expression.Name(attrNotBefore), expression.Value(now.UnixMilli())).
		Set(expression.Name("updatedAtUtc"), expression.Value(now)).
		Set(expression.Name(attrPendingPK), expression.Value(keys.OutboxPendingPK(key, s.DB.OutboxShards))).
		Set(expression.Name(attrPendingSK), expression.Value(keys.OutboxPendingSK(now, key))).
		Remove(expression.Name(attrLeaseUntil))
	upd = expiresAfter(upd, now)
	cond := expression.Name(attrStatus).Equal(expression.Value(StatusDropped)).
		And(expression.Name(attrPendingPK).Equal(expression.Value(keys.OutboxDroppedPK(subscriptionID))))
	rec, err := (&Outbox{DB: s.DB}).updateOutbox(ctx, key, upd, cond)
	if err != nil {
		return rec, fmt.Errorf("re-admit outbox item %s of subscription %d: %w", key, subscriptionID, err)
	}
	return rec, nil
}
