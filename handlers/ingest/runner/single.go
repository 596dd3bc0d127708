package runner

import (
	"context"
	"errors"
	"fmt"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/ops"
)

// runOne is Run for a job of one event or one sync page: read its outbox
// item (unless dispatched with it), process the job, settle the item.
func (w *Runner) runOne(ctx context.Context, job ingest.Job) error {
	log := w.jobLog(job)
	var rec *ops.IdempotencyRecord
	switch {
	case job.IdempotencyKey != "" && job.OutboxFailures != nil && !job.Redrive:
		// Dispatched right after a claim or lease that found the item
		// received: no need to read it. If another run settled it since,
		// the conditional settle below says so.
		rec = &ops.IdempotencyRecord{IdempotencyKey: job.IdempotencyKey, Status: ops.OutboxReceived,
			Failures: *job.OutboxFailures, Dispatches: job.OutboxDispatches, ParkedRecord: job.OutboxParkedRecord}
	case job.IdempotencyKey != "":
		r, err := w.store.Outbox.OutboxItem(ctx, job.IdempotencyKey)
		switch {
		case err == nil && r.Status == ops.OutboxDone && job.Redrive:
			// Parked once, done since (the sweeper ran it): a redrive must
			// not run done work again; the redrive then unparks the record.
			log.InfoContext(ctx, "redriven job is done already; not run again", "writeStatus", "skipped")
			return nil
		case err == nil && r.Status != ops.OutboxReceived && !job.Redrive:
			log.InfoContext(ctx, "job already settled; not run again", "writeStatus", "skipped", "outboxStatus", r.Status)
			return nil
		case err == nil && r.Status == ops.OutboxReceived:
			rec = r
		case err != nil && !errors.Is(err, model.ErrNotFound):
			return fmt.Errorf("run %s: %w", job.CorrelationID, err)
		}
	}
	perr := w.Process(ctx, job)
	if rec != nil && perr != nil && ctx.Err() != nil {
		log.WarnContext(ctx, "job interrupted; it stays received for the sweeper", "writeStatus", "interrupted", "error", perr)
		return fmt.Errorf("run %s: interrupted: %w", job.CorrelationID, ctx.Err())
	}
	// Record the outcome even if ctx ends now: the work is done.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	return w.settle(sctx, log, job, rec, perr)
}
