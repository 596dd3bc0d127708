// Package e2e holds end-to-end tests that run the api's routes (BFF and
// webhook on one mux), the ingestion worker and the Strava simulator on
// DynamoDB Local.
package e2e_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/handlers/bff"
	"github.com/commitcollect/backend/handlers/bff/export"
	"github.com/commitcollect/backend/handlers/bff/milestones"
	"github.com/commitcollect/backend/handlers/bff/openapi"
	"github.com/commitcollect/backend/handlers/config"
	"github.com/commitcollect/backend/handlers/ingest/handoff"
	"github.com/commitcollect/backend/handlers/ingest/intake"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/catalog"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/streams"
	"github.com/commitcollect/backend/projections/consumer"
	"github.com/commitcollect/backend/scripts/stravasim"
	"github.com/commitcollect/backend/test/dynamolocal"
)

func TestMain(m *testing.M) { dynamolocal.Main(m) }

const (
	subscriptionID = 4711
	verifyToken    = "e2e-verify"
	pathSecret     = "e2e-callback-path-0123"
	athleteID      = 9001
)

// api is the api Lambda's mux as handlers/api wires it, served over HTTP,
// with an in-process worker queue behind the webhook.
type api struct {
	t     *testing.T
	sim   *stravasim.Server
	st    *store.Adapters
	srv   *httptest.Server
	mux   *app.API
	queue *handoff.Queue
	// stream and projector play the projector Lambda's event source mapping.
	stream    *streams.Reader
	projector *consumer.Consumer
}

func newAPI(t *testing.T) *api {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	a := &api{t: t}
	a.sim = stravasim.New(stravasim.Options{SubscriptionID: subscriptionID, DeliveryBackoff: time.Millisecond})
	t.Cleanup(a.sim.Close)
	x := dynamolocal.NewStreamed(t)
	a.st = x.Store
	a.stream = streams.NewReader(x.Streams, x.ARN, streams.Options{Logger: log})
	a.projector = consumer.New(app.ProjectorStores(a.st), consumer.Options{Metrics: io.Discard})
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := catalog.Seed(context.Background(), a.st.Milestones, cat); err != nil {
		t.Fatal(err)
	}
	// The server exists before the mux: the public URL names it. Every
	// answer is checked against openapi.yaml (kin-openapi).
	a.srv = httptest.NewServer(conforming(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) })))
	t.Cleanup(a.srv.Close)

	worker := app.NewStravaWorker(a.st, app.StravaSettings{BaseURL: a.sim.URL, ClientID: a.sim.ClientID(), ClientSecret: a.sim.ClientSecret()}, log)
	a.queue = handoff.NewQueue(worker.Run, handoff.QueueOptions{Workers: 2, Backoff: 10 * time.Millisecond}, log)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = a.queue.Close(ctx)
	})
	// The api Lambda's own assembly (handlers/app).
	a.mux, err = app.NewAPI(config.Config{
		StravaBaseURL: a.sim.URL, StravaClientID: a.sim.ClientID(), StravaClientSecret: a.sim.ClientSecret(),
		StravaVerifyToken: verifyToken, StravaSubscriptionID: subscriptionID, PublicURL: a.srv.URL, WebhookPathSecrets: []string{pathSecret},
	}, a.st, a.queue, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// call sends a request with the browser's cookies and decodes a JSON answer.
func (a *api) call(b *http.Client, method, path string, body any, out any) int {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = strings.NewReader(string(raw))
	}
	req, _ := http.NewRequest(method, a.srv.URL+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := b.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			a.t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode
}

func TestLoginCreateMilestoneIngestAndRead(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	ctx := context.Background()

	// Every route on the assembled mux is documented, and nothing more.
	if err := openapi.CheckRoutes(a.mux.Routes, append(append(bff.Routes(), bff.PageRoute), intake.Routes([]string{pathSecret})...)); err != nil {
		t.Fatalf("openapi.yaml drifted from the api mux:\n%v", err)
	}

	// Log in through the real redirects: /auth/strava/login → simulator's
	// authorize → /auth/strava/callback → cookie, 302 to /.
	b := a.signIn(athleteID)
	jar := b.Jar
	var me bff.MeJSON
	if st := a.call(b, http.MethodGet, "/v1/me", nil, &me); st != http.StatusOK || me.AthleteID != athleteID || !me.Connected {
		t.Fatalf("GET /v1/me = %d %+v", st, me)
	}
	if s := a.sim.Stats(); s.Authorizations != 1 || s.CodeExchanges != 1 {
		t.Fatalf("simulator saw %+v, want one authorization and one code exchange", s)
	}

	// Commit to 10 km of running in March on the Steel Road Bike (8 parts).
	var m milestones.MilestoneJSON
	if st := a.call(b, http.MethodPost, "/v1/milestones", map[string]any{
		"modelId": "road-bike", "title": "10 km in March", "metric": "distance", "target": 10000,
		"sportTypes": []string{"Run"}, "periodStartAtUtc": "2026-03-01T00:00:00Z", "periodEndAtUtc": "2026-04-01T00:00:00Z",
	}, &m); st != http.StatusCreated {
		t.Fatalf("POST /v1/milestones = %d %+v", st, m)
	}

	// Strava reports three activities through the webhook; the worker
	// fetches each from the simulator and writes the workout.
	for i, sport := range []string{"Run", "Run", "Ride"} {
		id := int64(70000 + i)
		a.sim.PutActivity(stravasim.Activity{ID: id, AthleteID: athleteID, Name: "Morning " + sport, SportType: sport,
			Distance: 4000, MovingTime: 1200, ElapsedTime: 1300, StartDate: time.Date(2026, 3, 3+i, 6, 0, 0, 0, time.UTC)})
		if d, err := a.sim.Deliver(ctx, a.srv.URL+intake.WebhookPath, a.sim.ActivityEvent("create", id, athleteID, nil)); err != nil {
			t.Fatalf("deliver activity %d: %+v %v", id, d, err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := a.queue.Wait(wctx); err != nil {
		t.Fatal(err)
	}
	workouts, _, err := dynamo.QueryEntities[model.Workout](ctx, a.st.DB, a.st.DB.Tables().Main, keys.UserPK(me.UserID), keys.PrefixWorkoutStrava, dynamo.QueryOptions{})
	if err != nil || len(workouts) != 3 {
		t.Fatalf("workouts of the user = %d (%v), want 3", len(workouts), err)
	}

	// The projector reads the stream (the milestone's INSERT and the
	// workouts) and projects: two runs of 4 km count, the ride does not;
	// 8000 m of 10000 earns floor(8000*8/10000) = 6 of the 8 parts.
	if err := a.stream.Drain(wctx, a.projector.Handle); err != nil {
		t.Fatal(err)
	}
	var got milestones.MilestoneJSON
	if st := a.call(b, http.MethodGet, "/v1/milestones/"+m.MilestoneID, nil, &got); st != http.StatusOK ||
		got.MilestoneID != m.MilestoneID || got.Status != statusOfMarch(time.Now()) || got.Version < 1 || got.ProjectedAtUtc == nil ||
		!reflect.DeepEqual(got.Progress, milestones.Progress{Value: 8000, Target: 10000, Percent: 80, WorkoutsCounted: 2, Excluded: map[string]int{"sport": 1}}) {
		t.Fatalf("GET /v1/milestones/{id} = %d %+v", st, got)
	}
	if len(got.Awards) != 6 {
		t.Fatalf("awards = %+v, want parts 0..5", got.Awards)
	}
	for i, aw := range got.Awards {
		if aw.PartIndex != i || aw.Name == "" || aw.ActivityID < 70000 || aw.AwardedAtUtc.IsZero() {
			t.Fatalf("award %d = %+v", i, aw)
		}
	}

	// The export holds the workouts as stored, Strava's marks and elapsed
	// time included (checked against the document like every answer).
	var exp struct {
		Workouts []export.WorkoutJSON `json:"workouts"`
	}
	if st := a.call(b, http.MethodGet, "/v1/me/export", nil, &exp); st != http.StatusOK || len(exp.Workouts) != 3 {
		t.Fatalf("GET /v1/me/export = %d with %d workouts, want 200 with the 3", st, len(exp.Workouts))
	}
	for _, w := range exp.Workouts {
		if w.Flags == nil || w.ElapsedTimeSeconds == 0 {
			t.Fatalf("exported workout %+v: want Strava's marks and the elapsed time", w)
		}
	}

	// Deleting the account revokes the simulator's tokens and removes
	// everything, the workouts written by the worker included.
	var rep bff.DeletionReport
	if st := a.call(b, http.MethodDelete, "/v1/me", nil, &rep); st != http.StatusAccepted || rep.Status != "deleted" {
		t.Fatalf("DELETE /v1/me = %d %+v", st, rep)
	}
	if s := a.sim.Stats(); s.Deauthorizations != 1 {
		t.Fatalf("simulator deauthorizations = %d, want 1", s.Deauthorizations)
	}
	for _, pk := range []string{keys.UserPK(me.UserID), keys.AthletePK(athleteID)} {
		res, err := a.st.DB.QueryPrefix(ctx, a.st.DB.Tables().Main, pk, "", dynamo.QueryOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range res.Items {
			// Only the user guard stays (90 days): what writers in flight check.
			if k, err := dynamo.KeyOf(it); err != nil || k != keys.UserGuardKey(me.UserID) {
				t.Fatalf("partition %s after deletion holds %v (%v)", pk, k, err)
			}
		}
	}
	if st := a.call(b, http.MethodGet, "/v1/me", nil, nil); st != http.StatusUnauthorized {
		t.Fatalf("GET /v1/me after deletion = %d, want 401", st)
	}
	u, _ := url.Parse(a.srv.URL)
	for _, c := range jar.Cookies(u) {
		if c.Name == bff.SessionCookie {
			t.Fatalf("session cookie still set after deletion: %+v", c)
		}
	}
}

// conforming serves through next and fails t when an answer is not what
// openapi.yaml documents for its route and status (the body against the
// schema).
func conforming(t *testing.T, next http.Handler) http.Handler {
	var mu sync.Mutex
	checked := 0
	t.Cleanup(func() { t.Logf("checked %d answers against openapi.yaml", checked) })
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		if err := openapi.CheckResponse(r, rec.Code, rec.Header(), rec.Body.Bytes()); err != nil {
			t.Errorf("answer off the document: %v\n%s", err, rec.Body.String())
		}
		mu.Lock()
		checked++
		mu.Unlock()
	})
}

// statusOfMarch is what a March 2026 milestone that has not completed says
// at now: ended once 1 April has begun everywhere (UTC instants end there).
func statusOfMarch(now time.Time) string {
	if now.Before(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)) {
		return "active"
	}
	return "ended"
}
