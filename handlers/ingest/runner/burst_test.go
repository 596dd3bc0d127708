package runner_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/runner"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/ops"
)

// leaseStore is the runner's fake store with burst leases: renewFn and
// releaseFn answer RenewBurst and ReleaseBurst (nil fails the test).
type leaseStore struct {
	*fakeStore
	mu        sync.Mutex
	renewFn   func(token time.Time) error
	releaseFn func(token time.Time) error
}

// stores hands l as every port of the runner, the burst lease's too.
func (l *leaseStore) stores() runner.Stores {
	st := l.fakeStore.stores()
	st.Bursts = l
	return st
}

func (l *leaseStore) RenewBurst(_ context.Context, _ int64, token, _ time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.renewFn == nil {
		l.t.Fatalf("unexpected RenewBurst(%s)", token)
	}
	return l.renewFn(token)
}

func (l *leaseStore) ReleaseBurst(_ context.Context, _ int64, token time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.releaseFn == nil {
		l.t.Fatalf("unexpected ReleaseBurst(%s)", token)
	}
	return l.releaseFn(token)
}

// burstFunc serves bursts (the runner's handler of ingest.JobBurst) with a
// function.
type burstFunc func(context.Context, ingest.Job) []error

func (b burstFunc) Serve(ctx context.Context, job ingest.Job) []error { return b(ctx, job) }

func leasedBurst(n int, lease time.Duration) ingest.Job {
	var subs []ingest.Job
	for i := range n {
		j := received(0)
		j.IdempotencyKey, j.Event.ObjectID = fmt.Sprintf("k%d", i), int64(100+i)
		subs = append(subs, j)
	}
	job := ingest.NewBurst(subs, "burst-1")
	job.BurstLeaseUntil, job.BurstLeaseFor = time.Now().Add(lease).Truncate(time.Millisecond), lease
	return job
}

// TestABurstHoldsItsLeaseWhileItRuns: a burst under a burst lease renews it
// at once and every half lease while it runs (a 40 ms lease; the burst
// runs until the third renewal, or gives up after 30 s and fails the
// count), then settles each event and releases the lease once. Protection:
// holdBurstLease's renewals (without them a lease shorter than the burst
// lapses mid-run, and the next sweep dispatches the same events again).
func TestABurstHoldsItsLeaseWhileItRuns(t *testing.T) {
	t.Parallel()
	var renewed, released, settled int
	thrice := make(chan struct{})
	st := &leaseStore{fakeStore: &fakeStore{t: t, SettleFn: func(string, ops.OutboxStatus, string) error { settled++; return nil }}}
	st.renewFn = func(time.Time) error {
		if renewed++; renewed == 3 {
			close(thrice)
		}
		return nil
	}
	st.releaseFn = func(time.Time) error { released++; return nil }
	work := burstFunc(func(ctx context.Context, job ingest.Job) []error {
		select { // the burst runs until the lease was renewed at its start and twice more
		case <-thrice:
		case <-time.After(30 * time.Second):
		}
		return make([]error, len(job.Burst))
	})
	r := runner.NewRunner(st.stores(), runner.Kinds{ingest.JobBurst: work}, quietLog())
	if err := r.Run(context.Background(), leasedBurst(3, 40*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	t.Logf("renewed %d times, released %d, settled %d", renewed, released, settled)
	if renewed < 3 || released != 1 || settled != 3 {
		t.Fatalf("renewed %d, released %d, settled %d; want at start and at least twice more, one release, 3 settled", renewed, released, settled)
	}
}

// TestASupersededBurstStops: a burst whose lease was taken again (it
// lapsed while the burst waited: RenewBurst answers ErrConflict) serves
// nothing and settles nothing, leaving its events to the newer burst;
// one superseded while it runs stops there, its events left received.
// Protection: the renewal's fencing (without it both bursts read the same
// list pages, as the chaos import did until its allowance ran out).
func TestASupersededBurstStops(t *testing.T) {
	t.Parallel()
	st := &leaseStore{fakeStore: &fakeStore{t: t}}
	st.renewFn = func(time.Time) error { return fmt.Errorf("renew: %w", model.ErrConflict) }
	ran := false
	r := runner.NewRunner(st.stores(), runner.Kinds{ingest.JobBurst: burstFunc(func(_ context.Context, job ingest.Job) []error {
		ran = true
		return make([]error, len(job.Burst))
	})}, quietLog())
	if err := r.Run(context.Background(), leasedBurst(3, time.Minute)); err != nil || ran {
		t.Fatalf("superseded at its start: %v, ran %v; want nothing run", err, ran)
	}

	calls := 0
	st.renewFn = func(time.Time) error {
		if calls++; calls > 1 {
			return model.ErrConflict
		}
		return nil
	}
	stopped := false
	r = runner.NewRunner(st.stores(), runner.Kinds{ingest.JobBurst: burstFunc(func(ctx context.Context, job ingest.Job) []error {
		select {
		case <-ctx.Done():
			stopped = true
		case <-time.After(5 * time.Second):
		}
		return make([]error, len(job.Burst))
	})}, quietLog())
	if err := r.Run(context.Background(), leasedBurst(3, 40*time.Millisecond)); err != nil || !stopped {
		t.Fatalf("superseded while it ran: %v, stopped %v; want its context ended and nothing settled", err, stopped)
	}
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
