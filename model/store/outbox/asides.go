package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store/dynamo"
)

// Asides makes due items due later: the sweeper's spreading of one
// tenant's backlog over later sweeps when a read of the pending index
// comes back full of it.
type Asides struct {
	DB *dynamo.DB
}

// NewAsides returns the set-aside writes of db's outbox.
func NewAsides(db *dynamo.DB) *Asides { return &Asides{DB: db} }

// SetAsideOutboxItem makes a received item that is due at now (its lease
// lapsed, its not-before passed) due again at due: held for the sweeper
// with a not-before time, as a deferral holds it, without counting a
// deferral. ErrConflict when it is no longer due at now (leased, deferred
// or settled since the sweep read it), ErrNotFound when it is gone.
func (s *Asides) SetAsideOutboxItem(ctx context.Context, key string, due, now time.Time) error {
	upd := expression.Set(expression.Name(attrNotBefore), expression.Value(due.UnixMilli())).
		Set(expression.Name("reason"), expression.Value("set aside: its athlete's backlog is spread over later sweeps")).
		Set(expression.Name("updatedAtUtc"), expression.Value(now.UTC())).
		Set(expression.Name(attrPendingPK), expression.Value(keys.OutboxPendingPK(key, s.DB.OutboxShards))).
		Set(expression.Name(attrPendingSK), expression.Value(keys.OutboxPendingSK(due, key))).
		Remove(expression.Name(attrLeaseUntil))
	upd = expiresAfter(upd, due)
	cond := expression.AttributeExists(expression.Name(attrIdempotencyKey)).And(dueCondition(now))
	rec, err := (&Outbox{DB: s.DB}).updateOutbox(ctx, key, upd, cond)
	if err != nil {
		if rec == nil && errors.Is(err, model.ErrConflict) {
			err = fmt.Errorf("%w: %w", model.ErrNotFound, err)
		}
		return fmt.Errorf("set outbox item %s aside until %s: %w", key, due.UTC().Format(time.RFC3339), err)
	}
	return nil
}
