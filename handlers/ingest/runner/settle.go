package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/budget"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/emf"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/strava"
)

// record settles the job's outbox item as o says: done (and unparked),
// deferred, parked, or received again for a retry. An item another run
// settled meanwhile is left as it is.
func (w *Runner) record(ctx context.Context, log *slog.Logger, job ingest.Job, rec *ops.IdempotencyRecord, o Outcome, perr error, now time.Time) error {
	key := job.IdempotencyKey
	var err error
	switch o.Kind {
	case OutcomeDone:
		err = w.store.Outbox.SettleOutboxItem(ctx, key, ops.OutboxDone, "", now)
		if uerr := w.unparkDone(ctx, job, rec); uerr != nil {
			// The outcome is recorded; a redrive of the stale record finds
			// the job done and does not run it again.
			log.WarnContext(ctx, "parked record of a done job not removed", "error", uerr)
		}
	case OutcomeDeferred:
		w.countAppCredentials(ctx, log, perr, now)
		w.countHeldBack(ctx, log, perr, now)
		log.InfoContext(ctx, "job deferred", "writeStatus", "deferred", "notBefore", o.Until.UTC().Format(time.RFC3339), "reason", o.Reason)
		err = w.store.Outbox.DeferOutboxItem(ctx, key, o.Until, o.Reason, false, now)
	case OutcomeParked:
		err = w.park(ctx, job, o.Reason, now)
		if o.Poison {
			log.ErrorContext(ctx, "job parked as poison", "writeStatus", "rejected", "error", perr)
		} else {
			log.ErrorContext(ctx, "job parked after bounded retries", "writeStatus", "parked", "error", perr)
		}
	case OutcomeRetry:
		log.WarnContext(ctx, "job failed; retried later", "writeStatus", "retry", "failures", rec.Failures+1,
			"notBefore", o.Until.Format(time.RFC3339), "error", perr)
		err = w.store.Outbox.DeferOutboxItem(ctx, key, o.Until, o.Reason, true, now)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, model.ErrConflict), errors.Is(err, model.ErrNotFound):
		log.InfoContext(ctx, "outbox item settled elsewhere meanwhile", "outcome", o.Kind, "error", err)
		return nil
	}
	return fmt.Errorf("run %s: record %s: %w", job.CorrelationID, o.Kind, err)
}

// countAppCredentials writes the StravaAppCredentialsRejected metric (the
// alarm of the same name pages the operator) for a job deferred because
// Strava refused the application's credentials, and logs it as an error:
// no athlete can fix it.
func (w *Runner) countAppCredentials(ctx context.Context, log *slog.Logger, perr error, now time.Time) {
	if !errors.Is(perr, strava.ErrAppCredentials) {
		return
	}
	log.ErrorContext(ctx, "strava refused the application's client credentials; job waits for the operator",
		"writeStatus", "deferred", "error", perr)
	if err := budget.WriteEMF(w.Metrics, now, "Service", "worker",
		[]emf.Value{{Name: MetricAppCredentialsRejected, Unit: "Count", Value: 1}}); err != nil {
		log.WarnContext(ctx, "app credentials metric not written", "error", err)
	}
}

// countHeldBack writes the AthleteReadsHeldBack metric for a job its
// athlete's own read cap (window or day) deferred.
func (w *Runner) countHeldBack(ctx context.Context, log *slog.Logger, perr error, now time.Time) {
	var de *ingest.DeferError
	if !errors.As(perr, &de) || !de.AthleteCap {
		return
	}
	if err := budget.WriteEMF(w.Metrics, now, "Service", "worker",
		[]emf.Value{{Name: MetricAthleteReadsHeldBack, Unit: "Count", Value: 1}}); err != nil {
		log.WarnContext(ctx, "held-back metric not written", "error", err)
	}
}

// MetricAthleteReadsHeldBack is the worker metric counting jobs held back by
// their athlete's own read cap (per window or per day).
const MetricAthleteReadsHeldBack = "AthleteReadsHeldBack"

// MetricAppCredentialsRejected is the worker metric counting jobs deferred
// because Strava refused the application's client credentials.
const MetricAppCredentialsRejected = "StravaAppCredentialsRejected"

// unparkDone removes the PARKED#WORKER record of a job that is done: one
// parked at shutdown (or by a failed hand-off) and completed later by the
// sweeper would otherwise be run again by `make redrive`. Every park marks
// the job's outbox item first (MarkOutboxParked), so only a job whose item
// says so pays for the delete: a gathered create served by a burst, on its
// second dispatch, costs no extra write. A record parked by a run that had
// read its item before the mark (two dispatches racing), or by older code,
// stays: a redrive of it finds the job done and does not run it (Run), and
// the redrive removes it.
func (w *Runner) unparkDone(ctx context.Context, job ingest.Job, rec *ops.IdempotencyRecord) error {
	if !rec.ParkedRecord {
		return nil
	}
	if err := w.store.Parked.RemoveParked(ctx, keys.ParkSourceWorker, job.IdempotencyKey); err != nil {
		return fmt.Errorf("remove the parked record of done job %s: %w", job.IdempotencyKey, err)
	}
	return nil
}

// park sets the job aside for an operator: a PARKED#WORKER record (what
// `make redrive` reads; its payload is the job marked Redrive) and the
// outbox item settled as parked with the reason.
func (w *Runner) park(ctx context.Context, job ingest.Job, reason string, now time.Time) error {
	job.Redrive = true
	payload, err := json.Marshal(job)
	if err != nil {
		return fmt.Errorf("park %s: encode: %w", job.CorrelationID, err)
	}
	r := &ops.ParkedRecord{Source: keys.ParkSourceWorker, RecordID: job.IdempotencyKey, Reason: reason,
		Payload: string(payload), CorrelationID: job.CorrelationID, ParkedAtUtc: now.UTC()}
	r.UserID, r.AthleteID = w.parkedOwner(ctx, job)
	if err := w.store.Outbox.MarkOutboxParked(ctx, job.IdempotencyKey); err != nil && !errors.Is(err, model.ErrNotFound) {
		return fmt.Errorf("park %s: %w", job.CorrelationID, err)
	}
	if err := w.store.Parked.Park(ctx, r); err != nil {
		return fmt.Errorf("park %s: %w", job.CorrelationID, err)
	}
	return w.store.Outbox.SettleOutboxItem(ctx, job.IdempotencyKey, ops.OutboxParked, reason, now)
}

// parkedOwner names the user and athlete a parked job belongs to, so an
// account deletion finds its record: a sync job carries both; an event
// carries the athlete, whose user is resolved when it is linked (best
// effort: an unresolved record keeps only the athlete).
func (w *Runner) parkedOwner(ctx context.Context, job ingest.Job) (string, int64) {
	if job.Sync != nil {
		return job.Sync.UserID, job.Sync.AthleteID
	}
	userID, err := w.store.Athletes.ResolveAthlete(ctx, job.Event.OwnerID)
	if err != nil {
		return "", job.Event.OwnerID
	}
	return userID, job.Event.OwnerID
}

func (w *Runner) audit(ctx context.Context, log *slog.Logger, subjectPK, userID, eventType string, job ingest.Job, details map[string]string) {
	w.store.Audits.Audit(ctx, log, ingest.AuditEntry(subjectPK, userID, eventType, job, details, w.Now()))
}
