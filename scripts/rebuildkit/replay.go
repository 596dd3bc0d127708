package rebuildkit

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/streams"
)

// Replay warnings, printed before every replay.
const (
	WarnRetention = "warning: a DynamoDB stream keeps records for 24 hours only; what is older is gone from it. " +
		"To restore projections for all time, recompute from the workout log: rebuild --all."
	WarnReaders = "warning: DynamoDB Streams throttles more than two concurrent readers per shard, and the live " +
		"projector (Lambda's event source mapping) is already one of them: run one replay at a time and expect " +
		"LimitExceeded back-off while it runs."
)

// Replayer is the streams.Handler a replay reads the stream into: it keeps
// only one user's records when asked to, and either forwards the batch to
// the projector (in process, or a deployed Lambda) or, in a dry run,
// remembers the affected users for a recompute without writes at the end.
type Replayer struct {
	// User limits the replay to one user's records (empty: every user).
	User string
	// DryRun forwards nothing; Finish recomputes the affected users without
	// writing.
	DryRun bool
	// Forward is the projector's stream handler (not needed for a dry run).
	Forward streams.Handler

	mu        sync.Mutex
	users     map[string]bool
	records   int
	forwarded int
	batches   int
}

// ReplayStats counts what a replay saw.
type ReplayStats struct {
	// Records read from the stream, and Forwarded to the projector after
	// the user filter.
	Records, Forwarded, Batches int
	// Users are the users whose milestones the records can change.
	Users []string
}

// Handle implements streams.Handler. A forwarded batch's partial batch
// response is passed back unchanged (sequence numbers identify records in
// the unfiltered batch too), so the reader retries from the failed record.
func (r *Replayer) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	keep := ev.Records
	if r.User != "" {
		keep = nil
		for _, rec := range ev.Records {
			if k, err := RecordKey(rec); err == nil && k.PK == keys.UserPK(r.User) {
				keep = append(keep, rec)
			}
		}
	}
	r.mu.Lock()
	r.batches++
	r.records += len(ev.Records)
	if r.users == nil {
		r.users = map[string]bool{}
	}
	for _, u := range AffectedUsers(keep) {
		r.users[u] = true
	}
	r.mu.Unlock()
	if r.DryRun || len(keep) == 0 {
		return events.DynamoDBEventResponse{}, nil
	}
	if r.Forward == nil {
		return events.DynamoDBEventResponse{}, fmt.Errorf("replay: no projector to forward to: %w", model.ErrInvalid)
	}
	resp, err := r.Forward(ctx, events.DynamoDBEvent{Records: keep})
	if err == nil {
		r.mu.Lock()
		r.forwarded += len(keep)
		r.mu.Unlock()
	}
	return resp, err
}

// Stats returns what the replay saw so far.
func (r *Replayer) Stats() ReplayStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	users := make([]string, 0, len(r.users))
	for u := range r.users {
		users = append(users, u)
	}
	slices.Sort(users)
	return ReplayStats{Records: r.records, Forwarded: r.forwarded, Batches: r.batches, Users: users}
}

// DryRunReport recomputes, without writing, every user the replayed records
// touched and returns what would change. Users that fail are counted in the
// summary's Errors.
func (r *Replayer) DryRunReport(ctx context.Context, recompute Recompute) Summary {
	var sum Summary
	for _, u := range r.Stats().Users {
		out, err := recompute(ctx, u, true)
		if err != nil {
			sum.fail(u, err)
			continue
		}
		if out.UserID == "" {
			out.UserID = u
		}
		sum.add(out, true)
	}
	SortDrift(sum.Drift)
	return sum
}

// PrintWarnings writes the retention and throttling warnings.
func PrintWarnings(w io.Writer) {
	fmt.Fprintln(w, WarnRetention)
	fmt.Fprintln(w, WarnReaders)
}

// LambdaAPI is the part of the Lambda client a replay uses (*lambda.Client).
type LambdaAPI interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, opts ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

var _ LambdaAPI = (*lambda.Client)(nil)

// InvokeHandler returns a streams.Handler that sends each batch to the
// deployed projector function with a synchronous (RequestResponse) invoke,
// exactly as the event source mapping would, and returns its partial batch
// response. A function error fails the whole batch (the reader retries it).
func InvokeHandler(api LambdaAPI, function string) streams.Handler {
	return func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		payload, err := json.Marshal(ev)
		if err != nil {
			return events.DynamoDBEventResponse{}, fmt.Errorf("invoke %s: encode batch: %w", function, err)
		}
		out, err := api.Invoke(ctx, &lambda.InvokeInput{
			FunctionName: aws.String(function), InvocationType: types.InvocationTypeRequestResponse, Payload: payload,
		})
		if err != nil {
			return events.DynamoDBEventResponse{}, fmt.Errorf("invoke %s: %w", function, err)
		}
		return DecodeInvoke(function, out)
	}
}

// DecodeInvoke interprets a RequestResponse invoke of a stream handler: a
// function error (or a non-200 status) fails the whole batch; otherwise the
// payload is its partial batch response (empty or null: every record done).
// It returns an error matching model.ErrInvalid for a payload that is not a
// batch response.
func DecodeInvoke(function string, out *lambda.InvokeOutput) (events.DynamoDBEventResponse, error) {
	var resp events.DynamoDBEventResponse
	if out.FunctionError != nil {
		return resp, fmt.Errorf("invoke %s: function error %s: %s", function, aws.ToString(out.FunctionError), out.Payload)
	}
	if out.StatusCode != 200 {
		return resp, fmt.Errorf("invoke %s: status %d", function, out.StatusCode)
	}
	if len(out.Payload) == 0 || string(out.Payload) == "null" {
		return resp, nil
	}
	if err := json.Unmarshal(out.Payload, &resp); err != nil {
		return resp, fmt.Errorf("invoke %s: response %q is not a batch response: %v: %w", function, out.Payload, err, model.ErrInvalid)
	}
	return resp, nil
}

// ProcessJob processes one worker Job (its JSON) again: the worker's Handle.
// It returns nil when the job is done (or dropped as poison, which the worker
// audits) and an error when it should be tried again later.
type ProcessJob func(ctx context.Context, job json.RawMessage) error

// InvokeJob returns a ProcessJob that runs a worker Job in the deployed
// worker function with a synchronous (RequestResponse) invoke, so the
// redrive knows whether it succeeded. A function error means the job
// failed again.
func InvokeJob(api LambdaAPI, function string) ProcessJob {
	return func(ctx context.Context, job json.RawMessage) error {
		out, err := api.Invoke(ctx, &lambda.InvokeInput{
			FunctionName: aws.String(function), InvocationType: types.InvocationTypeRequestResponse, Payload: job,
		})
		if err != nil {
			return fmt.Errorf("invoke %s: %w", function, err)
		}
		if out.FunctionError != nil {
			return fmt.Errorf("invoke %s: function error %s: %s", function, aws.ToString(out.FunctionError), out.Payload)
		}
		if out.StatusCode != 200 {
			return fmt.Errorf("invoke %s: status %d", function, out.StatusCode)
		}
		return nil
	}
}
