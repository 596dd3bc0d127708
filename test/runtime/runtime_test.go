package runtime

import (
	"archive/zip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/commitcollect/backend/handlers/bff"
	"github.com/commitcollect/backend/handlers/bff/export"
	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/handoff"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/secrets/secretstest"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/sessions"
	"github.com/commitcollect/backend/model/store/tableadmin"
	"github.com/commitcollect/backend/model/streams"
	"github.com/commitcollect/backend/scripts/deploy/tfdeploy"
	"github.com/commitcollect/backend/scripts/stravasim"
	"github.com/commitcollect/backend/test/dynamolocal"
)

func TestMain(m *testing.M) { dynamolocal.Main(m) }

// The values this test gives the environment variables Terraform sets
// (terraform/modules/commitcollect and modules/function). In AWS they are
// ARNs, URLs and names of the deployment; here they point at the test's
// stand-ins. TestEnvironmentMatchesTerraform keeps this list and Terraform's
// names equal, so a new variable cannot be missed here.
func envValues(f *fixture) map[string]string {
	return map[string]string{
		"CC_TABLE_PREFIX":             f.prefix,
		"CC_LOG_LEVEL":                f.dep.LogLevel,
		"STRAVA_BASE_URL":             f.sim.URL,
		"STRAVA_CLIENT_ID":            f.sim.ClientID(),
		"STRAVA_CLIENT_SECRET_PARAM":  secretParam,
		"STRAVA_VERIFY_TOKEN_PARAM":   verifyParam,
		"CC_WEBHOOK_PATH_SECRET":      pathSecret,
		"CC_PUBLIC_URL":               publicURL,
		"CC_WORKER_FUNCTION":          workerFunction,
		"CC_CORS_ORIGINS":             appOrigin,
		"STRAVA_SUBSCRIPTION_ID":      fmt.Sprint(subscriptionID),
		"CC_OUTBOX_LEASE":             outboxLease.String(),
		"CC_ATHLETE_READS_PER_WINDOW": "30", "CC_ATHLETE_READS_PER_DAY": "100",
		"CC_RECONCILE_DAYS":     "14",
		"CC_RECONCILE_INTERVAL": "168h",
		"CC_RECONCILE_IDLE":     "672h",
		"CC_OUTBOX_SHARDS":      "32",
		"CC_SYNC_MAX_DAYS":      "365",
		"CC_SYNC_BUDGET_SHARE":  "0.5",
		"CC_TOKEN_KMS_KEY":      tokenKeyARN,
	}
}

const (
	secretParam    = "arn:aws:ssm:ap-southeast-2:123456789012:parameter/commitcollect/rt/strava-client-secret"
	verifyParam    = "arn:aws:ssm:ap-southeast-2:123456789012:parameter/commitcollect/rt/strava-verify-token"
	verifyToken    = "rt-verify-token"
	pathSecret     = "rt-callback-path-0123456789"
	publicURL      = "https://api.commitcollect.test"
	appOrigin      = "https://app.commitcollect.test"
	workerFunction = "commitcollect-rt-worker"
	subscriptionID = 4242
	athleteID      = 777001
	region         = "ap-southeast-2"
	tokenKeyARN    = "arn:aws:kms:ap-southeast-2:123456789012:key/0b6a3c2e-7d41-4e7b-9a51-runtime00001"
	outboxLease    = 5 * time.Minute
)

func terraformRoot() string { return filepath.Join("..", "..", "terraform") }

// TestEnvironmentMatchesTerraform: every variable Terraform sets on a
// function has a value in envValues, and envValues names nothing Terraform
// does not set (runs without the emulator).
func TestEnvironmentMatchesTerraform(t *testing.T) {
	t.Parallel()
	d, err := LoadDeployment(terraformRoot())
	if err != nil {
		t.Fatal(err)
	}
	values := envValues(&fixture{sim: &stravasim.Server{}, dep: d})
	used := map[string]bool{}
	for _, fn := range Functions {
		if len(d.Env[fn]) == 0 {
			t.Errorf("terraform gives %s no environment", fn)
		}
		for _, k := range d.Env[fn] {
			used[k] = true
			if _, ok := values[k]; !ok {
				t.Errorf("terraform sets %s on %s, the runtime test gives it no value (envValues)", k, fn)
			}
		}
	}
	for k := range values {
		if !used[k] {
			t.Errorf("envValues sets %s, which terraform gives no function", k)
		}
	}
	for _, want := range []string{"CC_WORKER_FUNCTION", "STRAVA_VERIFY_TOKEN_PARAM", "CC_CORS_ORIGINS"} {
		if !slices.Contains(d.Env["api"], want) {
			t.Errorf("api environment %v lacks %s", d.Env["api"], want)
		}
	}
	if len(d.Filters) != 4 {
		t.Errorf("projector filters = %v, want 4", d.Filters)
	}
}

// fixture is one emulated deployment.
type fixture struct {
	t       *testing.T
	ctx     context.Context
	dep     Deployment
	prefix  string
	tables  dynamo.Tables
	st      *store.Adapters
	ss      *sessions.Store // the sign-ins (st's DB)
	db      *dynamodb.Client
	sim     *stravasim.Server
	aws     *AWS
	fns     map[string]*Emulator
	stream  *streams.Reader
	streamN struct{ seen, delivered, batches, ownWrites int }
	invokes int
	kms     *secretstest.KMS
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func TestLambdaRuntime(t *testing.T) {
	rie := os.Getenv(EnvRIE)
	if rie == "" {
		// make lambda-rie (and so make test) builds it here from the Go module proxy.
		if root, err := dynamolocal.ModuleRoot(); err == nil {
			if p := filepath.Join(root, ".cache", "bin", "aws-lambda-rie"); fileExists(p) {
				rie = p
			}
		}
	}
	if rie == "" {
		t.Skipf("SKIP: %s is not set and make lambda-rie has not built .cache/bin/aws-lambda-rie: the Lambda runtime tests "+
			"need AWS's Runtime Interface Emulator (make test builds it; or %s=/path/to/aws-lambda-rie go test ./test/runtime/)",
			EnvRIE, EnvRIE)
	}
	if _, err := os.Stat(rie); err != nil {
		t.Fatalf("%s=%s: %v", EnvRIE, rie, err)
	}
	f := newFixture(t, rie)

	// --- webhook subscription handshake
	hs := f.api("GET", "/webhooks/strava/"+pathSecret+"?hub.mode=subscribe&hub.verify_token="+verifyToken+"&hub.challenge=ch-123", nil, nil, "")
	if hs.StatusCode != 200 || !strings.Contains(hs.Body, `"hub.challenge":"ch-123"`) {
		t.Fatalf("handshake: %d %s", hs.StatusCode, hs.Body)
	}
	if r := f.api("GET", "/webhooks/strava?hub.mode=subscribe&hub.verify_token=wrong&hub.challenge=x", nil, nil, ""); r.StatusCode != 403 {
		t.Fatalf("handshake with a wrong token: %d %s", r.StatusCode, r.Body)
	}
	// --- every answer, whichever route or refusal wrote it, carries what a
	// browser needs (the api is reached over https: HSTS)
	for _, target := range []string{"/webhooks/strava?hub.mode=subscribe&hub.verify_token=wrong", "/v1/me", "/", "/auth/strava/callback?state=x&code=y"} {
		r := f.api("GET", target, nil, nil, "")
		if header(r, "X-Content-Type-Options") != "nosniff" || !strings.Contains(header(r, "Strict-Transport-Security"), "max-age=") ||
			!strings.Contains(header(r, "Content-Security-Policy"), "frame-ancestors 'none'") {
			t.Fatalf("GET %s: %d, headers %v; want nosniff, HSTS and a CSP forbidding framing", target, r.StatusCode, r.Headers)
		}
	}

	// --- OAuth login through the simulator, twice: one user, two sessions
	s1 := f.login()
	s2 := f.login()
	if s1 == s2 {
		t.Fatalf("two logins gave the same session cookie")
	}
	var me struct {
		UserID    string `json:"userId"`
		AthleteID int64  `json:"athleteId"`
		Connected bool   `json:"connected"`
	}
	f.apiJSON("GET", "/v1/me", s1, "", 200, &me)
	var me2 struct {
		UserID string `json:"userId"`
	}
	f.apiJSON("GET", "/v1/me", s2, "", 200, &me2)
	if me.UserID == "" || me.UserID != me2.UserID || me.AthleteID != athleteID || !me.Connected {
		t.Fatalf("/v1/me: %+v and %+v, want one connected user for athlete %d", me, me2, athleteID)
	}
	if ids, _, err := f.ss.UserSessionIDs(f.ctx, me.UserID); err != nil || len(ids) != 2 {
		t.Fatalf("sessions of %s: %v, %v; want 2", me.UserID, ids, err)
	}

	// --- CORS: the preflight, when it reaches the api Lambda
	pf := f.api("OPTIONS", "/v1/milestones", map[string]string{
		"Origin": appOrigin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type",
	}, nil, "")
	if pf.StatusCode != 204 || header(pf, "Access-Control-Allow-Origin") != appOrigin ||
		header(pf, "Access-Control-Allow-Credentials") != "true" ||
		!strings.Contains(header(pf, "Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(strings.ToLower(header(pf, "Access-Control-Allow-Headers")), "content-type") {
		t.Fatalf("preflight from %s: %d %v %q", appOrigin, pf.StatusCode, pf.Headers, pf.Body)
	}
	if r := f.api("OPTIONS", "/v1/milestones", map[string]string{"Origin": "https://evil.test", "Access-Control-Request-Method": "POST"}, nil, ""); r.StatusCode != 403 || header(r, "Access-Control-Allow-Origin") != "" {
		t.Fatalf("preflight from another origin: %d %v", r.StatusCode, r.Headers)
	}
	if r := f.api("GET", "/v1/me", map[string]string{"Origin": appOrigin}, []string{s1}, ""); r.StatusCode != 200 || header(r, "Access-Control-Allow-Origin") != appOrigin {
		t.Fatalf("cross-origin GET /v1/me: %d %v", r.StatusCode, r.Headers)
	}

	// --- milestones: the catalog was seeded by the deploy's own seeding
	now := time.Now().UTC()
	start := now.Add(-72 * time.Hour).Truncate(time.Hour)
	create := fmt.Sprintf(`{"modelId":"saturn-v","title":"Run 10 km","metric":"distance","target":10000,"sportTypes":["Run"],"periodStartAtUtc":%q,"periodEndAtUtc":%q}`,
		start.Format(time.RFC3339), now.Add(72*time.Hour).Format(time.RFC3339))
	var ms struct {
		MilestoneID string `json:"milestoneId"`
		Status      string `json:"status"`
	}
	f.apiJSON("POST", "/v1/milestones", s1, create, 201, &ms)
	if ms.MilestoneID == "" || ms.Status != "active" {
		t.Fatalf("created milestone: %+v", ms)
	}
	if r := f.api("POST", "/v1/milestones", nil, []string{s1}, strings.Replace(create, "saturn-v", "no-such-model", 1)); r.StatusCode != 400 || !strings.Contains(r.Body, "modelId") {
		t.Fatalf("milestone on an unknown model: %d %s", r.StatusCode, r.Body)
	}
	var list struct {
		Milestones []struct {
			MilestoneID string `json:"milestoneId"`
		} `json:"milestones"`
	}
	f.apiJSON("GET", "/v1/milestones", s1, "", 200, &list)
	if len(list.Milestones) != 1 || list.Milestones[0].MilestoneID != ms.MilestoneID {
		t.Fatalf("milestones: %+v", list)
	}
	// The milestone INSERT reaches the projector through the mapping's filter.
	f.pumpStream()

	// --- a workout: webhook → async invoke → worker → stream → projector
	f.sim.PutActivity(stravasim.Activity{ID: 9001, AthleteID: athleteID, Name: "Morning run", SportType: "Run",
		Distance: 6000, MovingTime: 1800, ElapsedTime: 1900, StartDate: now.Add(-2 * time.Hour)})
	// One event delivered twice (its event_time is part of its identity:
	// two events built a second apart are two events).
	ev := f.sim.ActivityEvent("create", 9001, athleteID, nil)
	f.webhook(ev, "accepted")
	f.webhook(ev, "duplicate")
	f.drainWorker()
	w, err := f.st.Workouts.Workout(f.ctx, me.UserID, 9001)
	if err != nil || w.DistanceMeters != 6000 || w.SportType != "Run" {
		t.Fatalf("workout 9001: %+v, %v", w, err)
	}
	f.pumpStream()
	f.checkMilestone(me.UserID, ms.MilestoneID, 6000, 6, model.StatusActive)

	// A ride does not count; a second run completes the milestone.
	f.sim.PutActivity(stravasim.Activity{ID: 9002, AthleteID: athleteID, Name: "Ride", SportType: "Ride",
		Distance: 30000, MovingTime: 3600, ElapsedTime: 3700, StartDate: now.Add(-90 * time.Minute)})
	f.sim.PutActivity(stravasim.Activity{ID: 9003, AthleteID: athleteID, Name: "Evening run", SportType: "Run",
		Distance: 5000, MovingTime: 1500, ElapsedTime: 1600, StartDate: now.Add(-time.Hour)})
	f.webhook(f.sim.ActivityEvent("create", 9002, athleteID, nil), "accepted")
	f.webhook(f.sim.ActivityEvent("create", 9003, athleteID, nil), "accepted")
	f.drainWorker()
	f.pumpStream()
	f.checkMilestone(me.UserID, ms.MilestoneID, 11000, 10, model.StatusCompleted)

	// A deleted run lowers the value, never the awards.
	f.sim.DeleteActivity(9003)
	f.webhook(f.sim.ActivityEvent("delete", 9003, athleteID, nil), "accepted")
	f.drainWorker()
	f.pumpStream()
	f.checkMilestone(me.UserID, ms.MilestoneID, 6000, 10, model.StatusCompleted)

	// The projector's own writes (progress, awards) never reach it: the
	// mapping's filters drop them, and they were there to drop.
	if f.streamN.ownWrites != 0 || f.streamN.seen <= f.streamN.delivered {
		t.Fatalf("the projector was invoked with %d of its own writes; %d records seen, %d delivered", f.streamN.ownWrites, f.streamN.seen, f.streamN.delivered)
	}

	// --- the sweeper, invoked by its schedule: an event accepted (200) by an
	// api that died before its async invoke left a received outbox item whose
	// lease lapsed; the sweeper hands it to the worker, nobody redelivers.
	f.sim.PutActivity(stravasim.Activity{ID: 9004, AthleteID: athleteID, Name: "Lost run", SportType: "Run",
		Distance: 2000, MovingTime: 600, ElapsedTime: 650, StartDate: now.Add(-30 * time.Minute)})
	f.claimLostHandOff(f.sim.ActivityEvent("create", 9004, athleteID, nil))
	var sweep handoff.SweepResult
	out, err := f.fns["sweeper"].Invoke(f.ctx, []byte(scheduledEvent))
	if err != nil || json.Unmarshal(out, &sweep) != nil || sweep.Dispatched != 1 || sweep.Failed != 0 {
		t.Fatalf("sweeper: %s %+v, %v; want 1 dispatched", out, sweep, err)
	}
	f.drainWorker()
	if w, err := f.st.Workouts.Workout(f.ctx, me.UserID, 9004); err != nil || w.DistanceMeters != 2000 {
		t.Fatalf("workout 9004 after the sweep: %+v, %v", w, err)
	}
	f.pumpStream()
	f.checkMilestone(me.UserID, ms.MilestoneID, 8000, 10, model.StatusCompleted)
	// Strava tokens were sealed and opened through KMS with the key
	// Terraform names (login and refresh), never stored raw.
	if f.kms.Requests("GenerateDataKey") == 0 || f.kms.Requests("Decrypt") == 0 {
		t.Fatalf("KMS requests: GenerateDataKey %d, Decrypt %d; want both", f.kms.Requests("GenerateDataKey"), f.kms.Requests("Decrypt"))
	}

	// --- account deletion for a user with two sessions
	var del struct {
		Status    string   `json:"status"`
		Completed []string `json:"completed"`
		StoppedAt string   `json:"stoppedAt"`
	}
	f.apiJSON("DELETE", "/v1/me", s1, "", 202, &del)
	if del.Status != "deleted" || del.StoppedAt != "" {
		t.Fatalf("DELETE /v1/me: %+v", del)
	}
	for _, s := range []string{s1, s2} {
		if r := f.api("GET", "/v1/me", nil, []string{s}, ""); r.StatusCode != 401 {
			t.Fatalf("GET /v1/me with a session of the deleted user: %d %s", r.StatusCode, r.Body)
		}
	}
	if ids, _, err := f.ss.UserSessionIDs(f.ctx, me.UserID); err != nil || len(ids) != 0 {
		t.Fatalf("sessions left: %v, %v", ids, err)
	}
	for _, s := range []string{s1, s2} {
		if _, err := f.ss.Session(f.ctx, keys.SessionHash(strings.TrimPrefix(s, "cc_session="))); !errors.Is(err, model.ErrNotFound) {
			t.Fatalf("session %s after deletion: %v, want ErrNotFound", s, err)
		}
	}
	if _, err := f.st.Users.Profile(f.ctx, me.UserID); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("profile after deletion: %v", err)
	}
	left, err := f.st.DB.QueryPrefix(f.ctx, f.tables.Main, keys.UserPK(me.UserID), "", dynamo.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range left.Items {
		// Only the user guard stays (90 days): what writers in flight check.
		if k, err := dynamo.KeyOf(it); err != nil || k != keys.UserGuardKey(me.UserID) {
			t.Fatalf("user partition after deletion holds %v (%v)", k, err)
		}
	}
	f.pumpStream() // the deletions' REMOVE records are filtered out
	if got := f.sim.Stats().Deauthorizations; got != 1 {
		t.Fatalf("Strava deauthorizations = %d, want 1", got)
	}

	f.exportLargeHistory(20000)
	f.report()
}

// exportLargeHistory gives a user n stored workouts and exports them
// through the api Lambda (its Terraform timeout and Lambda's 6 MB answer
// limit enforced by the emulator), following Link's next page: every
// workout comes exactly once, each body within export.PageBytes.
func (f *fixture) exportLargeHistory(n int) {
	f.t.Helper()
	const user, athlete, first = "export-user", int64(77001), int64(9_000_000)
	if err := f.st.DB.Put(f.ctx, f.tables.Main, &model.Profile{UserID: user, AthleteID: athlete, DisplayName: "Long History", CreatedAtUtc: time.Now().UTC()}); err != nil {
		f.t.Fatal(err)
	}
	cookie := model.NewID()
	if err := f.ss.CreateSession(f.ctx, &model.Session{SessionID: keys.SessionHash(cookie), UserID: user, CreatedAtUtc: time.Now().UTC(),
		ExpiresAtUtc: time.Now().Add(time.Hour).Unix()}); err != nil {
		f.t.Fatal(err)
	}
	seeded := time.Now()
	if err := SeedHistory(f.ctx, f.st, user, athlete, first, n); err != nil {
		f.t.Fatal(err)
	}
	seen := make(map[int64]int, n)
	target, pages, largestBody, largestInvoke := "/v1/me/export", 0, 0, 0
	start := time.Now()
	for target != "" {
		r := f.api("GET", target, nil, []string{bff.SessionCookie + "=" + cookie}, "")
		invoke, _ := json.Marshal(r)
		largestBody, largestInvoke = max(largestBody, len(r.Body)), max(largestInvoke, len(invoke))
		if r.StatusCode != 200 || len(r.Body) > export.PageBytes {
			f.t.Fatalf("export page %d: %d, %d bytes (bound %d): %.300s", pages, r.StatusCode, len(r.Body), export.PageBytes, r.Body)
		}
		var page struct {
			Workouts []struct {
				ActivityID int64 `json:"activityId"`
			} `json:"workouts"`
		}
		if err := json.Unmarshal([]byte(r.Body), &page); err != nil {
			f.t.Fatalf("export page %d is not JSON: %v", pages, err)
		}
		for _, w := range page.Workouts {
			seen[w.ActivityID]++
		}
		target = strings.TrimPrefix(nextLink(header(r, "Link")), publicURL)
		pages++
	}
	for id := first; id < first+int64(n); id++ {
		if seen[id] != 1 {
			f.t.Fatalf("activity %d exported %d times, want once", id, seen[id])
		}
	}
	fmt.Printf("export: workouts=%d pages=%d largest_body=%d largest_invoke=%d (Lambda limit 6291456) seeded_in=%s exported_in=%s\n",
		len(seen), pages, largestBody, largestInvoke, start.Sub(seeded).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	if pages < 2 {
		f.t.Fatalf("%d workouts in %d page: want the history paged", n, pages)
	}
}

// nextLink is the target of a Link header's rel="next" (RFC 8288), or "".
func nextLink(link string) string {
	for _, part := range strings.Split(link, ",") {
		target, params, ok := strings.Cut(strings.TrimSpace(part), ";")
		if ok && strings.Contains(params, `rel="next"`) {
			return strings.Trim(strings.TrimSpace(target), "<>")
		}
	}
	return ""
}

func newFixture(t *testing.T, rie string) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	f := &fixture{t: t, ctx: ctx, fns: map[string]*Emulator{}}
	var err error
	if f.dep, err = LoadDeployment(terraformRoot()); err != nil {
		t.Fatal(err)
	}
	// Strava's callback routes, under this deployment's path segment.
	callback, err := f.dep.CallbackRoutes(pathSecret)
	if err != nil {
		t.Fatal(err)
	}
	f.dep.Routes = append(f.dep.Routes, callback...)

	// DynamoDB Local: the four tables of a fresh deployment, then the deploy's
	// own post-apply seeding from Terraform-shaped outputs.
	endpoint := dynamolocal.Endpoint(t)
	db, streamsClient := dynamolocal.Clients(t)
	f.db = db
	f.prefix = dynamolocal.UniquePrefix()
	f.tables = dynamo.TableNames(f.prefix)
	if err := tableadmin.CreateTables(ctx, db, f.tables); err != nil {
		t.Fatalf("create tables: %v", err)
	}
	t.Cleanup(func() { _ = tableadmin.DeleteTables(context.Background(), db, f.tables) })
	f.st = store.New(db, f.tables)
	f.ss = sessions.New(f.st.DB)
	desc, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(f.tables.Main)})
	if err != nil {
		t.Fatal(err)
	}
	streamARN := aws.ToString(desc.Table.LatestStreamArn)
	outs := terraformOutputs(f.tables, streamARN)
	target, err := tfdeploy.TargetFromOutputs(outs)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := tfdeploy.SeedCatalog(ctx, db, target.Tables); err != nil || n == 0 {
		t.Fatalf("seed the catalog as the deploy does: %d, %v", n, err)
	}

	f.sim = stravasim.New(stravasim.Options{SubscriptionID: subscriptionID})
	t.Cleanup(f.sim.Close)
	f.sim.AddAthlete(stravasim.Athlete{ID: athleteID, Firstname: "Ada", Lastname: "Runtime"})

	f.aws = NewAWS(t, map[string]string{secretParam: f.sim.ClientSecret(), verifyParam: verifyToken})
	// KMS for the token key Terraform gives api and worker (CC_TOKEN_KMS_KEY):
	// the real KMS client in the bootstraps signs and sends its requests here.
	f.kms = secretstest.NewKMS(t, tokenKeyARN)
	f.aws.Retries = f.dep.WorkerRetries

	// The bootstraps, built for this machine exactly as `make build` does,
	// taken out of their zips.
	dist := t.TempDir()
	zips := buildLikeMake(t, dist)
	values := envValues(f)
	for _, fn := range Functions {
		z := filepath.Join(dist, fn+".zip")
		if !slices.Contains(zips, z) {
			t.Fatalf("build made %v, no %s", zips, z)
		}
		bootstrap := unzipBootstrap(t, z, filepath.Join(t.TempDir(), fn))
		name := "commitcollect-rt-" + fn
		env := map[string]string{
			// What Lambda gives every function.
			"AWS_REGION": region, "AWS_DEFAULT_REGION": region,
			"AWS_ACCESS_KEY_ID": "AKIDRUNTIMETEST", "AWS_SECRET_ACCESS_KEY": "runtime-test-secret", "AWS_SESSION_TOKEN": "runtime-test-session",
			"AWS_LAMBDA_FUNCTION_NAME":        name,
			"AWS_LAMBDA_FUNCTION_TIMEOUT":     fmt.Sprint(f.dep.Settings[fn].TimeoutS),
			"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": fmt.Sprint(f.dep.Settings[fn].MemoryMB),
			"AWS_LAMBDA_LOG_GROUP_NAME":       "/aws/lambda/" + name, "AWS_LAMBDA_LOG_FORMAT": "JSON",
			"PATH": "/usr/local/bin:/usr/bin:/bin", "TZ": ":UTC", "LANG": "en_US.UTF-8",
			// The test's stand-ins for AWS endpoints (the SDK's standard variables).
			"AWS_ENDPOINT_URL_DYNAMODB": endpoint,
			"AWS_ENDPOINT_URL_LAMBDA":   f.aws.URL,
			"AWS_ENDPOINT_URL_SSM":      f.aws.URL,
			"AWS_ENDPOINT_URL_KMS":      f.kms.URL,
		}
		for _, k := range f.dep.Env[fn] {
			v, ok := values[k]
			if !ok {
				t.Fatalf("no value for %s (see TestEnvironmentMatchesTerraform)", k)
			}
			env[k] = v
		}
		f.fns[fn] = StartEmulator(t, rie, bootstrap, fn, env)
	}
	f.aws.Register(workerFunction, f.fns["worker"])

	f.stream = streams.NewReader(streamsClient, streamARN, streams.Options{Start: streams.TrimHorizon, BatchSize: 100, MaxAttempts: 3})
	return f
}

// terraformOutputs are the outputs scripts/deploy reads after apply.
func terraformOutputs(t dynamo.Tables, streamARN string) map[string]tfexec.OutputMeta {
	names, _ := json.Marshal(map[string]string{"main": t.Main, "sessions": t.Sessions, "audit": t.Audit, "idempotency": t.Idempotency})
	arn, _ := json.Marshal(streamARN)
	return map[string]tfexec.OutputMeta{"table_names": {Value: names}, "stream_arn": {Value: arn}}
}

func unzipBootstrap(t *testing.T, zipPath, dir string) string {
	t.Helper()
	zr, err := zip.OpenReader(zipPath)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	if len(zr.File) != 1 || zr.File[0].Name != "bootstrap" || zr.File[0].Mode()&0o111 == 0 {
		t.Fatalf("%s: want exactly one executable bootstrap, got %v", zipPath, zr.File)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := zr.File[0].Open()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out := filepath.Join(dir, "bootstrap")
	w, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(w, in); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// ---------------------------------------------------------------- the api

// apiEvent builds the API Gateway HTTP API (payload 2.0) event for a
// request, routed as the Terraform routes route it.
func (f *fixture) apiEvent(method, target string, hdr map[string]string, cookies []string, body string) events.APIGatewayV2HTTPRequest {
	f.t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		f.t.Fatal(err)
	}
	routeKey := route(f.dep.Routes, method, u.Path)
	if routeKey == "" {
		if method != http.MethodOptions {
			f.t.Fatalf("%s %s matches no route of the HTTP API (terraform local.routes): API Gateway would answer 404", method, u.Path)
		}
		// A preflight reaches the Lambda only through a catch-all route
		// (API Gateway's cors_configuration answers it otherwise).
		routeKey = "$default"
	}
	now := time.Now().UTC()
	h := map[string]string{"host": "api.commitcollect.test", "user-agent": "runtime-test", "x-forwarded-proto": "https", "x-forwarded-for": "203.0.113.7"}
	for k, v := range hdr {
		h[strings.ToLower(k)] = v
	}
	if body != "" {
		h["content-type"] = "application/json"
	}
	if len(cookies) > 0 {
		h["cookie"] = strings.Join(cookies, "; ")
	}
	var qs map[string]string
	if q := u.Query(); len(q) > 0 {
		qs = map[string]string{}
		for k, v := range q {
			qs[k] = strings.Join(v, ",")
		}
	}
	f.invokes++
	return events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: routeKey, RawPath: u.Path, RawQueryString: u.RawQuery,
		Cookies: cookies, Headers: h, QueryStringParameters: qs, Body: body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey: routeKey, AccountID: "123456789012", Stage: "$default", APIID: "rt0api", DomainName: "api.commitcollect.test",
			DomainPrefix: "api", RequestID: fmt.Sprintf("rt-%d", f.invokes), Time: now.Format("02/Jan/2006:15:04:05 -0700"), TimeEpoch: now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: u.Path, Protocol: "HTTP/1.1", SourceIP: "203.0.113.7", UserAgent: "runtime-test"},
		},
	}
}

// route returns the route key of routes that API Gateway would pick for
// method and path ("{name}" matches one segment), or "".
func route(routes []string, method, path string) string {
	for _, r := range routes {
		m, p, _ := strings.Cut(r, " ")
		if m != method {
			continue
		}
		ps, xs := strings.Split(p, "/"), strings.Split(path, "/")
		if len(ps) != len(xs) {
			continue
		}
		ok := true
		for i := range ps {
			if !(strings.HasPrefix(ps[i], "{") && strings.HasSuffix(ps[i], "}") && xs[i] != "") && ps[i] != xs[i] {
				ok = false
			}
		}
		if ok {
			return r
		}
	}
	return ""
}

// api invokes the api Lambda with a request and returns its response.
func (f *fixture) api(method, target string, hdr map[string]string, cookies []string, body string) events.APIGatewayV2HTTPResponse {
	f.t.Helper()
	ev, _ := json.Marshal(f.apiEvent(method, target, hdr, cookies, body))
	out, err := f.fns["api"].Invoke(f.ctx, ev)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, target, err)
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		f.t.Fatalf("%s %s: response %s: %v", method, target, out, err)
	}
	return resp
}

// apiJSON calls the api with a session cookie and decodes the JSON answer,
// failing unless the status is want.
func (f *fixture) apiJSON(method, target, session, body string, want int, out any) {
	f.t.Helper()
	r := f.api(method, target, nil, []string{session}, body)
	if r.StatusCode != want {
		f.t.Fatalf("%s %s: %d %s, want %d", method, target, r.StatusCode, r.Body, want)
	}
	if err := json.Unmarshal([]byte(r.Body), out); err != nil {
		f.t.Fatalf("%s %s: %s: %v", method, target, r.Body, err)
	}
}

func header(r events.APIGatewayV2HTTPResponse, name string) string {
	for k, v := range r.Headers {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	for k, v := range r.MultiValueHeaders {
		if strings.EqualFold(k, name) && len(v) > 0 {
			return strings.Join(v, ",")
		}
	}
	return ""
}

// cookie returns "name=value" of a Set-Cookie the response carries.
func cookie(r events.APIGatewayV2HTTPResponse, name string) string {
	all := append([]string(nil), r.Cookies...)
	if v := header(r, "Set-Cookie"); v != "" {
		all = append(all, v)
	}
	for _, c := range all {
		nv, _, _ := strings.Cut(c, ";")
		if strings.HasPrefix(nv, name+"=") && len(nv) > len(name)+1 {
			return nv
		}
	}
	return ""
}

// login runs the OAuth login: /auth/strava/login on the api, the
// simulator's authorize page, /auth/strava/callback on the api. It returns
// the session cookie ("cc_session=…").
func (f *fixture) login() string {
	f.t.Helper()
	start := f.api("GET", "/auth/strava/login", nil, nil, "")
	state := cookie(start, "cc_oauth_state")
	loc := header(start, "Location")
	if start.StatusCode != 302 || state == "" || !strings.HasPrefix(loc, f.sim.URL+"/oauth/authorize") {
		f.t.Fatalf("login: %d location %q cookies %v", start.StatusCode, loc, start.Cookies)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(loc)
	if err != nil {
		f.t.Fatal(err)
	}
	_ = resp.Body.Close()
	back := resp.Header.Get("Location")
	if resp.StatusCode != 302 || !strings.HasPrefix(back, publicURL+"/auth/strava/callback?") {
		f.t.Fatalf("simulator authorize: %d %q", resp.StatusCode, back)
	}
	cb := f.api("GET", strings.TrimPrefix(back, publicURL), nil, []string{state}, "")
	session := cookie(cb, "cc_session")
	if cb.StatusCode != 302 || session == "" {
		f.t.Fatalf("callback: %d %v %s", cb.StatusCode, cb.Cookies, cb.Body)
	}
	return session
}

// webhook delivers a Strava event to POST /webhooks/strava/{secret} and checks the
// answer's status field.
func (f *fixture) webhook(ev stravasim.Event, wantStatus string) {
	f.t.Helper()
	body, _ := json.Marshal(ev)
	r := f.api("POST", "/webhooks/strava/"+pathSecret, nil, nil, string(body)) // the callback Strava is subscribed to
	var got struct {
		Status string `json:"status"`
	}
	if r.StatusCode != 200 || json.Unmarshal([]byte(r.Body), &got) != nil || got.Status != wantStatus {
		f.t.Fatalf("webhook %s %d: %d %s, want 200 status %q", ev.AspectType, ev.ObjectID, r.StatusCode, r.Body, wantStatus)
	}
}

// scheduledEvent is what an EventBridge schedule invokes the sweeper with.
const scheduledEvent = `{"version":"0","id":"5f3c1e1a-0000-4000-8000-000000000001","detail-type":"Scheduled Event",` +
	`"source":"aws.events","account":"123456789012","time":"2026-11-23T12:00:00Z","region":"ap-southeast-2",` +
	`"resources":["arn:aws:events:ap-southeast-2:123456789012:rule/commitcollect-rt-sweeper"],"detail":{}}`

// claimLostHandOff records ev in the outbox as the webhook does (received,
// with its job), accepted two leases ago and never dispatched.
func (f *fixture) claimLostHandOff(sev stravasim.Event) {
	f.t.Helper()
	ev := ingest.Event{ObjectType: sev.ObjectType, ObjectID: sev.ObjectID, AspectType: sev.AspectType,
		OwnerID: sev.OwnerID, SubscriptionID: sev.SubscriptionID, EventTime: sev.EventTime}
	accepted := time.Now().Add(-2 * outboxLease).UTC()
	job := ingest.Job{Event: ev, CorrelationID: model.NewID(), IdempotencyKey: ev.IdempotencyKey(), ReceivedAtUtc: accepted}
	raw, err := json.Marshal(job)
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.st.Outbox.ClaimOutboxItem(f.ctx, job.IdempotencyKey, job.CorrelationID, string(raw), accepted, outboxLease, ingest.IdempotencyTTL); err != nil {
		f.t.Fatalf("claim the lost hand-off: %v", err)
	}
}

// drainWorker waits until the worker ran every job the api handed off.
func (f *fixture) drainWorker() {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.ctx, time.Minute)
	defer cancel()
	if err := f.aws.Wait(ctx); err != nil {
		f.t.Fatalf("worker: %v", err)
	}
}

// pumpStream reads what the main table's stream holds, applies the event
// source mapping's filters and delivers the remaining records to the
// projector in batches (partial batch responses honoured by the reader).
func (f *fixture) pumpStream() {
	f.t.Helper()
	err := f.stream.Drain(f.ctx, func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		var keep []events.DynamoDBEventRecord
		for _, r := range ev.Records {
			f.streamN.seen++
			b, err := json.Marshal(r)
			if err != nil {
				return events.DynamoDBEventResponse{}, err
			}
			ok, err := f.dep.Filters.Match(b)
			if err != nil {
				return events.DynamoDBEventResponse{}, err
			}
			if ok {
				keep = append(keep, r)
				if w, has := r.Change.NewImage["writtenBy"]; has && r.EventName == "MODIFY" &&
					w.DataType() == events.DataTypeString && w.String() == model.WriterProjector {
					f.streamN.ownWrites++
				}
			}
		}
		if len(keep) == 0 {
			return events.DynamoDBEventResponse{}, nil // Lambda does not invoke for a batch filtered to nothing
		}
		f.streamN.delivered += len(keep)
		f.streamN.batches++
		payload, _ := json.Marshal(events.DynamoDBEvent{Records: keep})
		out, err := f.fns["projector"].Invoke(ctx, payload)
		if err != nil {
			return events.DynamoDBEventResponse{}, err
		}
		var resp events.DynamoDBEventResponse
		if err := json.Unmarshal(out, &resp); err != nil {
			return events.DynamoDBEventResponse{}, fmt.Errorf("projector response %s: %w", out, err)
		}
		if len(resp.BatchItemFailures) > 0 {
			f.t.Errorf("projector reported failures: %+v", resp.BatchItemFailures)
		}
		return resp, nil
	})
	if err != nil {
		f.t.Fatalf("stream: %v", err)
	}
}

// checkMilestone asserts the stored projection: progress value (m), awards
// minted (items in the table) and status.
func (f *fixture) checkMilestone(userID, milestoneID string, wantMeters float64, wantAwards int, wantStatus model.MilestoneStatus) {
	f.t.Helper()
	um, err := f.st.Milestones.UserMilestones(f.ctx, userID)
	if err != nil {
		f.t.Fatal(err)
	}
	var m *model.Milestone
	for i := range um.Milestones {
		if um.Milestones[i].MilestoneID == milestoneID {
			m = &um.Milestones[i]
		}
	}
	if m == nil {
		f.t.Fatalf("milestone %s not stored", milestoneID)
	}
	got := float64(m.ProgressValue) / 1000 // millimetres
	if got != wantMeters || len(um.Awards[milestoneID]) != wantAwards || m.Status != wantStatus || m.AwardedParts != wantAwards {
		f.t.Fatalf("milestone %s: value %v m, %d award items, status %s; want %v m, %d, %s",
			milestoneID, got, len(um.Awards[milestoneID]), m.Status, wantMeters, wantAwards, wantStatus)
	}
}

// report prints what the emulator measured: invocations, cold starts, and
// the bootstraps' peak RSS. The emulator starts the bootstrap asynchronously,
// so its Init Duration is only the hand-over (well under a millisecond) and
// the real cold start (process start, configuration, SSM, first request)
// lands in the first invocation's Duration: both are printed.
func (f *fixture) report() {
	f.t.Helper()
	names := append([]string(nil), Functions...)
	sort.Strings(names)
	total := 0
	for _, fn := range names {
		e := f.fns[fn]
		reps := e.Reports()
		total += len(reps)
		var inits []string
		var warm []float64
		for i, r := range reps {
			if r.InitMs > 0 {
				inits = append(inits, fmt.Sprintf("%.2f ms", r.InitMs))
			}
			if i > 0 {
				warm = append(warm, r.DurationMs)
			}
		}
		if len(reps) == 0 || len(inits) != 1 {
			f.t.Errorf("%s: %d invocations and %d cold starts, want >0 and exactly 1", fn, len(reps), len(inits))
			continue
		}
		sort.Float64s(warm)
		median := 0.0
		if len(warm) > 0 {
			median = warm[len(warm)/2]
		}
		f.t.Logf("REPORT %-9s invocations=%d  Init Duration=%v  first invocation=%.1f ms  median warm=%.1f ms  peak RSS (bootstrap VmHWM)=%.1f MB  (emulator's Max Memory Used=%d MB: Terraform's memory_mb, not measured)",
			fn, len(reps), inits, reps[0].DurationMs, median, float64(e.PeakRSSKB())/1024, reps[0].MaxMemoryMB)
		if n := strings.Count(e.Output(), `"level":"ERROR"`); n > 0 {
			f.t.Errorf("%s logged %d errors", fn, n)
		}
	}
	f.t.Logf("invocations: %d in all (api %d requests); stream records seen %d, delivered after the filters %d in %d projector batches; AWS shim calls %v",
		total, f.invokes, f.streamN.seen, f.streamN.delivered, f.streamN.batches, f.aws.Calls())
}
