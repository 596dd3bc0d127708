package handoff

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/emf"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/retry"
)

// Stores are the adapters a Sweeper is handed, each behind the port of
// what a sweep does with it.
type Stores struct {
	// Due lists the due items (the pending index).
	Due DueItems
	// Outbox leases and settles them.
	Outbox OutboxLeases
	// Bursts lease an athlete's burst as one (nil: each item of a burst
	// is leased).
	Bursts BurstLeases
	// Asides set a tenant's backlog aside (nil: nothing is).
	Asides AsideStore
}

// DueItems lists received items due at now through the sparse pending
// index, oldest due first, at most limit (model/store/pending.Index).
type DueItems interface {
	DueOutboxItems(ctx context.Context, now time.Time, limit int) ([]ops.IdempotencyRecord, error)
}

// OutboxLeases lease and settle outbox items (model/store/outbox.Outbox).
type OutboxLeases interface {
	// LeaseOutboxItem takes a fresh lease on a due item; ErrConflict when it
	// is no longer due, ErrNotFound when it is gone.
	LeaseOutboxItem(ctx context.Context, key string, now time.Time, lease time.Duration) (*ops.IdempotencyRecord, error)
	// SettleOutboxItem ends a received item as done or parked.
	SettleOutboxItem(ctx context.Context, key string, status ops.OutboxStatus, reason string, now time.Time) error
}

// Sweeper defaults.
const (
	// DefaultSweepLimit bounds the items one sweep dispatches, so a backlog
	// released at a rate-limit reset drains over several sweeps.
	DefaultSweepLimit = 200
)

// Sweeper re-dispatches outbox items whose hand-off was lost (the process
// died between the claim and the dispatch, the dispatch failed, the worker
// died before settling) or whose deferral has ended (rate-limit window
// reset, per-athlete cap, retry backoff). Each item is leased again with a
// conditional write before it is dispatched, so concurrent sweepers (and a
// redelivered webhook) dispatch it once per lease; an athlete's bursts of
// one sweep are leased as one instead (Bursts, burstlease.go), so
// concurrent sweepers dispatch them once per burst lease (a webhook
// redelivered while one is in flight may claim one of its events again: a
// duplicate run, which writes and settles nothing twice). It runs at start and
// every few seconds in the local stack and once a minute in AWS (the
// sweeper Lambda on a schedule).
type Sweeper struct {
	due      DueItems
	outbox   OutboxLeases
	dispatch ingest.Dispatcher
	log      *slog.Logger
	// Now is the clock; tests may replace it.
	Now func() time.Time
	// Lease is the lease each dispatch takes (ingest.DefaultLease when zero).
	Lease time.Duration
	// Limit bounds the turns dispatched per sweep (DefaultSweepLimit).
	Limit int
	// Read bounds the due items one sweep reads (DefaultSweepRead).
	Read int
	// Bursts leases an athlete's burst as one (burstlease.go; Stores.Bursts).
	// Nil: each item of a burst is leased.
	Bursts BurstLeases
	// Asides sets a tenant's backlog aside when a read comes back full
	// (aside.go; Stores.Asides); nil: nothing is set aside, and a tenant with more due
	// items than Read hides everybody due after it.
	Asides AsideStore
	// AsideStep is the step between a tenant's set-aside slots
	// (DefaultAsideStep when zero).
	AsideStep time.Duration

	slotsMu sync.Mutex
	slots   Slots
}

// AsideStore makes a due item due later (implemented by
// model/store/outbox.Asides).
type AsideStore interface {
	// SetAsideOutboxItem makes a received item that is due at now due
	// again at due; ErrConflict when it is no longer due at now (leased,
	// deferred or settled since it was read), ErrNotFound when it is gone.
	SetAsideOutboxItem(ctx context.Context, key string, due, now time.Time) error
}

// NewSweeper builds a sweeper over the adapters st that hands due items
// to d.
func NewSweeper(st Stores, d ingest.Dispatcher, log *slog.Logger) *Sweeper {
	return &Sweeper{due: st.Due, outbox: st.Outbox, Bursts: st.Bursts, Asides: st.Asides, dispatch: d, log: log,
		Now: func() time.Time { return time.Now().UTC() }, Lease: ingest.DefaultLease, Limit: DefaultSweepLimit, Read: DefaultSweepRead}
}

// SweepResult counts what one sweep did.
type SweepResult struct {
	// Due is how many due items the pending index listed (at most Read).
	Due int
	// Dispatched were leased and handed off.
	Dispatched int
	// Skipped were no longer due when leased (settled or taken meanwhile).
	Skipped int
	// Failed were leased but the hand-off failed; the next sweep after the
	// lease retries them.
	Failed int
	// Parked carried a job that cannot be decoded.
	Parked int
	// Bursts counts the burst jobs dispatched (their items count in
	// Dispatched).
	Bursts int
	// SetAside counts the items made due later to spread a tenant's
	// backlog (aside.go).
	SetAside int
	// More says due work was left for the next sweep (the plan held more
	// turns than Limit, or more items were due than the sweep read).
	More bool
	// OldestDueAge is how long ago the oldest due item was accepted.
	OldestDueAge time.Duration
}

// Sweep dispatches the items due now: it reads the due backlog (at most
// Read items) and dispatches at most Limit turns, shared out fairly over
// tenants (Plan, fair.go), an athlete's due creates as one burst.
// It returns an error when the pending index cannot be read or the
// dispatcher is closed; a failure on one item is counted and the sweep goes
// on.
func (s *Sweeper) Sweep(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	now := s.Now()
	limit := s.Limit
	if limit <= 0 {
		limit = DefaultSweepLimit
	}
	read := s.Read
	if read <= 0 {
		read = DefaultSweepRead
	}
	due, err := s.due.DueOutboxItems(ctx, now, read)
	if err != nil {
		return res, fmt.Errorf("sweep: %w", err)
	}
	res.Due = len(due)
	for _, d := range due {
		if age := now.Sub(d.CreatedAtUtc); age > res.OldestDueAge {
			res.OldestDueAge = age
		}
	}
	turns, more := Plan(due, limit)
	res.More = more || len(due) >= read
	for _, turn := range turns {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("sweep: %w", err)
		}
		var jobs []ingest.Job
		var burstLease time.Time
		if turn.Burst && s.Bursts != nil {
			jobs, burstLease = s.leaseBurst(ctx, turn, now, &res)
		} else {
			jobs = s.leaseTurn(ctx, turn, now, &res)
		}
		if len(jobs) == 0 {
			continue
		}
		job := jobs[0]
		if turn.Burst {
			job = ingest.NewBurst(jobs, "burst-"+jobs[0].CorrelationID)
			if !burstLease.IsZero() {
				job.BurstLeaseUntil, job.BurstLeaseFor = burstLease, s.lease()
			}
		}
		if err := s.dispatch.Dispatch(ctx, job); err != nil {
			if errors.Is(err, ErrQueueClosed) {
				return res, fmt.Errorf("sweep: %w", err)
			}
			s.log.WarnContext(ctx, "sweeper hand-off failed; retried after the lease", "correlationId", job.CorrelationID, "error", err)
			s.releaseBurst(ctx, job)
			res.Failed += len(jobs)
			if errors.Is(err, ErrQueueFull) {
				break // the rest would only take leases they cannot use
			}
			continue
		}
		res.Dispatched += len(jobs)
		if turn.Burst {
			res.Bursts++
		}
	}
	s.setAside(ctx, due, turns, len(due) >= read, now, &res)
	return res, nil
}

// lease is the lease each dispatch takes.
func (s *Sweeper) lease() time.Duration {
	if s.Lease <= 0 {
		return ingest.DefaultLease
	}
	return s.Lease
}

// leaseTurn leases the turn's items and returns their jobs, ready to
// dispatch (jobOf). Items no longer due are skipped, undecodable ones
// parked, each counted in res.
func (s *Sweeper) leaseTurn(ctx context.Context, turn Turn, now time.Time, res *SweepResult) []ingest.Job {
	lease := s.lease()
	var jobs []ingest.Job
	for _, d := range turn.Items {
		log := s.log.With("idempotencyKey", d.IdempotencyKey, "correlationId", d.CorrelationID)
		rec, err := s.outbox.LeaseOutboxItem(ctx, d.IdempotencyKey, now, lease)
		if errors.Is(err, model.ErrConflict) || errors.Is(err, model.ErrNotFound) {
			res.Skipped++
			continue
		}
		if err != nil {
			log.WarnContext(ctx, "sweeper could not lease an outbox item", "error", err)
			res.Failed++
			continue
		}
		if job, ok := s.jobOf(ctx, log, rec, now, turn.Burst, res); ok {
			jobs = append(jobs, job)
		}
	}
	return jobs
}

// jobOf decodes the job of a received item rec that is due, ready to
// dispatch (an activity event marked Gathered: it was gathered already);
// an undecodable one is parked, counted in res, and not ok.
func (s *Sweeper) jobOf(ctx context.Context, log *slog.Logger, rec *ops.IdempotencyRecord, now time.Time, burst bool, res *SweepResult) (ingest.Job, bool) {
	job, err := ingest.DecodeJob([]byte(rec.Job))
	if err != nil {
		reason := "undecodable job: " + err.Error()
		if serr := s.outbox.SettleOutboxItem(ctx, rec.IdempotencyKey, ops.OutboxParked, reason, now); serr != nil {
			log.ErrorContext(ctx, "sweeper could not park an undecodable outbox item", "error", serr)
			res.Failed++
			return ingest.Job{}, false
		}
		log.ErrorContext(ctx, "outbox item parked", "writeStatus", "parked", "reason", reason)
		res.Parked++
		return ingest.Job{}, false
	}
	job = job.WithOutbox(rec)
	job.Gathered = job.Event.Burstable()
	log.InfoContext(ctx, "outbox item re-dispatched", "dispatches", rec.Dispatches, "failures", rec.Failures,
		"deferrals", rec.Deferrals, "ageMs", now.Sub(rec.CreatedAtUtc).Milliseconds(), "burst", burst)
	return job, true
}

// Drain sweeps while the last sweep dispatched work and left more
// (SweepResult.More) and ctx leaves more than spare before its deadline:
// the sweeper Lambda's schedule fires once a minute, and a backlog larger
// than one sweep's limit goes on draining within the same invocation. It
// returns the sweeps' figures summed (OldestDueAge: the first sweep's) and
// how many sweeps ran.
func (s *Sweeper) Drain(ctx context.Context, spare time.Duration) (SweepResult, int, error) {
	var total SweepResult
	for n := 1; ; n++ {
		res, err := s.Sweep(ctx)
		total.add(res, n == 1)
		if err != nil {
			return total, n, err
		}
		deadline, ok := ctx.Deadline()
		if !res.More || res.Dispatched+res.SetAside == 0 || (ok && time.Until(deadline) <= spare) {
			return total, n, nil
		}
	}
}

// add sums r into total; the first sweep's backlog age is the one kept.
func (total *SweepResult) add(r SweepResult, first bool) {
	total.Due += r.Due
	total.Dispatched += r.Dispatched
	total.Skipped += r.Skipped
	total.Failed += r.Failed
	total.Parked += r.Parked
	total.Bursts += r.Bursts
	total.SetAside += r.SetAside
	total.More = r.More
	if first {
		total.OldestDueAge = r.OldestDueAge
	}
}

// Run sweeps at once and then every interval until ctx ends (the local
// stack's loop; in AWS a schedule invokes Sweep). A sweep that left due work
// (SweepResult.More) is followed by another one at once.
func (s *Sweeper) Run(ctx context.Context, every time.Duration) {
	for {
		res, err := s.Sweep(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "sweep failed", "error", err)
		}
		if res.Due > 0 {
			s.log.InfoContext(ctx, "sweep", "due", res.Due, "dispatched", res.Dispatched, "bursts", res.Bursts, "skipped", res.Skipped,
				"failed", res.Failed, "parked", res.Parked, "setAside", res.SetAside, "oldestDueAgeMs", res.OldestDueAge.Milliseconds())
		}
		wait := every
		if err == nil && res.Dispatched+res.SetAside > 0 && res.More {
			wait = 0
		}
		if retry.Sleep(ctx, wait) != nil {
			return
		}
	}
}

// SweeperMetricsNamespace is the CloudWatch namespace of the sweeper's
// metrics (the backlog alarm reads OutboxDue there).
const SweeperMetricsNamespace = "CommitCollect/Sweeper"

// WriteEMF writes the sweep's figures as one CloudWatch Embedded Metric
// Format line (dimension Service=sweeper): OutboxDue, OutboxDispatched,
// OutboxSkipped, OutboxDispatchFailed, OutboxParked and OutboxSetAside
// (counts) and
// OutboxOldestDueAge (seconds since the oldest due item was accepted).
func (r SweepResult) WriteEMF(w io.Writer, now time.Time) error {
	return emf.Write(w, SweeperMetricsNamespace, now, "Service", "sweeper", []emf.Value{
		{Name: "OutboxDue", Unit: "Count", Value: float64(r.Due)}, {Name: "OutboxDispatched", Unit: "Count", Value: float64(r.Dispatched)},
		{Name: "OutboxSkipped", Unit: "Count", Value: float64(r.Skipped)}, {Name: "OutboxDispatchFailed", Unit: "Count", Value: float64(r.Failed)},
		{Name: "OutboxParked", Unit: "Count", Value: float64(r.Parked)}, {Name: "OutboxSetAside", Unit: "Count", Value: float64(r.SetAside)},
		{Name: "OutboxOldestDueAge", Unit: "Seconds", Value: float64(int64(r.OldestDueAge.Seconds()))},
	})
}
