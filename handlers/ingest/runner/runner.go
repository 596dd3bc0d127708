// Package runner runs the jobs handed off to the worker and records each
// job's outcome in its outbox item, in watermill's shape: the loop
// (Runner.Run, runner.go: a job of its own, single.go; a burst of gathered
// creates, burst.go), the handler (registered by the job's kind, Kinds:
// the fetcher, the bursts, the syncer), the retry and park policy (Decide, and settle applying it,
// policy.go) and the outcome's record in the item (settle.go) are separate
// things, read in that order.
//
// The idempotency item of an event (ops.IdempotencyRecord) is
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
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model/store/metering"

	"github.com/commitcollect/backend/handlers/ingest/budget"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/ops"
)

// Stores are the adapters a Runner is handed, each behind the port of what
// the runner does with it.
type Stores struct {
	// Outbox holds the jobs' outbox items.
	Outbox Settler
	// Parked holds the jobs set aside for redrive.
	Parked Parking
	// Athletes resolve a job's athlete to the user its audit entry is filed
	// under.
	Athletes ingest.AthleteResolver
	// Audits write the runner's audit entries.
	Audits ingest.Auditor
	// Bursts hold a burst job's athlete lease (nil: a burst runs without
	// renewing or releasing it).
	Bursts BurstLeaseHolder
}

// Settler records a job's outcome in its outbox item.
type Settler interface {
	// OutboxItem reads the job's outbox item; ErrNotFound when none.
	OutboxItem(ctx context.Context, key string) (*ops.IdempotencyRecord, error)
	// SettleOutboxItem ends a received item as done or parked; ErrConflict
	// when it was settled already.
	SettleOutboxItem(ctx context.Context, key string, status ops.OutboxStatus, reason string, now time.Time) error
	// DeferOutboxItem keeps a received item received until notBefore;
	// ErrConflict when it was settled already.
	DeferOutboxItem(ctx context.Context, key string, notBefore time.Time, reason string, failure bool, now time.Time) error
	// MarkOutboxParked marks the job's outbox item before its record is
	// parked, so a later run that finishes the job removes the record.
	MarkOutboxParked(ctx context.Context, key string) error
}

// Parking sets jobs aside for redrive and takes them back.
type Parking interface {
	// Park sets a record aside for redrive (PARKED#{source}#{shard}).
	Park(ctx context.Context, r *ops.ParkedRecord) error
	// RemoveParked removes a done job's parked record from its shard
	// (missing: not an error).
	RemoveParked(ctx context.Context, source, recordID string) error
}

// Processor does a job's work. Its error is the job's outcome (Decide).
type Processor interface {
	Process(ctx context.Context, job ingest.Job) error
}

// Handler serves the jobs of one kind: the outcome of each outbox item a
// job serves, in order (one for a job of its own; one per event of a
// burst, whose items the runner settles each).
type Handler interface {
	Serve(ctx context.Context, job ingest.Job) []error
}

// Kinds are the job kinds a runner runs, each with its handler: the one
// table where a kind is registered (handlers/app's worker). A job of a
// kind without a handler is poison (model.ErrInvalid).
type Kinds map[ingest.JobKind]Handler

// One serves a kind whose jobs serve one outbox item each with p.
func One(p Processor) Handler { return one{p} }

type one struct{ p Processor }

func (o one) Serve(ctx context.Context, job ingest.Job) []error {
	return []error{o.p.Process(ctx, job)}
}

// handler is the handler of job's kind, or an error naming the kind.
func (w *Runner) handler(job ingest.Job) (Handler, error) {
	if h := w.Kinds[job.KindOf()]; h != nil {
		return h, nil
	}
	return nil, fmt.Errorf("run %s: no handler for jobs of kind %q: %w", job.CorrelationID, job.KindOf(), model.ErrInvalid)
}

// Process does job's work with its kind's handler without settling it (a
// job of one outbox item).
func (w *Runner) Process(ctx context.Context, job ingest.Job) error {
	h, err := w.handler(job)
	if err != nil {
		return err
	}
	return h.Serve(ctx, job)[0]
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
	store Stores
	// Kinds are the job kinds the runner runs, each with its handler.
	Kinds Kinds
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

// NewRunner builds the runner of the kinds' jobs over the adapters st.
func NewRunner(st Stores, kinds Kinds, log *slog.Logger) *Runner {
	return &Runner{store: st, Kinds: kinds, log: log, Now: func() time.Time { return time.Now().UTC() },
		MaxFailures: ingest.DefaultMaxFailures, RetryBase: DefaultRetryBase}
}

func (w *Runner) jobLog(job ingest.Job) *slog.Logger { return ingest.JobLog(w.log, job) }

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
// (an old payload, a redrive) keeps the old contract (settle). It is the
// ProcessFunc of a local Queue.
func (w *Runner) Run(ctx context.Context, job ingest.Job) error {
	ctx, logCapacity := w.meterJob(ctx, job)
	defer logCapacity()
	if len(job.Burst) == 0 {
		return w.runOne(ctx, job)
	}
	w.runBurst(ctx, job)
	return nil
}

// meterJob gives one job its own consumed-capacity meter (metering.StartMeter:
// a meter the caller's context carries receives the figures too) and
// returns the function that logs the job's line: "job finished" with the
// job's correlationId, activityId, durationMs and the DynamoDB requests,
// rcu and wcu it cost (by operation under ops).
//
// It also counts the job's Strava reads and writes them as the StravaReads
// metric of the job's class to Metrics (budget.WriteReadsEMF).
func (w *Runner) meterJob(ctx context.Context, job ingest.Job) (context.Context, func()) {
	ctx, m := metering.StartMeter(ctx)
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
