// Package redrive processes dead letters again, idempotently: the records
// parked in the tables (RedriveParked) and the messages of the Lambdas'
// dead-letter queues (RedriveQueue), for make redrive.
package redrive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/commitcollect/backend/scripts/rebuildkit"
	"log/slog"
	"slices"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/streams"
)

// ParkedStore is the part of the store a local redrive uses.
type ParkedStore interface {
	Parked(ctx context.Context, source string) ([]ops.ParkedRecord, error)
	Unpark(ctx context.Context, source, recordID string) error
}

var _ ParkedStore = (*store.ParkedRecords)(nil)

// Redriver processes dead letters again, idempotently: a projector record
// becomes a recompute of its user from the workout log (so it does not
// matter whether the record is old, duplicated or out of order), a worker
// job goes back to the worker, which always fetches the activity's current
// state.
type Redriver struct {
	// Recompute is the projector's recompute (for projector records).
	Recompute rebuildkit.Recompute
	// ProcessJob is the worker (for worker jobs; nil: they are left alone).
	ProcessJob rebuildkit.ProcessJob
	// Streams reads stream ranges named by projector DLQ messages.
	Streams streams.API
	// Logger receives one line per record (default slog.Default()).
	Logger *slog.Logger
}

// Summary counts a redrive.
type Summary struct {
	// Redriven were processed and removed (unparked or deleted).
	Redriven int `json:"redriven"`
	// Kept are still parked / in the queue, with Notes saying why.
	Kept int `json:"kept"`
	// Users recomputed for projector records.
	Users []string `json:"users,omitempty"`
	// Notes are what an operator must know or do about kept records.
	Notes []string `json:"notes,omitempty"`
}

func (s *Summary) keep(note string) {
	s.Kept++
	s.Notes = append(s.Notes, note)
}

// String renders the summary line.
func (s Summary) String() string {
	return fmt.Sprintf("redriven=%d kept=%d users=%d", s.Redriven, s.Kept, len(s.Users))
}

func (r *Redriver) log() *slog.Logger {
	if r.Logger == nil {
		return slog.Default()
	}
	return r.Logger
}

// RedriveParked processes the records parked under source (keys.ParkSourceProjector
// or keys.ParkSourceWorker) and unparks each one that succeeded. Projector records
// are grouped by user: one recompute per user, then all of that user's
// records are unparked. (Feeding a record back to the stream handler would
// not do: a record that fails again is parked again under the same id, which
// is a no-op, and would then be unparked and lost.) It returns an error only
// when the parked records cannot be listed; per-record failures are kept
// parked and noted.
func (r *Redriver) RedriveParked(ctx context.Context, st ParkedStore, source string) (Summary, error) {
	var sum Summary
	recs, err := st.Parked(ctx, source)
	if err != nil {
		return sum, err
	}
	switch source {
	case keys.ParkSourceProjector:
		byUser := map[string][]ops.ParkedRecord{}
		for _, p := range recs {
			var rec events.DynamoDBEventRecord
			if err := json.Unmarshal([]byte(p.Payload), &rec); err != nil {
				sum.keep(fmt.Sprintf("parked %s record %s: payload is not a stream record (%v); inspect it and unpark by hand", source, p.RecordID, err))
				continue
			}
			u, ok := rebuildkit.RecordUser(rec)
			if !ok {
				sum.keep(fmt.Sprintf("parked %s record %s: no user in its keys (%s); nothing to recompute, inspect it and unpark by hand", source, p.RecordID, p.Reason))
				continue
			}
			byUser[u] = append(byUser[u], p)
		}
		users := make([]string, 0, len(byUser))
		for u := range byUser {
			users = append(users, u)
		}
		slices.Sort(users)
		for _, u := range users {
			if r.Recompute == nil {
				return sum, fmt.Errorf("redrive %s: no recompute: %w", source, model.ErrInvalid)
			}
			if _, err := r.Recompute(ctx, u, false); err != nil {
				for _, p := range byUser[u] {
					sum.keep(fmt.Sprintf("parked %s record %s (user %s): recompute failed again: %v", source, p.RecordID, u, err))
				}
				r.log().ErrorContext(ctx, "redrive recompute failed", "userId", u, "error", err)
				continue
			}
			sum.Users = append(sum.Users, u)
			for _, p := range byUser[u] {
				if err := st.Unpark(ctx, source, p.RecordID); err != nil {
					sum.keep(fmt.Sprintf("parked %s record %s: processed but not unparked: %v", source, p.RecordID, err))
					continue
				}
				sum.Redriven++
				r.log().InfoContext(ctx, "redriven", "source", source, "recordId", p.RecordID, "userId", u, "correlationId", p.CorrelationID)
			}
		}
	case keys.ParkSourceWorker:
		for _, p := range recs {
			if r.ProcessJob == nil {
				sum.keep(fmt.Sprintf("parked %s record %s: no worker wired into this command; left parked", source, p.RecordID))
				continue
			}
			if err := r.ProcessJob(ctx, json.RawMessage(p.Payload)); err != nil {
				sum.keep(fmt.Sprintf("parked %s record %s: worker failed again: %v", source, p.RecordID, err))
				r.log().ErrorContext(ctx, "redrive job failed", "recordId", p.RecordID, "correlationId", p.CorrelationID, "error", err)
				continue
			}
			if err := st.Unpark(ctx, source, p.RecordID); err != nil {
				sum.keep(fmt.Sprintf("parked %s record %s: processed but not unparked: %v", source, p.RecordID, err))
				continue
			}
			sum.Redriven++
			r.log().InfoContext(ctx, "redriven", "source", source, "recordId", p.RecordID, "correlationId", p.CorrelationID)
		}
	default:
		return sum, fmt.Errorf("redrive: unknown source %q (want %s or %s): %w", source, keys.ParkSourceProjector, keys.ParkSourceWorker, model.ErrInvalid)
	}
	return sum, nil
}

// HandleMessage processes one dead-letter message body and reports whether
// it is done (the caller deletes it). A kept message comes with a note that
// says why and what to do.
func (r *Redriver) HandleMessage(ctx context.Context, body []byte) (done bool, users []string, note string) {
	env, err := rebuildkit.ParseEnvelope(body)
	if err != nil {
		return false, nil, fmt.Sprintf("not a Lambda failure record, left in the queue: %v", err)
	}
	log := r.log().With("requestId", env.RequestID, "function", env.FunctionName(), "condition", env.Condition)
	switch env.Kind {
	case rebuildkit.KindAsyncFailure:
		if r.ProcessJob == nil {
			return false, nil, fmt.Sprintf("worker job %s: no worker wired into this command (use --invoke-worker); left in the queue", env.RequestID)
		}
		if err := r.ProcessJob(ctx, env.Payload); err != nil {
			log.ErrorContext(ctx, "redrive job failed", "error", err)
			return false, nil, fmt.Sprintf("worker job %s: failed again: %v", env.RequestID, err)
		}
		log.InfoContext(ctx, "worker job redriven")
		return true, nil, ""
	case rebuildkit.KindStreamFailure:
		b := *env.Batch
		if r.Streams == nil || r.Recompute == nil {
			return false, nil, fmt.Sprintf("stream batch %s: no stream reader or recompute wired; left in the queue", env.RequestID)
		}
		recs, err := rebuildkit.ReadRange(ctx, r.Streams, b)
		if errors.Is(err, rebuildkit.ErrRangeGone) || (err == nil && len(recs) == 0) {
			return false, nil, fmt.Sprintf("stream batch %s (shard %s, %s..%s, first record %s): the records are no longer in the stream, "+
				"which keeps 24 hours; the message is left in the queue. Find the drift with `verify --all` and restore it with "+
				"`rebuild --user ID` for the users it names (or `rebuild --all`), then delete the message.",
				env.RequestID, b.ShardID, b.StartSequenceNumber, b.EndSequenceNumber, b.ApproximateArrivalOfFirstRecord.Format(time.RFC3339))
		}
		if err != nil {
			return false, nil, fmt.Sprintf("stream batch %s: %v", env.RequestID, err)
		}
		users = rebuildkit.AffectedUsers(recs)
		for _, u := range users {
			if _, err := r.Recompute(ctx, u, false); err != nil {
				log.ErrorContext(ctx, "redrive recompute failed", "userId", u, "error", err)
				return false, users, fmt.Sprintf("stream batch %s: recompute of user %s failed: %v", env.RequestID, u, err)
			}
		}
		log.InfoContext(ctx, "stream batch redriven", "records", len(recs), "users", len(users))
		return true, users, ""
	}
	return false, nil, fmt.Sprintf("message %s: unknown kind %q", env.RequestID, env.Kind)
}

// SQSAPI is the part of the SQS client a queue redrive uses (*sqs.Client).
type SQSAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

var _ SQSAPI = (*sqs.Client)(nil)

// RedriveQueue receives every message of a dead-letter queue once, processes
// it (HandleMessage) and deletes the ones that are done. Kept messages stay
// invisible for visibility (default 5 minutes) and then reappear in the
// queue. It stops when a receive brings nothing new, after max messages
// (0: no limit), or when ctx ends.
func (r *Redriver) RedriveQueue(ctx context.Context, q SQSAPI, queueURL string, visibility time.Duration, max int) (Summary, error) {
	var sum Summary
	if visibility <= 0 {
		visibility = 5 * time.Minute
	}
	seen := map[string]bool{}
	for max <= 0 || len(seen) < max {
		n := int32(10)
		if max > 0 {
			n = int32(min(10, max-len(seen)))
		}
		out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(queueURL), MaxNumberOfMessages: n, WaitTimeSeconds: 2,
			VisibilityTimeout: int32(visibility.Seconds()),
		})
		if err != nil {
			return sum, fmt.Errorf("receive from %s: %w", queueURL, err)
		}
		fresh := 0
		for _, m := range out.Messages {
			id := aws.ToString(m.MessageId)
			if seen[id] {
				continue
			}
			seen[id] = true
			fresh++
			done, users, note := r.HandleMessage(ctx, []byte(aws.ToString(m.Body)))
			sum.Users = append(sum.Users, users...)
			if !done {
				sum.keep(fmt.Sprintf("message %s: %s", id, note))
				continue
			}
			if _, err := q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				sum.keep(fmt.Sprintf("message %s: processed but not deleted (it will be processed again, harmlessly): %v", id, err))
				continue
			}
			sum.Redriven++
		}
		if fresh == 0 {
			break
		}
	}
	slices.Sort(sum.Users)
	sum.Users = slices.Compact(sum.Users)
	return sum, nil
}
