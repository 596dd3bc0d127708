package ingest

import (
	"context"
	"time"

	"github.com/commitcollect/backend/model"
)

// IdempotencyTTL is how long an accepted event's key is kept after its last
// activity (lease end, not-before time, settle): long past Strava's
// redelivery window, and never while the item is pending (see
// model.OutboxTTL).
const IdempotencyTTL = model.OutboxTTL

// HeaderCorrelationID carries the correlation id on every webhook answer.
const HeaderCorrelationID = "X-Correlation-Id"

// DefaultLease is how long a hand-off is presumed in flight before the
// sweeper dispatches the event again: longer than the worker Lambda's
// timeout plus the time an async invoke waits in Lambda's queue normally.
const DefaultLease = 5 * time.Minute

// Dispatcher hands an accepted job to the worker asynchronously. Dispatch
// returns once the job is queued (not processed); an error means it was not
// queued. The job is durable before it is dispatched (its outbox item is
// received), so a failed or lost hand-off is repaired by the Sweeper.
type Dispatcher interface {
	Dispatch(ctx context.Context, job Job) error
}
