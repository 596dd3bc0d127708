package ingest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/commitcollect/backend/handlers/ingest/budget"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/intake"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/calendar"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/metering"
	"github.com/commitcollect/backend/model/store/outbox"
	"github.com/commitcollect/backend/model/store/tableadmin"
	"github.com/commitcollect/backend/model/streams"
	"github.com/commitcollect/backend/projections/consumer"
	"github.com/commitcollect/backend/scripts/stravasim"
	"github.com/commitcollect/backend/test/dynamolocal"
	"github.com/commitcollect/backend/test/ingesttest"
)

// The DynamoDB requests of one warm webhook create event (a worker and a
// projector that have seen one event of the athlete before), for a user with
// more than 3000 lifetime workouts and one monthly distance milestone, as
// TestOneCreateEventCost measures them. WCU count index writes (DynamoDB
// Local reports them like AWS: 1 per index entry written or removed).
//
//	stage      op          table        what                                   RCU  WCU
//	webhook    UpdateItem  Idempotency  claim the outbox item (+ Pending)        -    2
//	worker     UpdateItem  Main         write the workout (+ LSI1)               -    2
//	worker     PutItem     Audit        STRAVA_ACTIVITY_CREATE (no index keys)   -    1
//	worker     UpdateItem  Idempotency  settle done (− Pending)                  -    2
//	projector  Query       Main         the guard, milestones and awards         1    -
//	projector  Query       Main/LSI1    the month's workouts only                1    -
//	projector  UpdateItem  Main         progress, version-checked                -    1
//
// 7 requests, 2 RCU, 8 WCU. Gone from the path (each was one request
// before): the worker's GetItem of the outbox item (the job carries its
// failure count), of the athlete → user mapping (cached), of the stored
// workout for coalescing (not for a create), of the rate-limit state (cached
// briefly) and of the Strava connection (the token is cached until near
// expiry), and its PutItem of the rate-limit state (written only when it
// changed materially); both audit entries lost their two index entries
// (2 WCU each). Then, at the floor:
//   - the user guard's consistent GetItem after the workout write (1 RCU):
//     the projector's milestone read covers the guard (store/guard.go);
//     putting it back breaks maxRCUPerEvent and maxRequestsPerEvent;
//   - the athlete's read counter (1 WCU): touched only past the instance's
//     own allowance (fetch/spend.go); back, it breaks maxWCUPerEvent;
//   - the projector's MILESTONE_PROGRESS_UPDATED for a new running value
//     (1 WCU): only parts and status changes are audited (consumer
//     report.go); back, it breaks maxWCUPerEvent.
const (
	maxRequestsPerEvent = 7
	maxWCUPerEvent      = 8
	maxRCUPerEvent      = 2
)

// meteredCall is one DynamoDB request as the meter saw it.
type meteredCall struct {
	stage, op, table, index string
	rcu, wcu                float64
	scanned                 int
}

// meter lists the DynamoDB requests of one client with the capacity
// DynamoDB reports for them (it asks for ReturnConsumedCapacity INDEXES on
// every request) and the items each Query scanned: the per-request view of
// the test's log. The asserted totals come from the product's own meter
// (metering.WithMeter), which counts the same requests. Test only; stage
// labels the calls that follow.
type meter struct {
	mu    sync.Mutex
	stage string
	calls []meteredCall
}

func (m *meter) setStage(s string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stage = s
}

func (m *meter) take() []meteredCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.calls
	m.calls = nil
	return out
}

func (m *meter) install(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("CostMeter",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				c := meteredCall{op: awsmiddleware.GetOperationName(ctx)}
				total := types.ReturnConsumedCapacityIndexes
				switch p := in.Parameters.(type) {
				case *dynamodb.GetItemInput:
					p.ReturnConsumedCapacity, c.table = total, *p.TableName
				case *dynamodb.PutItemInput:
					p.ReturnConsumedCapacity, c.table = total, *p.TableName
				case *dynamodb.UpdateItemInput:
					p.ReturnConsumedCapacity, c.table = total, *p.TableName
				case *dynamodb.DeleteItemInput:
					p.ReturnConsumedCapacity, c.table = total, *p.TableName
				case *dynamodb.QueryInput:
					p.ReturnConsumedCapacity, c.table = total, *p.TableName
					if p.IndexName != nil {
						c.index = *p.IndexName
					}
				case *dynamodb.TransactWriteItemsInput:
					p.ReturnConsumedCapacity = total
				case *dynamodb.BatchWriteItemInput:
					p.ReturnConsumedCapacity = total
				case *dynamodb.BatchGetItemInput:
					p.ReturnConsumedCapacity = total
				}
				out, md, err := next.HandleInitialize(ctx, in)
				var ccs []types.ConsumedCapacity
				switch r := out.Result.(type) {
				case *dynamodb.GetItemOutput:
					ccs = one(r.ConsumedCapacity)
				case *dynamodb.PutItemOutput:
					ccs = one(r.ConsumedCapacity)
				case *dynamodb.UpdateItemOutput:
					ccs = one(r.ConsumedCapacity)
				case *dynamodb.DeleteItemOutput:
					ccs = one(r.ConsumedCapacity)
				case *dynamodb.QueryOutput:
					ccs, c.scanned = one(r.ConsumedCapacity), int(r.ScannedCount)
				case *dynamodb.TransactWriteItemsOutput:
					ccs = r.ConsumedCapacity
				case *dynamodb.BatchWriteItemOutput:
					ccs = r.ConsumedCapacity
				case *dynamodb.BatchGetItemOutput:
					ccs = r.ConsumedCapacity
				}
				var units float64
				for _, cc := range ccs {
					if cc.CapacityUnits != nil {
						units += *cc.CapacityUnits
					}
					if c.table == "" && cc.TableName != nil {
						c.table = *cc.TableName
					}
				}
				if c.op == "GetItem" || c.op == "Query" || c.op == "BatchGetItem" {
					c.rcu = units
				} else {
					c.wcu = units
				}
				m.mu.Lock()
				c.stage = m.stage
				m.calls = append(m.calls, c)
				m.mu.Unlock()
				return out, md, err
			}), middleware.After)
	})
}

func one(cc *types.ConsumedCapacity) []types.ConsumedCapacity {
	if cc == nil {
		return nil
	}
	return []types.ConsumedCapacity{*cc}
}

// costReport sums calls: requests, RCU, WCU.
func costReport(calls []meteredCall, prefix string) (n int, rcu, wcu float64, lines []string) {
	for _, c := range calls {
		n++
		rcu += c.rcu
		wcu += c.wcu
		table := c.table[len(prefix):]
		if c.index != "" {
			table += "/" + c.index
		}
		lines = append(lines, fmt.Sprintf("%-9s %-18s %-24s rcu %-4g wcu %-4g scanned %d", c.stage, c.op, table, c.rcu, c.wcu, c.scanned))
	}
	return n, rcu, wcu, lines
}

// meteredStores creates tables on the test's DynamoDB Local and returns a
// store over them whose calls m lists, a plain one (plain's client, for
// seeding and reading back unmetered) sharing its token sealer, and the
// tables' name prefix.
func meteredStores(t *testing.T, plain *dynamodb.Client) (seed, st *store.Adapters, m *meter, prefix string) {
	t.Helper()
	tables := dynamolocal.MustCreateTables(t, plain)
	seed = store.New(plain, tables)
	seed.DB.Secrets = dynamolocal.NewSealer(t)
	m = &meter{}
	st = store.New(dynamodb.NewFromConfig(dynamolocal.Config(dynamolocal.Endpoint(t)), m.install), tables)
	st.DB.Secrets = seed.DB.Secrets
	return seed, st, m, strings.TrimSuffix(tables.Main, dynamo.BaseMain)
}

// linkSimAthlete adds athlete to sim and seeds, unmetered, its link to
// user as a sign-in would: the connection with the simulator's tokens
// (granted now) and the athlete's OWNER item.
func linkSimAthlete(t *testing.T, seed *store.Adapters, sim *stravasim.Server, athlete int64, user string) {
	t.Helper()
	ctx, tables, now := context.Background(), seed.DB.Tables(), time.Now().UTC()
	sim.AddAthlete(stravasim.Athlete{ID: athlete, Firstname: "A"})
	tok := sim.IssueTokens(athlete, 6*time.Hour)
	if err := seed.DB.Put(ctx, tables.Main, &model.StravaConnection{UserID: user, AthleteID: athlete, AccessToken: tok.AccessToken,
		RefreshToken: tok.RefreshToken, ExpiresAtUtc: tok.ExpiresAt, Scopes: tok.Scope, TokenVersion: 1, UpdatedAtUtc: now,
		GrantedAtUtc: &now}); err != nil {
		t.Fatal(err)
	}
	if err := seed.DB.Put(ctx, tables.Main, &model.AthleteOwner{AthleteID: athlete, UserID: user, CreatedAtUtc: now}); err != nil {
		t.Fatal(err)
	}
}

// pop is the one job d was handed since the last pop.
func pop(t testing.TB, d *ingesttest.RecordingDispatcher) ingest.Job {
	t.Helper()
	jobs := d.Take()
	if len(jobs) != 1 {
		t.Fatalf("got %d hand-offs, want 1", len(jobs))
	}
	return jobs[0]
}

// TestOneCreateEventCost sends create events for a user with 3001 workouts
// before March and a monthly (March) distance milestone through webhook,
// worker and projector on one metered DynamoDB client, and asserts the
// requests, RCU and WCU of a warm event (the second; the first is printed
// as the cold cost) against the per-event bounds above: putting back a
// removed request fails it. It is also item 2's proof: the projection reads
// only the month's workouts (the log query scans exactly them) and its
// value is exact although the lifetime log exceeds the guardrail.
func TestOneCreateEventCost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	plain, streamsClient := dynamolocal.Clients(t)
	seedStore, st, m, prefix := meteredStores(t, plain)
	tables := st.DB.Tables()

	sim := stravasim.New(stravasim.Options{SubscriptionID: ingesttest.SubscriptionID})
	t.Cleanup(sim.Close)
	const athlete, user = 501, "heavy"
	linkSimAthlete(t, seedStore, sim, athlete, user)
	march := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	april := march.AddDate(0, 1, 0)
	const older, inMarch = model.MaxWorkoutsToInspect + 1, 4
	var es []model.Entity
	var want int64 // mm
	for i := range older + inMarch {
		w := &model.Workout{UserID: user, AthleteID: athlete, ActivityID: int64(1000 + i), SportType: "Run",
			DistanceMeters: float64(1000 + i), StartDateUtc: march.Add(-time.Duration(i+1) * 6 * time.Hour),
			CreatedAtUtc: march, UpdatedAtUtc: march, CorrelationID: "seed"}
		if i >= older {
			w.StartDateUtc = march.Add(time.Duration(i-older+1) * 24 * time.Hour)
			want += int64(w.DistanceMeters) * 1000
		}
		es = append(es, w)
	}
	es = append(es, &model.ModelMeta{ModelID: "rocket", Name: "Rocket", PartCount: 10, CatalogVersion: 1},
		&model.Milestone{UserID: user, MilestoneID: "march", MilestoneDefinition: model.MilestoneDefinition{ModelID: "rocket",
			Title: "1000 km in March", Metric: model.MetricDistance, Target: 1000000, PeriodStartAtUtc: march, PeriodEndAtUtc: &april,
			PartCount: 10}, Projection: model.Projection{Status: model.StatusActive}, CreatedAtUtc: march, WrittenBy: model.WriterAPI})
	if err := seedStore.DB.BatchPut(ctx, tables.Main, es); err != nil {
		t.Fatal(err)
	}
	arn, err := tableadmin.StreamARN(ctx, plain, tables)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	newRecords := func() []events.DynamoDBEventRecord {
		all, err := streams.ReadAll(ctx, streamsClient, arn)
		if err != nil {
			t.Fatal(err)
		}
		var out []events.DynamoDBEventRecord
		for _, r := range all {
			if !seen[r.EventID] {
				seen[r.EventID] = true
				out = append(out, r)
			}
		}
		return out
	}
	newRecords() // the seed's records are not part of an event

	d := &ingesttest.RecordingDispatcher{}
	mux := http.NewServeMux()
	intake.NewWebhook(intake.WebhookConfig{VerifyToken: ingesttest.VerifyToken, SubscriptionID: ingesttest.SubscriptionID}, st.Outbox, outbox.NewDrops(st.DB), d, ingesttest.Log()).Mount(mux)
	worker := app.NewStravaWorker(st, app.StravaSettings{BaseURL: sim.URL, ClientID: sim.ClientID(), ClientSecret: sim.ClientSecret(),
		AthleteReadsPerWindow: budget.DefaultAthleteReadsPerWindow}, ingesttest.Log())
	proj := consumer.New(app.ProjectorStores(st), consumer.Options{Metrics: &strings.Builder{}})

	type cost struct {
		calls []meteredCall
		total metering.Units
	}
	event := func(id int64, day int, meters float64) cost {
		t.Helper()
		product := metering.NewMeter()
		ctx := metering.WithMeter(ctx, product)
		sim.PutActivity(stravasim.Activity{ID: id, AthleteID: athlete, Name: "Act", SportType: "Run", Distance: meters,
			MovingTime: 1500, ElapsedTime: 1600, StartDate: march.AddDate(0, 0, day).Add(7 * time.Hour)})
		want += int64(meters) * 1000
		m.take()
		m.setStage("webhook")
		body, _ := json.Marshal(sim.ActivityEvent("create", id, athlete, nil))
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, intake.WebhookPath, strings.NewReader(string(body))).WithContext(ctx))
		if rec.Code != http.StatusOK {
			t.Fatalf("webhook: %d %s", rec.Code, rec.Body)
		}
		m.setStage("worker")
		if err := worker.Run(ctx, pop(t, d)); err != nil {
			t.Fatal(err)
		}
		m.setStage("stream")
		recs := newRecords() // not metered: the stream client is another client
		m.setStage("projector")
		resp, err := proj.Handle(ctx, events.DynamoDBEvent{Records: recs})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("projector: %+v %v", resp, err)
		}
		return cost{calls: m.take(), total: product.Snapshot().Units}
	}
	cold := event(9001, 10, 5000)
	warm := event(9002, 11, 7000)

	for _, run := range []struct {
		name string
		c    cost
	}{{"cold", cold}, {"warm", warm}} {
		n, rcu, wcu, lines := costReport(run.c.calls, prefix)
		t.Logf("%s create event: %d requests, %g RCU, %g WCU (store meter: %+v)\n%s", run.name, n, rcu, wcu, run.c.total, strings.Join(lines, "\n"))
		if n != run.c.total.Requests {
			t.Errorf("%s: the store meter counted %d requests, the test's %d", run.name, run.c.total.Requests, n)
		}
	}
	_, _, _, lines := costReport(warm.calls, prefix)
	if u := warm.total; u.Requests > maxRequestsPerEvent || u.WCU > maxWCUPerEvent || u.RCU > maxRCUPerEvent {
		t.Errorf("warm create event: %d requests, %g RCU, %g WCU; want at most %d, %d, %d:\n%s", u.Requests, u.RCU, u.WCU,
			maxRequestsPerEvent, maxRCUPerEvent, maxWCUPerEvent, strings.Join(lines, "\n"))
	}
	// Item 2: the cold event reads the month's workouts and nothing else
	// (the milestone has no week sums yet), the warm one only its own UTC
	// week's (the sums the cold one kept hold the month's other weeks).
	scanned := func(c cost) (out []int) {
		for _, call := range c.calls {
			if call.index == dynamo.IndexLSI1 {
				out = append(out, call.scanned)
			}
		}
		return out
	}
	starts := []time.Time{march.AddDate(0, 0, 10).Add(7 * time.Hour), march.AddDate(0, 0, 11).Add(7 * time.Hour)} // cold, warm
	for i := range inMarch {
		starts = append(starts, march.AddDate(0, 0, i+1)) // the seed's
	}
	inWarmWeek := 0
	for _, at := range starts {
		if calendar.WeekOf(at) == calendar.WeekOf(starts[1]) {
			inWarmWeek++
		}
	}
	if got := scanned(cold); fmt.Sprint(got) != fmt.Sprint([]int{inMarch + 1}) {
		t.Errorf("the cold event's log queries scanned %v items, want one query of the %d March workouts", got, inMarch+1)
	}
	if got := scanned(warm); fmt.Sprint(got) != fmt.Sprint([]int{inWarmWeek}) {
		t.Errorf("the warm event's log queries scanned %v items, want one query of the %d workouts of its week", got, inWarmWeek)
	}
	var ms model.Milestone
	if err := seedStore.DB.Get(ctx, tables.Main, keys.MilestoneKey(user, "march"), &ms); err != nil {
		t.Fatal(err)
	}
	if ms.ProgressValue != want || ms.WorkoutsCounted != inMarch+2 || ms.Truncated {
		t.Errorf("got value %d counted %d truncated %v; want %d, %d, false (exact beyond %d lifetime workouts)",
			ms.ProgressValue, ms.WorkoutsCounted, ms.Truncated, want, inMarch+2, model.MaxWorkoutsToInspect)
	}
}
