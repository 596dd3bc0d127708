// Package runner runs the jobs handed off to the worker and records each
// job's outcome in its outbox item, in watermill's shape: the loop and its
// acknowledgement (Runner.Run, settle), the handler (a Processor: the
// fetcher or the syncer, by Route) and the retry and park policy (Decide)
// are three things.
//
// The idempotency item of an event (model.IdempotencyRecord) is
// the durable hand-off. Its life:
//
//	(none) ──claim──▶ received ──worker: written / nothing to do──▶ done
//	                  │  ▲     ──worker: poison, or MaxFailures──▶ parked (+ PARKED#WORKER)
//	                  │  └── worker: deferred (429, spent budget, athlete cap: until the
//	                  │      window reset) or failed (backoff) → notBefore
//	                  └── lease lapsed / notBefore passed → sweeper or a redelivery
//	                      claims it again (conditional) and dispatches the stored job
//
// While received the item carries PendingPK/PendingSK (the sparse Pending
// index, keyed by due instant, spread over CC_OUTBOX_SHARDS partitions,
// default 32, by a hash of the key; the index projects only the keys, the
// correlation id and the creation instant, and the lease returns the whole
// item), so the sweeper finds due work with one Query per shard. A redelivered event is a duplicate while its item is done,
// parked, leased or deferred. Delivery to the worker is at least once: a job
// may run twice (lease lapse, concurrent sweepers are excluded by the
// conditional lease, but a slow worker is not), so the worker coalesces (a
// stored fetch that started after the job's receipt answers it) and orders
// its writes by fetch start (model.Workout.FetchStartedAtNs).
//
// Lifetime: the item's TTL (expiresAt) lies IdempotencyTTL (7 days) after
// its last activity: every claim, lease and deferral puts it after the new
// due time, the settle 7 days after the settle, so a received item never
// expires while pending however long it is deferred (model/store outbox.go).
//
// Parked records: a PARKED#WORKER record (PARKED#{source}#{shard} /
// {idempotency key}, keys.ParkedShards shards by a hash of the key; records
// parked before the shards stay under PARKED#{source} and are still read
// until they expire; userId and athleteId when known, expiresAt 30 days after parking,
// model.ParkedRetentionDays) is written by the worker's park (poison,
// MaxFailures) and by a local queue's on-failure destination (the outcome
// could not be recorded; the item stays received), each after marking the
// job's outbox item (parkedRecord). A done job whose item is so marked
// removes its record, and a redriven job whose item is done is not run again, so `make redrive` never re-runs done work. An
// account deletion deletes the user's parked records.
package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store/capacity"
	"github.com/commitcollect/backend/model/strava"

	"github.com/commitcollect/backend/handlers/ingest/budget"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/emf"
)

// Store is the outbox the runner settles jobs in, and where it parks them
// (model/store.Store), by use case.
type Store interface {
	Settler
	Parking
	// ResolveAthlete returns the athlete's user; ErrNotFound when unlinked.
	ResolveAthlete(ctx context.Context, athleteID int64) (string, error)
	ingest.Auditor
}

// Settler records a job's outcome in its outbox item.
type Settler interface {
	// OutboxItem reads the job's outbox item; ErrNotFound when none.
	OutboxItem(ctx context.Context, key string) (*model.IdempotencyRecord, error)
	// SettleOutboxItem ends a received item as done or parked; ErrConflict
	// when it was settled already.
	SettleOutboxItem(ctx context.Context, key string, status model.OutboxStatus, reason string, now time.Time) error
	// DeferOutboxItem keeps a received item received until notBefore;
	// ErrConflict when it was settled already.
	DeferOutboxItem(ctx context.Context, key string, notBefore time.Time, reason string, failure bool, now time.Time) error
}

// Parking sets jobs aside for redrive and takes them back.
type Parking interface {
	// Park sets a record aside for redrive (PARKED#{source}#{shard}).
	Park(ctx context.Context, r *model.ParkedRecord) error
	// MarkOutboxParked marks the job's outbox item before its record is
	// parked, so a later run that finishes the job removes the record.
	MarkOutboxParked(ctx context.Context, key string) error
	// RemoveParked removes a done job's parked record from its shard
	// (missing: not an error).
	RemoveParked(ctx context.Context, source, recordID string) error
}

// Processor does a job's work. Its error is the job's outcome (Decide).
type Processor interface {
	Process(ctx context.Context, job ingest.Job) error
}

// Runner defaults.
const (
	// DefaultRetryBase is the first backoff after a failed attempt (full
	// jitter, doubling: up to 30 s, 1 min, 2 min … retryMax).
	DefaultRetryBase = 15 * time.Second
	retryMax         = 15 * time.Minute
	// settleTimeout bounds recording a job's outcome after its context
	// ended.
	settleTimeout = 5 * time.Second
)

// Runner runs the jobs the outbox hands off (the worker Lambda, the local
// queue's workers): it processes each and settles its outbox item.
type Runner struct {
	store Store
	work  Processor
	log   *slog.Logger
	// Now is the clock; tests may replace it.
	Now func() time.Time
	// MaxFailures bounds the retryable failures of a job before it is
	// parked.
	MaxFailures int
	// RetryBase is the first backoff after a failure (CC_RETRY_BASE).
	RetryBase time.Duration
	// Metrics receives one CloudWatch EMF line per job that read Strava:
	// StravaReads by Class (the worker Lambda's stdout). Nil writes none.
	Metrics io.Writer
}

// NewRunner builds the runner of work's jobs over the outbox st.
func NewRunner(st Store, work Processor, log *slog.Logger) *Runner {
	return &Runner{store: st, work: work, log: log, Now: func() time.Time { return time.Now().UTC() },
		MaxFailures: ingest.DefaultMaxFailures, RetryBase: DefaultRetryBase}
}

// BurstProcessor serves a burst job (ingest.Job.Burst): one outcome per
// create, in order (fetch.Fetcher).
type BurstProcessor interface {
	ProcessBurst(ctx context.Context, job ingest.Job) []error
}

// runBurst serves a burst and settles each event's outbox item with its own
// outcome, as Run would have for it alone. A burst under the athlete's
// burst lease holds it while it runs and releases it at the end
// (burstlease.go). A burst has no outbox item of its own: an outcome that
// cannot be recorded leaves that item received, and the sweeper dispatches
// it again after its lease (the burst's, or the item's).
func (w *Runner) runBurst(ctx context.Context, job ingest.Job) {
	log := w.jobLog(job)
	bp, ok := w.work.(BurstProcessor)
	if !ok {
		log.ErrorContext(ctx, "burst job but no burst processor configured; its items wait for their leases")
		return
	}
	ctx, release, err := w.holdBurstLease(ctx, log, job)
	if err != nil {
		log.InfoContext(ctx, "burst superseded: its lease was taken again, a newer burst serves its events", "writeStatus", "skipped", "error", err)
		return
	}
	defer release(false)
	outcomes := bp.ProcessBurst(ctx, job)
	if ctx.Err() != nil {
		log.WarnContext(ctx, "burst interrupted; its items stay received for the sweeper", "writeStatus", "interrupted")
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	for i, sub := range job.Burst {
		rec := &model.IdempotencyRecord{IdempotencyKey: sub.IdempotencyKey, Status: model.OutboxReceived, Dispatches: sub.OutboxDispatches,
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

// Route hands sync jobs to syncs and every other job to events. A sync job
// without syncs is poison (model.ErrInvalid).
func Route(events, syncs Processor) Processor { return router{events, syncs} }

type router struct{ events, syncs Processor }

// ProcessBurst hands a burst to events when it serves bursts; otherwise
// every event of the burst is processed alone.
func (r router) ProcessBurst(ctx context.Context, job ingest.Job) []error {
	if bp, ok := r.events.(BurstProcessor); ok {
		return bp.ProcessBurst(ctx, job)
	}
	out := make([]error, len(job.Burst))
	for i, sub := range job.Burst {
		sub.Gathered = true
		out[i] = r.events.Process(ctx, sub)
	}
	return out
}

func (r router) Process(ctx context.Context, job ingest.Job) error {
	if job.Sync == nil {
		return r.events.Process(ctx, job)
	}
	if r.syncs == nil {
		return fmt.Errorf("process %s: sync job but no syncer configured: %w", job.CorrelationID, model.ErrInvalid)
	}
	return r.syncs.Process(ctx, job)
}

func (w *Runner) jobLog(job ingest.Job) *slog.Logger { return ingest.JobLog(w.log, job) }

func (w *Runner) audit(ctx context.Context, log *slog.Logger, subjectPK, userID, eventType string, job ingest.Job, details map[string]string) {
	w.store.Audit(ctx, log, ingest.AuditEntry(subjectPK, userID, eventType, job, details, w.Now()))
}

// Handle is the worker Lambda's entry point: it decodes the ingest.Job and runs it
// (Run). It returns an error only when Run does (the outcome could not be
// recorded: Lambda's async retries, then the failure destination; the
// outbox item stays received for the sweeper meanwhile). An undecodable
// payload is logged and dropped: it names no outbox item, and the item it
// came from, still received, is dispatched again by the sweeper from its
// stored job.
func (w *Runner) Handle(ctx context.Context, raw json.RawMessage) error {
	job, err := ingest.DecodeJob(raw)
	if err != nil {
		w.log.ErrorContext(ctx, "worker dropped a poison job", "error", err, "bytes", len(raw))
		return nil
	}
	return w.Run(ctx, job)
}

// Run processes a job and settles its outbox item: done when processed (or
// deliberately dropped), parked with the reason for poison and for a job
// whose retryable failures reached MaxFailures, received with a not-before
// time for a deferral (ingest.DeferError, not counted as a failure) or a retryable
// failure (backoff). A job whose item is already settled is not run again
// when the worker reads the item; a job carrying OutboxFailures (dispatched
// right after its claim or lease) is not checked first, and its settle then
// finds the item settled (a rare duplicate dispatch costs a run, never a
// second outcome: writes are ordered and settles conditional).
// Run returns nil once the outcome is recorded (so Lambda does not retry
// what the sweeper will); it returns an error only when the outcome could
// not be recorded, or when ctx ended while the job ran (its item then stays
// received and the sweeper runs it again). A job without an outbox item
// (an old payload, a redrive) keeps the old contract (Classify). It is the
// ProcessFunc of a local Queue.
func (w *Runner) Run(ctx context.Context, job ingest.Job) error {
	ctx, logCapacity := w.meterJob(ctx, job)
	defer logCapacity()
	if len(job.Burst) > 0 {
		w.runBurst(ctx, job)
		return nil
	}
	log := w.jobLog(job)
	var rec *model.IdempotencyRecord
	switch {
	case job.IdempotencyKey != "" && job.OutboxFailures != nil && !job.Redrive:
		// Dispatched right after a claim or lease that found the item
		// received: no need to read it. If another run settled it since,
		// the conditional settle below says so.
		rec = &model.IdempotencyRecord{IdempotencyKey: job.IdempotencyKey, Status: model.OutboxReceived,
			Failures: *job.OutboxFailures, Dispatches: job.OutboxDispatches, ParkedRecord: job.OutboxParkedRecord}
	case job.IdempotencyKey != "":
		r, err := w.store.OutboxItem(ctx, job.IdempotencyKey)
		switch {
		case err == nil && r.Status == model.OutboxDone && job.Redrive:
			// Parked once, done since (the sweeper ran it): a redrive must
			// not run done work again; the redrive then unparks the record.
			log.InfoContext(ctx, "redriven job is done already; not run again", "writeStatus", "skipped")
			return nil
		case err == nil && r.Status != model.OutboxReceived && !job.Redrive:
			log.InfoContext(ctx, "job already settled; not run again", "writeStatus", "skipped", "outboxStatus", r.Status)
			return nil
		case err == nil && r.Status == model.OutboxReceived:
			rec = r
		case err != nil && !errors.Is(err, model.ErrNotFound):
			return fmt.Errorf("run %s: %w", job.CorrelationID, err)
		}
	}
	perr := w.work.Process(ctx, job)
	if rec == nil {
		return w.Classify(ctx, job, perr)
	}
	if perr != nil && ctx.Err() != nil {
		log.WarnContext(ctx, "job interrupted; it stays received for the sweeper", "writeStatus", "interrupted", "error", perr)
		return fmt.Errorf("run %s: interrupted: %w", job.CorrelationID, ctx.Err())
	}
	// Record the outcome even if ctx ends now: the work is done.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	return w.settle(sctx, log, job, rec, perr)
}

// settle records the outcome of a processed job in its outbox item.
func (w *Runner) settle(ctx context.Context, log *slog.Logger, job ingest.Job, rec *model.IdempotencyRecord, perr error) error {
	now := w.Now()
	key := job.IdempotencyKey
	o := Decide(perr, rec.Failures, w.MaxFailures, w.RetryBase, now)
	var err error
	switch o.Kind {
	case OutcomeDone:
		err = w.store.SettleOutboxItem(ctx, key, model.OutboxDone, "", now)
		if uerr := w.unparkDone(ctx, job, rec); uerr != nil {
			// The outcome is recorded; a redrive of the stale record finds
			// the job done and does not run it again.
			log.WarnContext(ctx, "parked record of a done job not removed", "error", uerr)
		}
	case OutcomeDeferred:
		w.countAppCredentials(ctx, log, perr, now)
		w.countHeldBack(ctx, log, perr, now)
		log.InfoContext(ctx, "job deferred", "writeStatus", "deferred", "notBefore", o.Until.UTC().Format(time.RFC3339), "reason", o.Reason)
		err = w.store.DeferOutboxItem(ctx, key, o.Until, o.Reason, false, now)
	case OutcomeParked:
		if o.Poison {
			log.ErrorContext(ctx, "job parked as poison", "writeStatus", "rejected", "error", perr)
			w.audit(ctx, log, keys.AthletePK(job.Event.OwnerID), "", ingest.AuditEventRejected, job,
				map[string]string{"reason": perr.Error()})
		} else {
			log.ErrorContext(ctx, "job parked after bounded retries", "writeStatus", "parked", "error", perr)
		}
		err = w.park(ctx, job, o.Reason, now)
	case OutcomeRetry:
		log.WarnContext(ctx, "job failed; retried later", "writeStatus", "retry", "failures", rec.Failures+1,
			"notBefore", o.Until.Format(time.RFC3339), "error", perr)
		err = w.store.DeferOutboxItem(ctx, key, o.Until, o.Reason, true, now)
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
func (w *Runner) unparkDone(ctx context.Context, job ingest.Job, rec *model.IdempotencyRecord) error {
	if !rec.ParkedRecord {
		return nil
	}
	if err := w.store.RemoveParked(ctx, keys.ParkSourceWorker, job.IdempotencyKey); err != nil {
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
	r := &model.ParkedRecord{Source: keys.ParkSourceWorker, RecordID: job.IdempotencyKey, Reason: reason,
		Payload: string(payload), CorrelationID: job.CorrelationID, ParkedAtUtc: now.UTC()}
	r.UserID, r.AthleteID = w.parkedOwner(ctx, job)
	if err := w.store.MarkOutboxParked(ctx, job.IdempotencyKey); err != nil && !errors.Is(err, model.ErrNotFound) {
		return fmt.Errorf("park %s: %w", job.CorrelationID, err)
	}
	if err := w.store.Park(ctx, r); err != nil {
		return fmt.Errorf("park %s: %w", job.CorrelationID, err)
	}
	return w.store.SettleOutboxItem(ctx, job.IdempotencyKey, model.OutboxParked, reason, now)
}

// parkedOwner names the user and athlete a parked job belongs to, so an
// account deletion finds its record: a sync job carries both; an event
// carries the athlete, whose user is resolved when it is linked (best
// effort: an unresolved record keeps only the athlete).
func (w *Runner) parkedOwner(ctx context.Context, job ingest.Job) (string, int64) {
	if job.Sync != nil {
		return job.Sync.UserID, job.Sync.AthleteID
	}
	userID, err := w.store.ResolveAthlete(ctx, job.Event.OwnerID)
	if err != nil {
		return "", job.Event.OwnerID
	}
	return userID, job.Event.OwnerID
}

// Classify decides what a Process error means for the caller: nil for
// success and for poison jobs (errors matching model.ErrInvalid, logged and
// audited here), the error itself for everything else, which is worth
// retrying.
func (w *Runner) Classify(ctx context.Context, job ingest.Job, err error) error {
	if err == nil {
		return nil
	}
	log := w.jobLog(job)
	if !errors.Is(err, model.ErrInvalid) {
		log.WarnContext(ctx, "job failed, retryable", "writeStatus", "retry", "error", err)
		return err
	}
	log.ErrorContext(ctx, "job dropped as poison", "writeStatus", "rejected", "error", err)
	w.audit(ctx, log, keys.AthletePK(job.Event.OwnerID), "", ingest.AuditEventRejected, job,
		map[string]string{"reason": err.Error()})
	return nil
}

// meterJob gives one job its own consumed-capacity meter (capacity.StartMeter:
// a meter the caller's context carries receives the figures too) and
// returns the function that logs the job's line: "job finished" with the
// job's correlationId, activityId, durationMs and the DynamoDB requests,
// rcu and wcu it cost (by operation under ops).
//
// It also counts the job's Strava reads and writes them as the StravaReads
// metric of the job's class to Metrics (budget.WriteReadsEMF).
func (w *Runner) meterJob(ctx context.Context, job ingest.Job) (context.Context, func()) {
	ctx, m := capacity.StartMeter(ctx)
	ctx, reads := budget.WithReadCounter(ctx)
	start := w.Now()
	return ctx, func() {
		n := reads.Load()
		w.jobLog(job).InfoContext(ctx, "job finished", "durationMs", w.Now().Sub(start).Milliseconds(), "stravaReads", n, m.Snapshot().Attr())
		if err := budget.WriteReadsEMF(w.Metrics, ingest.ReadClass(job), n, w.Now()); err != nil {
			w.log.WarnContext(ctx, "strava read metric not written", "error", err)
		}
	}
}
