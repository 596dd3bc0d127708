package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/retry"
)

// Outcomes of a processed job, as its outbox item records them.
const (
	OutcomeDone     = "done"
	OutcomeDeferred = "deferred"
	OutcomeParked   = "parked"
	OutcomeRetry    = "retry"
)

// Outcome is what a processed job's error means for its outbox item.
type Outcome struct {
	// Kind is one of the Outcome… constants.
	Kind string
	// Until is when a deferred or retried job is due again.
	Until time.Time
	// Reason is kept on the item (deferred, parked, retry).
	Reason string
	// Poison says a parked job's input can never be processed
	// (model.ErrInvalid), rather than its failures ran out.
	Poison bool
}

// Decide is the retry and park policy for a job whose item has failed
// failures times before and whose processing returned perr: nil is done; a
// *ingest.DeferError waits until its instant and is not a failure;
// model.ErrInvalid is poison, parked at once; the failure that reaches
// maxFailures (at least one) parks the job; any other failure is retried
// after a full-jitter backoff from retryBase (at least a millisecond), at
// most retryMax.
func Decide(perr error, failures, maxFailures int, retryBase time.Duration, now time.Time) Outcome {
	var de *ingest.DeferError
	switch {
	case perr == nil:
		return Outcome{Kind: OutcomeDone}
	case errors.As(perr, &de):
		return Outcome{Kind: OutcomeDeferred, Until: de.Until, Reason: de.Reason}
	case errors.Is(perr, model.ErrInvalid):
		return Outcome{Kind: OutcomeParked, Reason: perr.Error(), Poison: true}
	case failures+1 >= max(maxFailures, 1):
		return Outcome{Kind: OutcomeParked, Reason: fmt.Sprintf("gave up after %d failures: %v", failures+1, perr)}
	}
	return Outcome{Kind: OutcomeRetry, Until: now.Add(retry.Backoff(failures+1, max(retryBase, time.Millisecond), retryMax)),
		Reason: perr.Error()}
}

// settle records the outcome of a processed job (Decide) in its outbox
// item (record) and audits a poison job. A job without an outbox item (an
// old payload, a redrive; rec nil) keeps the old contract: nil for success
// and for poison, the error itself for everything else, which is worth
// retrying.
func (w *Runner) settle(ctx context.Context, log *slog.Logger, job ingest.Job, rec *ops.IdempotencyRecord, perr error) error {
	now := w.Now()
	failures := 0
	if rec != nil {
		failures = rec.Failures
	}
	o := Decide(perr, failures, w.MaxFailures, w.RetryBase, now)
	var err error
	if rec != nil {
		err = w.record(ctx, log, job, rec, o, perr, now)
	}
	if o.Poison {
		w.audit(ctx, log, keys.AthletePK(job.Event.OwnerID), "", ingest.AuditEventRejected, job,
			map[string]string{"reason": perr.Error()})
	}
	switch {
	case rec != nil:
		return err
	case o.Kind == OutcomeDone:
		return nil
	case o.Poison:
		log.ErrorContext(ctx, "job dropped as poison", "writeStatus", "rejected", "error", perr)
		return nil
	}
	log.WarnContext(ctx, "job failed, retryable", "writeStatus", "retry", "error", perr)
	return perr
}
