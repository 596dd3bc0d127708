package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/syncjobs/scheduler"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/retry"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/limits"
	"github.com/commitcollect/backend/model/store/metering"
	"github.com/commitcollect/backend/model/store/tableadmin"
	"github.com/commitcollect/backend/model/streams"
	"github.com/commitcollect/backend/model/syncstate"
	"github.com/commitcollect/backend/projections/consumer"
	"github.com/commitcollect/backend/scripts/stravasim"
	"github.com/commitcollect/backend/test/dynamolocal"
)

// backfillRun is what one benchmarked backfill did.
type backfillRun struct {
	activities, stravaRequests, listRequests int
	syncRequests, projRequests               int
	syncRCU, syncWCU, projRCU, projWCU       float64
	batches, workoutRecords, recomputes      int
	conflicts                                int
	elapsed, synced                          time.Duration
}

// backfillBenchSize is the history the benchmark imports: 400 activities (a
// year of an athlete who trains most days), or CC_BENCH_BACKFILL (up to
// model.MaxWorkoutsToInspect, the projector's guardrail).
func backfillBenchSize(b *testing.B) int {
	n := 400
	if v := os.Getenv("CC_BENCH_BACKFILL"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > model.MaxWorkoutsToInspect {
			b.Fatalf("CC_BENCH_BACKFILL=%q: want 1..%d", v, model.MaxWorkoutsToInspect)
		}
	}
	return n
}

// BenchmarkBackfill imports a new athlete's history of N activities (400;
// CC_BENCH_BACKFILL) from the Strava simulator, one op per backfill: the
// connect's backfill job through the worker and the Syncer (pages of 200,
// diff against the stored log, ordered upserts, one guard check per page,
// cursor in the sync state, outbox settles) while a stream reader like
// Lambda's event source mapping (batches of up to 100, a batching window of
// 1 s) hands the records to the projector, until the milestone has counted
// all N. It reports activities imported per second, Strava requests per 1000
// activities, DynamoDB capacity units per imported activity for the sync path
// and for the projector (read and write), DynamoDB requests and RCU per
// imported activity against the floor (backfillMax…), and the projector's
// recomputes per stream batch: a page's workouts are projected once, at the
// page's end, so that is well under 1.
func BenchmarkBackfill(b *testing.B) {
	n := backfillBenchSize(b)
	var sum backfillRun
	for b.Loop() {
		b.StopTimer()
		r := runBackfill(b, n)
		sum.activities += r.activities
		sum.stravaRequests += r.stravaRequests
		sum.listRequests += r.listRequests
		sum.syncRequests += r.syncRequests
		sum.projRequests += r.projRequests
		sum.syncRCU += r.syncRCU
		sum.syncWCU += r.syncWCU
		sum.projRCU += r.projRCU
		sum.projWCU += r.projWCU
		sum.batches += r.batches
		sum.workoutRecords += r.workoutRecords
		sum.recomputes += r.recomputes
		sum.conflicts += r.conflicts
		sum.elapsed += r.elapsed
		sum.synced += r.synced
		b.StartTimer() // b.Loop wants it running
	}
	acts := float64(sum.activities)
	b.ReportMetric(acts/sum.elapsed.Seconds(), "activities/s")
	b.ReportMetric(float64(sum.stravaRequests)*1000/acts, "strava-req/1000act")
	b.ReportMetric(sum.syncRCU/acts, "sync-RCU/act")
	b.ReportMetric(sum.syncWCU/acts, "sync-WCU/act")
	b.ReportMetric(sum.projRCU/acts, "proj-RCU/act")
	b.ReportMetric(sum.projWCU/acts, "proj-WCU/act")
	b.ReportMetric(float64(sum.recomputes)/float64(sum.batches), "recomputes/batch")
	reqPerAct := float64(sum.syncRequests+sum.projRequests) / acts
	rcuPerAct := (sum.syncRCU + sum.projRCU) / acts
	b.ReportMetric(reqPerAct, "ddb-req/act")
	b.ReportMetric(rcuPerAct, "RCU/act")
	b.Logf("backfill targets: DynamoDB requests per imported activity %.3f (sync %d + projector %d) ≤ %.1f: %s; "+
		"RCU per imported activity %.3f ≤ %.1f: %s",
		reqPerAct, sum.syncRequests, sum.projRequests, backfillMaxRequestsPerActivity,
		verdict(reqPerAct, backfillMaxRequestsPerActivity), rcuPerAct, backfillMaxRCUPerActivity, verdict(rcuPerAct, backfillMaxRCUPerActivity))
	b.Logf("backfill of %d activities in %s (written in %s, projected after): %d strava requests (%d list pages); sync path %.0f RCU %.0f WCU, projector %.0f RCU %.0f WCU; "+
		"%d stream batches carried %d workout records and cost %d recomputes (%.0f RCU each, %d re-read after a conflict)",
		sum.activities, sum.elapsed.Round(time.Millisecond), sum.synced.Round(time.Millisecond), sum.stravaRequests, sum.listRequests, sum.syncRCU, sum.syncWCU,
		sum.projRCU, sum.projWCU, sum.batches, sum.workoutRecords, sum.recomputes, sum.projRCU/float64(max(sum.recomputes, 1)), sum.conflicts)
}

// The cost floor of an import, per imported activity: one write each, the
// rest (list pages' sync state, sync reads, the outbox, one guard read and
// one projection per page) spread over a page of 200.
const (
	backfillMaxRequestsPerActivity = 1.2
	backfillMaxRCUPerActivity      = 0.3
)

// verdict says whether got is at most limit ("met" or "MISSED").
func verdict(got, limit float64) string {
	if got <= limit {
		return "met"
	}
	return "MISSED"
}

// runBackfill sets up a fresh table set, simulator and athlete with n
// activities over the last year and a milestone covering the year, then
// times the backfill and its projection (the timer runs only meanwhile).
func runBackfill(b *testing.B, n int) backfillRun {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	sim := stravasim.New(stravasim.Options{})
	defer sim.Close()
	cfg := dynamolocal.Config(dynamolocal.Endpoint(b))
	// Capacity comes from the product's meter (metering.WithMeter): what the
	// sync path's calls cost, and what the projector's batches cost.
	syncMeter, projMeter := metering.NewMeter(), metering.NewMeter()
	plain := dynamodb.NewFromConfig(cfg)
	tables := dynamolocal.MustCreateTables(b, plain)
	st := store.New(plain, tables)
	st.DB.Secrets = dynamolocal.NewSealer(b)
	proj := store.New(plain, tables)
	arn, err := tableadmin.StreamARN(ctx, plain, tables)
	if err != nil {
		b.Fatal(err)
	}

	const user, athlete = "bf-user", int64(4242)
	now := time.Now().UTC()
	start := now.AddDate(0, 0, -364).Truncate(24 * time.Hour)
	sim.AddAthlete(stravasim.Athlete{ID: athlete, Firstname: "B"})
	tok := sim.IssueTokens(athlete, 24*time.Hour)
	every := now.Sub(start) / time.Duration(n+1)
	total := 0.0
	for i := range n {
		d := float64(3000 + i%5000)
		total += d
		sim.PutActivity(stravasim.Activity{ID: int64(10_000 + i), AthleteID: athlete, Name: "Run", SportType: "Run", Distance: d,
			TotalElevationGain: 12, MovingTime: 1500, ElapsedTime: 1600, StartDate: now.Add(-time.Duration(i+1) * every).Truncate(time.Second)})
	}
	for _, e := range []model.Entity{
		&model.StravaConnection{UserID: user, AthleteID: athlete, AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken,
			ExpiresAtUtc: tok.ExpiresAt, Scopes: tok.Scope, TokenVersion: 1, UpdatedAtUtc: now},
		&model.AthleteOwner{AthleteID: athlete, UserID: user, CreatedAtUtc: now},
		&model.ModelMeta{ModelID: "rocket", Name: "Rocket", PartCount: 10, CatalogVersion: 1},
		// Twice the history's distance: the milestone stays active and
		// earns half its parts, so recomputes write and mint.
		&model.Milestone{UserID: user, MilestoneID: "year", MilestoneDefinition: model.MilestoneDefinition{ModelID: "rocket",
			Title: "A year of running", Metric: model.MetricDistance, Target: 2 * total, SportTypes: []string{"Run"},
			PeriodStartAtUtc: start, PartCount: 10}, Projection: model.Projection{Status: model.StatusActive}, CreatedAtUtc: now,
			WrittenBy: model.WriterAPI},
	} {
		if err := st.DB.Put(ctx, tables.Main, e); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 10 {
		if err := st.DB.Put(ctx, tables.Main, &model.ModelPart{ModelID: "rocket", PartIndex: i, Name: fmt.Sprintf("part-%d", i)}); err != nil {
			b.Fatal(err)
		}
	}

	// The projector, past the setup's records.
	_, streamsAPI := dynamolocal.Clients(b)
	reader := streams.NewReader(streamsAPI, arn, streams.Options{BatchSize: 100, PollInterval: 200 * time.Millisecond, Logger: log})
	if err := reader.Drain(ctx, func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		return events.DynamoDBEventResponse{}, nil
	}); err != nil {
		b.Fatal(err)
	}
	c := consumer.New(app.ProjectorStores(proj), consumer.Options{Metrics: io.Discard, Logger: log})
	var (
		mu                      sync.Mutex
		batches, workoutRecords int
	)
	// The event source mapping's batching window (terraform's
	// projector.batching_window_s, 1 s): the next batch is read no sooner
	// than a window after this one was, so records gather meanwhile.
	const window = time.Second
	handle := func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		read := time.Now()
		defer func() { _ = retry.Sleep(ctx, window-time.Since(read)) }()
		resp, err := c.Handle(metering.WithMeter(ctx, projMeter), ev)
		mu.Lock()
		defer mu.Unlock()
		batches++
		for _, rec := range ev.Records {
			if strings.HasPrefix(rec.Change.Keys["SK"].String(), keys.PrefixWorkoutStrava) {
				workoutRecords++
			}
		}
		return resp, err
	}

	w := app.NewStravaWorker(st, app.StravaSettings{BaseURL: sim.URL, ClientID: sim.ClientID(), ClientSecret: sim.ClientSecret()}, log)
	sched := scheduler.New(app.SchedulerStores(st), nil, log)
	setup := ctx // the checks after the run are not metered
	ctx = metering.WithMeter(ctx, syncMeter)
	runCtx, stop := context.WithCancel(ctx)
	readerDone := make(chan error, 1)

	b.StartTimer()
	began := time.Now()
	go func() { readerDone <- reader.Run(runCtx, handle) }()
	if ok, err := sched.EnsureBackfill(ctx, user, "connect"); err != nil || !ok {
		b.Fatalf("EnsureBackfill: got %v, %v", ok, err)
	}
	horizon, err := sched.Horizon(ctx, user, now)
	if err != nil {
		b.Fatal(err)
	}
	key := keys.SyncJobKey(syncstate.SyncModeBackfill, user, horizon)
	for runs := 0; ; runs++ {
		rec, err := st.Outbox.OutboxItem(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		if rec.Status != ops.OutboxReceived {
			break
		}
		if runs > n/100+10 {
			b.Fatalf("backfill not settled after %d runs", runs)
		}
		j, err := ingest.DecodeJob([]byte(rec.Job))
		if err != nil {
			b.Fatal(err)
		}
		if err := w.Run(ctx, j); err != nil {
			b.Fatal(err)
		}
	}
	synced := time.Since(began)
	// Projected: the milestone counts every imported workout (read through
	// the unmetered client).
	var m model.Milestone
	for deadline := time.Now().Add(2 * time.Minute); ; {
		if err := st.DB.Get(setup, tables.Main, keys.MilestoneKey(user, "year"), &m); err != nil {
			b.Fatal(err)
		}
		if m.WorkoutsCounted == n {
			break
		}
		if time.Now().After(deadline) {
			mu.Lock()
			defer mu.Unlock()
			b.Fatalf("the milestone counts %d of %d workouts (the projector saw %d workout records)", m.WorkoutsCounted, n, workoutRecords)
		}
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(began)
	b.StopTimer()
	stop()
	if err := <-readerDone; err != nil && !errors.Is(err, context.Canceled) {
		b.Fatal(err)
	}

	// Every activity was imported once and counted by the milestone.
	ss, err := limits.New(st).SyncState(setup, user)
	if err != nil || ss.State != syncstate.SyncIdle || ss.ImportedCount != n {
		b.Fatalf("sync state: got %+v, %v; want idle with %d imported", ss, err, n)
	}
	stats := sim.Stats()
	syncU, projU := syncMeter.Snapshot(), projMeter.Snapshot()
	syncRCU, syncWCU, projRCU, projWCU := syncU.RCU, syncU.WCU, projU.RCU, projU.WCU
	if syncWCU == 0 || projRCU == 0 {
		b.Fatalf("no consumed capacity reported (sync %v WCU, projector %v RCU)", syncWCU, projRCU)
	}
	cs := c.Stats()
	return backfillRun{activities: n, listRequests: int(stats.ListRequests),
		stravaRequests: int(stats.ListRequests + stats.ActivityRequests + stats.TokenRefreshes),
		syncRequests:   syncU.Requests, projRequests: projU.Requests,
		syncRCU: syncRCU, syncWCU: syncWCU, projRCU: projRCU, projWCU: projWCU,
		batches: batches, workoutRecords: workoutRecords, recomputes: int(cs.UsersProjected), conflicts: int(cs.ConflictsRetried), elapsed: elapsed, synced: synced}
}
