package ingest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/fetch"
	"github.com/commitcollect/backend/handlers/ingest/handoff"
	"github.com/commitcollect/backend/handlers/ingest/intake"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/streams"
	"github.com/commitcollect/backend/projections/consumer"
	"github.com/commitcollect/backend/test/dynamolocal"
	"github.com/commitcollect/backend/test/stravasim"
)

func TestMain(m *testing.M) { dynamolocal.Main(m) }

const (
	subscriptionID = 120475
	verifyToken    = "verify-me"
)

func testLog() *slog.Logger {
	if os.Getenv("INGEST_TEST_LOG") != "" {
		return slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	return slog.New(slog.DiscardHandler)
}

// countingDispatcher counts hand-offs and can be told to fail.
type countingDispatcher struct {
	next  ingest.Dispatcher
	calls atomic.Int64
	fail  atomic.Int64 // fail this many next calls
}

func (d *countingDispatcher) Dispatch(ctx context.Context, job ingest.Job) error {
	d.calls.Add(1)
	if d.fail.Add(-1) >= 0 {
		return errHandOff
	}
	d.fail.Store(0)
	return d.next.Dispatch(ctx, job)
}

var errHandOff = &handOffError{}

type handOffError struct{}

func (*handOffError) Error() string { return "lambda invoke refused (test)" }

// harness is the whole ingestion path on DynamoDB Local and the simulator:
// webhook (real HTTP server) → counting dispatcher → in-process queue →
// worker → Strava simulator.
type harness struct {
	t        testing.TB
	sim      *stravasim.Server
	st       *store.Store
	worker   *app.Worker
	queue    *handoff.Queue
	dispatch *countingDispatcher
	srv      *httptest.Server
	hookURL  string
	// projected holds the stream records project handed over already.
	projected map[string]bool
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	h := &harness{t: t}
	h.sim = stravasim.New(stravasim.Options{SubscriptionID: subscriptionID, DeliveryBackoff: time.Millisecond})
	t.Cleanup(h.sim.Close)
	h.st = dynamolocal.NewStore(t)
	h.worker = h.newWorker()
	h.queue = handoff.NewQueue(h.worker.Run, handoff.QueueOptions{Workers: 2, Backoff: 10 * time.Millisecond}, testLog())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.queue.Close(ctx)
	})
	h.dispatch = &countingDispatcher{next: h.queue}
	mux := http.NewServeMux()
	intake.NewWebhook(intake.WebhookConfig{VerifyToken: verifyToken, SubscriptionID: subscriptionID},
		h.st, h.dispatch, testLog()).Mount(mux)
	h.srv = httptest.NewServer(mux)
	t.Cleanup(h.srv.Close)
	h.hookURL = h.srv.URL + intake.WebhookPath
	// Register the callback like the deploy does: Strava validates it first.
	if id, err := h.sim.Subscribe(context.Background(), h.hookURL, verifyToken); err != nil || id != subscriptionID {
		t.Fatalf("subscribe: got %d, %v; want %d", id, err, subscriptionID)
	}
	return h
}

// project hands the stream records not handed before to a projector, as
// the stream's event source mapping would (the check of the user guard
// after a webhook fetch's write happens there).
func (h *harness) project() {
	h.t.Helper()
	ctx := context.Background()
	db, streamsAPI := dynamolocal.Clients(h.t)
	arn, err := store.StreamARN(ctx, db, h.st.Tables())
	if err != nil {
		h.t.Fatal(err)
	}
	all, err := streams.ReadAll(ctx, streamsAPI, arn)
	if err != nil {
		h.t.Fatal(err)
	}
	if h.projected == nil {
		h.projected = map[string]bool{}
	}
	var recs []events.DynamoDBEventRecord
	for _, r := range all {
		if !h.projected[r.EventID] {
			h.projected[r.EventID] = true
			recs = append(recs, r)
		}
	}
	proj := consumer.New(h.st, consumer.Options{Metrics: io.Discard})
	if resp, err := proj.Handle(ctx, events.DynamoDBEvent{Records: recs}); err != nil || len(resp.BatchItemFailures) > 0 {
		h.t.Fatalf("projector: %+v, %v", resp, err)
	}
}

// newWorker builds another worker (another "Lambda instance") over the same
// table and simulator.
//
// Its fetcher has no lister: every create is fetched alone, however many
// of one athlete a test runs in a row, so a test's setup never waits for
// the sweeper to gather a burst. Bursts are decided in package fetch
// (burst_test.go) and run wired in test/e2e (TestNoisyNeighbours).
func (h *harness) newWorker() *app.Worker {
	w := app.NewStravaWorker(h.st, app.StravaSettings{
		BaseURL: h.sim.URL, ClientID: h.sim.ClientID(), ClientSecret: h.sim.ClientSecret(),
		AthleteReadsPerWindow: fetch.DefaultAthleteReadsPerWindow,
	}, testLog())
	w.Fetch.Lister = nil
	return w
}

// link connects athlete to user with simulator-issued tokens living ttl.
func (h *harness) link(user string, athlete int64, ttl time.Duration) stravasim.Tokens {
	h.t.Helper()
	ctx := context.Background()
	h.sim.AddAthlete(stravasim.Athlete{ID: athlete, Firstname: "A"})
	tok := h.sim.IssueTokens(athlete, ttl)
	c := &model.StravaConnection{UserID: user, AthleteID: athlete, AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken,
		ExpiresAtUtc: tok.ExpiresAt, Scopes: tok.Scope, TokenVersion: 1, UpdatedAtUtc: time.Now().UTC()}
	if err := h.st.Put(ctx, h.st.Tables().Main, c); err != nil {
		h.t.Fatal(err)
	}
	if err := h.st.Put(ctx, h.st.Tables().Main, &model.AthleteOwner{AthleteID: athlete, UserID: user, CreatedAtUtc: time.Now().UTC()}); err != nil {
		h.t.Fatal(err)
	}
	return tok
}

func (h *harness) activity(id, athlete int64, sport string) {
	h.sim.PutActivity(stravasim.Activity{ID: id, AthleteID: athlete, Name: "Act", SportType: sport, Distance: 5000,
		TotalElevationGain: 30, MovingTime: 1500, ElapsedTime: 1600, StartDate: time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC)})
}

// deliver sends ev like Strava does and waits until the queue is idle.
func (h *harness) deliver(ev stravasim.Event) stravasim.Delivery {
	h.t.Helper()
	d, err := h.sim.Publish(context.Background(), ev)
	if err != nil {
		h.t.Fatalf("deliver %+v: %+v %v", ev, d, err)
	}
	h.wait()
	return d
}

// sweep runs one sweep as of at, dispatching to the harness's queue.
func (h *harness) sweep(at time.Time) handoff.SweepResult {
	h.t.Helper()
	sw := handoff.NewSweeper(h.st, h.queue, testLog())
	sw.Now = func() time.Time { return at }
	res, err := sw.Sweep(context.Background())
	if err != nil {
		h.t.Fatalf("sweep: %v", err)
	}
	return res
}

// claim records j in the outbox as the webhook does (lease from now).
func (h *harness) claim(j ingest.Job) {
	h.t.Helper()
	raw, err := json.Marshal(j)
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.st.ClaimOutboxItem(context.Background(), j.IdempotencyKey, j.CorrelationID, string(raw),
		j.ReceivedAtUtc, ingest.DefaultLease, ingest.IdempotencyTTL); err != nil {
		h.t.Fatalf("claim %s: %v", j.IdempotencyKey, err)
	}
}

// outbox reads the outbox item of j.
func (h *harness) outbox(j ingest.Job) *model.IdempotencyRecord {
	h.t.Helper()
	rec, err := h.st.OutboxItem(context.Background(), j.IdempotencyKey)
	if err != nil {
		h.t.Fatalf("outbox %s: %v", j.IdempotencyKey, err)
	}
	return rec
}

func (h *harness) wait() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.queue.Wait(ctx); err != nil {
		h.t.Fatalf("queue did not drain: %v", err)
	}
}

func (h *harness) post(body []byte) (*http.Response, map[string]any) {
	h.t.Helper()
	resp, err := http.Post(h.hookURL, "application/json", bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp, m
}

func (h *harness) workout(user string, id int64) *model.Workout {
	h.t.Helper()
	w, err := h.st.Workout(context.Background(), user, id)
	if err != nil {
		h.t.Fatalf("workout %d: %v", id, err)
	}
	return w
}

func (h *harness) workouts(user string) []model.Workout {
	h.t.Helper()
	ws, _, err := store.QueryEntities[model.Workout](context.Background(), h.st.DB, h.st.Tables().Main,
		keys.UserPK(user), keys.PrefixWorkoutStrava, store.QueryOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return ws
}

// audits lists the audit entries of a subject partition by event type.
func (h *harness) audits(subjectPK string) map[string][]model.AuditEntry {
	h.t.Helper()
	es, _, err := store.QueryEntities[model.AuditEntry](context.Background(), h.st.DB, h.st.Tables().Audit,
		subjectPK, keys.PrefixAudit, store.QueryOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string][]model.AuditEntry{}
	for _, e := range es {
		out[e.EventType] = append(out[e.EventType], e)
	}
	return out
}

func (h *harness) connection(user string) (*model.StravaConnection, error) {
	return h.st.StravaConnection(context.Background(), user)
}

func job(ev stravasim.Event) ingest.Job {
	up := map[string]any{}
	for k, v := range ev.Updates {
		up[k] = v
	}
	e := ingest.Event{ObjectType: ev.ObjectType, ObjectID: ev.ObjectID, AspectType: ev.AspectType, Updates: up,
		OwnerID: ev.OwnerID, SubscriptionID: ev.SubscriptionID, EventTime: ev.EventTime}
	return ingest.Job{Event: e, CorrelationID: model.NewID(), IdempotencyKey: e.IdempotencyKey(), ReceivedAtUtc: time.Now().UTC()}
}
