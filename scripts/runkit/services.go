package runkit

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/handlers/config"
	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/handoff"
	"github.com/commitcollect/backend/handlers/ingest/intake"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/retry"
	"github.com/commitcollect/backend/model/store/metering"
	"github.com/commitcollect/backend/model/store/tableadmin"
	"github.com/commitcollect/backend/model/streams"
)

// startWorker starts the worker behind the Dispatcher the api's webhook
// uses, the sweeper and the reconciliation's schedule.
func (s *Stack) startWorker(o Options) {
	cfg, log := s.Config, s.log
	worker := app.WorkerOf(cfg, s.Store, o.WorkerMetrics, log.With("service", "worker"))
	run := func(ctx context.Context, job ingest.Job) error {
		return worker.Run(metering.WithMeter(ctx, s.Capacity.Worker), job)
	}
	s.Queue = handoff.NewQueue(run, handoff.QueueOptions{OnFailure: s.parkJob, Capacity: cmp.Or(max(o.QueueCapacity, 0), DefaultQueueCapacity), Workers: DefaultQueueWorkers},
		log.With("service", "worker"))
	// The sweeper: at start it dispatches what a killed predecessor left
	// received (accepted but never settled), then every SweepInterval.
	s.Sweeper = app.SweeperOf(cfg, s.Store, s.Queue, log.With("service", "sweeper"))
	sweepCtx, sweepCancel := context.WithCancel(metering.WithMeter(context.Background(), s.Capacity.Sweeper))
	s.sweepCancel, s.sweepDone = sweepCancel, make(chan struct{})
	s.Scheduler = app.SchedulerOf(cfg, s.Store, s.Queue, log.With("service", "reconciler"))
	go func() {
		defer close(s.sweepDone)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.reconcileEvery(sweepCtx, ReconcileTick(s.Scheduler.Settings.WithDefaults().ReconcileInterval))
		}()
		s.Sweeper.Run(sweepCtx, cmp.Or(o.SweepInterval, DefaultSweepInterval))
		wg.Wait()
	}()
}

// serveAPI serves the api's handler and subscribes its webhook at the
// simulator.
func (s *Stack) serveAPI(ctx context.Context, o Options) error {
	apiLog := s.log.With("service", "api")
	mux, err := app.NewAPI(s.Config, s.Store, s.Queue, nil, apiLog)
	if err != nil {
		return err
	}
	s.WebhookURL = s.APIURL + intake.CallbackPath(first(s.Config.WebhookPathSecrets))
	var handler http.Handler = mux
	if o.WrapAPI != nil {
		handler = o.WrapAPI(mux)
	}
	s.server = &http.Server{Handler: app.Metered(handler, apiLog), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return metering.WithMeter(context.Background(), s.Capacity.API) }}
	go func() {
		if err := s.server.Serve(s.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("api server stopped", "error", err)
		}
	}()
	if s.Sim != nil {
		if _, _, ok := s.Sim.Subscription(); !ok {
			if _, err := s.Sim.Subscribe(ctx, s.WebhookURL, s.Config.StravaVerifyToken); err != nil {
				return fmt.Errorf("subscribe the webhook at the simulator: %w", err)
			}
		}
	}
	return nil
}

// startProjector starts the projector, fed by a stream reader as the event
// source mapping does.
func (s *Stack) startProjector(ctx context.Context, o Options, local config.Local, db *dynamodb.Client, streamsAPI streams.API) error {
	log := s.log
	s.Projector = app.ProjectorOf(s.Store, io.Discard, log.With("service", "projector"))
	arn, err := tableadmin.StreamARN(ctx, db, s.Config.Tables())
	if err != nil {
		return err
	}
	var cps streams.CheckpointStore = &streams.MemoryCheckpoints{}
	if local.DataDir != "" {
		cps = &streams.FileCheckpoints{Path: filepath.Join(local.DataDir, "stream-checkpoints.json")}
	}
	s.Reader = streams.NewReader(streamsAPI, arn, streams.Options{
		Start: streams.TrimHorizon, Checkpoints: cps, PollInterval: cmp.Or(o.PollInterval, 100*time.Millisecond),
		BatchingWindow: max(cmp.Or(o.BatchingWindow, DefaultBatchingWindow), 0),
		MaxAttempts:    o.MaxAttempts, OnDiscard: s.parkRecords, Logger: log.With("service", "stream-reader"),
	})
	s.handler = s.Projector.Handle
	if o.WrapProjector != nil {
		s.handler = o.WrapProjector(s.handler)
	}
	runCtx, cancel := context.WithCancel(metering.WithMeter(context.Background(), s.Capacity.Projector))
	s.cancel = cancel
	go func() {
		defer close(s.runDone)
		s.runErr = s.Reader.Run(runCtx, s.handler)
		if s.runErr != nil && !errors.Is(s.runErr, context.Canceled) {
			log.Error("stream reader stopped", "error", s.runErr)
		}
	}()
	return nil
}

// ReconcileTick is how often the local stack runs a reconciliation step
// for a CC_RECONCILE_INTERVAL of interval: as Terraform's schedule does
// for the default week (every minute), scaled down for shorter intervals
// (at least every second).
func ReconcileTick(interval time.Duration) time.Duration {
	return min(time.Minute, max(time.Second, interval/(7*24*60)))
}

// reconcileEvery runs a reconciliation step every tick (the local
// stand-in for the Terraform schedule) until ctx ends.
func (s *Stack) reconcileEvery(ctx context.Context, tick time.Duration) {
	for retry.Sleep(ctx, tick) == nil {
		res, err := s.Scheduler.ReconcileStep(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "reconciliation step failed", "error", err)
		}
		if res.Users > 0 {
			s.log.InfoContext(ctx, "reconciliation step", res.LogArgs()...)
		}
	}
}

// parkJob is the local queue's on-failure destination (the worker Lambda's
// DLQ in AWS): the worker could not even record the job's outcome. The job
// is kept for redrive; its outbox item also stays received, so the sweeper
// tries it again.
func (s *Stack) parkJob(ctx context.Context, job ingest.Job, cause error) {
	job.Redrive = true
	payload, err := json.Marshal(job)
	if err != nil {
		s.log.ErrorContext(ctx, "worker job not parked (cannot encode it); it stays received in the outbox",
			"correlationId", job.CorrelationID, "error", err)
		return
	}
	r := &ops.ParkedRecord{Source: keys.ParkSourceWorker, RecordID: job.IdempotencyKey, Reason: cause.Error(),
		Payload: string(payload), CorrelationID: job.CorrelationID, AthleteID: job.Event.OwnerID}
	if job.Sync != nil {
		r.UserID, r.AthleteID = job.Sync.UserID, job.Sync.AthleteID
	} else if u, err := s.Store.Users.ResolveAthlete(ctx, job.Event.OwnerID); err == nil {
		r.UserID = u // an account deletion finds the record by user
	}
	if r.RecordID == "" {
		r.RecordID = job.CorrelationID
	}
	if job.IdempotencyKey != "" {
		// Marked first: the sweeper may finish the job later, and must then
		// remove this record (runner.unparkDone).
		if err := s.Store.Outbox.MarkOutboxParked(ctx, job.IdempotencyKey); err != nil && !errors.Is(err, model.ErrNotFound) {
			s.log.ErrorContext(ctx, "worker job not parked (cannot mark its outbox item); it stays received in the outbox",
				"correlationId", job.CorrelationID, "error", err)
			return
		}
	}
	if err := s.Store.Parked.Park(ctx, r); err != nil {
		s.log.ErrorContext(ctx, "park worker job failed; it stays received in the outbox for the sweeper",
			"correlationId", job.CorrelationID, "idempotencyKey", job.IdempotencyKey, "error", err)
		return
	}
	s.log.WarnContext(ctx, "worker job parked for redrive", "correlationId", job.CorrelationID, "reason", cause.Error())
}

// parkRecords is the stream reader's on-failure destination.
func (s *Stack) parkRecords(ctx context.Context, recs []events.DynamoDBEventRecord, cause error) {
	if err := s.Projector.Discard(ctx, recs, cause); err != nil {
		seqs := make([]string, len(recs))
		for i, r := range recs {
			seqs[i] = r.Change.SequenceNumber
		}
		s.log.ErrorContext(ctx, "stream records could not be parked", "sequenceNumbers", strings.Join(seqs, ","), "error", err)
		return
	}
	s.log.WarnContext(ctx, "stream records parked for redrive", "count", len(recs), "cause", cause.Error())
}

// first is the first of secrets, the current path secret ("" without one).
func first(secrets []string) string {
	if len(secrets) == 0 {
		return ""
	}
	return secrets[0]
}
