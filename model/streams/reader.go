package streams

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/commitcollect/backend/model/retry"
)

// API is the part of the DynamoDB Streams client the reader uses
// (*dynamodbstreams.Client implements it).
type API interface {
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

var _ API = (*dynamodbstreams.Client)(nil)

// Handler is a Lambda stream handler: the projector's Handle method.
type Handler func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error)

// Position is where a shard without a checkpoint starts.
type Position string

// Start positions.
const (
	TrimHorizon Position = "trim-horizon" // the oldest record still in the stream (24 h)
	Latest      Position = "latest"       // only records written from now on
)

// Options configures a Reader.
type Options struct {
	// Start is where shards without a checkpoint begin (default TrimHorizon).
	Start Position
	// Checkpoints persists progress (default: in memory).
	Checkpoints CheckpointStore
	// BatchSize is the GetRecords limit and so the largest batch handed to
	// the handler (default 100, max 1000).
	BatchSize int
	// PollInterval is the pause after a round that found nothing (default 200ms).
	PollInterval time.Duration
	// BatchingWindow is the pause after a busy round, one that delivered at
	// least busyRound records (0: none), so that records arriving meanwhile
	// are delivered together, as the event source mapping's batching
	// window gathers them: a burst is handled in fewer, larger batches (one
	// recompute per user per batch), while a lone record and the writes it
	// causes are read within PollInterval. A round with a full batch
	// (BatchSize records) is never followed by the window: a backlog is
	// read back to back (pauseAfter).
	BatchingWindow time.Duration
	// MaxAttempts bounds deliveries of one failing record (default 10); after
	// that OnDiscard receives the rest of the batch, as Lambda's on-failure
	// destination would, and the shard moves on.
	MaxAttempts int
	// OnDiscard receives records given up on (e.g. to park them for
	// redrive). When nil they are logged at error level with their sequence
	// numbers.
	OnDiscard func(ctx context.Context, records []events.DynamoDBEventRecord, cause error)
	// Logger receives progress and problems (default slog.Default()).
	Logger *slog.Logger
}

// Reader reads one stream and feeds a Handler, like Lambda's event source
// mapping: shard by shard, parents before children, retrying from the first
// failed record of a partial batch response.
type Reader struct {
	api       API
	streamARN string
	o         Options
	shards    map[string]*shardState
	// Stats counts what the reader did; read it after Run returns.
	Stats Stats
}

// Stats counts a reader's work.
type Stats struct {
	Batches   int
	Records   int
	Retries   int
	Discarded int
}

type shardState struct {
	id, parent string
	iterator   *string
	cp         Checkpoint
	loaded     bool
}

// NewReader returns a reader of streamARN.
func NewReader(api API, streamARN string, o Options) *Reader {
	if o.Start == "" {
		o.Start = TrimHorizon
	}
	if o.Checkpoints == nil {
		o.Checkpoints = &MemoryCheckpoints{}
	}
	if o.BatchSize <= 0 || o.BatchSize > 1000 {
		o.BatchSize = 100
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 200 * time.Millisecond
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 10
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Reader{api: api, streamARN: streamARN, o: o, shards: map[string]*shardState{}}
}

// Run reads until ctx is cancelled (then it returns nil) or a non-retryable
// error occurs.
func (r *Reader) Run(ctx context.Context, h Handler) error {
	return r.run(ctx, h, false)
}

// Drain reads every record currently in the stream, then returns: each
// shard is read until a GetRecords call returns nothing (or it closes).
func (r *Reader) Drain(ctx context.Context, h Handler) error {
	return r.run(ctx, h, true)
}

const describeEvery = 10 * time.Second

// busyRound is how many records one round must deliver before the reader
// waits BatchingWindow: a burst, not one event and the writes it causes.
const busyRound = 4

// noAnswer is poll's count when GetRecords must be called again.
const noAnswer = -1

func (r *Reader) run(ctx context.Context, h Handler, drain bool) error {
	var lastDescribe time.Time
	caughtUp := map[string]bool{}
	for {
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(lastDescribe) > describeEvery || len(r.shards) == 0 || drain {
			if err := r.describe(ctx); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			lastDescribe = time.Now()
		}
		progressed, full := false, false
		active, delivered := 0, 0
		for _, s := range r.eligible() {
			if drain && caughtUp[s.id] {
				continue
			}
			active++
			n, err := r.poll(ctx, s, h)
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				return err
			}
			switch {
			case n > 0:
				progressed, delivered = true, delivered+n
				full = full || n >= r.o.BatchSize
			case n == 0 && drain:
				caughtUp[s.id] = true
			}
		}
		if drain && active == 0 {
			return nil
		}
		if pause := pauseAfter(r.o, progressed, delivered, full); !drain && pause > 0 {
			if err := retry.Sleep(ctx, pause); err != nil {
				return nil
			}
		}
	}
}

// pauseAfter is the reader's pause after a round: the poll interval when
// it found nothing; none after a full batch, since the shard holds more and
// the event source mapping invokes as soon as a batch fills (its window
// only bounds the wait for one that does not); the batching window after a
// busy round; none after a lighter one. Waiting the window after full
// batches would hold a backlog of n batches for n windows, every record
// behind it waiting too.
func pauseAfter(o Options, progressed bool, delivered int, full bool) time.Duration {
	switch {
	case !progressed:
		return o.PollInterval
	case full || delivered < busyRound:
		return 0
	default:
		return o.BatchingWindow
	}
}

// describe lists every shard of the stream (paginating DescribeStream).
func (r *Reader) describe(ctx context.Context) error {
	in := &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(r.streamARN)}
	for attempt := 0; ; {
		out, err := r.api.DescribeStream(ctx, in)
		if err != nil {
			var le *types.LimitExceededException
			if errors.As(err, &le) && attempt < 8 {
				attempt++
				if err := retry.Sleep(ctx, retry.Backoff(attempt, 100*time.Millisecond, 5*time.Second)); err != nil {
					return err
				}
				continue
			}
			return fmt.Errorf("describe stream %s: %w", r.streamARN, err)
		}
		for _, sh := range out.StreamDescription.Shards {
			id := aws.ToString(sh.ShardId)
			if _, ok := r.shards[id]; !ok {
				r.shards[id] = &shardState{id: id, parent: aws.ToString(sh.ParentShardId)}
			}
		}
		if out.StreamDescription.LastEvaluatedShardId == nil {
			return nil
		}
		in.ExclusiveStartShardId = out.StreamDescription.LastEvaluatedShardId
	}
}

// eligible returns the shards to read now: not finished, and whose parent is
// finished or no longer in the stream (lineage: parents before children).
// Order is stable (by shard id) so runs are reproducible.
func (r *Reader) eligible() []*shardState {
	var out []*shardState
	for _, s := range sortedShards(r.shards) {
		if s.cp.Done {
			continue
		}
		if p, ok := r.shards[s.parent]; ok && s.parent != "" && !p.cp.Done {
			continue
		}
		out = append(out, s)
	}
	return out
}

// poll makes one GetRecords call on s and delivers what it returns. It
// returns the number of records read, or noAnswer when the call must be
// repeated (throttled, iterator expired or trimmed).
func (r *Reader) poll(ctx context.Context, s *shardState, h Handler) (int, error) {
	if !s.loaded {
		cp, err := r.o.Checkpoints.Load(ctx, s.id)
		if err != nil {
			return 0, err
		}
		s.cp, s.loaded = cp, true
		if cp.Done {
			return 0, nil
		}
	}
	if s.iterator == nil {
		if err := r.newIterator(ctx, s); err != nil {
			return 0, err
		}
	}
	out, err := r.api.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: s.iterator, Limit: aws.Int32(int32(r.o.BatchSize))})
	if err != nil {
		var (
			expired *types.ExpiredIteratorException
			limit   *types.LimitExceededException
			trimmed *types.TrimmedDataAccessException
		)
		switch {
		case errors.As(err, &expired):
			s.iterator = nil // renewed from the checkpoint on the next poll
			return noAnswer, nil
		case errors.As(err, &limit):
			r.o.Logger.WarnContext(ctx, "stream read throttled; backing off", "shardId", s.id)
			return noAnswer, retry.Sleep(ctx, retry.Backoff(3, 100*time.Millisecond, 2*time.Second))
		case errors.As(err, &trimmed):
			r.o.Logger.WarnContext(ctx, "checkpoint older than the stream's 24 h retention; resuming at trim horizon", "shardId", s.id)
			s.cp.SequenceNumber, s.iterator = "", nil
			return noAnswer, nil
		}
		var rnf *types.ResourceNotFoundException
		if errors.As(err, &rnf) {
			// The shard aged out of the stream: nothing more to read.
			return 0, r.finish(ctx, s)
		}
		return 0, fmt.Errorf("get records of shard %s: %w", s.id, err)
	}
	s.iterator = out.NextShardIterator
	if len(out.Records) > 0 {
		recs := make([]events.DynamoDBEventRecord, 0, len(out.Records))
		for _, rec := range out.Records {
			lr, err := ToLambdaRecord(rec, r.streamARN)
			if err != nil {
				return 0, err
			}
			recs = append(recs, lr)
		}
		if err := r.deliver(ctx, s, recs, h); err != nil {
			return 0, err
		}
	}
	if s.iterator == nil {
		return len(out.Records), r.finish(ctx, s)
	}
	return len(out.Records), nil
}

func (r *Reader) newIterator(ctx context.Context, s *shardState) error {
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(r.streamARN), ShardId: aws.String(s.id)}
	switch {
	case s.cp.SequenceNumber != "":
		in.ShardIteratorType, in.SequenceNumber = types.ShardIteratorTypeAfterSequenceNumber, aws.String(s.cp.SequenceNumber)
	case r.o.Start == Latest:
		in.ShardIteratorType = types.ShardIteratorTypeLatest
	default:
		in.ShardIteratorType = types.ShardIteratorTypeTrimHorizon
	}
	out, err := r.api.GetShardIterator(ctx, in)
	if err != nil {
		var rnf *types.ResourceNotFoundException
		if errors.As(err, &rnf) {
			return r.finish(ctx, s)
		}
		return fmt.Errorf("get iterator for shard %s: %w", s.id, err)
	}
	s.iterator = out.ShardIterator
	return nil
}

func (r *Reader) finish(ctx context.Context, s *shardState) error {
	s.cp.Done, s.iterator = true, nil
	if err := r.o.Checkpoints.Save(ctx, s.id, s.cp); err != nil {
		return fmt.Errorf("checkpoint shard %s: %w", s.id, err)
	}
	r.o.Logger.DebugContext(ctx, "shard finished", "shardId", s.id)
	return nil
}

// deliver hands recs to h as Lambda would: a function error retries the
// whole batch; a partial batch response retries from the first failed
// record; after MaxAttempts the remainder is discarded to OnDiscard.
func (r *Reader) deliver(ctx context.Context, s *shardState, recs []events.DynamoDBEventRecord, h Handler) error {
	attempts := 0
	for len(recs) > 0 {
		r.Stats.Batches++
		resp, err := h(ctx, events.DynamoDBEvent{Records: recs})
		failedAt := len(recs)
		var cause error
		if err != nil {
			failedAt, cause = 0, err
		} else if len(resp.BatchItemFailures) > 0 {
			failedAt = indexOf(recs, resp.BatchItemFailures[0].ItemIdentifier)
			cause = fmt.Errorf("handler reported record %s failed", resp.BatchItemFailures[0].ItemIdentifier)
		}
		if failedAt > 0 {
			r.Stats.Records += failedAt
			s.cp.SequenceNumber = recs[failedAt-1].Change.SequenceNumber
			if err := r.o.Checkpoints.Save(ctx, s.id, s.cp); err != nil {
				return fmt.Errorf("checkpoint shard %s: %w", s.id, err)
			}
			attempts = 0
		}
		recs = recs[failedAt:]
		if len(recs) == 0 {
			return nil
		}
		attempts++
		if attempts >= r.o.MaxAttempts {
			r.Stats.Discarded += len(recs)
			r.discard(ctx, recs, cause)
			s.cp.SequenceNumber = recs[len(recs)-1].Change.SequenceNumber
			if err := r.o.Checkpoints.Save(ctx, s.id, s.cp); err != nil {
				return fmt.Errorf("checkpoint shard %s: %w", s.id, err)
			}
			return nil
		}
		r.Stats.Retries++
		r.o.Logger.WarnContext(ctx, "retrying stream records", "shardId", s.id,
			"fromSequenceNumber", recs[0].Change.SequenceNumber, "attempt", attempts, "error", cause)
		if err := retry.Sleep(ctx, retry.Backoff(attempts, 50*time.Millisecond, 5*time.Second)); err != nil {
			return err
		}
	}
	return nil
}

func (r *Reader) discard(ctx context.Context, recs []events.DynamoDBEventRecord, cause error) {
	if r.o.OnDiscard != nil {
		r.o.OnDiscard(ctx, recs, cause)
		return
	}
	seqs := make([]string, len(recs))
	for i, rec := range recs {
		seqs[i] = rec.Change.SequenceNumber
	}
	r.o.Logger.ErrorContext(ctx, "stream records discarded after retries", "sequenceNumbers", seqs, "error", cause)
}

// indexOf finds the record with sequence number seq; an identifier the
// batch does not hold is treated as "the whole batch failed" (Lambda does
// the same with an invalid identifier).
func indexOf(recs []events.DynamoDBEventRecord, seq string) int {
	for i, rec := range recs {
		if rec.Change.SequenceNumber == seq {
			return i
		}
	}
	return 0
}

func sortedShards(m map[string]*shardState) []*shardState {
	out := make([]*shardState, 0, len(m))
	for _, s := range m {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *shardState) int { return strings.Compare(a.id, b.id) })
	return out
}

// ReadAll returns every record currently in the stream, shard by shard in
// lineage order, converted as Lambda delivers them. For tests and tools.
func ReadAll(ctx context.Context, api API, streamARN string) ([]events.DynamoDBEventRecord, error) {
	var all []events.DynamoDBEventRecord
	r := NewReader(api, streamARN, Options{BatchSize: 1000, Logger: slog.New(slog.DiscardHandler)})
	err := r.Drain(ctx, func(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		all = append(all, ev.Records...)
		return events.DynamoDBEventResponse{}, nil
	})
	if err != nil {
		return nil, err
	}
	return all, nil
}
