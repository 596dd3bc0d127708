// Package handoff hands jobs to the worker and sees that none is lost: the
// Dispatchers (LambdaDispatcher in AWS, Queue in the local stack) and the
// Sweeper, which dispatches again what the outbox holds past its lease or
// not-before (package runner describes the item's life), sharing each sweep
// fairly over athletes (fair.go).
//
// Hand-off: Dispatcher. In AWS LambdaDispatcher invokes CC_WORKER_FUNCTION
// with InvocationType=Event. Locally Queue is a bounded channel with worker
// goroutines (a key already queued is not queued twice); a full queue leaves
// the event to the sweeper. The sweeper (Sweeper: every 5 s in `make run` and
// at its start, the sweeper Lambda every minute in AWS) re-dispatches items
// whose lease lapsed or whose not-before passed, and reports OutboxDue per
// sweep (SweeperMetricsNamespace), which Terraform alarms on. Ctrl-C locally:
// running jobs finish within 15 s, queued ones stay received.
package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model/retry"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/commitcollect/backend/model"
)

// LambdaInvoker is the part of the Lambda client the dispatcher uses
// (*lambda.Client).
type LambdaInvoker interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, opts ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// LambdaDispatcher hands jobs to the worker Lambda with an asynchronous
// invoke (InvocationType ingest.Event): Lambda queues the job, retries failures
// twice and sends what still fails to the function's failure destination.
type LambdaDispatcher struct {
	client   LambdaInvoker
	function string
}

// NewLambdaDispatcher dispatches to the named worker function.
func NewLambdaDispatcher(client LambdaInvoker, function string) *LambdaDispatcher {
	return &LambdaDispatcher{client: client, function: function}
}

// Dispatch queues job with Lambda. It returns an error (matching
// model.ErrRetryable) when Lambda did not accept it with 202.
func (d *LambdaDispatcher) Dispatch(ctx context.Context, job ingest.Job) error {
	payload, err := json.Marshal(job)
	if err != nil {
		return fmt.Errorf("dispatch job %s: encode: %w", job.CorrelationID, err)
	}
	out, err := d.client.Invoke(ctx, &lambda.InvokeInput{
		FunctionName: aws.String(d.function), InvocationType: types.InvocationTypeEvent, Payload: payload,
	})
	if err != nil {
		return fmt.Errorf("dispatch job %s to %s: %w: %w", job.CorrelationID, d.function, model.ErrRetryable, err)
	}
	if out.StatusCode != 202 {
		return fmt.Errorf("dispatch job %s to %s: status %d: %w", job.CorrelationID, d.function, out.StatusCode, model.ErrRetryable)
	}
	return nil
}

// ErrQueueFull means the local queue had no room for a job.
var ErrQueueFull = fmt.Errorf("ingest queue full: %w", model.ErrRetryable)

// ErrQueueClosed means the local queue no longer accepts jobs.
var ErrQueueClosed = errors.New("ingest queue closed")

// ProcessFunc processes one job; an error matching model.ErrRetryable is
// retried, any other error is final.
type ProcessFunc func(ctx context.Context, job ingest.Job) error

// QueueOptions shapes a Queue.
type QueueOptions struct {
	// Workers is the number of goroutines processing jobs (default 2).
	Workers int
	// Capacity bounds the jobs waiting (default 100); Dispatch fails
	// beyond it and the job waits in the outbox for the sweeper.
	Capacity int
	// Attempts bounds how often a job is tried (default 3, like Lambda's
	// async invoke: one try and two retries).
	Attempts int
	// Backoff is the first pause between attempts; it doubles with each
	// retry (default 100 ms).
	Backoff time.Duration
	// OnFailure receives a job that failed for good (the local DLQ), with a
	// live context. Nil only logs it (the job's outbox item stays received).
	OnFailure func(ctx context.Context, job ingest.Job, err error)
}

// Queue is the in-process ingest.Dispatcher of the local stack and tests: a
// bounded channel drained by worker goroutines that call process, retrying
// retryable failures like Lambda's async invoke does. Durability is the
// outbox's: a job the queue drops (full, closed, shut down before or while
// it ran) stays received in the idempotency table and the Sweeper dispatches
// it again. A job whose idempotency key is already queued or running is not
// queued twice (the sweeper may re-dispatch an item whose job still waits
// here).
type Queue struct {
	jobs    chan ingest.Job
	process ProcessFunc
	opts    QueueOptions
	log     *slog.Logger
	ctx     context.Context
	cancel  context.CancelFunc
	stop    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	closed  bool
	keys    map[string]bool // queued or running, by idempotency key
	pending atomic.Int64    // dispatched and not yet finished
	left    atomic.Int64    // queued jobs left to the outbox at Close
}

// NewQueue starts a queue whose workers call process.
func NewQueue(process ProcessFunc, opts QueueOptions, log *slog.Logger) *Queue {
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	if opts.Capacity <= 0 {
		opts.Capacity = 100
	}
	if opts.Attempts <= 0 {
		opts.Attempts = 3
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 100 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	q := &Queue{jobs: make(chan ingest.Job, opts.Capacity), process: process, opts: opts, log: log, ctx: ctx, cancel: cancel,
		stop: make(chan struct{}), keys: map[string]bool{}}
	for range opts.Workers {
		q.wg.Add(1)
		go q.run()
	}
	return q
}

// Dispatch queues job without blocking. It returns ErrQueueFull (retryable)
// when the queue is at capacity and ErrQueueClosed after Close; a job whose
// idempotency key is already queued or running is accepted without being
// queued again.
func (q *Queue) Dispatch(_ context.Context, job ingest.Job) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return fmt.Errorf("dispatch job %s: %w", job.CorrelationID, ErrQueueClosed)
	}
	if job.IdempotencyKey != "" && q.keys[job.IdempotencyKey] {
		return nil
	}
	select {
	case q.jobs <- job:
		// finish (which undoes both) waits for q.mu, held until we return.
		q.pending.Add(1)
		q.keys[job.IdempotencyKey] = true
		return nil
	default:
		return fmt.Errorf("dispatch job %s: %w", job.CorrelationID, ErrQueueFull)
	}
}

// Wait blocks until every job dispatched so far has been processed (or
// failed for good, or was left at Close), or ctx ends.
func (q *Queue) Wait(ctx context.Context) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for q.pending.Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// Close stops taking work: Dispatch refuses new jobs, jobs still waiting in
// the queue are not started (they stay received in the outbox, for the
// sweeper of the next start), and the jobs running finish, bounded by ctx.
// When ctx ends first the running jobs are cancelled; they do not settle
// their outbox items, which therefore stay received too. Nothing is
// dropped: everything not finished is in the outbox. It returns ctx.Err()
// when the running jobs had to be cancelled.
func (q *Queue) Close(ctx context.Context) error {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.stop)
	}
	q.mu.Unlock()
	done := make(chan struct{})
	go func() { q.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		q.cancel()
		<-done
		err = ctx.Err()
	}
	q.cancel()
	for {
		select {
		case job := <-q.jobs:
			q.leave(job)
		default:
			if n := q.left.Load(); n > 0 {
				q.log.WarnContext(ctx, "queue closed with jobs not started; they stay received in the outbox for the sweeper", "jobs", n)
			}
			return err
		}
	}
}

// Left counts the jobs Close left to the outbox without starting them.
func (q *Queue) Left() int64 { return q.left.Load() }

func (q *Queue) leave(job ingest.Job) {
	q.left.Add(1)
	q.finish(job)
	q.log.Info("job left to the outbox at shutdown", "correlationId", job.CorrelationID, "idempotencyKey", job.IdempotencyKey)
}

func (q *Queue) finish(job ingest.Job) {
	q.mu.Lock()
	delete(q.keys, job.IdempotencyKey)
	q.mu.Unlock()
	q.pending.Add(-1)
}

func (q *Queue) run() {
	defer q.wg.Done()
	for {
		select {
		case <-q.stop:
			return
		case job := <-q.jobs:
			if q.stopping() { // closing: do not start it
				q.leave(job)
				continue
			}
			q.handle(job)
			q.finish(job)
		}
	}
}

func (q *Queue) stopping() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}

func (q *Queue) handle(job ingest.Job) {
	var err error
	for attempt := 1; attempt <= q.opts.Attempts; attempt++ {
		if err = q.process(q.ctx, job); err == nil || !errors.Is(err, model.ErrRetryable) {
			break
		}
		if q.ctx.Err() != nil {
			break
		}
		if attempt < q.opts.Attempts {
			q.log.WarnContext(q.ctx, "job failed, will retry", "correlationId", job.CorrelationID,
				"attempt", attempt, "error", err)
			if retry.Sleep(q.ctx, q.opts.Backoff<<(attempt-1)) != nil {
				break
			}
		}
	}
	if err == nil {
		return
	}
	if q.ctx.Err() != nil {
		// Shut down while it ran: not a failure of the job. Its outbox
		// item stays received and the sweeper of the next start runs it.
		q.log.Warn("job interrupted by shutdown; it stays received in the outbox", "correlationId", job.CorrelationID,
			"idempotencyKey", job.IdempotencyKey, "error", err)
		return
	}
	q.log.Error("job failed for good", "correlationId", job.CorrelationID, "error", err)
	if q.opts.OnFailure != nil {
		q.opts.OnFailure(context.WithoutCancel(q.ctx), job, err)
	}
}
