package store

import (
	"context"
	"fmt"
	"log/slog"

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
// same record twice keeps the first.
func (s *Store) Park(ctx context.Context, r *model.ParkedRecord) error {
	if r.ParkedAtUtc.IsZero() {
		r.ParkedAtUtc = s.Now()
	}
	err := s.PutIfAbsent(ctx, s.t.Main, r)
	if err != nil && !isConflict(err) {
		return fmt.Errorf("park %s record %s: %w", r.Source, r.RecordID, err)
	}
	return nil
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
