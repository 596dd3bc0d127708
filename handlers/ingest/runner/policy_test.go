package runner_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/runner"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/ops"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	later := now.Add(7 * time.Minute)
	transient := fmt.Errorf("strava 503: %w", model.ErrRetryable)
	tests := []struct {
		name      string
		err       error
		failures  int
		want      string
		poison    bool
		wantUntil time.Time // zero: not checked here
	}{
		{"success is done", nil, 0, runner.OutcomeDone, false, time.Time{}},
		{"a deferral waits and is no failure", &ingest.DeferError{Until: later, Reason: "budget"}, 5, runner.OutcomeDeferred, false, later},
		{"a wrapped deferral too", fmt.Errorf("page: %w", &ingest.DeferError{Until: later, Reason: "429"}), 0, runner.OutcomeDeferred, false, later},
		{"invalid input is poison", fmt.Errorf("map: %w", model.ErrInvalid), 0, runner.OutcomeParked, true, time.Time{}},
		{"a failure below the bound is retried", transient, 4, runner.OutcomeRetry, false, time.Time{}},
		{"the failure reaching the bound parks", transient, 5, runner.OutcomeParked, false, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := runner.Decide(tt.err, tt.failures, 6, 15*time.Second, now)
			if got.Kind != tt.want || got.Poison != tt.poison {
				t.Fatalf("got %+v, want kind %s poison %v", got, tt.want, tt.poison)
			}
			if !tt.wantUntil.IsZero() && !got.Until.Equal(tt.wantUntil) {
				t.Fatalf("until %v, want %v", got.Until, tt.wantUntil)
			}
			if got.Kind == runner.OutcomeRetry && (got.Until.Before(now) || got.Until.After(now.Add(15*time.Minute))) {
				t.Fatalf("retry at %v: want within the backoff cap after %v", got.Until, now)
			}
			if got.Kind == runner.OutcomeParked && !tt.poison && !strings.Contains(got.Reason, "gave up after 6 failures") {
				t.Fatalf("reason %q: want the failure count", got.Reason)
			}
		})
	}
}

func TestDecideParksAtTheFirstFailureWhenTheBoundIsZero(t *testing.T) {
	t.Parallel()
	if got := runner.Decide(errors.New("boom"), 0, 0, time.Second, time.Now()); got.Kind != runner.OutcomeParked {
		t.Fatalf("got %+v, want parked: a bound below one is one", got)
	}
}

// fakeStore is every port of the runner's Stores with a function per method (nil: the
// call is a test failure), in the style of wtf's mock package.
type fakeStore struct {
	t              *testing.T
	OutboxItemFn   func(key string) (*ops.IdempotencyRecord, error)
	SettleFn       func(key string, status ops.OutboxStatus, reason string) error
	DeferFn        func(key string, notBefore time.Time, reason string, failure bool) error
	ParkFn         func(r *ops.ParkedRecord) error
	RemoveParkedFn func(source, recordID string) error
	MarkParkedFn   func(key string) error
	audits         []string
}

func (f *fakeStore) OutboxItem(_ context.Context, key string) (*ops.IdempotencyRecord, error) {
	if f.OutboxItemFn == nil {
		f.t.Fatalf("unexpected OutboxItem(%s)", key)
	}
	return f.OutboxItemFn(key)
}

func (f *fakeStore) SettleOutboxItem(_ context.Context, key string, status ops.OutboxStatus, reason string, _ time.Time) error {
	if f.SettleFn == nil {
		f.t.Fatalf("unexpected SettleOutboxItem(%s, %s)", key, status)
	}
	return f.SettleFn(key, status, reason)
}

func (f *fakeStore) DeferOutboxItem(_ context.Context, key string, notBefore time.Time, reason string, failure bool, _ time.Time) error {
	if f.DeferFn == nil {
		f.t.Fatalf("unexpected DeferOutboxItem(%s)", key)
	}
	return f.DeferFn(key, notBefore, reason, failure)
}

func (f *fakeStore) Park(_ context.Context, r *ops.ParkedRecord) error {
	if f.ParkFn == nil {
		f.t.Fatalf("unexpected Park(%s)", r.RecordID)
	}
	return f.ParkFn(r)
}

func (f *fakeStore) MarkOutboxParked(_ context.Context, key string) error {
	if f.MarkParkedFn == nil {
		f.t.Fatalf("unexpected MarkOutboxParked(%s)", key)
	}
	return f.MarkParkedFn(key)
}

func (f *fakeStore) RemoveParked(_ context.Context, source, recordID string) error {
	if f.RemoveParkedFn == nil {
		f.t.Fatalf("unexpected RemoveParked(%s)", recordID)
	}
	return f.RemoveParkedFn(source, recordID)
}

func (f *fakeStore) ResolveAthlete(context.Context, int64) (string, error) { return "u1", nil }

func (f *fakeStore) Audit(_ context.Context, _ *slog.Logger, e *model.AuditEntry) {
	f.audits = append(f.audits, e.EventType)
}

type processFunc func(context.Context, ingest.Job) error

func (p processFunc) Process(ctx context.Context, job ingest.Job) error { return p(ctx, job) }

func received(failures int) ingest.Job {
	n := failures
	return ingest.Job{IdempotencyKey: "k1", CorrelationID: "c1", OutboxFailures: &n, OutboxDispatches: 2,
		Event: ingest.Event{ObjectType: ingest.ObjectActivity, ObjectID: 7, AspectType: ingest.AspectCreate, OwnerID: 9}}
}

// TestRunnerSettlesByTheProcessorsError runs a received job (on its second
// dispatch, as a gathered create served by a burst) through the runner with
// a fake outbox: what the processor returns is recorded as the policy says,
// and nothing else is written. A park marks the outbox item before it writes
// the record, and only a done job whose item is so marked removes a parked
// record. Protection: removing the mark's check from unparkDone makes every
// later-dispatch job pay a DeleteItem (the "done" case then sees "unpark").
func TestRunnerSettlesByTheProcessorsError(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	until := now.Add(time.Hour)
	tests := []struct {
		name       string
		failures   int
		parkedOnce bool
		perr       error
		want       string // the store calls, in order
		wantAudit  string
	}{
		{"done on a later dispatch, never parked: no delete", 0, false, nil, "settle done", ""},
		{"done, parked once: its stale parked record removed", 0, true, nil, "settle done; unpark", ""},
		{"deferred, not counted as a failure", 0, false, &ingest.DeferError{Until: until, Reason: "budget"}, "defer failure=false", ""},
		{"retried with a failure counted", 1, false, fmt.Errorf("503: %w", model.ErrRetryable), "defer failure=true", ""},
		{"parked after the last failure", 5, false, fmt.Errorf("503: %w", model.ErrRetryable), "mark; park; settle parked", ""},
		{"poison parked at once and audited", 0, false, fmt.Errorf("map: %w", model.ErrInvalid), "mark; park; settle parked", ingest.AuditEventRejected},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var calls []string
			st := &fakeStore{t: t,
				SettleFn: func(_ string, status ops.OutboxStatus, _ string) error {
					calls = append(calls, "settle "+string(status))
					return nil
				},
				DeferFn: func(_ string, _ time.Time, _ string, failure bool) error {
					calls = append(calls, fmt.Sprintf("defer failure=%v", failure))
					return nil
				},
				ParkFn: func(r *ops.ParkedRecord) error {
					if r.UserID != "u1" || r.AthleteID != 9 || !strings.Contains(r.Payload, `"redrive":true`) {
						t.Errorf("parked record %+v: want the owner and the job marked for redrive", r)
					}
					calls = append(calls, "park")
					return nil
				},
				RemoveParkedFn: func(string, string) error { calls = append(calls, "unpark"); return nil },
				MarkParkedFn:   func(string) error { calls = append(calls, "mark"); return nil },
			}
			r := runner.NewRunner(st.stores(), runner.Kinds{ingest.JobEvent: runner.One(processFunc(func(context.Context, ingest.Job) error { return tt.perr }))},
				slog.New(slog.NewTextHandler(io.Discard, nil)))
			r.Now = func() time.Time { return now }
			job := received(tt.failures)
			job.OutboxParkedRecord = tt.parkedOnce
			if err := r.Run(context.Background(), job); err != nil {
				t.Fatalf("run: %v", err)
			}
			if got := strings.Join(calls, "; "); got != tt.want {
				t.Fatalf("store calls %q, want %q", got, tt.want)
			}
			if got := strings.Join(st.audits, ","); got != tt.wantAudit {
				t.Fatalf("audits %q, want %q", got, tt.wantAudit)
			}
		})
	}
}

// TestRunnerDoesNotRunASettledJobAgain: a job without its outbox state is
// read first, and one settled since is not run.
func TestRunnerDoesNotRunASettledJobAgain(t *testing.T) {
	t.Parallel()
	st := &fakeStore{t: t, OutboxItemFn: func(string) (*ops.IdempotencyRecord, error) {
		return &ops.IdempotencyRecord{IdempotencyKey: "k1", Status: ops.OutboxDone}, nil
	}}
	ran := false
	r := runner.NewRunner(st.stores(), runner.Kinds{ingest.JobEvent: runner.One(processFunc(func(context.Context, ingest.Job) error { ran = true; return nil }))},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	job := received(0)
	job.OutboxFailures = nil
	if err := r.Run(context.Background(), job); err != nil || ran {
		t.Fatalf("run: %v, ran %v; want nil and not run", err, ran)
	}
}

// TestJobsRunByTheirKindsHandler: each job runs with the handler its kind
// registered, a kind added later (named in Job.Kind, its payload in
// Job.Work) by one line of the table, and a job of a kind nobody
// registered is poison. Protection: Runner.handler (routing by the job's
// fields instead sends the later kind to the events' handler).
func TestJobsRunByTheirKindsHandler(t *testing.T) {
	t.Parallel()
	var events, deliveries []string
	kinds := runner.Kinds{
		ingest.JobEvent: runner.One(processFunc(func(_ context.Context, j ingest.Job) error {
			events = append(events, j.CorrelationID)
			return nil
		})),
		"deliver": runner.One(processFunc(func(_ context.Context, j ingest.Job) error {
			deliveries = append(deliveries, string(j.Work))
			return nil
		})),
	}
	r := runner.NewRunner(runner.Stores{}, kinds, quietLog())
	ctx := context.Background()
	if err := r.Process(ctx, ingest.Job{CorrelationID: "e1"}); err != nil {
		t.Fatalf("event job: %v", err)
	}
	if err := r.Process(ctx, ingest.Job{CorrelationID: "d1", Kind: "deliver", Work: []byte(`{"to":"https://example.test/hook"}`)}); err != nil {
		t.Fatalf("deliver job: %v", err)
	}
	if err := r.Process(ctx, ingest.Job{CorrelationID: "s1", Sync: &ingest.SyncJob{UserID: "u"}}); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("sync job with no sync handler: %v, want ErrInvalid", err)
	}
	if len(events) != 1 || events[0] != "e1" || len(deliveries) != 1 || deliveries[0] != `{"to":"https://example.test/hook"}` {
		t.Fatalf("events %v, deliveries %v; want each job with its own kind's handler", events, deliveries)
	}
}

// stores hands f as every port of the runner but the burst lease's.
func (f *fakeStore) stores() runner.Stores {
	return runner.Stores{Outbox: f, Parked: f, Athletes: f, Audits: f}
}
