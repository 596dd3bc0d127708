package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/projections"
	"github.com/commitcollect/backend/projections/consumer/trigger"
)

// Handle processes one batch of stream records. Each user with at least one
// trigger is re-projected once (users in parallel). A user whose projection
// fails fails its records; the response names the sequence number of the
// first failed record in the batch, so Lambda resumes there (later records
// are redelivered, which is harmless). Poison records are audited and parked,
// not reported, so they cannot block the shard. The error is always nil:
// failures are reported per record.
//
// # Grouping by user
//
// Streams order records per item, not per user, so a record is never a delta
// to add: it is a reason to recompute that user's milestones from the log. A
// batch is grouped by user; each user is recomputed once however many of their
// records the batch holds, and up to 4 users (Options.Concurrency) run in
// parallel. One recompute is: read the user's guard, milestones and award
// items (one strongly consistent Query, SK between GUARD and MILESTONE$,
// keys.GuardAndMilestones; a guard that holds removes the batch's webhook
// workout writes, recompute.go; no milestones means nothing else is read),
// then the workout log inside the milestones' periods, or only the weeks
// touched of those keeping week sums (store.WorkoutLog; projections'
// weeks.go), then projections.Project per milestone. A milestone whose
// projection did not change and has no award to mint is not written.
// Milestones are read before the log on purpose: a concurrent recompute that
// wrote after our read makes our write conflict, and one that wrote before
// it saw no newer log than ours, so the last write always includes every
// workout written before it.
//
// # Partial batch response
//
// Handle never returns an error. When a user's recompute fails, all of that
// user's records are marked failed and the response
// (events.DynamoDBEventResponse) names the sequence number of the first
// failed record in the batch. Lambda checkpoints everything before it and
// redelivers from there (records after it are recomputed again, which is
// harmless); other users in the same batch are still processed. In AWS the
// mapping retries with bisect and bounded record age and then sends the
// failed range to the projector dead-letter queue (`make redrive
// ARGS="--queue-url …"`).
//
// # Poison records are parked, not skipped
//
// A record that can never be processed (undecodable, written by a newer
// schema), and every record of a user whose log the code cannot read
// (ErrUnsupportedSchema, ErrInvalid), is written to the main table under
// PARKED#PROJECTOR#{shard} / {eventId} (keys.ParkedKey) with the reason, the full record as JSON and
// its correlation id, and audited (PROJECTOR_RECORD_PARKED). It is then not
// reported failed, so it cannot block the shard. If parking itself fails,
// the record is reported failed instead, so nothing is lost. `make redrive`
// (scripts/rebuildkit) processes parked records again.
func (c *Consumer) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	start := c.o.Now()
	read := func() Cost { return Cost{} }
	if c.o.Meter != nil {
		ctx, read = c.o.Meter(ctx)
	}
	bm := batchMetrics{seen: len(ev.Records)}
	c.stats.seen.Add(int64(len(ev.Records)))
	failed := make([]bool, len(ev.Records))
	users := c.group(ctx, ev, start, failed, &bm)
	c.fanOut(ctx, ev, users, failed, &bm)
	resp := respond(ev, failed, &bm)
	c.stats.failed.Add(int64(bm.failed))
	c.stats.parked.Add(int64(bm.parked))
	bm.duration = c.o.Now().Sub(start)
	bm.capacity = read()
	c.emit(bm)
	c.o.Logger.InfoContext(ctx, "batch processed", "records", bm.seen, "ignored", bm.ignored, "parked", bm.parked,
		"failed", bm.failed, "users", bm.users, "awardsMinted", bm.minted, "lagMs", bm.maxLag.Milliseconds(), bm.capacity.Log)
	return resp, nil
}

// userWork is one user's share of a batch: the records that trigger its
// re-projection and the correlation id of the last of them.
type userWork struct {
	userID        string
	records       []int
	correlationID string
	written       []int64             // activity ids of the webhook workout writes
	touched       projections.Touched // the days and weeks the triggers concern
}

// group classifies the batch's records: ignored ones are counted, poison
// ones parked (failed when parking fails), and the triggers grouped by user,
// in the order the users first appear.
func (c *Consumer) group(ctx context.Context, ev events.DynamoDBEvent, start time.Time, failed []bool, bm *batchMetrics) []*userWork {
	users := map[string]*userWork{}
	var order []*userWork
	for i, rec := range ev.Records {
		if t := rec.Change.ApproximateCreationDateTime.Time; !t.IsZero() {
			bm.maxLag = max(bm.maxLag, start.Sub(t))
		}
		d := trigger.Classify(rec)
		log := c.o.Logger.With("eventId", rec.EventID, "sequenceNumber", rec.Change.SequenceNumber, "eventName", rec.EventName,
			"userId", d.UserID, "activityId", d.ActivityID, "milestoneId", d.MilestoneID, "correlationId", d.CorrelationID)
		switch d.Action {
		case trigger.Ignore:
			bm.ignored++
			c.stats.ignored.Add(1)
			log.DebugContext(ctx, "record ignored", "reason", d.Reason)
		case trigger.Park:
			log.WarnContext(ctx, "poison record", "error", d.Err)
			if err := c.recorder.park(ctx, rec, d, d.Err); err != nil {
				log.ErrorContext(ctx, "park failed: record reported failed", "error", err)
				failed[i] = true
			} else {
				bm.parked++
			}
		case trigger.Recompute:
			u := users[d.UserID]
			if u == nil {
				u = &userWork{userID: d.UserID}
				users[d.UserID] = u
				order = append(order, u)
			}
			u.records = append(u.records, i)
			u.touched.Add(d.Days, d.Starts, d.DaysKnown)
			if d.Written {
				u.written = append(u.written, d.ActivityID)
			}
			if d.CorrelationID != "" {
				u.correlationID = d.CorrelationID
			}
			log.DebugContext(ctx, "record triggers projection", "reason", d.Reason)
		}
	}
	return order
}

// fanOut re-projects each user once, Concurrency at a time, and settles its
// records: a user whose log cannot be read by this code parks them, any
// other failure fails them.
func (c *Consumer) fanOut(ctx context.Context, ev events.DynamoDBEvent, users []*userWork, failed []bool, bm *batchMetrics) {
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		sem = make(chan struct{}, c.o.Concurrency)
	)
	for _, u := range users {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			rep, err := c.recompute(ctx, u.userID, u.correlationID, u.written, u.touched, false)
			mu.Lock()
			defer mu.Unlock()
			bm.users++
			bm.conflicts += max(rep.Attempts-1, 0)
			for _, m := range rep.Milestones {
				bm.minted += len(m.Minted) * btoi(m.Written)
				bm.truncated += btoi(m.Skipped == "" && m.Recomputed.Truncated)
			}
			if err != nil {
				c.settleFailed(ctx, ev, u, err, failed, bm)
			}
		}()
	}
	wg.Wait()
}

// settleFailed settles the records of a user whose projection failed with
// err: parked when the log itself cannot be read by this code (retrying is
// pointless until it is fixed or newer code is deployed), else failed.
func (c *Consumer) settleFailed(ctx context.Context, ev events.DynamoDBEvent, u *userWork, err error, failed []bool, bm *batchMetrics) {
	log := c.o.Logger.With("userId", u.userID, "correlationId", u.correlationID)
	if errors.Is(err, model.ErrUnsupportedSchema) || errors.Is(err, model.ErrInvalid) {
		log.WarnContext(ctx, "user cannot be projected: parking its records", "error", err)
		for _, i := range u.records {
			if perr := c.recorder.park(ctx, ev.Records[i], trigger.Classify(ev.Records[i]), err); perr != nil {
				failed[i] = true
			} else {
				bm.parked++
			}
		}
		return
	}
	log.ErrorContext(ctx, "user projection failed: records reported failed", "error", err, "records", len(u.records))
	for _, i := range u.records {
		failed[i] = true
	}
}

// respond counts the failed records and names the first one's sequence
// number, where Lambda resumes the shard.
func respond(ev events.DynamoDBEvent, failed []bool, bm *batchMetrics) events.DynamoDBEventResponse {
	var resp events.DynamoDBEventResponse
	for i, f := range failed {
		if !f {
			continue
		}
		bm.failed++
		if len(resp.BatchItemFailures) == 0 {
			resp.BatchItemFailures = []events.DynamoDBBatchItemFailure{{ItemIdentifier: ev.Records[i].Change.SequenceNumber}}
		}
	}
	return resp
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Discard parks records the event source gave up on after its retries
// (the local stack's equivalent of the event source mapping's on-failure
// destination), audited like poison records, so `redrive` can recompute
// their users later. It returns an error joining every record it could not
// park; the caller must then keep them (log them with their sequence
// numbers) rather than lose them.
func (c *Consumer) Discard(ctx context.Context, recs []events.DynamoDBEventRecord, cause error) error {
	var errs []error
	for _, rec := range recs {
		d := trigger.Classify(rec)
		if d.Action == trigger.Ignore {
			continue // nothing to redo: the projector would ignore it anyway
		}
		if err := c.recorder.park(ctx, rec, d, fmt.Errorf("gave up after retries: %w", cause)); err != nil {
			errs = append(errs, fmt.Errorf("park discarded record %s: %w", rec.Change.SequenceNumber, err))
		}
	}
	return errors.Join(errs...)
}
