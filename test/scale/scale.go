package scale

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model/emf/emftest"
	"github.com/commitcollect/backend/model/syncstate"

	"github.com/aws/aws-lambda-go/events"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/catalog"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/retry"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/metering"
	"github.com/commitcollect/backend/model/store/tableadmin"
	"github.com/commitcollect/backend/model/streams"
	"github.com/commitcollect/backend/scripts/runkit"
	"github.com/commitcollect/backend/scripts/stravasim"
)

// Settings size one simulation (Full and Reduced are `make scale`'s and
// `make test`'s).
type Settings struct {
	Mode string
	// Athletes are seeded before the day starts; MilestoneShare of them
	// get an active monthly distance milestone.
	Athletes       int
	MilestoneShare float64
	// Day is the compressed day; Window Strava's short rate-limit window
	// (CC_STRAVA_WINDOW and the simulator's); Interval the reconciliation
	// interval (CC_RECONCILE_INTERVAL; CC_RECONCILE_IDLE is 4×).
	Day, Window, Interval time.Duration
	// ActivitiesPerDay per athlete, each announced by a create webhook at a
	// time drawn from the daily curve (evening peak PeakFactor× the night).
	ActivitiesPerDay float64
	PeakFactor       float64
	// PushedEdits and UnpushedEdits are the shares of activities edited
	// later in the day with and without an update webhook.
	PushedEdits, UnpushedEdits float64
	// Connects athletes connect during the day (OAuth) with HistoryDays
	// days of activities (one a day) to backfill.
	Connects, HistoryDays int
	// Senders deliver webhooks concurrently.
	Senders int
}

// Full is `make scale`'s run.
var Full = Settings{Mode: "full", Athletes: 2000, MilestoneShare: 0.5, Day: 6 * time.Minute, Window: 10 * time.Second,
	Interval: 90 * time.Second, ActivitiesPerDay: 1, PeakFactor: 3, PushedEdits: 0.05, UnpushedEdits: 0.05,
	Connects: 40, HistoryDays: 60, Senders: 16}

// Reduced is `make test`'s run: the same day shape, smaller and shorter.
var Reduced = Settings{Mode: "reduced", Athletes: 200, MilestoneShare: 0.5, Day: 45 * time.Second, Window: 5 * time.Second,
	Interval: 10 * time.Second, ActivitiesPerDay: 1, PeakFactor: 3, PushedEdits: 0.05, UnpushedEdits: 0.1,
	Connects: 4, HistoryDays: 30, Senders: 8}

// windows is how many Strava windows the day spans.
func (s Settings) windows() int { return max(1, int(s.Day/s.Window)) }

// ReadLimit is the app-wide reads per window the simulator enforces:
// enough for the peak window's webhook fetches twice over (the syncs may
// hold half of every window), so only syncs should ever have to wait.
func (s Settings) ReadLimit() int {
	perWindow := float64(s.Athletes) * s.ActivitiesPerDay * (1 + s.PushedEdits) / float64(s.windows())
	return max(60, int(math.Ceil(2.3*perWindow*s.PeakFactor)))
}

// curve is the day's webhook arrival density at hour h (0-24): a night
// floor, a morning bump and an evening peak PeakFactor× the floor.
func (s Settings) curve(h float64) float64 {
	g := func(mu, sigma float64) float64 { return math.Exp(-(h - mu) * (h - mu) / (2 * sigma * sigma)) }
	return 1 + (s.PeakFactor-1)*(0.35*g(7.5, 1)+g(19, 1.5))
}

// arrivals draws n instants in [0, Day) from the daily curve.
func (s Settings) arrivals(rng *rand.Rand, n int) []time.Duration {
	const steps = 24 * 60
	cdf := make([]float64, steps+1)
	for i := range steps {
		cdf[i+1] = cdf[i] + s.curve(24*(float64(i)+0.5)/steps)
	}
	out := make([]time.Duration, n)
	for k := range out {
		u := rng.Float64() * cdf[steps]
		i := max(0, sort.SearchFloat64s(cdf, u)-1)
		frac := (float64(i) + rng.Float64()) / steps
		out[k] = time.Duration(frac * float64(s.Day))
	}
	slices.Sort(out)
	return out
}

// The simulator's webhook subscription: its id and verify token.
const (
	scaleSubscriptionID = 24
	scaleVerifyToken    = "scale"
)

// Env is one simulation's world: the local stack (in this process, its
// meters counting keys), the Strava simulator behind a proxy that counts
// reads per window, and the observers.
type Env struct {
	S       Settings
	St      *runkit.Stack
	Sim     *stravasim.Server
	Keys    *metering.WriteKeys
	Logf    func(string, ...any)
	proxy   *httptest.Server
	tr      *tracker
	reads   *readLog
	emf     *emfLog
	logs    *logCapture
	share   int
	nextID  atomic.Int64
	loginMu sync.Mutex
	knobs   []string
	modelID string
	parts   int
	began   time.Time
	idle    time.Duration // CC_RECONCILE_IDLE as the product applies it
}

// Start brings up the simulator, its proxy and the local stack on
// endpoint (DynamoDB Local) with the given table prefix. extraEnv
// ("NAME=value") override the product knobs.
func Start(ctx context.Context, s Settings, endpoint, prefix string, extraEnv []string, logf func(string, ...any)) (*Env, error) {
	e := &Env{S: s, Logf: logf, tr: newTracker(), reads: newReadLog(s.Window), emf: &emfLog{},
		logs: &logCapture{window: s.Window, shared: &logShared{deferred: map[time.Time][2]int{}, trail: newTrail()}}, began: time.Now()}
	e.logs.reads = e.reads
	e.nextID.Store(time.Now().Unix() * 1000)
	limit := s.ReadLimit()
	big := limit * (s.windows() + 1000)
	e.Sim = stravasim.New(stravasim.Options{SubscriptionID: scaleSubscriptionID, Window: s.Window,
		Limits: stravasim.Limits{Short: 2 * limit, Daily: 2 * big, ReadShort: limit, ReadDaily: big}})
	e.proxy = httptest.NewServer(e.reads.wrap(e.Sim.Handler()))
	knobs := map[string]string{
		"CC_STRAVA_WINDOW": s.Window.String(), "CC_RECONCILE_INTERVAL": s.Interval.String(),
		"CC_RECONCILE_IDLE": (4 * s.Interval).String(), "CC_RECONCILE_DAYS": "3",
		"CC_RETRY_BASE": "1s", "CC_OUTBOX_LEASE": (2 * s.Window).String(), "CC_STRAVA_TIMEOUT": "5s",
	}
	for _, kv := range extraEnv {
		if k, v, ok := strings.Cut(kv, "="); ok {
			knobs[k] = v
		}
	}
	for k, v := range knobs {
		e.knobs = append(e.knobs, k+"="+v)
	}
	slices.Sort(e.knobs)
	env := map[string]string{
		"CC_HTTP_ADDR": "127.0.0.1:0", "DYNAMODB_ENDPOINT": endpoint, "CC_TABLE_PREFIX": prefix,
		"STRAVA_BASE_URL": e.proxy.URL, "STRAVA_CLIENT_ID": e.Sim.ClientID(), "STRAVA_CLIENT_SECRET": e.Sim.ClientSecret(),
		"STRAVA_SUBSCRIPTION_ID": strconv.FormatInt(scaleSubscriptionID, 10), "STRAVA_VERIFY_TOKEN": scaleVerifyToken,
	}
	for k, v := range knobs {
		env[k] = v
	}
	st, err := runkit.Start(ctx, runkit.Options{
		Getenv: func(k string) string { return env[k] }, Log: slog.New(e.logs), WrapProjector: e.tr.observe,
		WorkerMetrics: e.emf, SweepInterval: max(500*time.Millisecond, s.Window/5),
	})
	if err != nil {
		e.proxy.Close()
		e.Sim.Close()
		return nil, err
	}
	e.St = st
	// The idle round-robin and the share as the product applies them
	// (defaults and bounds included).
	set := st.Scheduler.Settings.WithDefaults()
	e.idle = set.ReconcileIdle
	e.share = int(math.Floor(set.BudgetShare * float64(limit)))
	if _, err := e.Sim.Subscribe(ctx, st.WebhookURL, scaleVerifyToken); err != nil {
		e.Close()
		return nil, fmt.Errorf("subscribe at the simulator: %w", err)
	}
	cat, err := catalog.Default()
	if err != nil {
		e.Close()
		return nil, err
	}
	e.modelID, e.parts = cat.Models[0].ModelID, cat.Models[0].PartCount
	e.Keys = metering.NewWriteKeys(tableadmin.KeySchemas(tableadmin.Specs(st.Store.DB.Tables())), 0)
	return e, nil
}

// Close stops everything and drops the tables.
func (e *Env) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if e.St != nil {
		e.St.Close(ctx)
		_ = tableadmin.DeleteTables(ctx, e.St.Store.DB.Client(), e.St.Store.DB.Tables())
	}
	e.proxy.Close()
	e.Sim.Close()
}

// athlete is a seeded or connected athlete.
type athlete struct {
	id        int64
	userID    string
	milestone bool
}

// seed creates the athletes directly (simulator tokens, store.CreateUser,
// store.CreateMilestone), concurrently: 2,000 OAuth logins would take
// longer than the day. Seeding is not metered.
func (e *Env) seed(ctx context.Context, rng *rand.Rand) ([]*athlete, error) {
	as := make([]*athlete, e.S.Athletes)
	for i := range as {
		as[i] = &athlete{id: e.nextID.Add(1), userID: fmt.Sprintf("scale-%d", i), milestone: rng.Float64() < e.S.MilestoneShare}
	}
	now := time.Now().UTC()
	end := now.AddDate(0, 0, 2)
	jobs := make(chan *athlete)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range jobs {
				e.Sim.AddAthlete(stravasim.Athlete{ID: a.id, Firstname: "Scale", Lastname: a.userID})
				tok := e.Sim.IssueTokens(a.id, 24*time.Hour)
				err := e.St.Store.Users.CreateUser(ctx, &model.Profile{UserID: a.userID, AthleteID: a.id, DisplayName: a.userID, CreatedAtUtc: now},
					&model.StravaConnection{UserID: a.userID, AthleteID: a.id, AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken,
						ExpiresAtUtc: tok.ExpiresAt, Scopes: tok.Scope, TokenVersion: 1, UpdatedAtUtc: now})
				if err == nil && a.milestone {
					err = e.St.Store.Milestones.CreateMilestone(ctx, &model.Milestone{UserID: a.userID, MilestoneID: "month",
						MilestoneDefinition: model.MilestoneDefinition{ModelID: e.modelID, Title: "Scale month", Metric: model.MetricDistance,
							Target: 1e6, PeriodStartAtUtc: now.AddDate(0, 0, -30), PeriodEndAtUtc: &end, PartCount: e.parts},
						Projection: model.Projection{Status: model.StatusActive}, CreatedAtUtc: now, WrittenBy: model.WriterAPI})
				}
				if err != nil {
					select {
					case errs <- fmt.Errorf("seed athlete %d: %w", a.id, err):
					default:
					}
				}
			}
		}()
	}
	for _, a := range as {
		select {
		case jobs <- a:
		case err := <-errs:
			close(jobs)
			wg.Wait()
			return nil, err
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		return nil, err
	default:
	}
	return as, nil
}

// connect adds an athlete with days of history at Strava and logs them in
// through the API's OAuth flow (which links them and enqueues their
// backfill); it returns the history's expectations (counted from began),
// registered before the login, so no backfilled write can pass before it
// is awaited.
func (e *Env) connect(ctx context.Context, days int, began time.Time) ([]*expectation, error) {
	id := e.nextID.Add(1)
	e.Sim.AddAthlete(stravasim.Athlete{ID: id, Firstname: "Scale", Lastname: "Connect"})
	now := time.Now().UTC()
	var hist []*expectation
	for d := 1; d <= days; d++ {
		act := activity(e.nextID.Add(1), id, 3000+float64(d), now.Add(-time.Duration(d)*24*time.Hour))
		e.Sim.PutActivity(act)
		hist = append(hist, e.tr.expect(act.ID, act.Distance, began))
	}
	e.loginMu.Lock() // the simulator's authorization is one setting
	defer e.loginMu.Unlock()
	e.Sim.SetAuthorization(stravasim.Authorization{AthleteID: id})
	c := runkit.Browser(20 * time.Second)
	if err := runkit.Login(ctx, c, e.St.APIURL); err != nil {
		return nil, fmt.Errorf("login athlete %d: %w", id, err)
	}
	if err := runkit.SendJSON(ctx, c, http.MethodGet, e.St.APIURL+"/v1/me", nil, nil, http.StatusOK); err != nil {
		return nil, fmt.Errorf("who is athlete %d: %w", id, err)
	}
	return hist, nil
}

func activity(id, owner int64, metres float64, start time.Time) stravasim.Activity {
	return stravasim.Activity{ID: id, AthleteID: owner, Name: fmt.Sprintf("Run %d", id), SportType: "Run", Distance: metres,
		MovingTime: int64(metres / 3), ElapsedTime: int64(metres/3) + 60, StartDate: start.UTC().Truncate(time.Second)}
}

// ---------------------------------------------------------------- observers

// expectation is a state of one activity the pipeline owes: its workout
// written with Distance, counted from Since.
type expectation struct {
	distance float64
	// commute, when set, is the commute mark Strava now shows (an edit
	// that toggled it, which no webhook announces): the written workout
	// must carry it too.
	commute *bool
	since   time.Time
	done    time.Time
	// For a webhook: the activity, its kind (create or update), the
	// athlete, and when the POST was acknowledged (set by its sender).
	activity, athlete int64
	kind              string
	acked             time.Time
}

// tracker sees every workout record the projector is handed (the stream of
// the main table) and matches it against expectations. An activity can owe
// several states in turn (its create, then an edit): each is its own
// expectation, so an edit reconciliation never catches does not turn the
// create that was written into lost work.
type tracker struct {
	mu      sync.Mutex
	exp     map[int64][]*expectation
	batches []batch // every batch the projector was handed, in order
}

func newTracker() *tracker { return &tracker{exp: map[int64][]*expectation{}} }

// expect registers one more state activity id must reach.
func (t *tracker) expect(id int64, distance float64, since time.Time) *expectation {
	t.mu.Lock()
	defer t.mu.Unlock()
	x := &expectation{distance: distance, since: since}
	t.exp[id] = append(t.exp[id], x)
	return x
}

// result returns when expectation x was met (ok false when not yet).
func (t *tracker) result(x *expectation) (since, done time.Time, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return x.since, x.done, !x.done.IsZero()
}

func (t *tracker) observe(h streams.Handler) streams.Handler {
	return func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		now := time.Now()
		b := batch{at: now, records: len(ev.Records), byPK: map[string]int{}}
		t.mu.Lock()
		for _, r := range ev.Records {
			pk, sk := r.Change.Keys["PK"], r.Change.Keys["SK"]
			if pk.DataType() != events.DataTypeString || sk.DataType() != events.DataTypeString {
				continue
			}
			b.byPK[pk.String()]++
			k, err := keys.ParseKey(model.Key{PK: pk.String(), SK: sk.String()})
			if err != nil || k.Kind != keys.KindWorkout {
				continue
			}
			d, ok := r.Change.NewImage["distanceMeters"]
			if !ok || d.DataType() != events.DataTypeNumber {
				continue
			}
			f, err := strconv.ParseFloat(d.Number(), 64)
			if err != nil {
				continue
			}
			commute := commuteOf(r.Change.NewImage)
			for _, x := range t.exp[k.ActivityID] {
				if x.done.IsZero() && x.distance == f && (x.commute == nil || *x.commute == commute) {
					x.done = now
				}
			}
		}
		t.mu.Unlock()
		resp, err := h(ctx, ev)
		b.took = time.Since(now)
		t.mu.Lock()
		t.batches = append(t.batches, b)
		t.mu.Unlock()
		return resp, err
	}
}

// commuteOf reads Strava's commute mark from a workout's stream image
// (false when the image holds no flags).
func commuteOf(img map[string]events.DynamoDBAttributeValue) bool {
	f, ok := img["flags"]
	if !ok || f.DataType() != events.DataTypeMap {
		return false
	}
	c, ok := f.Map()["commute"]
	return ok && c.DataType() == events.DataTypeBoolean && c.Boolean()
}

// readLog counts the simulator's read requests per window, by endpoint.
type readLog struct {
	window time.Duration
	mu     sync.Mutex
	by     map[time.Time]*Window
}

func newReadLog(w time.Duration) *readLog { return &readLog{window: w, by: map[time.Time]*Window{}} }

func (l *readLog) at(t time.Time) *Window {
	start := t.UTC().Truncate(l.window)
	w := l.by[start]
	if w == nil {
		w = &Window{Start: start, ByClass: map[string]int{}}
		l.by[start] = w
	}
	return w
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (l *readLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		now := time.Now()
		h.ServeHTTP(sw, r)
		if r.Method != http.MethodGet {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		win := l.at(now)
		switch p := r.URL.Path; {
		case p == "/api/v3/athlete/activities":
			win.List++
		case p == "/api/v3/athlete":
			win.Athlete++
		case strings.HasPrefix(p, "/api/v3/activities/"):
			win.Activity++
		default:
			return
		}
		if sw.status == http.StatusTooManyRequests {
			win.Refused++
		}
	})
}

// listsSoFar is how many sync list reads the window of t has served.
func (l *readLog) listsSoFar(t time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.at(t).List
}

// emfLog reads the worker's EMF lines (StravaReads by Class).
type emfLog struct {
	mu    sync.Mutex
	lines []emfLine
	buf   []byte
}

type emfLine struct {
	at    time.Time
	class string
	reads int
}

func (m *emfLog) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.buf = append(m.buf, p...)
	for {
		i := slices.Index(m.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		if line, err := emftest.Parse(m.buf[:i]); err == nil {
			if reads, ok := line.Value("StravaReads"); ok {
				m.lines = append(m.lines, emfLine{at: line.At, class: line.Dimension("Class"), reads: int(reads)})
			}
		}
		m.buf = m.buf[i+1:]
	}
}

// logCapture is the stack's slog handler: it counts webhook jobs deferred,
// noting whether syncs had spent reads in that window already; it keeps
// the first errors, and each activity's trail (trail.go).
type logCapture struct {
	window time.Duration
	reads  *readLog
	attrs  []slog.Attr
	shared *logShared
}

type logShared struct {
	mu       sync.Mutex
	deferred map[time.Time][2]int // window → webhook jobs deferred, of which with syncs' reads spent
	errors   []string
	trail    *trail // what was logged about each activity
}

func (h *logCapture) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *logCapture) Handle(_ context.Context, r slog.Record) error {
	sh := h.shared
	sh.trail.note(h.attrs, r)
	if r.Level >= slog.LevelError {
		sh.mu.Lock()
		if len(sh.errors) < 5 {
			sh.errors = append(sh.errors, r.Message)
		}
		sh.mu.Unlock()
	}
	if r.Message != "job deferred" {
		return nil
	}
	webhook := false
	for _, a := range h.attrs {
		if a.Key == "eventType" && strings.HasPrefix(a.Value.String(), "activity.") {
			webhook = true
		}
	}
	if !webhook {
		return nil
	}
	withSyncs := h.reads.listsSoFar(r.Time) > 0
	start := r.Time.UTC().Truncate(h.window)
	sh.mu.Lock()
	c := sh.deferred[start]
	c[0]++
	if withSyncs {
		c[1]++
	}
	sh.deferred[start] = c
	sh.mu.Unlock()
	return nil
}

func (h *logCapture) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(slices.Clip(h.attrs), as...)
	return &c
}

func (h *logCapture) WithGroup(string) slog.Handler { return h }

// ---------------------------------------------------------------- the run

// Run seeds the athletes, plays the compressed day and waits out the edit
// bound, then measures. It returns an error only when the run could not be
// played; what it measured is in the report.
func (e *Env) Run(ctx context.Context, seed uint64) (Report, error) {
	s := e.S
	rng := rand.New(rand.NewPCG(seed, 24))
	r := Report{Mode: s.Mode, Athletes: s.Athletes, Connects: s.Connects, HistoryDays: s.HistoryDays, Day: s.Day, Window: s.Window,
		Interval: s.Interval, Bound: e.idle + s.Window, FastBound: s.Interval + s.Window, ReadLimit: s.ReadLimit(), SyncShare: e.share,
		TablePrefix: strings.TrimSuffix(e.St.Store.DB.Tables().Main, dynamo.BaseMain), ProductKnobs: e.knobs}
	t0 := time.Now()
	as, err := e.seed(ctx, rng)
	if err != nil {
		return r, err
	}
	for _, a := range as {
		if a.milestone {
			r.Milestones++
		}
	}
	e.Logf("seeded %d athletes (%d milestones) in %s", len(as), r.Milestones, time.Since(t0).Round(time.Millisecond))
	if err := e.waitQuiet(ctx, 2*time.Minute); err != nil {
		return r, err
	}
	// From now on every component counts its written keys: the day's traffic.
	for _, m := range []*metering.Meter{e.St.Capacity.API, e.St.Capacity.Worker, e.St.Capacity.Projector, e.St.Capacity.Sweeper} {
		m.CountWriteKeys(e.Keys)
	}

	// The day's plan: creates on the daily curve, edits after them, connects.
	type plan struct {
		at       time.Duration
		kind     string // create, pushed, unpushed, connect
		athlete  *athlete
		activity int64
	}
	n := int(math.Round(float64(s.Athletes) * s.ActivitiesPerDay))
	times := s.arrivals(rng, n)
	var steps []plan
	for _, at := range times {
		a := as[rng.IntN(len(as))]
		p := plan{at: at, kind: "create", athlete: a, activity: e.nextID.Add(1)}
		steps = append(steps, p)
		later := at + time.Duration((0.05+0.2*rng.Float64())*float64(s.Day))
		switch u := rng.Float64(); {
		case later >= s.Day:
		case u < s.PushedEdits:
			steps = append(steps, plan{at: later, kind: "pushed", athlete: a, activity: p.activity})
		case u < s.PushedEdits+s.UnpushedEdits:
			steps = append(steps, plan{at: later, kind: "unpushed", athlete: a, activity: p.activity})
		}
	}
	for range s.Connects {
		steps = append(steps, plan{at: time.Duration((0.1 + 0.7*rng.Float64()) * float64(s.Day)), kind: "connect"})
	}
	slices.SortStableFunc(steps, func(a, b plan) int { return int(a.at - b.at) })

	var (
		mu        sync.Mutex
		webhooks  []*expectation // one per webhook sent: the state it announced
		edits     []*athlete
		editExp   []*expectation
		editAt    []time.Time
		connects  []time.Time
		histories [][]*expectation
		notAck    int
		connErr   error
		perWindow = map[int]int{}
	)
	type send struct {
		ev stravasim.Event
		x  *expectation
	}
	queue := make(chan send, 4096)
	var senders sync.WaitGroup
	for range s.Senders {
		senders.Add(1)
		go func() {
			defer senders.Done()
			for q := range queue {
				_, err := e.Sim.Deliver(ctx, e.St.WebhookURL, q.ev)
				mu.Lock()
				q.x.acked = time.Now()
				if err != nil {
					notAck++
				}
				mu.Unlock()
			}
		}()
	}
	var side sync.WaitGroup
	dayStart := time.Now()
	e.Logf("day starts: %d steps over %s", len(steps), s.Day)
	distance := map[int64]float64{}
	created := map[int64]*expectation{}
	for _, p := range steps {
		if d := time.Until(dayStart.Add(p.at)); d > 0 {
			if err := retry.Sleep(ctx, d); err != nil {
				return r, err
			}
		}
		now := time.Now()
		switch p.kind {
		case "create":
			m := 2000 + float64(rng.IntN(20000))
			distance[p.activity] = m
			e.Sim.PutActivity(activity(p.activity, p.athlete.id, m, now.Add(-time.Hour)))
			x := e.tr.expect(p.activity, m, now)
			x.activity, x.athlete, x.kind = p.activity, p.athlete.id, "create"
			created[p.activity] = x
			queue <- send{e.Sim.ActivityEvent("create", p.activity, p.athlete.id, nil), x}
			mu.Lock()
			webhooks = append(webhooks, x)
			perWindow[int(p.at/s.Window)]++
			mu.Unlock()
		case "pushed", "unpushed":
			if _, _, ok := e.tr.result(created[p.activity]); !ok {
				continue // its create is not written yet: no edit on top of it
			}
			m := distance[p.activity]
			var commute *bool
			if p.kind == "unpushed" && len(edits)%2 == 1 { // every other silent edit: a commute mark toggled on
				commute = new(true)
				e.Sim.UpdateActivity(p.activity, func(a *stravasim.Activity) { a.Commute = true })
			} else {
				m += 100
				e.Sim.UpdateActivity(p.activity, func(a *stravasim.Activity) { a.Distance = m })
			}
			distance[p.activity] = m
			x := e.tr.expect(p.activity, m, now)
			x.commute = commute
			if p.kind == "pushed" {
				x.activity, x.athlete, x.kind = p.activity, p.athlete.id, "update"
				queue <- send{e.Sim.ActivityEvent("update", p.activity, p.athlete.id, map[string]string{"title": "edited"}), x}
				mu.Lock()
				webhooks = append(webhooks, x)
				perWindow[int(p.at/s.Window)]++
				mu.Unlock()
				continue
			}
			edits, editExp, editAt = append(edits, p.athlete), append(editExp, x), append(editAt, now)
		case "connect":
			side.Add(1)
			go func() {
				defer side.Done()
				began := time.Now()
				hist, err := e.connect(ctx, s.HistoryDays, began)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					connErr = errors.Join(connErr, err)
					return
				}
				connects, histories = append(connects, began), append(histories, hist)
			}()
		}
	}
	close(queue)
	senders.Wait()
	side.Wait()
	dayEnd := time.Now()
	e.Logf("day over after %s; waiting out the edit bound (%s) and the backlog", dayEnd.Sub(dayStart).Round(time.Second), r.Bound)
	if connErr != nil {
		return r, connErr
	}

	// Wait: every webhook and backfill written, and the last edit's bound past.
	lastEdit := dayEnd
	if len(editAt) > 0 {
		lastEdit = editAt[len(editAt)-1]
	}
	deadline := time.Now().Add(r.Bound + 3*time.Minute)
	for {
		missing := 0
		for _, x := range webhooks {
			if _, _, ok := e.tr.result(x); !ok {
				missing++
			}
		}
		for _, h := range histories {
			for _, x := range h {
				if _, _, ok := e.tr.result(x); !ok {
					missing++
				}
			}
		}
		if (missing == 0 && time.Since(lastEdit) > r.Bound) || time.Now().After(deadline) {
			break
		}
		if err := retry.Sleep(ctx, 500*time.Millisecond); err != nil {
			return r, err
		}
	}

	// Measure.
	// Every webhook counts with its own lag: a create's from its POST to
	// the created state, an update's from its POST to the edited state.
	for _, x := range webhooks {
		since, done, ok := e.tr.result(x)
		if !ok {
			r.Lost++
			continue
		}
		r.Lags = append(r.Lags, max(0, done.Sub(since)))
	}
	r.Webhooks = len(webhooks)
	r.NotDelivered = notAck
	e.explainSlowest(&r, webhooks, dayStart)
	for i, h := range histories {
		var last time.Duration
		for _, x := range h {
			_, done, ok := e.tr.result(x)
			if !ok {
				r.Lost++
				continue
			}
			r.Backfilled++
			last = max(last, done.Sub(connects[i]))
		}
		r.BackfillTimes = append(r.BackfillTimes, last)
	}
	for i, a := range edits {
		_, done, ok := e.tr.result(editExp[i])
		r.Edits++
		if ok {
			r.CaughtAny++
		}
		if a.milestone {
			r.EditsMilestone++
			switch {
			case ok && done.Sub(editAt[i]) <= r.Bound:
				r.CaughtMilestone++
			case ok:
				r.MissedEdits = append(r.MissedEdits, fmt.Sprintf("%s's edit at %s of the day, caught %s after it; %s",
					a.userID, ms(editAt[i].Sub(dayStart)), ms(done.Sub(editAt[i])), e.reconciles(ctx, a.userID, dayStart)))
			default:
				r.MissedEdits = append(r.MissedEdits, fmt.Sprintf("%s's edit at %s of the day, never caught; %s",
					a.userID, ms(editAt[i].Sub(dayStart)), e.reconciles(ctx, a.userID, dayStart)))
			}
			if ok && done.Sub(editAt[i]) <= r.FastBound {
				r.CaughtFast++
			}
		}
	}
	mean := float64(len(webhooks)) / float64(s.windows())
	busiest := 0
	for _, c := range perWindow {
		busiest = max(busiest, c)
	}
	if mean > 0 {
		r.PeakFactor = float64(busiest) / mean
	}
	r.Windows = e.windows(dayStart, time.Now())
	r.HotKeys = e.Keys.Hottest()
	r.Elapsed = time.Since(e.began)
	if errs := e.logs.shared; len(errs.errors) > 0 {
		e.Logf("first error logs of the stack: %q", errs.errors)
	}
	return r, nil
}

// windows assembles the per-window figures from from to to.
func (e *Env) windows(from, to time.Time) []Window {
	e.reads.mu.Lock()
	byStart := map[time.Time]*Window{}
	for k, w := range e.reads.by {
		c := *w
		c.ByClass = map[string]int{}
		byStart[k] = &c
	}
	e.reads.mu.Unlock()
	get := func(t time.Time) *Window {
		start := t.UTC().Truncate(e.S.Window)
		w := byStart[start]
		if w == nil {
			w = &Window{Start: start, ByClass: map[string]int{}}
			byStart[start] = w
		}
		return w
	}
	e.emf.mu.Lock()
	for _, l := range e.emf.lines {
		get(l.at).ByClass[l.class] += l.reads
	}
	e.emf.mu.Unlock()
	sh := e.logs.shared
	sh.mu.Lock()
	for start, c := range sh.deferred {
		w := get(start)
		w.WebhooksDeferred, w.DeferredWithSyncs = c[0], c[1]
	}
	sh.mu.Unlock()
	var out []Window
	for start, w := range byStart {
		if !start.Before(from.UTC().Truncate(e.S.Window)) && !start.After(to) {
			out = append(out, *w)
		}
	}
	slices.SortFunc(out, func(a, b Window) int { return a.Start.Compare(b.Start) })
	return out
}

// waitQuiet waits until the worker queue is drained and the projector has
// had nothing to do for a moment (the seeded milestones are projected).
func (e *Env) waitQuiet(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	if err := e.St.Queue.Wait(ctx); err != nil {
		return fmt.Errorf("worker queue did not drain: %w", err)
	}
	prev := e.St.Capacity.Projector.Snapshot().Requests
	for {
		if err := retry.Sleep(ctx, time.Second); err != nil {
			return fmt.Errorf("projector still busy after %s: %w", limit, err)
		}
		cur := e.St.Capacity.Projector.Snapshot().Requests
		if cur == prev {
			return nil
		}
		prev = cur
	}
}

// reconciles says when the user's reconciliations finished, as instants of
// the day begun at dayStart (the audit trail's sync completions of mode
// reconcile), for a missed edit's line.
func (e *Env) reconciles(ctx context.Context, userID string, dayStart time.Time) string {
	st := e.St.Store
	es, _, err := dynamo.QueryEntities[model.AuditEntry](ctx, st.DB, st.DB.Tables().Audit, keys.UserPK(userID), keys.PrefixAudit, dynamo.QueryOptions{})
	if err != nil {
		return "reconciliations not read: " + err.Error()
	}
	var at []string
	for _, a := range es {
		if a.EventType == ingest.AuditSyncCompleted && a.Details["mode"] == syncstate.SyncModeReconcile {
			at = append(at, ms(a.OccurredAtUtc.Sub(dayStart)))
		}
	}
	return "reconciled at " + strings.Join(at, ", ")
}
