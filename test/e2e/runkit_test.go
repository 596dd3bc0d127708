package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/commitcollect/backend/test/capture"

	"github.com/aws/aws-lambda-go/events"

	"github.com/commitcollect/backend/handlers/config"
	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/secrets"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/limits"
	"github.com/commitcollect/backend/model/store/metering"
	"github.com/commitcollect/backend/model/store/tableadmin"
	"github.com/commitcollect/backend/model/streams"
	"github.com/commitcollect/backend/model/syncstate"
	"github.com/commitcollect/backend/scripts/demokit"
	"github.com/commitcollect/backend/scripts/runkit"
	"github.com/commitcollect/backend/scripts/stravasim"
	"github.com/commitcollect/backend/test/dynamolocal"
)

// lookup is an environment made of m only.
// lookup reads the stack's configuration from m, with the whole day's
// sync share from midnight unless m says otherwise: a backfill just after
// midnight UTC would otherwise wait for the daily pacing.
func lookup(m map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := m[k]; ok || k != "CC_SYNC_DAY_HEAD_START" {
			return v
		}
		return "1"
	}
}

// failOnce makes the projector fail part-way through batches, once each,
// and records where the reader resumed: as Lambda does, from the first
// failed sequence number.
type failOnce struct {
	mu sync.Mutex
	// pending is the sequence number reported failed, awaiting its retry.
	pending string
	// resumed pairs each reported sequence number with the first record of
	// the next delivery.
	resumed     [][2]string
	midBatch    bool // a batch of ≥ 3 records failed in its middle
	workoutFail bool // a batch failed at a workout record
}

func (f *failOnce) wrap(h streams.Handler) streams.Handler {
	return func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.pending != "" && len(ev.Records) > 0 {
			f.resumed = append(f.resumed, [2]string{f.pending, ev.Records[0].Change.SequenceNumber})
			f.pending = ""
		}
		at := -1
		switch {
		case !f.midBatch && len(ev.Records) >= 3:
			at, f.midBatch = len(ev.Records)/2, true
		case !f.workoutFail:
			for i, r := range ev.Records {
				if k, ok := r.Change.Keys["SK"]; ok && r.EventName == "INSERT" && k.DataType() == events.DataTypeString {
					if p, err := keys.ParseKey(model.Key{PK: r.Change.Keys["PK"].String(), SK: k.String()}); err == nil && p.Kind == keys.KindWorkout {
						at, f.workoutFail = i, true
						break
					}
				}
			}
		}
		if at < 0 {
			return h(ctx, ev)
		}
		// The records before the failure are processed for real.
		if at > 0 {
			resp, err := h(ctx, events.DynamoDBEvent{Records: ev.Records[:at]})
			if err != nil || len(resp.BatchItemFailures) > 0 {
				return resp, err
			}
		}
		f.pending = ev.Records[at].Change.SequenceNumber
		return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: f.pending}}}, nil
	}
}

// The demo a newcomer runs against `make run`, on the same stack, with the
// projector failing mid-batch on the way: every step reaches the expected
// progress, awards are minted once each, the duplicate webhook is refused
// and the reader resumes exactly at the failed record. An 8 s Strava window
// and a sweep every second keep it short: past three creates in a window
// the demo athlete's creates are gathered for list pages (a quarter of the
// window, 2 s here, 10 s at the local default), which the sweeper serves.
func TestLocalStackDemoWithProjectorFailures(t *testing.T) {
	t.Parallel()
	fail := &failOnce{}
	var logs bytes.Buffer
	var logMu sync.Mutex
	log := slog.New(slog.NewJSONHandler(writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return logs.Write(p)
	}), nil))
	ctx := context.Background()
	st, err := runkit.Start(ctx, runkit.Options{
		Getenv: lookup(map[string]string{
			"CC_HTTP_ADDR": "127.0.0.1:0", "CC_STRAVA_SIM_ADDR": "127.0.0.1:0",
			"DYNAMODB_ENDPOINT": dynamolocal.Endpoint(t), "CC_TABLE_PREFIX": dynamolocal.UniquePrefix(),
			"CC_STRAVA_WINDOW": "8s",
		}),
		Log: log, WrapProjector: fail.wrap, PollInterval: 20 * time.Millisecond, SweepInterval: time.Second,
		WrapAPI: func(h http.Handler) http.Handler { return conforming(t, h) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st.Close(cctx)
	})

	var out bytes.Buffer
	res, err := demokit.Demo(ctx, demokit.DemoOptions{APIURL: st.APIURL, SimURL: st.Sim.URL, AthleteID: 424242, Out: &out})
	if err != nil {
		logMu.Lock()
		var held []string // what kept work back: deferrals, retries, parking
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, `"writeStatus":"deferred"`) || strings.Contains(l, `"writeStatus":"retry"`) || strings.Contains(l, `"writeStatus":"parked"`) {
				held = append(held, l)
			}
		}
		logMu.Unlock()
		t.Fatalf("demo: %v\n%s\nworker jobs held back:\n%s", err, out.String(), strings.Join(held, "\n"))
	}
	t.Logf("the demo said:\n%s", out.String())
	f := res.Final
	if f.Status != "completed" || len(f.Awards) != res.PartCount || f.Progress.Value < res.Target {
		t.Fatalf("final milestone %+v, want completed with %d awards", f, res.PartCount)
	}
	for i, a := range f.Awards {
		if a.PartIndex != i || a.ActivityID == 0 {
			t.Fatalf("award %d = %+v", i, a)
		}
	}
	if res.Duplicate != "duplicate" {
		t.Errorf("duplicate webhook answered %q, want duplicate", res.Duplicate)
	}
	// The device sync is served by list pages, not a fetch per activity.
	if sy := res.Sync; sy.Activities < 10 || sy.ListPages < 1 || sy.Fetches >= int64(sy.Activities) {
		t.Errorf("device sync %+v: want its activities read from list pages", sy)
	}
	// The first run, at 6 am on the first local day (the day before in
	// UTC), counts: it tipped the first part.
	if first := res.Steps[0]; first.Lag == 0 || len(first.NewAwards) == 0 && first.Value == 0 {
		t.Errorf("the 6 am run of the first local day: %+v, want it counted", first)
	}
	// The history athlete's monthly series: its past months, projected
	// from the history at once, each with its own awards.
	if ps := res.History.Series.Periods; len(ps) < 2 || ps[len(ps)-1].Status != "completed" || len(ps[len(ps)-1].Awards) != res.PartCount ||
		res.History.Series.Recurrence != "monthly" {
		t.Errorf("monthly series %+v: want its first month completed with every part", res.History.Series)
	}
	if len(res.Collection) != 1 || res.Collection[0].ModelID != f.ModelID || len(res.Collection[0].Owned) != res.PartCount {
		t.Errorf("collection %+v, want every part of %s", res.Collection, f.ModelID)
	}
	// What counts: of four rides, the outdoor one; the manual entry, the
	// trainer session and the short ride are listed with their reasons.
	var why []string
	for _, e := range res.Rules.Workouts {
		why = append(why, fmt.Sprintf("%v/%s", e.Counted, e.Reason))
	}
	if want := []string{"false/below_minimum", "false/trainer", "false/manual", "true/"}; !slices.Equal(why, want) ||
		res.Rules.Milestone.Progress.WorkoutsCounted != 1 {
		t.Errorf("rules act: workouts say %v, milestone %+v; want %v and one counted", why, res.Rules.Milestone.Progress, want)
	}
	// Streaks: the freeze bridged the missed day, and its late upload
	// healed the streak, gave the freeze back and completed it.
	if sb, sh := res.Streak.Bridged.Streak, res.Streak.Healed.Streak; sb == nil || sh == nil || sb.Current != 5 || len(sb.FreezesUsed) != 1 ||
		sh.Current != 6 || len(sh.FreezesUsed) != 0 || res.Streak.Healed.Status != "completed" || len(res.Streak.Timeline.Days) != 6 {
		t.Errorf("streak act: bridged %+v, healed %+v (%s), timeline %+v", sb, sh, res.Streak.Healed.Status, res.Streak.Timeline)
	}
	if p := res.Rules.Milestone.Pace; p == nil || p.ProjectedFinishDate == nil {
		t.Errorf("rules act: the goal's pace %+v, want one with its finish", p)
	}
	minted := 0
	for _, s := range res.Steps {
		minted += len(s.NewAwards)
	}
	if minted != res.PartCount {
		t.Errorf("steps minted %d awards in all, want %d", minted, res.PartCount)
	}

	fail.mu.Lock()
	defer fail.mu.Unlock()
	if !fail.midBatch || !fail.workoutFail || fail.pending != "" || len(fail.resumed) != 2 {
		t.Fatalf("failures injected: mid-batch %v, at a workout %v, pending %q, resumed %v", fail.midBatch, fail.workoutFail, fail.pending, fail.resumed)
	}
	for _, r := range fail.resumed {
		if r[0] != r[1] {
			t.Errorf("reported failure at %s, next delivery started at %s", r[0], r[1])
		}
	}
	// The second act: the connect's backfill imports a history never
	// sent as webhooks and fills a milestone that started before it.
	h := res.History
	if h.Runs == 0 || h.Counted != h.Runs || h.Final.Progress.WorkoutsCounted != h.Runs {
		t.Errorf("history act: milestone counts %d, want the %d runs of its period", h.Counted, h.Runs)
	}
	// The page's count is recorded after its writes, which the milestone
	// may have counted first.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		sync, err := limits.New(st.Store).SyncState(ctx, h.UserID)
		if err == nil && sync.ImportedCount == h.Activities && sync.State == syncstate.SyncIdle {
			break
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("state %s, %d imported", sync.State, sync.ImportedCount)
			}
			t.Errorf("history act: sync %v; want idle with %d imported", err, h.Activities)
			break
		}
	}
	// The narration shows the progress bar and each award.
	for _, want := range []string{"Logged in as", "lag ", "minted", "milestone completed", "End-to-end lag", "backfill filling", "Backfill: "} {
		if !bytes.Contains(out.Bytes(), []byte(want)) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
	// What the athlete sees at / after signing in, in a real browser.
	t.Run("landing page in chromium", func(t *testing.T) { checkPageInChromium(t, st, res) })

	// One log line per webhook, workout write, projection and award.
	logMu.Lock()
	defer logMu.Unlock()
	for _, msg := range []string{"webhook event accepted", "workout written", "milestone projected", "award minted"} {
		if !bytes.Contains(logs.Bytes(), []byte(`"msg":"`+msg+`"`)) {
			t.Errorf("logs lack %q", msg)
		}
	}
	// Every api request, worker job and projector batch logs what its
	// DynamoDB calls cost, and the stack sums each component.
	for _, msg := range []string{"request served", "job finished", "batch processed"} {
		if !regexp.MustCompile(`"msg":"` + msg + `".*"requests":[1-9]`).Match(logs.Bytes()) {
			t.Errorf("no %q log line with its DynamoDB requests", msg)
		}
	}
	for name, m := range map[string]*metering.Meter{"api": st.Capacity.API, "worker": st.Capacity.Worker, "projector": st.Capacity.Projector} {
		if got := m.Snapshot(); got.Requests == 0 || got.RCU+got.WCU == 0 {
			t.Errorf("stack capacity of the %s: got %+v, want requests and units", name, got.Units)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }

// `make run` is the scripts/run binary: it starts its own DynamoDB Local,
// prints where everything listens, keeps the tables in CC_DATA_DIR across
// restarts, tells the operator commands pointed at its DynamoDB Local its
// token key (config.LocalStackEnv), and on Ctrl-C (SIGINT) stops without
// leaving DynamoDB Local or that file behind.
func TestRunBinaryStartsAndStopsCleanly(t *testing.T) {
	t.Parallel()
	bin, root := buildRun(t)
	data := t.TempDir()
	for round := 1; round <= 2; round++ {
		cmd := exec.Command(bin)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CC_HTTP_ADDR=127.0.0.1:0", "CC_STRAVA_SIM_ADDR=127.0.0.1:0", "CC_DATA_DIR="+data,
			"DYNAMODB_ENDPOINT=", "STRAVA_BASE_URL=", "CC_SYNC_DAY_HEAD_START=1")
		var stdout, stderr capture.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		api, dynamo := readBanner(t, &stdout, cmd, &stderr)
		// An operator command pointed at this DynamoDB Local (make redrive)
		// finds the stack's token key without being told it.
		pointed := func(k string) string {
			if k == "DYNAMODB_ENDPOINT" {
				return "http://" + dynamo
			}
			return ""
		}
		kept, err := os.ReadFile(filepath.Join(data, config.TokenKeyFile))
		if got := config.LocalStackEnv(pointed)("CC_TOKEN_KEY"); err != nil || got == "" || got != strings.TrimSpace(string(kept)) {
			t.Fatalf("round %d: a command pointed at the stack reads token key %q (%v); want the stack's", round, got, err)
		}
		resp, err := http.Get(api + "/webhooks/strava?hub.mode=subscribe&hub.verify_token=commitcollect-local&hub.challenge=r" + fmt.Sprint(round))
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("round %d: handshake at %s: %v %v", round, api, resp, err)
		}
		resp.Body.Close()
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("round %d: run exited with %v\n%s", round, err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("round %d: run did not stop within 30s of SIGINT\n%s", round, stderr.String())
		}
		if !strings.Contains(stderr.String(), "run: stopped") {
			t.Errorf("round %d: no clean stop in the logs:\n%s", round, stderr.String())
		}
		if _, err := os.Stat(config.StackFile("http://" + dynamo)); !os.IsNotExist(err) {
			t.Errorf("round %d: the stack's file for the operator commands outlived it: %v", round, err)
		}
		// DynamoDB Local is gone: nothing answers on its port any more.
		deadline := time.Now().Add(10 * time.Second)
		for {
			c, err := net.DialTimeout("tcp", dynamo, 200*time.Millisecond)
			if err != nil {
				break
			}
			c.Close()
			if time.Now().After(deadline) {
				t.Fatalf("round %d: DynamoDB Local still listening on %s after run stopped", round, dynamo)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if _, err := os.Stat(filepath.Join(data, "shared-local-instance.db")); err != nil {
		t.Errorf("CC_DATA_DIR holds no DynamoDB Local database: %v", err)
	}
}

var (
	apiLine    = regexp.MustCompile(`API\s+(http://\S+)`)
	dynamoLine = regexp.MustCompile(`DynamoDB\s+http://(\S+)`)
)

// readBanner waits for run to print where the API and DynamoDB Local listen.
func readBanner(t *testing.T, stdout *capture.Buffer, cmd *exec.Cmd, stderr *capture.Buffer) (api, dynamo string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		out := stdout.String()
		a, d := apiLine.FindStringSubmatch(out), dynamoLine.FindStringSubmatch(out)
		if a != nil && d != nil {
			return a[1], d[1]
		}
		if cmd.ProcessState != nil || time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("run did not print where it listens:\n%s\n%s", out, stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A stack killed (kill -9) after answering 200 leaves its accepted events
// received in the outbox; the next stack on the same tables writes them all
// with its sweeper, at start, without any redelivery from Strava.
func TestLocalStackSweepsWhatAKilledStackAccepted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sim := stravasim.New(stravasim.Options{SubscriptionID: 7})
	t.Cleanup(sim.Close)
	endpoint, prefix := dynamolocal.Endpoint(t), dynamolocal.UniquePrefix()
	db, _ := dynamolocal.Clients(t)
	tables := dynamo.TableNames(prefix)
	if err := tableadmin.CreateTables(ctx, db, tables); err != nil {
		t.Fatal(err)
	}
	// The killed stack and the next one share the token key (as CC_DATA_DIR's
	// token.key makes them do), so the connection it sealed stays readable.
	tokenKey := secrets.NewLocalKey()
	master, err := secrets.ParseLocalKey(tokenKey)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := secrets.NewLocalKeyProvider(master)
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(db, tables)
	st.DB.Secrets = secrets.NewSealer(kp)
	sim.AddAthlete(stravasim.Athlete{ID: 31, Firstname: "K"})
	tok := sim.IssueTokens(31, time.Hour)
	if err := st.DB.Put(ctx, tables.Main, &model.StravaConnection{UserID: "u31", AthleteID: 31, AccessToken: tok.AccessToken,
		RefreshToken: tok.RefreshToken, ExpiresAtUtc: tok.ExpiresAt, Scopes: tok.Scope, TokenVersion: 1}); err != nil {
		t.Fatal(err)
	}
	if err := st.DB.Put(ctx, tables.Main, &model.AthleteOwner{AthleteID: 31, UserID: "u31"}); err != nil {
		t.Fatal(err)
	}
	// What the killed stack's webhook recorded before dying: claims whose
	// jobs never ran.
	const n = 10
	accepted := time.Now().Add(-time.Minute).UTC()
	for i := range n {
		id := int64(3100 + i)
		sim.PutActivity(stravasim.Activity{ID: id, AthleteID: 31, Name: "K", SportType: "Run", Distance: 1000, MovingTime: 300,
			StartDate: time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC)})
		ev := ingest.Event{ObjectType: "activity", ObjectID: id, AspectType: "create", OwnerID: 31, SubscriptionID: 7, EventTime: 1700000000}
		j := ingest.Job{Event: ev, CorrelationID: model.NewID(), IdempotencyKey: ev.IdempotencyKey(), ReceivedAtUtc: accepted}
		raw, _ := json.Marshal(j)
		if _, err := st.Outbox.ClaimOutboxItem(ctx, j.IdempotencyKey, j.CorrelationID, string(raw), accepted, 10*time.Second, ingest.IdempotencyTTL); err != nil {
			t.Fatal(err)
		}
	}
	stack, err := runkit.Start(ctx, runkit.Options{
		Getenv: lookup(map[string]string{
			"CC_HTTP_ADDR": "127.0.0.1:0", "DYNAMODB_ENDPOINT": endpoint, "CC_TABLE_PREFIX": prefix,
			"STRAVA_BASE_URL": sim.URL, "STRAVA_CLIENT_ID": sim.ClientID(), "STRAVA_CLIENT_SECRET": sim.ClientSecret(),
			"STRAVA_SUBSCRIPTION_ID": "7", "CC_TOKEN_KEY": tokenKey,
		}),
		Log: slog.New(slog.DiscardHandler), SweepInterval: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stack.Close(cctx)
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := st.Pending.PendingOutbox(ctx, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		ws, _, err := dynamo.QueryEntities[model.Workout](ctx, st.DB, tables.Main, keys.UserPK("u31"), keys.PrefixWorkoutStrava, dynamo.QueryOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if b.Pending == 0 && len(ws) == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: %d of %d written, backlog %+v", len(ws), n, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The sweeper finds the athlete's accepted creates due together: one
	// burst, served by one list page instead of a fetch each.
	if st := sim.Stats(); st.ActivityFetches != 0 || st.ListRequests != 1 {
		t.Errorf("got %d Strava fetches and %d list pages, want the %d creates served by one page", st.ActivityFetches, st.ListRequests, n)
	}
}

// startQuietStack starts the local stack (what `make run` runs) with its own
// simulator on fresh tables of the shared DynamoDB Local, logging nothing,
// and closes it when the test ends. extra adds (or overrides) environment
// variables.
func startQuietStack(t *testing.T, extra ...map[string]string) *runkit.Stack {
	t.Helper()
	env := map[string]string{
		"CC_HTTP_ADDR": "127.0.0.1:0", "CC_STRAVA_SIM_ADDR": "127.0.0.1:0",
		"DYNAMODB_ENDPOINT": dynamolocal.Endpoint(t), "CC_TABLE_PREFIX": dynamolocal.UniquePrefix(),
	}
	for _, e := range extra {
		maps.Copy(env, e)
	}
	st, err := runkit.Start(context.Background(), runkit.Options{
		Getenv: lookup(env),
		Log:    slog.New(slog.DiscardHandler), PollInterval: 20 * time.Millisecond,
		WrapAPI: func(h http.Handler) http.Handler { return conforming(t, h) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st.Close(cctx)
	})
	return st
}
