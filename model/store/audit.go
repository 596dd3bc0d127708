package store

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/commitcollect/backend/model"
)

// AppendAudit writes an audit entry. An entry with the same key (a replayed
// event) is written once.
func (s *Store) AppendAudit(ctx context.Context, e *model.AuditEntry) error {
	err := s.PutIfAbsent(ctx, s.t.Audit, e)
	if err != nil && !isConflict(err) {
		return fmt.Errorf("append audit %s %s: %w", e.EventType, e.ItemKey(), err)
	}
	return nil
}

// Audit writes an audit entry and never fails: audit failures must not break
// business logic, so a failed write is logged (with the entry's identity) and
// dropped.
func (s *Store) Audit(ctx context.Context, log *slog.Logger, e *model.AuditEntry) {
	if err := s.AppendAudit(ctx, e); err != nil {
		log.ErrorContext(ctx, "audit write failed", "eventType", e.EventType,
			"correlationId", e.CorrelationID, "userId", e.UserID, "error", err)
	}
}

// Park sets a record aside for inspection and redrive (the local stand-in
// for a DLQ; in AWS the failure destinations are SQS queues). Parking the
// same record twice keeps the first. The record expires
// model.ParkedRetentionDays after parking unless r sets ExpiresAt (a record
// parked after its user's account deletion, by a job in flight that failed
// for good, is gone by then; the deletion removes those parked before).
func (s *Store) Park(ctx context.Context, r *model.ParkedRecord) error {
	if r.ParkedAtUtc.IsZero() {
		r.ParkedAtUtc = s.Now()
	}
	if r.ExpiresAt == 0 {
		r.ExpiresAt = r.ParkedAtUtc.Add(model.ParkedRetentionDays * 24 * time.Hour).Unix()
	}
	err := s.PutIfAbsent(ctx, s.t.Main, r)
	if err != nil && !isConflict(err) {
		return fmt.Errorf("park %s record %s: %w", r.Source, r.RecordID, err)
	}
	return nil
}

// DeleteUserParked deletes the parked records (every source) that belong to
// a user: those naming userID, and those naming no user but athleteID (a
// worker job parked before its athlete was resolved; athleteID 0 skips
// them). It reads each PARKED#{source} partition whole with a filter
// (keys only): the partitions hold only what failed for good and expire
// after model.ParkedRetentionDays, so they stay small; it is an account
// deletion's step, never a request path. It returns how many it deleted;
// re-running it is harmless.
func (s *Store) DeleteUserParked(ctx context.Context, userID string, athleteID int64) (int, error) {
	mine := expression.Name("userId").Equal(expression.Value(userID))
	if athleteID != 0 {
		mine = mine.Or(expression.AttributeNotExists(expression.Name("userId")).
			And(expression.Name("athleteId").Equal(expression.Value(athleteID))))
	}
	n := 0
	for _, source := range []string{model.ParkSourceProjector, model.ParkSourceWorker} {
		kc := expression.Key("PK").Equal(expression.Value(model.ParkedPK(source)))
		ex, err := expression.NewBuilder().WithKeyCondition(kc).WithFilter(mine).
			WithProjection(expression.NamesList(expression.Name("PK"), expression.Name("SK"))).Build()
		if err != nil {
			return n, fmt.Errorf("delete parked records of user %s: build query: %w", userID, err)
		}
		p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
			TableName: aws.String(s.t.Main), KeyConditionExpression: ex.KeyCondition(), FilterExpression: ex.Filter(),
			ProjectionExpression: ex.Projection(), ExpressionAttributeNames: ex.Names(),
			ExpressionAttributeValues: ex.Values(), ConsistentRead: aws.Bool(true),
		})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return n, fmt.Errorf("delete parked %s records of user %s: %w", source, userID, translate(err))
			}
			keys := make([]model.Key, 0, len(page.Items))
			for _, it := range page.Items {
				k, err := itemKey(it)
				if err != nil {
					return n, fmt.Errorf("delete parked %s records of user %s: %w", source, userID, err)
				}
				keys = append(keys, k)
			}
			if err := s.BatchDelete(ctx, s.t.Main, keys); err != nil {
				return n, fmt.Errorf("delete parked %s records of user %s: %w", source, userID, err)
			}
			n += len(keys)
		}
	}
	return n, nil
}

// Parked lists the records parked by source (at most MaxWorkoutsToInspect).
func (s *Store) Parked(ctx context.Context, source string) ([]model.ParkedRecord, error) {
	recs, _, err := QueryEntities[model.ParkedRecord](ctx, s, s.t.Main, model.ParkedPK(source), "", QueryOptions{})
	if err != nil {
		return nil, fmt.Errorf("list parked %s: %w", source, err)
	}
	return recs, nil
}

// Unpark removes a parked record once it has been redriven.
func (s *Store) Unpark(ctx context.Context, source, recordID string) error {
	return s.Delete(ctx, s.t.Main, model.ParkedKey(source, recordID))
}
