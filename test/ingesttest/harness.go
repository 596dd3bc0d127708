// Package ingesttest is the ingestion path's test harness: the webhook on a
// real HTTP server, a counting dispatcher, the in-process queue and a worker
// against DynamoDB Local and the Strava simulator. The ingestion packages'
// wired tests share it.
package ingesttest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/commitcollect/backend/handlers/ingest/budget"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/handoff"
	"github.com/commitcollect/backend/handlers/ingest/intake"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/limits"
	"github.com/commitcollect/backend/model/store/outbox"
	"github.com/commitcollect/backend/model/store/tableadmin"
	"github.com/commitcollect/backend/model/strava"
	"github.com/commitcollect/backend/model/streams"
	"github.com/commitcollect/backend/scripts/stravasim"
	"github.com/commitcollect/backend/test/dynamolocal"
)

const (
	SubscriptionID = 120475
	VerifyToken    = "verify-me"
)

// Log discards, or writes JSON to stderr when INGEST_TEST_LOG is set.
func Log() *slog.Logger {
	if os.Getenv("INGEST_TEST_LOG") != "" {
		return slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	return slog.New(slog.DiscardHandler)
}

// CountingDispatcher counts hand-offs and can be told to fail.
type CountingDispatcher struct {
	Next  ingest.Dispatcher
	Calls atomic.Int64
	Fail  atomic.Int64 // fail this many next calls
}

// Dispatch counts the hand-off and fails it while Fail is positive.
func (d *CountingDispatcher) Dispatch(ctx context.Context, job ingest.Job) error {
	d.Calls.Add(1)
	if d.Fail.Add(-1) >= 0 {
		return ErrHandOff
	}
	d.Fail.Store(0)
	return d.Next.Dispatch(ctx, job)
}

// RecordingDispatcher keeps every job handed off and runs none.
type RecordingDispatcher struct {
	mu   sync.Mutex
	jobs []ingest.Job
}

// Dispatch keeps the job.
func (d *RecordingDispatcher) Dispatch(_ context.Context, j ingest.Job) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.jobs = append(d.jobs, j)
	return nil
}

// Take returns the jobs handed off since the last Take.
func (d *RecordingDispatcher) Take() []ingest.Job {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.jobs
	d.jobs = nil
	return out
}

// ErrHandOff is the hand-off failure CountingDispatcher injects.
var ErrHandOff = &handOffError{}

type handOffError struct{}

func (*handOffError) Error() string { return "lambda invoke refused (test)" }

// Harness is the whole ingestion path on DynamoDB Local and the simulator:
// webhook (real HTTP server) → counting dispatcher → in-process queue →
// worker → Strava simulator.
type Harness struct {
	T   testing.TB
	Sim *stravasim.Server
	St  *store.Adapters
	// Budget is the Strava budget's state over St (read counters, sync
	// states).
	Budget   *limits.Store
	Worker   *app.Worker
	Queue    *handoff.Queue
	Dispatch *CountingDispatcher
	Srv      *httptest.Server
	HookURL  string
	// projected holds the stream records project handed over already.
	projected map[string]bool
}

// New starts the harness: the simulator, a store on DynamoDB Local (its
// tables without a stream), the worker, the queue and the webhook,
// subscribed at the simulator.
func New(t testing.TB) *Harness {
	t.Helper()
	return newOn(t, dynamolocal.NewStore(t))
}

// NewStreamed is New with the main table's stream, for tests that Project.
func NewStreamed(t testing.TB) *Harness {
	t.Helper()
	return newOn(t, dynamolocal.NewStreamed(t).Store)
}

func newOn(t testing.TB, st *store.Adapters) *Harness {
	t.Helper()
	h := &Harness{T: t, St: st}
	h.Sim = stravasim.New(stravasim.Options{SubscriptionID: SubscriptionID, DeliveryBackoff: time.Millisecond})
	t.Cleanup(h.Sim.Close)
	h.Budget = limits.New(h.St)
	h.Worker = h.NewWorker()
	h.Queue = handoff.NewQueue(h.Worker.Run, handoff.QueueOptions{Workers: 2, Backoff: 10 * time.Millisecond}, Log())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.Queue.Close(ctx)
	})
	h.Dispatch = &CountingDispatcher{Next: h.Queue}
	mux := http.NewServeMux()
	hook := intake.NewWebhook(intake.WebhookConfig{VerifyToken: VerifyToken, SubscriptionID: SubscriptionID},
		h.St.Outbox, outbox.NewDrops(h.St.DB), h.Dispatch, Log())
	hook.Metrics = io.Discard
	hook.Mount(mux)
	h.Srv = httptest.NewServer(mux)
	t.Cleanup(h.Srv.Close)
	h.HookURL = h.Srv.URL + intake.WebhookPath
	// Register the callback like the deploy does: Strava validates it first.
	if id, err := h.Sim.Subscribe(context.Background(), h.HookURL, VerifyToken); err != nil || id != SubscriptionID {
		t.Fatalf("subscribe: got %d, %v; want %d", id, err, SubscriptionID)
	}
	return h
}

// Project hands the stream records not handed before to a projector, as
// the stream's event source mapping would (the check of the user guard
// after a webhook fetch's write happens there). It needs NewStreamed.
func (h *Harness) Project() {
	h.T.Helper()
	ctx := context.Background()
	db, streamsAPI := dynamolocal.Clients(h.T)
	arn, err := tableadmin.StreamARN(ctx, db, h.St.DB.Tables())
	if err != nil {
		h.T.Fatal(err)
	}
	all, err := streams.ReadAll(ctx, streamsAPI, arn)
	if err != nil {
		h.T.Fatal(err)
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
	proj := app.ProjectorOf(h.St, io.Discard, nil)
	if resp, err := proj.Handle(ctx, events.DynamoDBEvent{Records: recs}); err != nil || len(resp.BatchItemFailures) > 0 {
		h.T.Fatalf("projector: %+v, %v", resp, err)
	}
}

// NewWorker builds another worker (another "Lambda instance") over the same
// table and simulator.
//
// Its fetcher has no lister: every create is fetched alone, however many
// of one athlete a test runs in a row, so a test's setup never waits for
// the sweeper to gather a burst. Bursts are decided in package fetch
// (burst_test.go) and run wired in test/e2e (TestNoisyNeighbours).
func (h *Harness) NewWorker() *app.Worker {
	w := app.NewStravaWorker(h.St, app.StravaSettings{
		BaseURL: h.Sim.URL, ClientID: h.Sim.ClientID(), ClientSecret: h.Sim.ClientSecret(),
		AthleteReadsPerWindow: budget.DefaultAthleteReadsPerWindow,
	}, Log())
	w.Bursts.Lister, w.Fetch.Gather = nil, false
	return w
}

// Link connects athlete to user with simulator-issued tokens living ttl.
func (h *Harness) Link(user string, athlete int64, ttl time.Duration) stravasim.Tokens {
	h.T.Helper()
	ctx := context.Background()
	h.Sim.AddAthlete(stravasim.Athlete{ID: athlete, Firstname: "A"})
	tok := h.Sim.IssueTokens(athlete, ttl)
	// As a login writes it: the grant's time is set, and refreshes leave it.
	now := time.Now().UTC()
	c := &model.StravaConnection{UserID: user, AthleteID: athlete, AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken,
		ExpiresAtUtc: tok.ExpiresAt, Scopes: tok.Scope, TokenVersion: 1, UpdatedAtUtc: now, GrantedAtUtc: &now}
	if err := h.St.DB.Put(ctx, h.St.DB.Tables().Main, c); err != nil {
		h.T.Fatal(err)
	}
	if err := h.St.DB.Put(ctx, h.St.DB.Tables().Main, &model.AthleteOwner{AthleteID: athlete, UserID: user, CreatedAtUtc: now}); err != nil {
		h.T.Fatal(err)
	}
	return tok
}

// Activity puts a 5 km activity of athlete at the simulator.
func (h *Harness) Activity(id, athlete int64, sport string) {
	h.Sim.PutActivity(stravasim.Activity{ID: id, AthleteID: athlete, Name: "Act", SportType: sport, Distance: 5000,
		TotalElevationGain: 30, MovingTime: 1500, ElapsedTime: 1600, StartDate: time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC)})
}

// Deliver sends ev like Strava does and waits until the queue is idle.
func (h *Harness) Deliver(ev stravasim.Event) stravasim.Delivery {
	h.T.Helper()
	d, err := h.Sim.Publish(context.Background(), ev)
	if err != nil {
		h.T.Fatalf("deliver %+v: %+v %v", ev, d, err)
	}
	h.Wait()
	return d
}

// Sweep runs one Sweep as of at, dispatching to the harness's queue.
func (h *Harness) Sweep(at time.Time) handoff.SweepResult {
	h.T.Helper()
	sw := handoff.NewSweeper(app.SweeperStores(h.St), h.Queue, Log())
	sw.Now = func() time.Time { return at }
	res, err := sw.Sweep(context.Background())
	if err != nil {
		h.T.Fatalf("sweep: %v", err)
	}
	return res
}

// Claim records j in the outbox as the webhook does (lease from now).
func (h *Harness) Claim(j ingest.Job) {
	h.T.Helper()
	raw, err := json.Marshal(j)
	if err != nil {
		h.T.Fatal(err)
	}
	if _, err := h.St.Outbox.ClaimOutboxItem(context.Background(), j.IdempotencyKey, j.CorrelationID, string(raw),
		j.ReceivedAtUtc, ingest.DefaultLease, ingest.IdempotencyTTL); err != nil {
		h.T.Fatalf("claim %s: %v", j.IdempotencyKey, err)
	}
}

// Outbox reads the Outbox item of j.
func (h *Harness) Outbox(j ingest.Job) *ops.IdempotencyRecord {
	h.T.Helper()
	rec, err := h.St.Outbox.OutboxItem(context.Background(), j.IdempotencyKey)
	if err != nil {
		h.T.Fatalf("outbox %s: %v", j.IdempotencyKey, err)
	}
	return rec
}

// Wait waits until the queue is idle.
func (h *Harness) Wait() {
	h.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.Queue.Wait(ctx); err != nil {
		h.T.Fatalf("queue did not drain: %v", err)
	}
}

// Post posts body to the webhook and decodes the answer.
func (h *Harness) Post(body []byte) (*http.Response, map[string]any) {
	h.T.Helper()
	resp, err := http.Post(h.HookURL, "application/json", bytes.NewReader(body))
	if err != nil {
		h.T.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp, m
}

// Workout reads the user's workout of activity id.
func (h *Harness) Workout(user string, id int64) *model.Workout {
	h.T.Helper()
	w, err := h.St.Workouts.Workout(context.Background(), user, id)
	if err != nil {
		h.T.Fatalf("workout %d: %v", id, err)
	}
	return w
}

// Workouts lists the user's workouts.
func (h *Harness) Workouts(user string) []model.Workout {
	h.T.Helper()
	ws, _, err := dynamo.QueryEntities[model.Workout](context.Background(), h.St.DB, h.St.DB.Tables().Main,
		keys.UserPK(user), keys.PrefixWorkoutStrava, dynamo.QueryOptions{})
	if err != nil {
		h.T.Fatal(err)
	}
	return ws
}

// Audits lists the audit entries of a subject partition by event type.
func (h *Harness) Audits(subjectPK string) map[string][]model.AuditEntry {
	h.T.Helper()
	es, _, err := dynamo.QueryEntities[model.AuditEntry](context.Background(), h.St.DB, h.St.DB.Tables().Audit,
		subjectPK, keys.PrefixAudit, dynamo.QueryOptions{})
	if err != nil {
		h.T.Fatal(err)
	}
	out := map[string][]model.AuditEntry{}
	for _, e := range es {
		out[e.EventType] = append(out[e.EventType], e)
	}
	return out
}

// Connection reads the user's Strava connection.
func (h *Harness) Connection(user string) (*model.StravaConnection, error) {
	return h.St.Connections.StravaConnection(context.Background(), user)
}

// Job is the job the webhook hands off for ev.
func Job(ev stravasim.Event) ingest.Job {
	up := map[string]any{}
	for k, v := range ev.Updates {
		up[k] = v
	}
	e := ingest.Event{ObjectType: ev.ObjectType, ObjectID: ev.ObjectID, AspectType: ev.AspectType, Updates: up,
		OwnerID: ev.OwnerID, SubscriptionID: ev.SubscriptionID, EventTime: ev.EventTime}
	return ingest.Job{Event: e, CorrelationID: model.NewID(), IdempotencyKey: e.IdempotencyKey(), ReceivedAtUtc: time.Now().UTC()}
}

// LinkReadOnly links like Link but with an activity:read grant (the one
// CommitCollect asks for), to which Strava answers 404 for a private
// activity.
func (h *Harness) LinkReadOnly(user string, athlete int64) {
	h.T.Helper()
	h.Link(user, athlete, time.Hour)
	tok := h.Sim.IssueTokens(athlete, time.Hour, "read", "activity:read")
	now := time.Now().UTC()
	c := &model.StravaConnection{UserID: user, AthleteID: athlete, AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken,
		ExpiresAtUtc: tok.ExpiresAt, Scopes: tok.Scope, TokenVersion: 1, UpdatedAtUtc: now, GrantedAtUtc: &now}
	if err := h.St.DB.Put(context.Background(), h.St.DB.Tables().Main, c); err != nil {
		h.T.Fatal(err)
	}
}

// IsCounted says whether the workout is in the user's workout log as a live
// workout (what the projection counts: isDeleted != true).
func (h *Harness) IsCounted(user string, id int64) bool {
	h.T.Helper()
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lg, err := h.St.Workouts.WorkoutLog(context.Background(), user, []model.Window{{From: from}})
	if err != nil {
		h.T.Fatal(err)
	}
	for _, w := range lg.Workouts {
		if w.ActivityID == id {
			return !w.IsDeleted
		}
	}
	return false
}

// WriteActivities stores n activities of athlete (ids from first) through
// the pipeline.
func (h *Harness) WriteActivities(athlete, first int64, n int) {
	h.T.Helper()
	for id := first; id < first+int64(n); id++ {
		h.Activity(id, athlete, "Run")
		h.Deliver(h.Sim.ActivityEvent("create", id, athlete, nil))
	}
}

// MustJSON marshals v or fails the test.
func MustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// SlowFirstFetch fetches at once (so it sees the state Strava had when its
// fetch started) but holds the answer until released.
type SlowFirstFetch struct {
	Next    app.StravaReads
	Fetched chan struct{}
	Release chan struct{}
}

// GetActivity fetches, signals Fetched and waits for Release.
func (f *SlowFirstFetch) GetActivity(ctx context.Context, tok string, id int64) (strava.Activity, strava.RateLimit, error) {
	a, rl, err := f.Next.GetActivity(ctx, tok, id)
	close(f.Fetched)
	<-f.Release
	return a, rl, err
}

// GetAthlete is Next's.
func (f *SlowFirstFetch) GetAthlete(ctx context.Context, tok string) (strava.Athlete, strava.RateLimit, error) {
	return f.Next.GetAthlete(ctx, tok)
}

// SetClock sets the clock of w's runner, fetcher and deauthorizer.
func SetClock(w *app.Worker, now func() time.Time) {
	w.Runner.Now, w.Fetch.Now, w.Fetch.Deauth.Now = now, now, now
}

// Brief shows what the deletion tests look at (a Workout's %+v prints its
// key only).
func Brief(w *model.Workout) string {
	return fmt.Sprintf("{isDeleted %v reason %q deletedAt %v %s %.0f m fetch %d}", w.IsDeleted, w.DeletedReason,
		w.DeletedAtUtc, w.SportType, w.DistanceMeters, w.FetchStartedAtNs)
}
