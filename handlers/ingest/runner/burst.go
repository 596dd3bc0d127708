package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/ops"
)

// runBurst serves a burst and settles each event's outbox item with its own
// outcome, as Run would have for it alone. A burst under the athlete's
// burst lease holds it while it runs and releases it at the end
// (holdBurstLease). A burst has no outbox item of its own: an outcome that
// cannot be recorded leaves that item received, and the sweeper dispatches
// it again after its lease (the burst's, or the item's).
func (w *Runner) runBurst(ctx context.Context, job ingest.Job) {
	log := w.jobLog(job)
	h, err := w.handler(job)
	if err != nil {
		log.ErrorContext(ctx, "burst job but no handler registered for bursts; its items wait for their leases", "error", err)
		return
	}
	ctx, release, err := w.holdBurstLease(ctx, log, job)
	if err != nil {
		log.InfoContext(ctx, "burst superseded: its lease was taken again, a newer burst serves its events", "writeStatus", "skipped", "error", err)
		return
	}
	defer release(false)
	outcomes := h.Serve(ctx, job)
	if ctx.Err() != nil {
		log.WarnContext(ctx, "burst interrupted; its items stay received for the sweeper", "writeStatus", "interrupted")
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	for i, sub := range job.Burst {
		rec := &ops.IdempotencyRecord{IdempotencyKey: sub.IdempotencyKey, Status: ops.OutboxReceived, Dispatches: sub.OutboxDispatches,
			ParkedRecord: sub.OutboxParkedRecord}
		if sub.OutboxFailures != nil {
			rec.Failures = *sub.OutboxFailures
		}
		if err := w.settle(sctx, w.jobLog(sub), sub, rec, outcomes[i]); err != nil {
			log.WarnContext(ctx, "burst item's outcome not recorded; it waits for its lease", "idempotencyKey", sub.IdempotencyKey, "error", err)
		}
	}
	release(true)
}

// BurstLeaseHolder renews and releases the athlete's burst lease a burst
// job carries (ingest.Job.BurstLeaseUntil, its token; model/store.Outbox,
// see its burstlease.go).
type BurstLeaseHolder interface {
	// RenewBurst extends the lease token to until; ErrConflict when it is
	// no longer that lease.
	RenewBurst(ctx context.Context, athleteID int64, token, until time.Time) error
	// ReleaseBurst releases one burst of the lease token.
	ReleaseBurst(ctx context.Context, athleteID int64, token time.Time) error
}

// holdBurstLease holds the burst lease of job while it runs: it renews the
// lease at once, and every half of its length (BurstLeaseFor) until the
// returned release is first called, which releases the lease when the
// burst's outcomes were recorded (done) and otherwise leaves it to lapse. A lease
// that was taken again (it lapsed while the burst waited or ran, and
// another sweep dispatched the athlete's events under a new one) makes the
// burst superseded: at once, an error and nothing to run; later, the
// returned context ends, the burst stops, and its events stay received for
// the newer burst. A job without a burst lease, or a runner without
// Bursts, runs as it is.
func (w *Runner) holdBurstLease(ctx context.Context, log *slog.Logger, job ingest.Job) (context.Context, func(done bool), error) {
	h := w.store.Bursts
	if h == nil || job.BurstLeaseUntil.IsZero() || job.BurstLeaseFor <= 0 {
		return ctx, func(bool) {}, nil
	}
	owner, token, every := job.Burst[0].Event.OwnerID, job.BurstLeaseUntil, job.BurstLeaseFor/2
	renew := func(ctx context.Context) error {
		return h.RenewBurst(ctx, owner, token, w.Now().Add(job.BurstLeaseFor))
	}
	if err := renew(ctx); errors.Is(err, model.ErrConflict) {
		return ctx, nil, fmt.Errorf("burst %s: %w", job.CorrelationID, err)
	} else if err != nil {
		log.WarnContext(ctx, "burst lease not renewed; the burst runs on", "error", err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if err := renew(ctx); errors.Is(err, model.ErrConflict) {
					log.InfoContext(ctx, "burst superseded while it ran: its lease was taken again; it stops", "error", err)
					cancel(err)
					return
				} else if err != nil && ctx.Err() == nil {
					log.WarnContext(ctx, "burst lease not renewed", "error", err)
				}
			}
		}
	})
	var once sync.Once
	return ctx, func(done bool) {
		once.Do(func() {
			close(stop)
			wg.Wait()
			cancel(nil)
			if !done {
				return
			}
			rctx, end := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
			defer end()
			if err := h.ReleaseBurst(rctx, owner, token); err != nil {
				log.WarnContext(ctx, "burst lease not released; it lapses", "error", err)
			}
		})
	}, nil
}
