package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/streams"
	"github.com/commitcollect/backend/scripts/rebuildkit"
	"github.com/commitcollect/backend/scripts/rebuildkit/redrive"
)

const replaySynopsis = `replay: read the main table's DynamoDB stream and feed it to the projector again: in process against the
table, or to the deployed projector Lambda (--invoke-function), batch by batch like Lambda's event source
mapping (partial batch responses honoured, retries, checkpoints).

  replay [--from trim-horizon|latest] [--checkpoint FILE] [--user ID] [--dry-run] [--invoke-function NAME] [--follow]

--dry-run writes nothing: it collects the users the records touch and prints the milestones a recompute
would change. A stream keeps 24 hours; for anything older use rebuild.
Exit status: 0 done, 2 on errors (including records the projector gave up on).`

// ReplayMain is the replay command.
func ReplayMain(ctx context.Context, args []string, std IO, setup Setup) int {
	fs := newFlagSet("replay", replaySynopsis, std.Err)
	prefix := tablePrefixFlag(fs)
	from := fs.String("from", string(streams.TrimHorizon), "where shards without a checkpoint start: trim-horizon (oldest record, up to 24 h ago) or latest")
	checkpoint := fs.String("checkpoint", "", "JSON checkpoint file: resume from it and save progress to it (a dry run reads it but never writes it)")
	user := fs.String("user", "", "replay only this user's records (filtered by key before the projector sees them)")
	dryRun := fs.Bool("dry-run", false, "write nothing; print the milestones that would change")
	function := fs.String("invoke-function", "", "send batches to this deployed projector Lambda (RequestResponse) instead of processing in process")
	follow := fs.Bool("follow", false, "keep reading new records until interrupted (default: stop once the stream is drained)")
	batch := fs.Int("batch-size", 100, "records per batch (1..1000)")
	asJSON := fs.Bool("json", false, "print the dry-run result as JSON")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	start := streams.Position(*from)
	if start != streams.TrimHorizon && start != streams.Latest {
		fmt.Fprintf(std.Err, "replay: --from %q: want trim-horizon or latest\n", *from)
		return ExitError
	}
	if *dryRun && *function != "" {
		fmt.Fprintln(std.Err, "replay: --dry-run and --invoke-function together: a dry run never invokes the projector")
		return ExitError
	}
	rebuildkit.PrintWarnings(std.Err)
	env, err := setup(ctx, *prefix)
	if err != nil {
		fmt.Fprintln(std.Err, "replay:", err)
		return ExitError
	}
	arn, err := env.StreamARN(ctx)
	if err != nil {
		fmt.Fprintln(std.Err, "replay:", err)
		return ExitError
	}
	rp := &rebuildkit.Replayer{User: *user, DryRun: *dryRun, Forward: env.Projector}
	if *function != "" {
		rp.Forward = rebuildkit.InvokeHandler(env.Lambda, *function)
	}
	var discarded []string
	reader := streams.NewReader(env.Streams, arn, streams.Options{
		Start: start, Checkpoints: replayCheckpoints(*checkpoint, *dryRun), BatchSize: *batch, Logger: env.Logger,
		OnDiscard: func(ctx context.Context, recs []events.DynamoDBEventRecord, cause error) {
			for _, rec := range recs {
				discarded = append(discarded, rec.Change.SequenceNumber)
			}
			env.Logger.ErrorContext(ctx, "projector gave up on records", "records", len(recs), "error", cause,
				"users", rebuildkit.AffectedUsers(recs))
		},
	})
	if *follow {
		err = reader.Run(ctx, rp.Handle)
	} else {
		err = reader.Drain(ctx, rp.Handle)
	}
	st := rp.Stats()
	code := ExitOK
	if err != nil {
		fmt.Fprintln(std.Err, "replay:", err)
		code = ExitError
	}
	if *dryRun {
		if !dryRunReport(ctx, std.Out, rp, env.Recompute, *asJSON) {
			code = ExitError
		}
		return code
	}
	fmt.Fprintf(std.Out, "replay: records=%d forwarded=%d batches=%d users=%d retries=%d discarded=%d\n",
		st.Records, st.Forwarded, st.Batches, len(st.Users), reader.Stats.Retries, reader.Stats.Discarded)
	if len(discarded) > 0 {
		fmt.Fprintf(std.Err, "replay: the projector gave up on %d records (%v); restore their users with rebuild --user\n", len(discarded), discarded)
		code = ExitError
	}
	return code
}

// replayCheckpoints is where a replay keeps its checkpoints: in memory, in
// a file, or read from a file and kept in memory (a dry run).
func replayCheckpoints(path string, dryRun bool) streams.CheckpointStore {
	switch {
	case path == "":
		return &streams.MemoryCheckpoints{}
	case dryRun:
		return &readOnlyCheckpoints{from: &streams.FileCheckpoints{Path: path}}
	}
	return &streams.FileCheckpoints{Path: path}
}

// dryRunReport prints the milestones a recompute of the replayed users
// would change; it reports whether every recompute succeeded.
func dryRunReport(ctx context.Context, out io.Writer, rp *rebuildkit.Replayer, recompute rebuildkit.Recompute, asJSON bool) bool {
	st := rp.Stats()
	sum := rp.DryRunReport(ctx, recompute)
	if asJSON {
		_ = json.NewEncoder(out).Encode(struct {
			Records int                `json:"records"`
			Users   []string           `json:"users"`
			Summary rebuildkit.Summary `json:"summary"`
		}{st.Records, st.Users, sum})
	} else {
		for _, d := range sum.Drift {
			fmt.Fprintf(out, "would change: %s\n", d)
		}
		fmt.Fprintf(out, "replay (dry run): records=%d users=%d %s\n", st.Records, len(st.Users), sum)
	}
	return sum.Errors == 0
}

// readOnlyCheckpoints reads checkpoints from a store and keeps new ones in
// memory, so a dry run starts where a saved replay stopped without moving it.
type readOnlyCheckpoints struct {
	from streams.CheckpointStore
	mem  streams.MemoryCheckpoints
	seen map[string]bool
}

func (c *readOnlyCheckpoints) Load(ctx context.Context, shardID string) (streams.Checkpoint, error) {
	if c.seen[shardID] {
		return c.mem.Load(ctx, shardID)
	}
	return c.from.Load(ctx, shardID)
}

func (c *readOnlyCheckpoints) Save(ctx context.Context, shardID string, cp streams.Checkpoint) error {
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	c.seen[shardID] = true
	return c.mem.Save(ctx, shardID, cp)
}

const redriveSynopsis = `redrive: process again what the failure paths set aside, idempotently.

  redrive [--source projector|worker|all]                 locally: records parked under PARKED#{source}
  redrive --queue-url URL [--invoke-worker NAME]          in AWS: a dead-letter queue (Lambda on-failure destination)

Projector records (parked records, or a stream batch named by a DLQ message, re-read from the stream while
it is still retained) become a recompute of their users from the workout log; worker jobs go back to the
worker (in process locally, or --invoke-worker to run them in the deployed worker Lambda). What succeeds is
unparked / deleted; what fails stays, with a note. A projector batch older than the stream's 24 hours
cannot be re-read: the message stays and the note says to verify --all and rebuild --user.
Exit status: 0 everything redriven, 2 if anything was kept.`

// RedriveMain is the redrive command.
func RedriveMain(ctx context.Context, args []string, std IO, setup Setup) int {
	fs := newFlagSet("redrive", redriveSynopsis, std.Err)
	prefix := tablePrefixFlag(fs)
	source := fs.String("source", "all", "local parked records to redrive: projector, worker or all")
	queueURL := fs.String("queue-url", "", "SQS dead-letter queue URL (AWS): worker async-failure records or projector stream-batch records")
	invokeWorker := fs.String("invoke-worker", "", "process worker jobs by invoking this deployed worker Lambda (RequestResponse)")
	maxMessages := fs.Int("max", 0, "stop after this many queue messages (0: until the queue has nothing new)")
	visibility := fs.Duration("visibility", 5*time.Minute, "how long a received message stays hidden while it is processed")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	env, err := setup(ctx, *prefix)
	if err != nil {
		fmt.Fprintln(std.Err, "redrive:", err)
		return ExitError
	}
	rd := &redrive.Redriver{Recompute: env.Recompute, ProcessJob: env.ProcessJob, Streams: env.Streams, Logger: env.Logger}
	if *invokeWorker != "" {
		rd.ProcessJob = rebuildkit.InvokeJob(env.Lambda, *invokeWorker)
	}
	var sums []redrive.Summary
	if *queueURL != "" {
		sum, err := rd.RedriveQueue(ctx, env.SQS, *queueURL, *visibility, *maxMessages)
		if err != nil {
			fmt.Fprintln(std.Err, "redrive:", err)
			return ExitError
		}
		sums = append(sums, sum)
	} else {
		var sources []string
		switch *source {
		case "projector":
			sources = []string{keys.ParkSourceProjector}
		case "worker":
			sources = []string{keys.ParkSourceWorker}
		case "all":
			sources = []string{keys.ParkSourceProjector, keys.ParkSourceWorker}
		default:
			fmt.Fprintf(std.Err, "redrive: --source %q: want projector, worker or all\n", *source)
			return ExitError
		}
		for _, s := range sources {
			sum, err := rd.RedriveParked(ctx, env.Store.Parked, s)
			if err != nil {
				fmt.Fprintln(std.Err, "redrive:", err)
				return ExitError
			}
			fmt.Fprintf(std.Out, "redrive %s: %s\n", strings.ToLower(s), sum)
			sums = append(sums, sum)
		}
	}
	code := ExitOK
	for _, s := range sums {
		if *queueURL != "" {
			fmt.Fprintf(std.Out, "redrive queue: %s\n", s)
		}
		for _, n := range s.Notes {
			fmt.Fprintf(std.Out, "kept: %s\n", n)
		}
		if s.Kept > 0 {
			code = ExitError
		}
	}
	return code
}
