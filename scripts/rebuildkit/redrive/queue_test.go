package redrive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// memQueue is an in-memory queue with SQS's receive/visibility/delete
// semantics, for the one thing no local stack provides (SQS). Like the
// stream reader's lineage test, it implements the consumer's own narrow
// interface and holds state; it does not record calls.
type memQueue struct {
	mu       sync.Mutex
	now      time.Time
	messages []*memMessage
	receipts int
}

type memMessage struct {
	id, body, receipt string
	visibleAt         time.Time
}

func (q *memQueue) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := &sqs.ReceiveMessageOutput{}
	for _, m := range q.messages {
		if len(out.Messages) == int(in.MaxNumberOfMessages) {
			break
		}
		if m.visibleAt.After(q.now) {
			continue
		}
		q.receipts++
		m.receipt = fmt.Sprintf("r%d", q.receipts)
		m.visibleAt = q.now.Add(time.Duration(in.VisibilityTimeout) * time.Second)
		out.Messages = append(out.Messages, types.Message{MessageId: aws.String(m.id), Body: aws.String(m.body), ReceiptHandle: aws.String(m.receipt)})
	}
	return out, nil
}

func (q *memQueue) DeleteMessage(_ context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, m := range q.messages {
		if m.receipt == aws.ToString(in.ReceiptHandle) {
			q.messages = slices.Delete(q.messages, i, i+1)
			return &sqs.DeleteMessageOutput{}, nil
		}
	}
	return nil, errors.New("ReceiptHandleIsInvalid")
}

var _ SQSAPI = (*memQueue)(nil)

func (q *memQueue) ids() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for _, m := range q.messages {
		out = append(out, m.id)
	}
	return out
}

// jobMessage renders the worker DLQ fixture for a job with correlation id corr.
func jobMessage(t *testing.T, corr string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "sqs", "worker-retries-exhausted.json"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Replace(string(b), "0f8c2a9e5b7d4e31a6c0d9b8e7f61234", corr, 1)
}

func TestRedriveQueue(t *testing.T) {
	t.Parallel()
	q := &memQueue{now: time.Date(2026, 3, 14, 7, 0, 0, 0, time.UTC)}
	for i := range 23 {
		q.messages = append(q.messages, &memMessage{id: fmt.Sprintf("m%02d", i), body: jobMessage(t, fmt.Sprintf("job-%02d", i))})
	}
	q.messages = append(q.messages, &memMessage{id: "junk", body: `{"not":"an envelope"}`})
	var (
		mu   sync.Mutex
		seen []string
	)
	rd := &Redriver{ProcessJob: func(_ context.Context, job json.RawMessage) error {
		var j struct{ CorrelationID string }
		if err := json.Unmarshal(job, &j); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, j.CorrelationID)
		if j.CorrelationID == "job-07" {
			return errors.New("strava 503")
		}
		return nil
	}}
	sum, err := rd.RedriveQueue(context.Background(), q, "https://sqs.example/dlq", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Redriven != 22 || sum.Kept != 2 || len(seen) != 23 {
		t.Fatalf("got %s with %d jobs processed, want 22 redriven, 2 kept, each of the 23 jobs processed once", sum, len(seen))
	}
	if got := q.ids(); !slices.Equal(got, []string{"m07", "junk"}) {
		t.Fatalf("left in the queue: got %v, want the failed job and the junk message", got)
	}
	if !strings.Contains(strings.Join(sum.Notes, "\n"), "m07: worker job e4b46cbf-b738-4a2c-8880-a18cdf61200e: failed again: strava 503") {
		t.Fatalf("notes: %q", sum.Notes)
	}

	// Once the kept messages are visible again, a bounded run takes one.
	q.now = q.now.Add(2 * time.Minute)
	seen = nil
	sum, err = rd.RedriveQueue(context.Background(), q, "https://sqs.example/dlq", time.Minute, 1)
	if err != nil || sum.Kept+sum.Redriven != 1 {
		t.Fatalf("--max 1: got %s, %v; want exactly one message handled", sum, err)
	}
}
