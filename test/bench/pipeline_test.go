package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/handlers/config"
	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/calendar"
	"github.com/commitcollect/backend/model/catalog"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/rules"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/metering"
	"github.com/commitcollect/backend/model/streak"
	"github.com/commitcollect/backend/model/streams"
	"github.com/commitcollect/backend/scripts/runkit"
	"github.com/commitcollect/backend/scripts/stravasim"
	"github.com/commitcollect/backend/test/awsrecord"
	"github.com/commitcollect/backend/test/dynamolocal"
	"github.com/commitcollect/backend/test/fixture"
)

func TestMain(m *testing.M) { dynamolocal.Main(m) }

// settings are the bench's knobs (environment variables, see the package
// doc).
type settings struct {
	users, events, senders, baselineWorkers, baselineItems, growthEvents int
	history                                                              []int
	timeout                                                              time.Duration
}

func settingsFromEnv(tb testing.TB) settings {
	tb.Helper()
	num := func(name string, def int) int {
		v := os.Getenv(name)
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			tb.Fatalf("%s=%q: want a positive integer", name, v)
		}
		return n
	}
	s := settings{
		users: num("CC_BENCH_USERS", 100), events: num("CC_BENCH_EVENTS", 3), senders: num("CC_BENCH_SENDERS", 8),
		baselineWorkers: 8, baselineItems: num("CC_BENCH_BASELINE_ITEMS", 3000), growthEvents: num("CC_BENCH_GROWTH_EVENTS", ingest.CreatesBeforeGather-1),
		timeout: time.Duration(num("CC_BENCH_TIMEOUT_S", 180)) * time.Second,
	}
	hs := os.Getenv("CC_BENCH_HISTORY")
	if hs == "" {
		hs = "10,100,1000,2900"
	}
	for _, f := range strings.Split(hs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			tb.Fatalf("CC_BENCH_HISTORY=%q: want comma-separated counts", hs)
		}
		s.history = append(s.history, n)
	}
	return s
}

// BenchmarkPipeline is the end-to-end bench (see the package doc): the raw
// PutItem baseline, U users × E events through the local stack's API, then
// the growth table. It runs once whatever b.N is, prints its tables and
// reports the headline figures as custom metrics for make bench's summary.
// It fails only when work was not done (an event never projected, a
// milestone counting the wrong number of workouts).
func BenchmarkPipeline(b *testing.B) {
	s := settingsFromEnv(b)
	p := startPipeline(b)
	ctx := context.Background()

	var r result
	r.settings = s
	r.baseline = p.baseline(b, s.baselineWorkers, s.baselineItems)
	r.run = p.throughput(ctx, b, s)
	for i, h := range s.history {
		for _, kind := range []string{monthly, withRules, lifetime, weekly, streakKind, longLife} {
			if kind == longLife && i < len(s.history)-1 {
				continue // once, at the largest history
			}
			r.growth = append(r.growth, p.growthRow(ctx, b, h, kind, s.growthEvents))
		}
	}
	r.workoutSize = p.workoutSize
	r.print(os.Stdout)

	tot := r.run.ingest.Add(r.run.project)
	b.ReportMetric(r.run.eventsPerSec, "events/s")
	b.ReportMetric(100*r.run.eventsPerSec/r.baseline.perSec, "%PutItem")
	b.ReportMetric(float64(r.run.refused), "refused")
	b.ReportMetric(float64(Percentile(r.run.lags, 0.5).Milliseconds()), "p50-ms")
	b.ReportMetric(float64(Percentile(r.run.lags, 0.99).Milliseconds()), "p99-ms")
	b.ReportMetric(tot.Requests, "req/event")
	b.ReportMetric(tot.RCU, "RCU/event")
	b.ReportMetric(tot.WCU, "WCU/event")
}

const (
	monthly  = "monthly"
	lifetime = "lifetime"
	// withRules is the monthly milestone with rules (benchRules): a tenth
	// of its history is manual entries, which do not count.
	withRules = "rules"
	// weekly is a weekly series begun seriesWeeks weeks before this one:
	// an event touches only its own week's period.
	weekly      = "weekly"
	seriesWeeks = 260
	// longLife is a weekly series begun longWeeks weeks before this one,
	// of a user whose collection holds longAwards awards: a user of twenty
	// years, whose events cost what a weekly series' do.
	longLife   = "long-life"
	longWeeks  = 1039
	longAwards = 50_000
	// streakKind is a day streak begun streakDays days before today: at
	// one workout a day, a streak that long, whose events re-read their
	// own day.
	streakKind = "streak"
	streakDays = 1000
	// monthDays is the monthly milestone's period: the 30 days up to now
	// (and one day ahead, so fresh activities count).
	monthDays = 30
	// runGoalMetres is each U×E user's monthly goal (100 km: with the
	// catalog's 10 parts, a part every 10 km) and runEventMetres each of its
	// runs.
	runGoalMetres  = 100_000
	runEventMetres = 5000
	// benchSubscription is the simulator's push subscription.
	benchSubscription = 1
)

// pipeline is the local stack (scripts/runkit, what make run runs) on
// the test's DynamoDB Local, with a Strava simulator whose rate limits do
// not bind (the bench measures the pipeline, not Strava's budget), and a
// tracker that sees each workout's stream record leave the projector.
type pipeline struct {
	st          *runkit.Stack
	sim         *stravasim.Server
	db          *dynamodb.Client
	http        *http.Client
	tr          *tracker
	modelID     string
	partCount   int
	workoutSize int
	nextID      atomic.Int64
	// calls counts every call the stack's AWS clients make (the stream
	// reader's and retries included), not only the store's metered ones.
	calls awsrecord.Tally
}

func startPipeline(b *testing.B) *pipeline {
	b.Helper()
	p := &pipeline{tr: newTracker(), http: &http.Client{Timeout: 30 * time.Second}}
	p.nextID.Store(time.Now().Unix() * 1000)
	big := 1 << 30
	sim, err := stravasim.Start("127.0.0.1:0", stravasim.Options{SubscriptionID: benchSubscription,
		Limits: stravasim.Limits{Short: big, Daily: big, ReadShort: big, ReadDaily: big}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(sim.Close)
	p.sim = sim
	env := map[string]string{
		"CC_HTTP_ADDR": "127.0.0.1:0", "DYNAMODB_ENDPOINT": dynamolocal.Endpoint(b), "CC_TABLE_PREFIX": dynamolocal.UniquePrefix(),
		"STRAVA_BASE_URL": sim.URL, "STRAVA_CLIENT_ID": sim.ClientID(), "STRAVA_CLIENT_SECRET": sim.ClientSecret(),
		"STRAVA_SUBSCRIPTION_ID": strconv.Itoa(benchSubscription), "STRAVA_VERIFY_TOKEN": "bench",
		// No per-athlete read cap: one bench athlete sends E events at once.
		"CC_ATHLETE_READS_PER_WINDOW": "0",
	}
	// Every AWS client the stack builds goes through config.AWS.
	config.Instrument = func(cfg *aws.Config) error { p.calls.Count(cfg); return nil }
	st, err := runkit.Start(context.Background(), runkit.Options{
		Getenv:        func(k string) string { return env[k] },
		Log:           slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
		WrapProjector: p.observe,
	})
	config.Instrument = nil
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st.Close(ctx)
	})
	p.st = st
	p.db, _ = dynamolocal.Clients(b)

	cat, err := catalog.Default()
	if err != nil {
		b.Fatal(err)
	}
	p.modelID, p.partCount = cat.Models[0].ModelID, cat.Models[0].PartCount

	// The size of one workout as LSI1 holds it (keys + WorkoutLogFields):
	// what a projection reads per workout.
	item, err := dynamo.Marshal(fixture.Workout("u", 1, fixture.Start(time.Now()), fixture.Metres(5000), fixture.Stored(time.Now()), fixture.Corr("bench-history")))
	if err != nil {
		b.Fatal(err)
	}
	keep := map[string]bool{"PK": true, "SK": true, dynamo.AttrLSI1SK: true}
	for _, f := range store.WorkoutLogFields {
		keep[f] = true
	}
	for k := range item {
		if !keep[k] {
			delete(item, k)
		}
	}
	p.workoutSize = ItemSize(item)
	return p
}

// observe wraps the projector's handler: when a batch returns, the workouts
// among its records before the first reported failure are projected (their
// users' milestones were recomputed from a log that holds them).
func (p *pipeline) observe(h streams.Handler) streams.Handler {
	return func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		began := time.Now()
		resp, err := h(ctx, ev)
		if err != nil {
			return resp, err
		}
		now := time.Now()
		took := now.Sub(began)
		ok := len(ev.Records)
		if len(resp.BatchItemFailures) > 0 {
			for i, r := range ev.Records {
				if r.Change.SequenceNumber == resp.BatchItemFailures[0].ItemIdentifier {
					ok = i
					break
				}
			}
		}
		for _, r := range ev.Records[:ok] {
			pk, sk := r.Change.Keys["PK"], r.Change.Keys["SK"]
			if pk.DataType() != events.DataTypeString || sk.DataType() != events.DataTypeString {
				continue
			}
			k, err := keys.ParseKey(model.Key{PK: pk.String(), SK: sk.String()})
			switch {
			case err != nil:
			case k.Kind == keys.KindWorkout:
				p.tr.projected(k.ActivityID, now, took)
			case k.Kind == keys.KindMilestone && r.EventName == "INSERT":
				p.tr.milestoneProjected(k.UserID, k.MilestoneID)
			}
		}
		return resp, err
	}
}

// tracker pairs each event's webhook send with the batch that projected its
// workout.
type tracker struct {
	mu         sync.Mutex
	sent       map[int64]time.Time
	done       map[int64]time.Time
	batch      map[int64]time.Duration // how long the projecting batch ran
	milestones map[[2]string]bool
}

func newTracker() *tracker {
	return &tracker{sent: map[int64]time.Time{}, done: map[int64]time.Time{}, batch: map[int64]time.Duration{},
		milestones: map[[2]string]bool{}}
}

func (t *tracker) milestoneProjected(userID, milestoneID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.milestones[[2]string{userID, milestoneID}] = true
}

func (t *tracker) milestoneDone(userID, milestoneID string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.milestones[[2]string{userID, milestoneID}]
}

func (t *tracker) expect(id int64, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sent[id] = at
}

func (t *tracker) projected(id int64, at time.Time, took time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.sent[id]; ok {
		if _, seen := t.done[id]; !seen {
			t.done[id], t.batch[id] = at, took
		}
	}
}

// batches returns how long the batch that projected each id ran.
func (t *tracker) batches(ids []int64) []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]time.Duration, 0, len(ids))
	for _, id := range ids {
		out = append(out, t.batch[id])
	}
	return out
}

// wait blocks until every id is projected; it returns those that were not
// when the timeout ends.
func (t *tracker) wait(ids []int64, timeout time.Duration) []int64 {
	deadline := time.Now().Add(timeout)
	for {
		t.mu.Lock()
		var missing []int64
		for _, id := range ids {
			if _, ok := t.done[id]; !ok {
				missing = append(missing, id)
			}
		}
		t.mu.Unlock()
		if len(missing) == 0 || time.Now().After(deadline) {
			return missing
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lags returns each id's webhook → projected time and the last projection.
func (t *tracker) lags(ids []int64) (lags []time.Duration, last time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		d := t.done[id]
		lags = append(lags, d.Sub(t.sent[id]))
		if d.After(last) {
			last = d
		}
	}
	return lags, last
}

type baselineResult struct {
	workers, items int
	elapsed        time.Duration
	perSec         float64
}

// baseline measures raw PutItem on the same DynamoDB Local: workers
// goroutines writing workout-sized items into a plain table (no index, no
// stream), as fast as they can.
func (p *pipeline) baseline(b *testing.B, workers, items int) baselineResult {
	b.Helper()
	ctx := context.Background()
	table := dynamolocal.UniquePrefix() + "PutItemBaseline"
	_, err := p.db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(table), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("PK"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("SK"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("PK"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("SK"), KeyType: types.KeyTypeRange},
		},
	})
	if err != nil {
		b.Fatalf("create baseline table: %v", err)
	}
	defer func() { _, _ = p.db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)}) }()
	tmpl, err := dynamo.Marshal(fixture.Workout("u", 1, fixture.Start(time.Now()), fixture.Metres(5000), fixture.Stored(time.Now()), fixture.Corr("bench-history")))
	if err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(items) {
					return
				}
				item := make(map[string]types.AttributeValue, len(tmpl))
				for k, v := range tmpl {
					item[k] = v
				}
				item["PK"] = &types.AttributeValueMemberS{Value: keys.UserPK(fmt.Sprintf("b%d", i%50))}
				item["SK"] = &types.AttributeValueMemberS{Value: keys.WorkoutKey("b", i).SK}
				if _, err := p.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		b.Fatalf("baseline PutItem: %v", err)
	}
	return baselineResult{workers: workers, items: items, elapsed: elapsed, perSec: float64(items) / elapsed.Seconds()}
}

// meters is the stack's three meters at one instant.
type meters struct{ api, worker, projector metering.Snapshot }

func (p *pipeline) capacity() meters {
	return meters{p.st.Capacity.API.Snapshot(), p.st.Capacity.Worker.Snapshot(), p.st.Capacity.Projector.Snapshot()}
}

// ingest and project return what ingestion (api + worker) and projection
// cost between two instants.
func (c meters) ingest(before meters) metering.Snapshot {
	return MinusSnapshot(c.api, before.api).Add(MinusSnapshot(c.worker, before.worker))
}

func (c meters) project(before meters) metering.Snapshot {
	return MinusSnapshot(c.projector, before.projector)
}

// quiesce waits until no component has made a metered DynamoDB call for a
// moment (the worker's outbox settle and the projector's last batch land
// after the projection the tracker saw), and returns the meters then.
func (p *pipeline) quiesce(b *testing.B) meters {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.st.Queue.Wait(ctx); err != nil {
		b.Fatalf("worker queue did not drain: %v", err)
	}
	prev := p.capacity()
	for ctx.Err() == nil {
		time.Sleep(300 * time.Millisecond)
		cur := p.capacity()
		if cur.api.Units == prev.api.Units && cur.worker.Units == prev.worker.Units && cur.projector.Units == prev.projector.Units {
			return cur
		}
		prev = cur
	}
	b.Fatalf("the stack kept calling DynamoDB for 30 s after its work was done")
	return prev
}

// newUser links a new simulator athlete to a new user, as sign-in does.
func (p *pipeline) newUser(ctx context.Context, b *testing.B, userID string) int64 {
	b.Helper()
	athlete := p.nextID.Add(1)
	p.sim.AddAthlete(stravasim.Athlete{ID: athlete, Firstname: "Bench"})
	tok := p.sim.IssueTokens(athlete, 12*time.Hour)
	now := time.Now().UTC()
	err := p.st.Store.Users.CreateUser(ctx, &model.Profile{UserID: userID, AthleteID: athlete, DisplayName: userID, CreatedAtUtc: now},
		&model.StravaConnection{UserID: userID, AthleteID: athlete, AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken,
			ExpiresAtUtc: tok.ExpiresAt, Scopes: tok.Scope, TokenVersion: 1, UpdatedAtUtc: now})
	if err != nil {
		b.Fatalf("create user %s: %v", userID, err)
	}
	return athlete
}

// newMilestone creates a distance milestone (monthly: the last 30 days;
// lifetime: since 2000) and waits until the projector has handled its
// INSERT (a projection that changes nothing writes nothing, so the item
// itself cannot tell).
func (p *pipeline) newMilestone(ctx context.Context, b *testing.B, userID, kind string, target float64) {
	b.Helper()
	now := time.Now().UTC()
	def := model.MilestoneDefinition{ModelID: p.modelID, Title: "Bench " + kind, Metric: model.MetricDistance,
		Target: target, PeriodStartAtUtc: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), PartCount: p.partCount}
	switch kind {
	case monthly, withRules:
		end := now.AddDate(0, 0, 1)
		def.PeriodStartAtUtc, def.PeriodEndAtUtc = now.AddDate(0, 0, -monthDays), &end
		if kind == withRules {
			def.Rules = benchRules()
		}
	case weekly, longLife:
		weeks := map[string]int{weekly: seriesWeeks, longLife: longWeeks}[kind]
		def.PeriodStartAtUtc, def.Recurrence = time.Time{}, calendar.Weekly
		def.PeriodStartDate = calendar.FormatDate(thisWeek(now).AddDate(0, 0, -7*weeks))
	case streakKind:
		def.PeriodStartAtUtc, def.Metric, def.Streak = time.Time{}, model.MetricStreak, &streak.Rule{Unit: streak.Day}
		def.PeriodStartDate = calendar.FormatDate(now.AddDate(0, 0, -streakDays))
	}
	m := &model.Milestone{UserID: userID, MilestoneID: kind, MilestoneDefinition: def,
		Projection: model.Projection{Status: model.StatusActive}, CreatedAtUtc: now, WrittenBy: model.WriterAPI}
	if err := p.st.Store.Milestones.CreateMilestone(ctx, m); err != nil {
		b.Fatalf("create milestone of %s: %v", userID, err)
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if p.tr.milestoneDone(userID, kind) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatalf("milestone %s of %s never projected", kind, userID)
}

// thisWeek is the Monday of now's week (UTC dates: the bench's workouts
// carry no local start).
func thisWeek(now time.Time) time.Time {
	day, _ := calendar.ParseDate(calendar.FormatDate(now.UTC()))
	first, _ := calendar.PeriodAround(calendar.Weekly, day)
	return first
}

func (p *pipeline) milestone(ctx context.Context, b *testing.B, userID, id string) model.Milestone {
	b.Helper()
	var m model.Milestone
	if err := p.st.Store.DB.Get(ctx, p.st.Store.DB.Tables().Main, keys.MilestoneKey(userID, id), &m); err != nil {
		b.Fatalf("read milestone %s of %s: %v", id, userID, err)
	}
	// The series' progress is its periods': this week's, kept on its item.
	if week := calendar.FormatDate(thisWeek(time.Now())); (id == weekly || id == longLife) && (m.Current == nil || m.Current.PeriodOf != week) {
		b.Fatalf("series %s of %s keeps %+v, want the week of %s", id, userID, m.Current, week)
	}
	return m
}

// event is one activity Strava will announce.
type event struct {
	athlete, id int64
}

// send posts the activity's create event to the webhook as Strava does,
// re-sending (after 200 ms) while the answer is not 200; it returns how many
// answers refused it.
func (p *pipeline) send(ctx context.Context, ev event) (refused int, err error) {
	body, err := json.Marshal(p.sim.ActivityEvent("create", ev.id, ev.athlete, nil))
	if err != nil {
		return 0, err
	}
	for range 50 {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.st.WebhookURL, bytes.NewReader(body))
		if err != nil {
			return refused, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := p.http.Do(req)
		if err != nil {
			return refused, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return refused, nil
		}
		refused++
		time.Sleep(200 * time.Millisecond)
	}
	return refused, errors.New("webhook refused the event 50 times")
}

type runResult struct {
	users, events, senders int
	parts                  int // the goal's parts, minted at equal steps
	elapsed                time.Duration
	eventsPerSec           float64
	refused                int
	lags                   []time.Duration
	ingest, project        PerEvent
	minIngest, minProject  PerEvent
	// ingestOps and projectOps are the run's totals by operation.
	ingestOps, projectOps metering.Snapshot
	// calls is every call to DynamoDB Local per event (callsLine: by call).
	calls     float64
	callsLine string
	// waitsLine is the mean wait of one call by call.
	waitsLine string
}

// throughput sends U users × E events through the API with S concurrent
// senders and waits for every workout to be projected.
func (p *pipeline) throughput(ctx context.Context, b *testing.B, s settings) runResult {
	b.Helper()
	r := runResult{users: s.users, events: s.users * s.events, senders: s.senders, parts: p.partCount}
	users := make([]string, s.users)
	athletes := make([]int64, s.users)
	for u := range users {
		users[u] = fmt.Sprintf("bench-run-%d", u)
		athletes[u] = p.newUser(ctx, b, users[u])
		// A part is minted every 10 km of runEventMetres runs.
		p.newMilestone(ctx, b, users[u], monthly, runGoalMetres)
	}
	before := p.quiesce(b)
	callsBefore := p.calls.Snapshot()

	// Activities exist at Strava before their events are sent; interleaved
	// so every user is busy at once.
	now := time.Now().UTC()
	queue := make(chan event, r.events)
	var ids []int64
	for j := range s.events {
		for u := range users {
			id := p.nextID.Add(1)
			p.sim.PutActivity(stravasim.Activity{ID: id, AthleteID: athletes[u], Name: "Bench run", SportType: "Run",
				Distance: runEventMetres, MovingTime: 1500, ElapsedTime: 1600, StartDate: now.Add(-time.Hour - time.Duration(j)*time.Minute)})
			queue <- event{athletes[u], id}
			ids = append(ids, id)
		}
	}
	close(queue)
	var refused atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, s.senders)
	start := time.Now()
	for range s.senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ev := range queue {
				p.tr.expect(ev.id, time.Now())
				n, err := p.send(ctx, ev)
				refused.Add(int64(n))
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatalf("send: %v", err)
	}
	if missing := p.tr.wait(ids, s.timeout); len(missing) > 0 {
		b.Fatalf("%d of %d events were never projected within %v (e.g. activity %d)", len(missing), len(ids), s.timeout, missing[0])
	}
	lags, last := p.tr.lags(ids)
	r.lags, r.refused = lags, int(refused.Load())
	r.elapsed = last.Sub(start)
	r.eventsPerSec = float64(r.events) / r.elapsed.Seconds()
	after := p.quiesce(b)
	r.ingestOps, r.projectOps = after.ingest(before), after.project(before)
	r.ingest, r.project = Per(r.ingestOps.Units, r.events), Per(r.projectOps.Units, r.events)
	callsAfter := p.calls.Snapshot()
	r.calls, r.callsLine = CallsPerEvent(callsBefore, callsAfter, r.events)
	r.waitsLine = MeanWaits(callsBefore, callsAfter)

	// The work was done: every user's milestone counts each of its events.
	for _, u := range users {
		if m := p.milestone(ctx, b, u, monthly); m.WorkoutsCounted != s.events {
			b.Fatalf("milestone of %s counts %d workouts, want %d", u, m.WorkoutsCounted, s.events)
		}
	}
	// Design minimum: the k-th event of a user reads a log of k workouts.
	for k := 1; k <= s.events; k++ {
		in, pr := DesignMinimum(k, p.workoutSize)
		r.minIngest = r.minIngest.Add(Per(in, s.events))
		r.minProject = r.minProject.Add(Per(pr, s.events))
	}
	return r
}

type growthRow struct {
	history         int
	kind            string
	events          int
	read            int // workouts the design reads at the last event
	counted         int // workouts in the milestone's period at the last event
	ingest, project PerEvent
	minIngest       PerEvent
	minProject      PerEvent
	lags            []time.Duration
	batches         []time.Duration // the projector batch's run time, per event
	// ingestOps and projectOps are the row's totals by operation.
	ingestOps, projectOps metering.Snapshot
}

// growthRow gives a new user h workouts (one a day, backwards from
// yesterday), then one milestone of kind, then sends n events one at a
// time, each waited for, and reports their cost and lag.
func (p *pipeline) growthRow(ctx context.Context, b *testing.B, h int, kind string, n int) growthRow {
	b.Helper()
	row := growthRow{history: h, kind: kind, events: n}
	userID := fmt.Sprintf("bench-h%d-%s", h, kind)
	athlete := p.newUser(ctx, b, userID)
	now := time.Now().UTC()
	es := make([]model.Entity, h)
	inMonth, inWeek, inUTCWeek, manualInMonth := 0, 0, 0, 0
	streakFrom := calendar.FormatDate(now.AddDate(0, 0, -streakDays))
	activeDays := map[string]bool{} // the streak's, UTC dates (no local starts here)
	gap := 0                        // a streak's history leaves the last n+1 days for its events: each heals a day, and writes
	if kind == streakKind {
		gap = n + 1
	}
	for i := range es {
		start := now.Add(-time.Duration(i+1+gap)*24*time.Hour - 2*time.Hour)
		if d := calendar.FormatDate(start); d >= streakFrom {
			activeDays[d] = true
		}
		if start.After(now.AddDate(0, 0, -monthDays)) {
			inMonth++
			if calendar.WeekOf(start) == calendar.WeekOf(now) {
				inUTCWeek++ // the week a monthly event re-reads; its sums hold the others
			}
		}
		if !start.Before(thisWeek(now)) {
			inWeek++
		}
		w := fixture.Workout(userID, p.nextID.Add(1), fixture.Start(start), fixture.Metres(1000), fixture.Stored(time.Now()), fixture.Corr("bench-history"))
		if kind == withRules { // Strava's marks known, a tenth of them manual entries
			w.Flags = &rules.Flags{Manual: i%10 == 0}
			if w.Flags.Manual && start.After(now.AddDate(0, 0, -monthDays)) {
				manualInMonth++
			}
		}
		es[i] = w
	}
	if err := p.st.Store.DB.BatchPut(ctx, p.st.Store.DB.Tables().Main, es); err != nil {
		b.Fatalf("write %d workouts of %s: %v", h, userID, err)
	}
	if kind == longLife {
		items, err := fixture.Collection(userID, longAwards)
		if err == nil {
			err = p.st.Store.DB.BatchPutItems(ctx, p.st.Store.DB.Tables().Main, items)
		}
		if err != nil {
			b.Fatalf("file %d awards of %s: %v", longAwards, userID, err)
		}
	}
	// A target no history reaches: the measured events mint no award.
	p.newMilestone(ctx, b, userID, kind, model.MaxTarget)
	// One event first, not measured: the worker has then seen the athlete
	// (mapping, token, rate state cached), as for every event but an
	// athlete's first; the rows are the steady cost per event.
	var eventStarts []time.Time
	sendOne := func(g int) {
		id := p.nextID.Add(1)
		start := time.Now().UTC().Add(-time.Hour - time.Duration(g)*time.Minute)
		if kind == streakKind { // a late upload of day g+1 before today
			start = now.Add(-time.Duration(g+1)*24*time.Hour - time.Hour)
		}
		eventStarts, activeDays[calendar.FormatDate(start)] = append(eventStarts, start), true
		p.sim.PutActivity(stravasim.Activity{ID: id, AthleteID: athlete, Name: "Bench run", SportType: "Run",
			Distance: 1000, MovingTime: 300, ElapsedTime: 320, StartDate: start})
		p.tr.expect(id, time.Now())
		if refused, err := p.send(ctx, event{athlete, id}); err != nil || refused > 0 {
			b.Fatalf("growth H=%d %s: webhook: %d refused, %v", h, kind, refused, err)
		}
		if missing := p.tr.wait([]int64{id}, time.Minute); len(missing) > 0 {
			b.Fatalf("growth H=%d %s: event never projected", h, kind)
		}
	}
	sendOne(n)
	for g := range n {
		before := p.quiesce(b)
		sendOne(g)
		id := p.nextID.Load()
		after := p.quiesce(b)
		in, pr := after.ingest(before), after.project(before)
		row.ingestOps, row.projectOps = row.ingestOps.Add(in), row.projectOps.Add(pr)
		row.ingest = row.ingest.Add(Per(in.Units, n))
		row.project = row.project.Add(Per(pr.Units, n))
		lag, _ := p.tr.lags([]int64{id})
		row.lags = append(row.lags, lag...)
		row.batches = append(row.batches, p.tr.batches([]int64{id})...)
		// The warm-up event's workout too.
		row.read, row.counted = inUTCWeek+g+2, min(inMonth+g+2, model.MaxWorkoutsToInspect)
		switch kind {
		case lifetime:
			row.read = min(h+g+2, model.MaxWorkoutsToInspect)
			row.counted = row.read
		case weekly, longLife:
			row.read, row.counted = inWeek+g+2, inWeek+g+2
		case withRules:
			row.counted = min(inMonth+g+2, model.MaxWorkoutsToInspect) - manualInMonth
		case streakKind: // the local day of the event, whole: its span in every zone
			row.read, row.counted = inDaySpan(es, eventStarts), len(activeDays)
		}
		minIn, minPr := DesignMinimum(row.read, p.workoutSize)
		row.minIngest = row.minIngest.Add(Per(minIn, n))
		row.minProject = row.minProject.Add(Per(minPr, n))
	}
	m := p.milestone(ctx, b, userID, kind)
	if want := row.counted; m.WorkoutsCounted != want {
		b.Fatalf("growth H=%d %s: milestone counts %d workouts, want %d", h, kind, m.WorkoutsCounted, want)
	}
	return row
}

// inDaySpan is how many workouts (history es and the events so far) a
// streak event re-reads: those started in the span of the last event's
// day (calendar.SpanOfDays).
func inDaySpan(es []model.Entity, events []time.Time) int {
	day, _ := calendar.ParseDate(calendar.FormatDate(events[len(events)-1]))
	span, n := calendar.SpanOfDays(day, &day), 0
	for _, e := range es {
		if span.Contains(e.(*model.Workout).StartDateUtc) {
			n++
		}
	}
	for _, t := range events {
		if span.Contains(t) {
			n++
		}
	}
	return n
}

// benchRules are the rules of the withRules milestone: a minimum time and
// distance every bench run meets, and every exclusion.
func benchRules() *rules.Rules {
	return &rules.Rules{MinMovingTimeSeconds: 120, MinDistanceMeters: 500,
		Exclude: []string{rules.ExcludeManual, rules.ExcludeTrainer, rules.ExcludeCommute}}
}
