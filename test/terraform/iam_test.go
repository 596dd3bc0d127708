package terraform

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/handlers/config"
	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/intake"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/catalog"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/secrets/secretstest"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/tableadmin"
	"github.com/commitcollect/backend/model/streams"
	"github.com/commitcollect/backend/scripts/stravasim"
	"github.com/commitcollect/backend/test/awsrecord"
	"github.com/commitcollect/backend/test/dynamolocal"
)

func TestMain(m *testing.M) { dynamolocal.Main(m) }

// IAM from the code.
//
// Where the recordings come from: TestIAMMatchesTheCode wires each Lambda
// exactly as its main does (handlers/{api,worker,projector,sweeper}/main.go:
// config.Load, Config.AWS, Config.DynamoDB, store.New, …) with the
// environment the plan gives that function, overridden only where the test
// must point elsewhere (DynamoDB Local tables under a test prefix, the Strava
// simulator, a local Lambda endpoint that accepts the api's async invoke and
// hands the payload to the worker, a local SSM endpoint answering the
// *_PARAM references). awsrecord.RecordCalls (installed as
// config.Instrument), switched on by
// CC_RECORD_AWS_CALLS in that environment, records every AWS call the
// function makes while representative flows run: the webhook handshake and
// events (create, update, delete, deauthorization), a refused hand-off that
// the sweeper re-dispatches once its lease lapses, OAuth login/callback in
// several sessions, the BFF reads and writes, logout, account deletion with
// two sessions, and the projector on the real stream records those writes
// produced. Recorded table names are mapped back to the planned tables, and
// the calls compared with each role's planned policy (the JSON that
// aws_iam_policy_document computed).

// grantedForAWS are grants the code never uses because AWS uses them on the
// function's behalf, each with its reason (action → reason; "*" any function).
var grantedForAWS = map[string]map[string]string{
	"projector": {
		"dynamodb:DescribeStream":   "Lambda's event source mapping reads the stream with the function's role",
		"dynamodb:GetRecords":       "Lambda's event source mapping reads the stream with the function's role",
		"dynamodb:GetShardIterator": "Lambda's event source mapping reads the stream with the function's role",
		"dynamodb:ListStreams":      "Lambda's event source mapping lists the table's streams with the function's role",
		"sqs:SendMessage":           "the event source mapping sends failed batches to the on-failure destination with the function's role",
	},
	"worker": {
		"sqs:SendMessage": "Lambda sends failed asynchronous invocations to the on-failure destination with the function's role",
	},
	"*": {
		// Only grants conditioned on kms:ViaService (viaService): a direct
		// kms:Decrypt grant, as on the token key, must be used by the code.
		"kms:Decrypt":          "DynamoDB (table key) and SSM (SecureString key) decrypt with the caller's credentials; kms:ViaService limits it to them",
		"logs:CreateLogStream": "the Lambda runtime writes the function's logs",
		"logs:PutLogEvents":    "the Lambda runtime writes the function's logs",
	},
}

func readCalls(t *testing.T, path string) []awsrecord.RecordedCall {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []awsrecord.RecordedCall
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var c awsrecord.RecordedCall
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("recorded line %q: %v", line, err)
		}
		out = append(out, c)
	}
	return out
}

// setEnv replaces the environment with env for one function's wiring:
// variables of the previous function that env lacks are removed.
func setEnv(t *testing.T, prev map[string]bool, env map[string]string) map[string]bool {
	t.Helper()
	for k := range prev {
		if _, ok := env[k]; !ok {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	now := map[string]bool{}
	for k, v := range env {
		t.Setenv(k, v)
		now[k] = true
	}
	return now
}

// lambdaShim is a local Lambda endpoint: it accepts asynchronous invokes
// with 202, as Lambda does, and keeps the payloads for the worker.
type lambdaShim struct {
	mu       sync.Mutex
	payloads []json.RawMessage
	refuse   int // refuse the next n invokes as Lambda does for a missing function
}

func (l *lambdaShim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	if r.Header.Get("X-Amz-Invocation-Type") != "Event" || !strings.Contains(r.URL.Path, "/functions/") {
		http.Error(w, "only asynchronous invokes", http.StatusBadRequest)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refuse > 0 {
		l.refuse--
		w.Header().Set("X-Amzn-ErrorType", "ResourceNotFoundException")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"Type":"User","Message":"Function not found"}`)
		return
	}
	l.payloads = append(l.payloads, b)
	w.WriteHeader(http.StatusAccepted)
}

func (l *lambdaShim) take() []json.RawMessage {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.payloads
	l.payloads = nil
	return out
}

// ssmShim answers SSM GetParameter for the given parameters.
func ssmShim(values map[string]string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ Name string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		v, ok := values[in.Name]
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		if r.Header.Get("X-Amz-Target") != "AmazonSSM.GetParameter" || !ok {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"__type":"ParameterNotFound","message":"not found"}`)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"Parameter": map[string]any{"Name": in.Name, "Type": "SecureString", "Value": v}})
	})
}

// Used is one IAM action on one resource ARN, with the encryption context of
// a KMS call.
type Used struct {
	Action, Resource string
	Context          map[string]string
}

// recordExample wires the four functions with their planned environment,
// runs the flows and returns the recorded calls per function, with table
// names mapped to the planned tables.
func recordExample(t *testing.T, d *Deployed) map[string][]Used {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	endpoint := dynamolocal.Endpoint(t)
	db, streamsAPI := dynamolocal.Clients(t)
	local := dynamolocal.MustCreateTables(t, db)
	localPrefix := strings.TrimSuffix(local.Main, "CommitCollect")
	if err := func() error {
		cat, err := catalog.Default()
		if err != nil {
			return err
		}
		_, err = catalog.Seed(ctx, store.New(db, local).Milestones, cat)
		return err
	}(); err != nil {
		t.Fatalf("seed the model catalog: %v", err)
	}

	const subscriptionID, verifyToken = 4711, "iam-verify-token"
	// Access tokens expire within the worker's refresh skew (5 min), so every
	// fetch refreshes them and the worker seals the rotated tokens.
	sim := stravasim.New(stravasim.Options{SubscriptionID: subscriptionID, DeliveryBackoff: time.Millisecond, TokenTTL: 2 * time.Minute})
	t.Cleanup(sim.Close)
	shim := &lambdaShim{}
	lambdaSrv := httptest.NewServer(shim)
	t.Cleanup(lambdaSrv.Close)
	apiEnv := EnvOf(d.Functions["api"])
	ssmSrv := httptest.NewServer(ssmShim(map[string]string{
		apiEnv["STRAVA_CLIENT_SECRET_PARAM"]: sim.ClientSecret(),
		apiEnv["STRAVA_VERIFY_TOKEN_PARAM"]:  verifyToken,
	}))
	t.Cleanup(ssmSrv.Close)
	// The key sealing Strava tokens, as the plan names it to the api.
	tokenKey := apiEnv[TokenKeyEnv]
	if tokenKey == "" {
		t.Fatalf("the plan gives the api no %s", TokenKeyEnv)
	}
	kmsSrv := secretstest.NewKMS(t, tokenKey)
	var mux http.Handler
	apiSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { mux.ServeHTTP(w, r) }))
	t.Cleanup(apiSrv.Close)

	recFile := filepath.Join(t.TempDir(), "calls.jsonl")
	env := func(role string) map[string]string {
		e := EnvOf(d.Functions[role])
		for k, v := range map[string]string{
			"CC_TABLE_PREFIX": localPrefix, "DYNAMODB_ENDPOINT": endpoint, "STRAVA_BASE_URL": sim.URL,
			"STRAVA_CLIENT_ID": sim.ClientID(), "AWS_ENDPOINT_URL_LAMBDA": lambdaSrv.URL, "AWS_ENDPOINT_URL_SSM": ssmSrv.URL,
			"AWS_ENDPOINT_URL_KMS": kmsSrv.URL,
			"AWS_REGION":           "ap-southeast-2", "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local",
			"AWS_EC2_METADATA_DISABLED": "true", awsrecord.RecordCallsEnv: recFile, "AWS_LAMBDA_FUNCTION_NAME": role,
		} {
			e[k] = v
		}
		if role == "api" {
			e["CC_PUBLIC_URL"] = apiSrv.URL
			e["STRAVA_SUBSCRIPTION_ID"] = fmt.Sprint(subscriptionID)
		}
		return e
	}

	// Every AWS configuration the wiring loads records its calls.
	config.Instrument = awsrecord.FromEnv
	t.Cleanup(func() { config.Instrument = nil })

	// The four Lambdas, built by the functions their mains call.
	prev := setEnv(t, nil, env("api"))
	apiHandler, err := app.APILambda(ctx)
	if err != nil {
		t.Fatalf("api: %v", err)
	}
	mux = apiHandler
	prev = setEnv(t, prev, env("worker"))
	worker, err := app.WorkerLambda(ctx)
	if err != nil {
		t.Fatalf("worker: %v", err)
	}
	prev = setEnv(t, prev, env("projector"))
	projector, err := app.ProjectorLambda(ctx)
	if err != nil {
		t.Fatalf("projector: %v", err)
	}
	setEnv(t, prev, env("sweeper"))
	tasks, err := app.SweeperLambda(ctx)
	if err != nil {
		t.Fatalf("sweeper: %v", err)
	}
	sweeper, reconciler := tasks.Sweeper, tasks.Scheduler

	// Lambda's side: the async invokes reach the worker, the stream the projector.
	arn, err := tableadmin.StreamARN(ctx, db, local)
	if err != nil {
		t.Fatal(err)
	}
	reader := streams.NewReader(streamsAPI, arn, streams.Options{Logger: log})
	var firstActivityJob *ingest.Job
	runWorker := func() {
		t.Helper()
		for _, p := range shim.take() {
			if j, err := ingest.DecodeJob(p); err == nil && firstActivityJob == nil && j.Event.ObjectType == ingest.ObjectActivity {
				firstActivityJob = &j
			}
			if err := worker.Handle(ctx, p); err != nil {
				t.Fatalf("worker: %v", err)
			}
		}
	}
	runProjector := func() {
		t.Helper()
		if err := reader.Drain(ctx, func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
			return projector.Handle(ctx, ev)
		}); err != nil {
			t.Fatalf("projector: %v", err)
		}
	}
	refuseNext := func() { shim.mu.Lock(); shim.refuse = 1; shim.mu.Unlock() }
	// The schedule's run once the lease of a lost hand-off has lapsed.
	runSweeper := func() int {
		t.Helper()
		sweeper.Now = func() time.Time { return time.Now().Add(sweeper.Lease + time.Second) }
		res, err := sweeper.Sweep(ctx)
		if err != nil {
			t.Fatalf("sweeper: %v (%+v)", err, res)
		}
		return res.Dispatched
	}
	// The reconcile schedule's runs (handlers/sweeper with {"task":"reconcile"}):
	// a step that begins a cycle (cursor, users count) and one a whole
	// interval later that comes to every user (milestones, sync state,
	// recent workouts, connection), inside the period of the milestone the
	// flows create (March 2026); then an operator's full round, which
	// enqueues for every connected athlete whatever it uploaded.
	runReconcile := func() {
		t.Helper()
		march := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
		// The flows' milestone has ended by now (the projector says so):
		// every user gets an active one over the steps' days (test setup,
		// through the unrestricted client, not a role).
		admin := store.New(db, local)
		for shard := range keys.UserListShards {
			page, err := admin.Users.ListUsers(ctx, shard, "", 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range page.UserIDs {
				end := march.AddDate(0, 1, 0)
				m := &model.Milestone{UserID: u, MilestoneID: "iam-reconcile", MilestoneDefinition: model.MilestoneDefinition{
					ModelID: "road-bike", Title: "March", Metric: "distance", Target: 1000, SportTypes: []string{"Run"},
					PeriodStartAtUtc: march.AddDate(0, -1, 0), PeriodEndAtUtc: &end, PartCount: 1},
					Projection: model.Projection{Status: model.StatusActive}, CreatedAtUtc: march, WrittenBy: model.WriterAPI}
				if err := admin.DB.Put(ctx, local.Main, m); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, at := range []time.Time{march, march.Add(reconciler.Settings.WithDefaults().ReconcileInterval)} {
			reconciler.Now = func() time.Time { return at }
			res, err := reconciler.ReconcileStep(ctx)
			if err != nil {
				t.Fatalf("reconcile step: got %+v, %v", res, err)
			}
			t.Logf("reconcile step at %s: %+v", at.Format(time.DateOnly), res)
		}
		reconciler.Now = func() time.Time { return time.Now().UTC() }
		if res, err := reconciler.ReconcileAll(ctx); err != nil || res.Enqueued == 0 {
			t.Fatalf("reconcile: got %+v, %v; want jobs enqueued", res, err)
		}
	}
	// Test setup through the unrestricted client: a revocation confirmed
	// while a sync page is in flight, and a fetch that lands after it.
	admin := store.New(db, local)
	revoke := func(athleteID int64) string {
		t.Helper()
		user, err := admin.Users.ResolveAthlete(ctx, athleteID)
		if err != nil {
			t.Fatal(err)
		}
		grant, err := admin.Connections.StravaConnectionGrant(ctx, user)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		if err := admin.Connections.RevokeStravaConnection(ctx, grant, now.Truncate(time.Second), now, now); err != nil {
			t.Fatal(err)
		}
		return user
	}
	landLate := func(user string, athleteID, activityID int64) {
		t.Helper()
		now := time.Now().UTC()
		if err := admin.Workouts.UpsertWorkout(ctx, &model.Workout{UserID: user, AthleteID: athleteID, ActivityID: activityID, SportType: "Run",
			DistanceMeters: 1000, StartDateUtc: now.Add(-time.Hour), CreatedAtUtc: now, UpdatedAtUtc: now, CorrelationID: "late"}); err != nil {
			t.Fatal(err)
		}
	}
	runFlows(t, apiSrv.URL, sim, verifyToken, refuseNext, runSweeper, runReconcile, runWorker, runProjector, revoke, landLate)
	// An operator's `make redrive` of a parked job: its payload carries no
	// failure count from a dispatcher, so the worker reads the outbox item
	// (GetItem on the idempotency table) before it runs the job again.
	if firstActivityJob == nil {
		t.Fatal("the flows dispatched no activity job to redrive")
	}
	redrive := *firstActivityJob
	redrive.Redrive, redrive.OutboxFailures = true, nil
	raw, err := json.Marshal(redrive)
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Handle(ctx, raw); err != nil {
		t.Fatalf("worker, redriven job: %v", err)
	}

	// Map the recordings to the planned resources.
	plannedPrefix := EnvOf(d.Functions["api"])["CC_TABLE_PREFIX"]
	out := map[string][]Used{}
	for _, c := range readCalls(t, recFile) {
		res := ""
		switch {
		case c.Table != "":
			tbl, ok := d.Tables[plannedPrefix+strings.TrimPrefix(c.Table, localPrefix)]
			if !ok {
				t.Fatalf("%s called %s on table %s, which the plan does not create", c.Function, c.Action, c.Table)
			}
			res = tbl.Str("arn")
			if c.Index != "" {
				res += "/index/" + c.Index
			}
		case c.Lambda != "":
			f, ok := d.Find("aws_lambda_function", "function_name", c.Lambda)
			if !ok {
				t.Fatalf("%s invoked %s, which the plan does not create", c.Function, c.Lambda)
			}
			res = f.Str("arn")
		case c.Parameter != "":
			res = c.Parameter
		case c.Key != "":
			res = c.Key // a key ARN as the code is configured with it
		case c.Queue != "":
			q, ok := d.Find("aws_sqs_queue", "url", c.Queue)
			if !ok {
				t.Fatalf("%s called %s on queue %s, which the plan does not create", c.Function, c.Action, c.Queue)
			}
			res = q.Str("arn")
		default:
			t.Fatalf("recorded call without a resource: %+v", c)
		}
		out[c.Function] = append(out[c.Function], Used{Action: c.Action, Resource: res, Context: c.EncryptionContext})
	}
	if kmsSrv.Requests("GenerateDataKey") == 0 || kmsSrv.Requests("Decrypt") == 0 {
		t.Fatalf("the local KMS endpoint got %d GenerateDataKey and %d Decrypt requests: the tokens were not sealed with the planned key",
			kmsSrv.Requests("GenerateDataKey"), kmsSrv.Requests("Decrypt"))
	}
	return out
}

// runFlows drives the api over HTTP (and the worker and projector after it).
func runFlows(t *testing.T, base string, sim *stravasim.Server, verifyToken string, refuseNext func(), runSweeper func() int, runReconcile, runWorker, runProjector func(),
	revoke func(athleteID int64) string, landLate func(user string, athleteID, activityID int64)) {
	t.Helper()
	ctx := context.Background()
	do := func(c *http.Client, method, path string, body any) (int, []byte) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, base+path, rd)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	expect := func(what string, got, want int, body []byte) {
		t.Helper()
		if got != want {
			t.Fatalf("%s = %d %s, want %d", what, got, body, want)
		}
	}
	login := func(athlete int64) *http.Client {
		t.Helper()
		sim.SetAuthorization(stravasim.Authorization{AthleteID: athlete})
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
			if req.URL.Path == "/" {
				return http.ErrUseLastResponse
			}
			return nil
		}}
		st, b := do(c, http.MethodGet, "/auth/strava/login", nil)
		expect("login", st, http.StatusFound, b)
		return c
	}
	const athlete, other = 9001, 9002
	sim.AddAthlete(stravasim.Athlete{ID: athlete, Firstname: "Ada"})
	sim.AddAthlete(stravasim.Athlete{ID: other, Firstname: "Bob"})

	st, b := do(http.DefaultClient, http.MethodGet, intake.WebhookPath+"?hub.mode=subscribe&hub.verify_token="+verifyToken+"&hub.challenge=c1", nil)
	expect("handshake", st, http.StatusOK, b)
	st, b = do(http.DefaultClient, http.MethodGet, "/", nil)
	expect("landing page", st, http.StatusOK, b)

	s1, s2, s3 := login(athlete), login(athlete), login(athlete)
	bob := login(other)
	for _, p := range []string{"/v1/me", "/v1/models", "/v1/milestones"} {
		st, b = do(s1, http.MethodGet, p, nil)
		expect("GET "+p, st, http.StatusOK, b)
	}
	st, b = do(s1, http.MethodPost, "/v1/milestones", map[string]any{
		"modelId": "road-bike", "title": "10 km in March", "metric": "distance", "target": 10000,
		"sportTypes": []string{"Run"}, "periodStartAtUtc": "2026-03-01T00:00:00Z", "periodEndAtUtc": "2026-04-01T00:00:00Z",
	})
	expect("POST /v1/milestones", st, http.StatusCreated, b)
	var m struct{ MilestoneID string }
	_ = json.Unmarshal(b, &m)

	// upload puts the athlete's run of 1 March + day at Strava and delivers
	// its create.
	upload := func(id int64, day int) {
		t.Helper()
		sim.PutActivity(stravasim.Activity{ID: id, AthleteID: athlete, Name: "Run", SportType: "Run",
			Distance: 4000, MovingTime: 1200, ElapsedTime: 1300, StartDate: time.Date(2026, 3, 1+day, 6, 0, 0, 0, time.UTC)})
		if _, err := sim.Deliver(ctx, base+intake.WebhookPath, sim.ActivityEvent("create", id, athlete, nil)); err != nil {
			t.Fatal(err)
		}
	}
	// Strava's events: creates, an update, a delete (the worker fetches each).
	for i := range 3 {
		upload(int64(70000+i), 2+i)
	}
	if _, err := sim.Deliver(ctx, base+intake.WebhookPath, sim.ActivityEvent("update", 70001, athlete, map[string]string{"title": "Long run"})); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Deliver(ctx, base+intake.WebhookPath, sim.ActivityEvent("delete", 70002, athlete, nil)); err != nil {
		t.Fatal(err)
	}
	// An event for an athlete nobody linked: the worker looks it up (OWNER
	// item, then GSI1) and gives up.
	sim.PutActivity(stravasim.Activity{ID: 71000, AthleteID: 4242, Name: "Run", SportType: "Run", Distance: 1000,
		MovingTime: 300, ElapsedTime: 300, StartDate: time.Date(2026, 3, 9, 6, 0, 0, 0, time.UTC)})
	if _, err := sim.Deliver(ctx, base+intake.WebhookPath, sim.ActivityEvent("create", 71000, 4242, nil)); err != nil {
		t.Fatal(err)
	}
	runWorker()
	runProjector()
	// A hand-off Lambda refuses: the event stays in the outbox and the
	// sweeper re-dispatches it once its lease lapses (Query on the Pending
	// index, the lease's UpdateItem, the async invoke); the worker settles it.
	refuseNext()
	st, b = do(http.DefaultClient, http.MethodPost, intake.WebhookPath, sim.ActivityEvent("update", 70000, athlete, map[string]string{"title": "again"}))
	expect("webhook with a failing hand-off", st, http.StatusOK, b)
	if n := runSweeper(); n != 1 {
		t.Fatalf("the sweeper re-dispatched %d outbox items, want the one whose hand-off failed", n)
	}
	runWorker()
	runProjector()
	st, b = do(s1, http.MethodGet, "/v1/milestones/"+m.MilestoneID, nil)
	expect("GET /v1/milestones/{id}", st, http.StatusOK, b)

	// Four more creates crowd the athlete's window: the webhook gathers
	// them at the claim, and the sweeper hands them out as one burst under
	// the athlete's burst lease (UpdateItem), reading their jobs
	// (BatchGetItem). A refused hand-off releases the lease (UpdateItem);
	// the next sweep hands the burst off again, and the worker serves it
	// and releases the lease (UpdateItem).
	for i := range 4 {
		upload(int64(70010+i), 9+i)
	}
	refuseNext()
	if n := runSweeper(); n != 0 {
		t.Fatalf("the sweeper handed off %d gathered creates through a refusing hand-off, want none", n)
	}
	if n := runSweeper(); n != 4 {
		t.Fatalf("the sweeper handed off %d gathered creates, want the burst of 4", n)
	}
	runWorker()
	runProjector()

	// Bob deauthorizes the app on Strava's side: Strava revokes the tokens,
	// then sends the event (the worker confirms it before removing anything).
	sim.RevokeAthlete(other)
	if _, err := sim.Deliver(ctx, base+intake.WebhookPath, sim.DeauthorizationEvent(other)); err != nil {
		t.Fatal(err)
	}
	runWorker()
	runProjector()
	_ = bob

	// Reconciliation of the athletes still connected (the sign-ins'
	// backfills ran with the worker above): it finds an activity no webhook
	// announced and writes it.
	sim.PutActivity(stravasim.Activity{ID: 70100, AthleteID: athlete, Name: "Unannounced", SportType: "Run",
		Distance: 3000, MovingTime: 900, ElapsedTime: 950, StartDate: time.Now().UTC().Add(-24 * time.Hour).Truncate(time.Second)})
	runReconcile()
	runWorker()
	runProjector()

	// Cy connects; the backfill's list page is answered only after Cy's
	// revocation was confirmed: the page's guard check removes its writes
	// (a transaction checking that no reconnect cleared the revocation).
	// Then a webhook fetch in flight lands: the projector removes it.
	const cy = 9003
	sim.AddAthlete(stravasim.Athlete{ID: cy, Firstname: "Cy"})
	sim.PutActivity(stravasim.Activity{ID: 70300, AthleteID: cy, Name: "Run", SportType: "Run", Distance: 5000,
		MovingTime: 1500, ElapsedTime: 1550, StartDate: time.Now().UTC().Add(-48 * time.Hour).Truncate(time.Second)})
	listed := sim.Stats().ListRequests
	_ = login(cy)
	gate := make(chan struct{})
	sim.AddFault(stravasim.Fault{Endpoint: stravasim.EndpointList, Gate: gate})
	worked := make(chan struct{})
	go func() { defer close(worked); runWorker() }()
	for deadline := time.Now().Add(30 * time.Second); sim.Stats().ListRequests == listed; {
		if time.Now().After(deadline) {
			close(gate)
			t.Fatal("Cy's backfill never listed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cyUser := revoke(cy)
	close(gate)
	<-worked
	landLate(cyUser, cy, 70301)
	runProjector()

	// Logout of one session; account deletion with the two others.
	st, b = do(s3, http.MethodPost, "/auth/logout", nil)
	if st >= 400 {
		t.Fatalf("logout = %d %s", st, b)
	}
	st, b = do(s1, http.MethodDelete, "/v1/me", nil)
	expect("DELETE /v1/me", st, http.StatusAccepted, b)
	st, b = do(s2, http.MethodGet, "/v1/me", nil)
	expect("GET /v1/me with the other session after deletion", st, http.StatusUnauthorized, b)
	runWorker()
	runProjector()
}

// IAMDiff compares the recorded calls with the planned policies: used but
// not granted (a grant counts only when its conditions hold for the call,
// see conditionsHold), and granted but neither used nor in grantedForAWS.
func IAMDiff(pols map[string][]Policy, used map[string][]Used) (missing, unused []string) {
	for _, fn := range FunctionRoles {
		type grant struct {
			action string
			res    *regexp.Regexp
			raw    string
			st     PolicyStatement
		}
		var grants []grant
		for _, p := range pols[fn] {
			for _, st := range p.Statement {
				if st.Effect != "Allow" {
					continue
				}
				for _, a := range st.Action {
					for _, r := range st.Resource {
						grants = append(grants, grant{a, iamPattern(r), r, st})
					}
				}
			}
		}
		allows := func(g grant, u Used) bool {
			return g.action == u.Action && g.res.MatchString(u.Resource) && conditionsHold(g.st.Condition, requestContext(u))
		}
		seen := map[string]bool{}
		for _, u := range used[fn] {
			key := fmt.Sprintf("%s %s %v", u.Action, u.Resource, u.Context)
			if seen[key] {
				continue
			}
			seen[key] = true
			if !slices.ContainsFunc(grants, func(g grant) bool { return allows(g, u) }) {
				ctx := ""
				if len(u.Context) > 0 {
					ctx = fmt.Sprintf(" with encryption context %v", u.Context)
				}
				missing = append(missing, fmt.Sprintf("%s: the code calls %s on %s%s, the role does not grant it", fn, u.Action, u.Resource, ctx))
			}
		}
		for _, g := range grants {
			if slices.ContainsFunc(used[fn], func(u Used) bool { return allows(g, u) }) || grantedForAWS[fn][g.action] != "" {
				continue
			}
			if grantedForAWS["*"][g.action] != "" && (!strings.HasPrefix(g.action, "kms:") || viaService(g.st)) {
				continue
			}
			unused = append(unused, fmt.Sprintf("%s: the role grants %s on %s (statement %q), which the code never calls", fn, g.action, g.raw, g.st.Sid))
		}
	}
	sort.Strings(missing)
	sort.Strings(unused)
	return missing, unused
}

// viaService reports whether st is usable only through an AWS service
// (StringEquals kms:ViaService): the service calls KMS, not the code.
func viaService(st PolicyStatement) bool {
	return len(st.Condition["StringEquals"]["kms:ViaService"]) > 0
}

// requestContext is the IAM request context of a recorded call, as far as
// the policies' conditions read it: a KMS call's encryption context
// (kms:EncryptionContext:<key>, kms:EncryptionContextKeys). The functions
// call AWS directly, so kms:ViaService is never present.
func requestContext(u Used) map[string][]string {
	out := map[string][]string{}
	for k, v := range u.Context {
		out["kms:EncryptionContext:"+k] = []string{v}
		out["kms:EncryptionContextKeys"] = append(out["kms:EncryptionContextKeys"], k)
	}
	return out
}

// conditionsHold evaluates a statement's conditions (test → key → values)
// on a request context. Only the operators the module uses are known; any
// other fails, so a new operator makes the test say so instead of passing.
func conditionsHold(cond map[string]map[string]StringOrList, req map[string][]string) bool {
	for test, keys := range cond {
		for key, want := range keys {
			got, present := req[key]
			switch test {
			case "StringEquals":
				if !present || len(got) != 1 || !slices.Contains(want, got[0]) {
					return false
				}
			case "Null":
				if len(want) != 1 || (want[0] == "true") == present {
					return false
				}
			case "ForAllValues:StringEquals":
				for _, g := range got {
					if !slices.Contains(want, g) {
						return false
					}
				}
			default:
				return false
			}
		}
	}
	return true
}

// TestIAMMatchesTheCode: per role, used ⊆ granted and granted ⊆ used ∪
// grantedForAWS.
func TestIAMMatchesTheCode(t *testing.T) {
	_, state := applied(t)
	d := NewDeployed(state)
	pols, err := d.RolePolicies()
	if err != nil {
		t.Fatal(err)
	}
	for role := range d.Functions {
		if !slices.Contains(FunctionRoles, role) {
			t.Errorf("function %s is deployed but its calls are never recorded: wire it in recordExample and add it to FunctionRoles", role)
		}
	}
	used := recordExample(t, d)
	for _, fn := range FunctionRoles {
		if len(used[fn]) == 0 {
			t.Fatalf("no calls recorded for %s: the flows did not exercise it", fn)
		}
		counts := map[string]int{}
		for _, u := range used[fn] {
			counts[u.Action]++
		}
		t.Logf("%s: %d calls recorded: %v", fn, len(used[fn]), counts)
	}
	missing, unused := IAMDiff(pols, used)
	if len(missing)+len(unused) > 0 {
		t.Fatalf("IAM and code disagree:\n%s", strings.Join(append(missing, unused...), "\n"))
	}
}
