package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/handlers/bff"
	"github.com/commitcollect/backend/handlers/bff/milestones"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/tableadmin"
	"github.com/commitcollect/backend/scripts/runkit"
	"github.com/commitcollect/backend/scripts/stravasim"
	"github.com/commitcollect/backend/test/dynamolocal"
)

// Defaults of the child pipeline's settings.
const (
	// VerifyToken is the webhook handshake token the child is given.
	VerifyToken = "chaos-verify"
	// SubscriptionID is the simulator's push subscription.
	SubscriptionID = 7
	// StravaTimeout bounds one Strava call in the child (CC_STRAVA_TIMEOUT):
	// longer than the slow answers, shorter than the timeouts.
	StravaTimeout = 4 * time.Second
	// Window is the rate-limit window the child assumes (CC_STRAVA_WINDOW)
	// and the simulator keeps (stravasim.Options.Window): Strava's is 15
	// minutes, which no test can sit out when work is deferred to a reset.
	Window = 10 * time.Second
	// OutboxLease is how long the child presumes an accepted event's
	// hand-off in flight before its sweeper dispatches it again
	// (CC_OUTBOX_LEASE).
	OutboxLease = 2 * time.Second
	// RetryBase is the first backoff of a job that failed retryably
	// (CC_RETRY_BASE): Strava's 5xx and timeouts are retried within seconds.
	RetryBase = 500 * time.Millisecond
	// DeliveryBackoff is the simulated Strava sender's pause between
	// attempts at one event (Strava does not say; it is not instant).
	DeliveryBackoff = 500 * time.Millisecond
	// DefaultPatience is Harness.Patience's default: two windows.
	DefaultPatience = 2 * Window
)

// ChildEnv are settings every child pipeline gets on top of the harness's
// own: knobs that shorten waits the scenarios would otherwise sit out, and
// the whole day's sync share from midnight (a backfill just after midnight
// UTC would otherwise wait minutes for the daily pacing).
// Entries are NAME=value; CC_CHAOS_ENV (the same form, separated by spaces)
// adds more from the command line.
var ChildEnv = []string{"CC_STRAVA_WINDOW=" + Window.String(), "CC_OUTBOX_LEASE=" + OutboxLease.String(),
	"CC_RETRY_BASE=" + RetryBase.String(), "CC_SYNC_DAY_HEAD_START=1"}

// Harness runs scenarios against one DynamoDB Local with one built
// scripts/run binary.
type Harness struct {
	// Bin is the scripts/run binary.
	Bin string
	// Endpoint is DynamoDB Local.
	Endpoint string
	// WorkDir holds each scenario's CC_DATA_DIR and the child's log.
	WorkDir string
	// Logf narrates progress (never nil after New).
	Logf func(format string, args ...any)
	// Patience is how long Settle waits for a change while some figure is
	// not 0 (default DefaultPatience): the pipeline may be waiting out a
	// retry backoff or a rate-limit window.
	Patience time.Duration

	db *dynamodb.Client
}

// BuildRun builds scripts/run from the module root into dir and returns the
// binary's path.
func BuildRun(ctx context.Context, dir string) (string, error) {
	root, err := dynamolocal.ModuleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "run")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./scripts/run")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./scripts/run: %w\n%s", err, out)
	}
	return bin, nil
}

// New prepares a harness over a built binary and a DynamoDB endpoint.
func New(bin, endpoint, workDir string, logf func(string, ...any)) *Harness {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &Harness{Bin: bin, Endpoint: endpoint, WorkDir: workDir, Logf: logf, Patience: DefaultPatience,
		db: dynamodb.NewFromConfig(dynamolocal.Config(endpoint))}
}

// Env is one scenario's world: its own tables (a table prefix), its own
// Strava, its own data dir and API port, and the child pipeline.
type Env struct {
	h       *Harness
	Name    string
	Prefix  string
	DataDir string
	Sim     *stravasim.Server
	Store   *store.Adapters
	APIAddr string
	Users   []*User
	// Window is the rate-limit window of the scenario (Window unless the
	// scenario sets its own).
	Window time.Duration
	// Extra are settings (NAME=value) the scenario gives the child on top
	// of ChildEnv, from its next Start.
	Extra []string

	child   *child
	starts  int
	logPath string

	mu          sync.Mutex
	acked       map[int64]int64 // activity id → owner athlete, for events answered 200
	told        map[int64]int64 // activity id → owner athlete, for events Strava's sender delivered
	accepted    int
	duplicates  int
	refused     int
	readsBefore int64
	began       time.Time
}

// User is a linked athlete with a logged-in API session.
type User struct {
	AthleteID  int64
	UserID     string
	Milestones []string
	// Scope is what the athlete grants at login ("": what the API asks
	// for); "read,activity:read" hides their private activities from us.
	Scope string
	http  *http.Client
}

// NewEnv creates the scenario's tables' prefix, data dir and simulator (with
// limits; zero fields take Strava's); Start runs the pipeline.
func (h *Harness) NewEnv(name string, limits stravasim.Limits) (*Env, error) {
	return h.NewEnvWindow(name, limits, Window)
}

// NewEnvWindow is NewEnv with the rate-limit window the simulator keeps and
// the child assumes (CC_STRAVA_WINDOW) set to window instead of Window.
func (h *Harness) NewEnvWindow(name string, limits stravasim.Limits, window time.Duration) (*Env, error) {
	dir := filepath.Join(h.WorkDir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	prefix := "chaos-" + strings.TrimPrefix(dynamolocal.UniquePrefix(), "t")
	e := &Env{h: h, Name: name, Prefix: prefix, DataDir: dir, APIAddr: fmt.Sprintf("127.0.0.1:%d", port),
		Sim: stravasim.New(stravasim.Options{SubscriptionID: SubscriptionID, Window: window, Limits: limits,
			DeliveryBackoff: DeliveryBackoff}),
		Store:   store.New(h.db, dynamo.TableNames(prefix)),
		logPath: filepath.Join(dir, "run.log"),
		acked:   map[int64]int64{}, told: map[int64]int64{}, began: time.Now(), Window: window}
	return e, nil
}

// APIURL is the child's API.
func (e *Env) APIURL() string { return "http://" + e.APIAddr }

// WebhookURL is the child's Strava callback.
func (e *Env) WebhookURL() string { return e.APIURL() + "/webhooks/strava" }

// Close stops the child (kill -9 if it still runs), the simulator, and drops
// the scenario's tables.
func (e *Env) Close() {
	if e.child != nil {
		e.child.kill()
	}
	e.Sim.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = tableadmin.DeleteTables(ctx, e.h.db, e.Store.DB.Tables())
}

// child is one run of the pipeline process.
type child struct {
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error
}

func (c *child) kill() {
	if c.cmd.Process != nil {
		_ = c.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-c.done
}

// Start runs the pipeline (scripts/run) and waits until its webhook answers
// the handshake; the first start also registers the push subscription at
// the simulator. Its stderr (JSON logs) is appended to run.log in the data
// dir.
func (e *Env) Start(ctx context.Context) error {
	if e.child != nil {
		select {
		case <-e.child.done:
		default:
			return errors.New("chaos: pipeline already running")
		}
	}
	e.starts++
	f, err := os.OpenFile(e.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "--- start %d at %s\n", e.starts, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(e.h.Bin)
	cmd.Dir = e.DataDir
	cmd.Env = append(childBaseEnv(),
		"CC_HTTP_ADDR="+e.APIAddr, "CC_PUBLIC_URL="+e.APIURL(), "CC_DATA_DIR="+e.DataDir,
		"DYNAMODB_ENDPOINT="+e.h.Endpoint, "CC_TABLE_PREFIX="+e.Prefix,
		"STRAVA_BASE_URL="+e.Sim.URL, "STRAVA_CLIENT_ID="+e.Sim.ClientID(), "STRAVA_CLIENT_SECRET="+e.Sim.ClientSecret(),
		"STRAVA_SUBSCRIPTION_ID="+strconv.Itoa(SubscriptionID), "STRAVA_VERIFY_TOKEN="+VerifyToken,
		"CC_STRAVA_TIMEOUT="+StravaTimeout.String(), "CC_LOG_LEVEL=info", "AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local")
	cmd.Env = append(cmd.Env, ChildEnv...)
	cmd.Env = append(cmd.Env, "CC_STRAVA_WINDOW="+e.Window.String()) // the last value of a name wins
	cmd.Env = append(cmd.Env, e.Extra...)
	cmd.Env = append(cmd.Env, strings.Fields(os.Getenv("CC_CHAOS_ENV"))...)
	cmd.Stdout, cmd.Stderr = io.Discard, f
	// Its own process group, so a signal meant for it never reaches us.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", e.h.Bin, err)
	}
	c := &child{cmd: cmd, log: f, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		f.Close()
		close(c.done)
	}()
	e.child = c
	deadline := time.Now().Add(90 * time.Second)
	url := e.WebhookURL() + "?hub.mode=subscribe&hub.verify_token=" + VerifyToken + "&hub.challenge=up"
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-c.done:
			return fmt.Errorf("pipeline exited during start-up (%v); see %s", c.err, e.logPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pipeline did not answer within 90s; see %s", e.logPath)
		}
	}
	if _, _, ok := e.Sim.Subscription(); !ok {
		if _, err := e.Sim.Subscribe(ctx, e.WebhookURL(), VerifyToken); err != nil {
			return fmt.Errorf("subscribe at the simulator: %w", err)
		}
	}
	return nil
}

// childBaseEnv is the harness's environment without the settings the child
// is given explicitly (a developer's DYNAMODB_ENDPOINT must not leak in).
func childBaseEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "CC_") || strings.HasPrefix(k, "STRAVA_") || k == "DYNAMODB_ENDPOINT" {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// Kill9 kills the pipeline with SIGKILL (no shutdown code runs) and waits
// for it to be gone.
func (e *Env) Kill9() {
	e.h.Logf("%s: kill -9 (start %d)", e.Name, e.starts)
	e.child.kill()
}

// Interrupt sends Ctrl-C (SIGINT) and waits up to limit for the pipeline to
// exit (then kills it); it returns how long the shutdown took.
func (e *Env) Interrupt(limit time.Duration) (time.Duration, error) {
	e.h.Logf("%s: Ctrl-C (start %d)", e.Name, e.starts)
	t0 := time.Now()
	if err := e.child.cmd.Process.Signal(os.Interrupt); err != nil {
		return 0, err
	}
	select {
	case <-e.child.done:
		return time.Since(t0), nil
	case <-time.After(limit):
		e.child.kill()
		return time.Since(t0), fmt.Errorf("pipeline still running %s after Ctrl-C; killed", limit)
	}
}

// LinkUser adds an athlete at Strava and logs them in through the API's
// OAuth flow, which links their Strava account to a new user.
func (e *Env) LinkUser(ctx context.Context, athleteID int64) (*User, error) {
	return e.LinkUserScoped(ctx, athleteID, "")
}

// LinkUserScoped is LinkUser with the scope the athlete grants ("": what
// the API asks for).
func (e *Env) LinkUserScoped(ctx context.Context, athleteID int64, scope string) (*User, error) {
	e.Sim.AddAthlete(stravasim.Athlete{ID: athleteID, Firstname: "Chaos", Lastname: strconv.FormatInt(athleteID, 10)})
	u := &User{AthleteID: athleteID, Scope: scope, http: runkit.Browser(20 * time.Second)}
	me, err := e.Login(ctx, u)
	if err != nil {
		return nil, err
	}
	u.UserID = me.UserID
	e.Users = append(e.Users, u)
	return u, nil
}

// Login runs the API's OAuth login for u's athlete again (as the athlete does
// after disconnecting, or on a new device) and returns what GET /v1/me says
// afterwards; u.UserID is left alone, so callers can compare.
func (e *Env) Login(ctx context.Context, u *User) (bff.MeJSON, error) {
	e.Sim.SetAuthorization(stravasim.Authorization{AthleteID: u.AthleteID, Scope: u.Scope})
	if err := runkit.Login(ctx, u.http, e.APIURL()); err != nil {
		return bff.MeJSON{}, fmt.Errorf("login athlete %d: %w", u.AthleteID, err)
	}
	me, err := e.Me(ctx, u)
	if err != nil {
		return me, err
	}
	if me.UserID == "" || me.AthleteID != u.AthleteID {
		return me, fmt.Errorf("login athlete %d: /v1/me says %+v", u.AthleteID, me)
	}
	return me, nil
}

// Me is GET /v1/me with u's session.
func (e *Env) Me(ctx context.Context, u *User) (bff.MeJSON, error) {
	var me bff.MeJSON
	if err := u.call(ctx, http.MethodGet, e.APIURL()+"/v1/me", nil, &me, http.StatusOK); err != nil {
		return me, fmt.Errorf("who is athlete %d: %w", u.AthleteID, err)
	}
	return me, nil
}

// DeleteAccount is DELETE /v1/me with u's session (202 and the report).
func (e *Env) DeleteAccount(ctx context.Context, u *User) (bff.DeletionReport, error) {
	var rep bff.DeletionReport
	if err := u.call(ctx, http.MethodDelete, e.APIURL()+"/v1/me", nil, &rep, http.StatusAccepted); err != nil {
		return rep, fmt.Errorf("delete the account of athlete %d: %w", u.AthleteID, err)
	}
	return rep, nil
}

// Forget drops u from the figures: after an account deletion nothing of
// theirs is owed a workout (the scenario checks the emptiness itself).
func (e *Env) Forget(u *User) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, owner := range e.acked {
		if owner == u.AthleteID {
			delete(e.acked, id)
		}
	}
	for id, owner := range e.told {
		if owner == u.AthleteID {
			delete(e.told, id)
		}
	}
	e.Users = slices.DeleteFunc(e.Users, func(x *User) bool { return x == u })
}

// UserItems lists the keys left in the user's partition of the main table
// (its guard, kept on purpose, aside).
func (e *Env) UserItems(ctx context.Context, userID string) ([]string, error) {
	res, err := e.Store.DB.QueryPrefix(ctx, e.Store.DB.Tables().Main, keys.UserPK(userID), "", dynamo.QueryOptions{Projection: []string{"PK", "SK"}})
	if err != nil {
		return nil, fmt.Errorf("read the partition of user %s: %w", userID, err)
	}
	var out []string
	for _, it := range res.Items {
		// The user guard stays on purpose (90 days): what writers in flight check.
		if sk, ok := it["SK"].(*types.AttributeValueMemberS); ok && sk.Value != keys.SKGuard {
			out = append(out, sk.Value)
		}
	}
	return out, nil
}

// Milestone is what a user commits to (POST /v1/milestones): UTC instants,
// or a series on the athlete's own days.
type Milestone struct {
	ModelID         string     `json:"modelId"`
	Title           string     `json:"title"`
	Metric          string     `json:"metric"`
	Target          float64    `json:"target"`
	SportTypes      []string   `json:"sportTypes"`
	Start           *time.Time `json:"periodStartAtUtc,omitempty"`
	End             *time.Time `json:"periodEndAtUtc,omitempty"`
	PeriodStartDate string     `json:"periodStartDate,omitempty"`
	Recurrence      string     `json:"recurrence,omitempty"`
	StreakUnit      string     `json:"streakUnit,omitempty"`
}

// AddMilestone creates a milestone for u through the BFF.
func (e *Env) AddMilestone(ctx context.Context, u *User, m Milestone) error {
	var out milestones.MilestoneJSON
	if err := u.call(ctx, http.MethodPost, e.APIURL()+"/v1/milestones", m, &out, http.StatusCreated); err != nil {
		return fmt.Errorf("create milestone for athlete %d: %w", u.AthleteID, err)
	}
	u.Milestones = append(u.Milestones, out.MilestoneID)
	return nil
}

func (u *User) call(ctx context.Context, method, url string, in, out any, want int) error {
	return runkit.SendJSON(ctx, u.http, method, url, in, out, want)
}

// Deliver sends ev as Strava does (up to 3 attempts while the answer is not
// 200 within 2 s) and books the answer.
func (e *Env) Deliver(ctx context.Context, ev stravasim.Event) stravasim.Delivery {
	d, err := e.Sim.Deliver(ctx, e.WebhookURL(), ev)
	e.book(ev, true, err == nil, d.Answer)
	return d
}

// Send builds an activity event at Strava's clock and delivers it.
func (e *Env) Send(ctx context.Context, aspect string, activityID, ownerID int64) stravasim.Event {
	ev := e.Sim.ActivityEvent(aspect, activityID, ownerID, nil)
	e.Deliver(ctx, ev)
	return ev
}

// DeliverAll delivers events with up to parallel senders at once.
func (e *Env) DeliverAll(ctx context.Context, evs []stravasim.Event, parallel int) {
	sem := make(chan struct{}, max(parallel, 1))
	var wg sync.WaitGroup
	for _, ev := range evs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			e.Deliver(ctx, ev)
		}()
	}
	wg.Wait()
}

// PostOnce posts ev once, with no retry (a forger's request), and books the
// answer.
func (e *Env) PostOnce(ctx context.Context, ev stravasim.Event) int {
	raw, _ := json.Marshal(ev)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.WebhookURL(), bytes.NewReader(raw))
	if err != nil {
		return 0
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Do(req)
	if err != nil {
		e.book(ev, false, false, "")
		return 0
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	e.book(ev, false, resp.StatusCode == http.StatusOK, string(body))
	return resp.StatusCode
}

// book records one event's fate: fromStrava says Strava's sender sent it
// (so the activity must end up counted, answered 200 or not), ok that it
// was answered 200.
func (e *Env) book(ev stravasim.Event, fromStrava, ok bool, answer string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ev.ObjectType == "activity" {
		if fromStrava {
			e.told[ev.ObjectID] = ev.OwnerID
		}
		if ok {
			e.acked[ev.ObjectID] = ev.OwnerID
		}
	}
	switch {
	case !ok:
		e.refused++
	case strings.Contains(answer, `"duplicate"`):
		e.accepted++
		e.duplicates++
	default:
		e.accepted++
	}
}

// WaitInFlight waits until Strava is answering at least n activity
// requests (e.g. a slow fetch has begun), or the limit passes.
func (e *Env) WaitInFlight(n int64, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for e.Sim.Stats().ActivityInFlight < n {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// WaitIdle waits until Strava has had no activity request in flight and
// received none for calm (the pipeline's fetches are done), or the limit
// passes.
func (e *Env) WaitIdle(calm, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	last, since := e.Sim.Stats(), time.Now()
	for {
		st := e.Sim.Stats()
		if st.ActivityInFlight > 0 || st.ActivityRequests+st.ListRequests != last.ActivityRequests+last.ListRequests {
			last, since = st, time.Now()
		}
		if time.Since(since) >= calm {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Awards counts the award items of every user (for timing kills during
// minting).
func (e *Env) Awards(ctx context.Context) (int, error) {
	n := 0
	for _, u := range e.Users {
		c, err := e.AwardsOf(ctx, u)
		if err != nil {
			return n, err
		}
		n += c
	}
	return n, nil
}

// AwardsOf counts u's award items.
func (e *Env) AwardsOf(ctx context.Context, u *User) (int, error) {
	refs, _, err := e.awardRefs(ctx, u.UserID)
	return len(refs), err
}

// awardRefs names every award item of a user, a series' periods' too, and
// the part count of each milestone.
func (e *Env) awardRefs(ctx context.Context, userID string) ([]AwardRef, map[string]int, error) {
	um, err := e.Store.Milestones.UserMilestones(ctx, userID)
	if err != nil {
		return nil, nil, err
	}
	var refs []AwardRef
	parts := map[string]int{}
	for _, m := range um.Milestones {
		parts[m.MilestoneID] = m.PartCount
		for i := range um.Awards[m.MilestoneID] {
			refs = append(refs, AwardRef{MilestoneID: m.MilestoneID, PartIndex: i})
		}
		if m.Recurrence == "" {
			continue
		}
		periods, err := e.Store.Milestones.SeriesPeriods(ctx, userID, m.MilestoneID, nil)
		if err != nil {
			return nil, nil, err
		}
		for start, p := range periods {
			for i := range p.Awards {
				refs = append(refs, AwardRef{MilestoneID: m.MilestoneID, PeriodOf: start, PartIndex: i})
			}
		}
	}
	return refs, parts, nil
}

// Settle polls until the pipeline is quiet — nothing stored changed and
// Strava answered nothing for quiet, with no Strava request in flight —
// with every figure at 0; when the figures are not all 0 it keeps waiting
// until nothing changed for Patience (work retried or deferred for a while
// still counts), and never past the deadline. Then it measures the figures.
func (e *Env) Settle(ctx context.Context, quiet, deadline time.Duration) (Figures, error) {
	end := time.Now().Add(deadline)
	patience := max(e.h.Patience, quiet)
	last, since := "", time.Now()
	var measured string // the fingerprint f was measured at
	var f Figures
	for {
		fp, err := e.fingerprint(ctx)
		if err != nil {
			return Figures{}, err
		}
		if fp != last {
			last, since = fp, time.Now()
		}
		calm := time.Since(since)
		if e.Sim.Stats().ActivityInFlight == 0 && calm >= quiet {
			if measured != fp {
				if f, err = e.Figures(ctx, true); err != nil {
					return f, err
				}
				measured = fp
			}
			if f.OK() || calm >= patience {
				f.Took = time.Since(e.began)
				return f, nil
			}
		}
		if time.Now().After(end) {
			return e.Figures(ctx, false)
		}
		select {
		case <-ctx.Done():
			return Figures{}, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// fingerprint summarises everything the figures read plus Strava's request
// count: when it stops changing, the pipeline has nothing left to do that
// anyone can see.
func (e *Env) fingerprint(ctx context.Context) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "reads=%d;", e.Reads())
	for _, u := range e.Users {
		ws, _, err := e.workouts(ctx, u.UserID)
		if err != nil {
			return "", err
		}
		for _, w := range ws {
			fmt.Fprintf(&b, "w%d:%s:%v:%v:%s;", w.ActivityID, w.SportType, w.DistanceMeters, w.IsDeleted, w.CorrelationID)
		}
		um, err := e.Store.Milestones.UserMilestones(ctx, u.UserID)
		if err != nil {
			return "", err
		}
		for _, m := range um.Milestones {
			fmt.Fprintf(&b, "m%s:%d:%d;", m.MilestoneID, m.Version, len(um.Awards[m.MilestoneID]))
		}
		audits, err := e.audits(ctx, u.UserID)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "a%d;", len(audits))
	}
	parked, err := e.Store.Parked.Parked(ctx, keys.ParkSourceWorker)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "p%d", len(parked))
	return b.String(), nil
}

// workouts reads every workout item of the user, tombstones included (the
// projector's date-ordered log leaves out items without a start date).
func (e *Env) workouts(ctx context.Context, userID string) ([]model.Workout, bool, error) {
	ws, err := allOf[model.Workout](ctx, e, e.Store.DB.Tables().Main, keys.UserPK(userID), keys.PrefixWorkoutStrava)
	if err != nil {
		return nil, false, fmt.Errorf("read workouts of user %s: %w", userID, err)
	}
	return ws, false, nil
}

func (e *Env) audits(ctx context.Context, userID string) ([]model.AuditEntry, error) {
	as, err := allOf[model.AuditEntry](ctx, e, e.Store.DB.Tables().Audit, keys.UserPK(userID), "")
	if err != nil {
		return nil, fmt.Errorf("read audit of user %s: %w", userID, err)
	}
	return as, nil
}

// allOf reads every item of pk under prefix, page after page, as T: the
// checks count what is there, however long the user's history.
func allOf[T any, PT interface {
	*T
	model.Entity
}](ctx context.Context, e *Env, table, pk, prefix string) ([]T, error) {
	var out []T
	err := dynamo.QueryEach(ctx, e.Store.DB, table, pk, prefix, dynamo.QueryOptions{}, func(items []dynamo.Item) error {
		for _, it := range items {
			var v T
			if err := dynamo.Unmarshal(it, PT(&v)); err != nil {
				return err
			}
			out = append(out, v)
		}
		return nil
	})
	return out, err
}

// Figures measures the scenario now (see Figures for each count).
func (e *Env) Figures(ctx context.Context, settled bool) (Figures, error) {
	e.mu.Lock()
	f := Figures{Scenario: e.Name, Accepted: e.accepted, Duplicates: e.duplicates, Refused: e.refused,
		Reads: e.Reads() - e.readsBefore, Took: time.Since(e.began), Settled: settled}
	owed := make(map[int64]int64, len(e.acked)+len(e.told)) // activities that must end up written
	for k, v := range e.told {
		owed[k] = v
	}
	acked := make(map[int64]bool, len(e.acked))
	for k, v := range e.acked {
		owed[k], acked[k] = v, true
	}
	e.mu.Unlock()
	var n notes
	strava := e.Sim.Activities()
	recompute := newVerifier(e.Store)

	stored := map[int64]model.Workout{}
	for _, u := range e.Users {
		ws, _, err := e.workouts(ctx, u.UserID)
		if err != nil {
			return f, err
		}
		for _, w := range ws {
			stored[w.ActivityID] = w
		}
		// Awards against their audit entries.
		refs, parts, err := e.awardRefs(ctx, u.UserID)
		if err != nil {
			return f, err
		}
		audits, err := e.audits(ctx, u.UserID)
		if err != nil {
			return f, err
		}
		unaudited, doubled := AwardAudit(refs, parts, audits)
		f.Unaudited += len(unaudited)
		f.DupAwards += len(doubled)
		for _, r := range unaudited {
			n.add("unaudited", "user %s %s", u.UserID, r)
		}
		for _, r := range doubled {
			n.add("dupAward", "user %s %s", u.UserID, r)
		}
		// Milestones against a recompute from the stored log.
		drift, err := recompute(ctx, u.UserID)
		if err != nil {
			f.DriftLog++
			n.add("driftLog", "user %s: %v", u.UserID, err)
		}
		f.DriftLog += len(drift)
		for _, d := range drift {
			n.add("driftLog", "%s", d)
		}
	}
	ids := make([]int64, 0, len(owed))
	for id := range owed {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		w, ok := stored[id]
		if _, atStrava := strava[id]; !ok && !atStrava {
			f.Unknown++ // Strava never had it (a forged create): nothing to keep
			continue
		}
		if !ok {
			f.Lost++
			if acked[id] {
				n.add("lost", "activity %d (athlete %d): accepted, never written", id, owed[id])
			} else {
				n.add("lost", "activity %d (athlete %d): refused until Strava gave up", id, owed[id])
			}
			continue
		}
		f.Written++
		var act *stravasim.Activity
		if a, ok := strava[id]; ok {
			act = &a
		}
		if d := StravaDrift(act, w); len(d) > 0 {
			f.DriftStrava++
			n.add("driftStrava", "activity %d %s", id, strings.Join(d, ", "))
		}
	}
	parked, err := e.Store.Parked.Parked(ctx, keys.ParkSourceWorker)
	if err != nil {
		return f, err
	}
	f.Parked = len(parked)
	f.Notes = n.list
	return f, nil
}

// Reads counts the read requests Strava received: activities and list
// pages.
func (e *Env) Reads() int64 {
	st := e.Sim.Stats()
	return st.ActivityRequests + st.ListRequests
}

// Activity is a Strava activity for the scenarios: owner, sport, metres,
// start.
func Activity(id, owner int64, sport string, metres float64, start time.Time) stravasim.Activity {
	return stravasim.Activity{ID: id, AthleteID: owner, Name: fmt.Sprintf("%s %d", sport, id), SportType: sport,
		Distance: metres, TotalElevationGain: float64(id % 50), MovingTime: int64(metres / 3), ElapsedTime: int64(metres/3) + 60,
		StartDate: start.UTC().Truncate(time.Second)}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Run runs one scenario in a fresh Env and returns its figures; notes on
// non-zero figures and the child's log path go to Logf.
func (h *Harness) Run(ctx context.Context, sc Scenario, full bool) (Figures, error) {
	window := sc.Window
	if window <= 0 {
		window = Window
	}
	e, err := h.NewEnvWindow(sc.Name, sc.Limits, window)
	if err != nil {
		return Figures{Scenario: sc.Name}, err
	}
	defer e.Close()
	if err := e.Start(ctx); err != nil {
		return Figures{Scenario: sc.Name}, err
	}
	e.readsBefore = e.Reads()
	f, err := sc.Run(ctx, e, full)
	f.Scenario = sc.Name
	if err != nil {
		return f, fmt.Errorf("%s: %w (pipeline log: %s)", sc.Name, err, e.logPath)
	}
	for _, n := range f.Notes {
		h.Logf("%s: %s", sc.Name, n)
	}
	if !f.OK() {
		h.Logf("%s: pipeline log: %s", sc.Name, e.logPath)
	}
	return f, nil
}
