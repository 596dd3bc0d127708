package handoff_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/handoff"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/test/ingesttest"
)

// The dispatchers: the local stack's queue and the worker Lambda's async
// invoke.

func TestQueueFullAndClosed(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	q := handoff.NewQueue(func(ctx context.Context, _ ingest.Job) error {
		<-release
		return nil
	}, handoff.QueueOptions{Workers: 1, Capacity: 1}, ingesttest.Log())
	ctx := context.Background()
	j := ingest.Job{CorrelationID: "c"}
	if err := q.Dispatch(ctx, j); err != nil { // taken by the worker
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	var err error
	for err == nil && time.Now().Before(deadline) { // fill the buffer until refused
		err = q.Dispatch(ctx, j)
	}
	if !errors.Is(err, handoff.ErrQueueFull) || !errors.Is(err, model.ErrRetryable) {
		t.Fatalf("got %v, want ErrQueueFull (retryable)", err)
	}
	close(release)
	if err := q.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.Dispatch(ctx, j); !errors.Is(err, handoff.ErrQueueClosed) {
		t.Fatalf("after close: got %v, want ErrQueueClosed", err)
	}
}

func TestQueueGivesUpAfterAttempts(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls, failed := 0, 0
	q := handoff.NewQueue(func(context.Context, ingest.Job) error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		return model.ErrRetryable
	}, handoff.QueueOptions{Attempts: 3, Backoff: time.Millisecond, OnFailure: func(context.Context, ingest.Job, error) {
		mu.Lock()
		defer mu.Unlock()
		failed++
	}}, ingesttest.Log())
	ctx := context.Background()
	if err := q.Dispatch(ctx, ingest.Job{CorrelationID: "c"}); err != nil {
		t.Fatal(err)
	}
	if err := q.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 3 || failed != 1 {
		t.Fatalf("got %d calls and %d failures, want 3 and 1", calls, failed)
	}
	_ = q.Close(ctx)
}

// TestLambdaDispatcher runs the real SDK client against a local HTTP
// endpoint standing in for the Lambda service.
func TestLambdaDispatcher(t *testing.T) {
	t.Parallel()
	var (
		mu      sync.Mutex
		gotPath string
		gotType string
		gotBody []byte
		status  = http.StatusAccepted
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		gotPath, gotType = r.URL.Path, r.Header.Get("X-Amz-Invocation-Type")
		gotBody, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if status >= 400 {
			_, _ = w.Write([]byte(`{"Type":"Service","message":"boom"}`))
		}
	}))
	defer srv.Close()
	client := lambda.NewFromConfig(aws.Config{
		Region: "ap-southeast-2", Credentials: credentials.NewStaticCredentialsProvider("k", "s", ""),
		BaseEndpoint: aws.String(srv.URL), Retryer: func() aws.Retryer { return retry.AddWithMaxAttempts(retry.NewStandard(), 1) },
	})
	d := handoff.NewLambdaDispatcher(client, "commitcollect-strava-worker")
	j := ingest.Job{Event: ingest.Event{ObjectType: "activity", ObjectID: 1, AspectType: "create", OwnerID: 2,
		SubscriptionID: 3, EventTime: 4}, CorrelationID: "corr-1", IdempotencyKey: "k"}
	if err := d.Dispatch(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if gotType != "Event" || gotPath != "/2015-03-31/functions/commitcollect-strava-worker/invocations" {
		t.Fatalf("got %s %q, want an Event invocation of the worker", gotPath, gotType)
	}
	back, err := ingest.DecodeJob(gotBody)
	if err != nil || back.CorrelationID != "corr-1" || back.Event.ObjectID != 1 {
		t.Fatalf("got payload %s (%v), want the job", gotBody, err)
	}
	status = http.StatusInternalServerError
	mu.Unlock()
	if err := d.Dispatch(context.Background(), j); !errors.Is(err, model.ErrRetryable) {
		t.Fatalf("got %v, want ErrRetryable", err)
	}
}
