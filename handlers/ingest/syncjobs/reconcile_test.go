package syncjobs_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/budget"
	"github.com/commitcollect/backend/handlers/ingest/syncjobs"
	"github.com/commitcollect/backend/handlers/ingest/syncjobs/scheduler"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/ports"
	"github.com/commitcollect/backend/model/strava"
	"github.com/commitcollect/backend/model/syncstate"
	"github.com/commitcollect/backend/scripts/stravasim"
	"github.com/commitcollect/backend/test/ingesttest"
)

// recordingLister records the options of every list call.
type recordingLister struct {
	syncjobs.ActivityLister
	mu   sync.Mutex
	opts []strava.ListOptions
}

func (l *recordingLister) ListActivities(ctx context.Context, tok string, o strava.ListOptions) ([]strava.Activity, strava.RateLimit, error) {
	l.mu.Lock()
	l.opts = append(l.opts, o)
	l.mu.Unlock()
	return l.ActivityLister.ListActivities(ctx, tok, o)
}

// scheduleStore is the real store with the scheduler's visits and claims
// counted per user, and a cursor save that fails on the nth call (a crash
// after a page was processed, before its cursor was saved).
type scheduleStore struct {
	scheduler.MilestoneReader
	scheduler.OutboxClaimer
	scheduler.ReconcileCursors
	mu        sync.Mutex
	visits    map[string]int
	claims    map[string]int
	keys      map[string]bool
	saves     int
	crashSave int
}

func (s *scheduleStore) UserMilestones(ctx context.Context, userID string) (ports.UserMilestones, error) {
	s.mu.Lock()
	s.visits[userID]++
	s.mu.Unlock()
	return s.MilestoneReader.UserMilestones(ctx, userID)
}

func (s *scheduleStore) ClaimOutboxItem(ctx context.Context, key, corr, job string, now time.Time, lease, ttl time.Duration) (*ops.IdempotencyRecord, error) {
	rec, err := s.OutboxClaimer.ClaimOutboxItem(ctx, key, corr, job, now, lease, ttl)
	if err == nil {
		j, derr := ingest.DecodeJob([]byte(job))
		s.mu.Lock()
		if derr == nil && !s.keys[key] { // a lapsed lease claims the same job again
			s.keys[key] = true
			s.claims[j.Sync.UserID]++
		}
		s.mu.Unlock()
	}
	return rec, err
}

func (s *scheduleStore) SaveReconcileCursor(ctx context.Context, c *syncstate.ReconcileCursor) error {
	s.mu.Lock()
	s.saves++
	crash := s.saves == s.crashSave
	s.mu.Unlock()
	if crash {
		return fmt.Errorf("simulated crash before the cursor was saved: %w", model.ErrRetryable)
	}
	return s.ReconcileCursors.SaveReconcileCursor(ctx, c)
}

func (s *scheduleStore) take() (visits, claims map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	visits, claims = s.visits, s.claims
	s.visits, s.claims = map[string]int{}, map[string]int{}
	return visits, claims
}

// milestone gives user an active milestone from start to end.
func (r *syncRig) milestone(user string, start, end time.Time) {
	r.T.Helper()
	m := &model.Milestone{UserID: user, MilestoneID: "m-" + user, MilestoneDefinition: model.MilestoneDefinition{
		ModelID: "distance", Title: "Run", Metric: "distance", Target: 100, SportTypes: []string{"Run"},
		PeriodStartAtUtc: start, PeriodEndAtUtc: &end, PartCount: 1}, Version: 1, CreatedAtUtc: start, WrittenBy: model.WriterAPI}
	m.Status = model.StatusActive
	if err := r.St.DB.Put(context.Background(), r.St.DB.Tables().Main, m); err != nil {
		r.T.Fatal(err)
	}
}

// profiles puts users' profiles and waits until the users index lists them.
func (r *syncRig) profiles(users ...string) {
	r.T.Helper()
	ctx := context.Background()
	for i, u := range users {
		if err := r.St.DB.Put(ctx, r.St.DB.Tables().Main, &model.Profile{UserID: u, AthleteID: int64(1000 + i)}); err != nil {
			r.T.Fatal(err)
		}
	}
	r.waitUntil("the users index lists every profile", func() bool {
		n, err := r.St.Users.CountUsers(ctx)
		return err == nil && n == len(users)
	})
}

func (r *syncRig) scheduleStore(settings syncjobs.SyncSettings) *scheduleStore {
	all := app.SchedulerStores(r.St)
	ss := &scheduleStore{MilestoneReader: all.Milestones, OutboxClaimer: all.Outbox, ReconcileCursors: all.Cursor,
		visits: map[string]int{}, claims: map[string]int{}, keys: map[string]bool{}}
	all.Milestones, all.Outbox, all.Cursor = ss, ss, ss
	r.sched = scheduler.New(all, nil, ingesttest.Log())
	r.sched.Settings = settings
	r.sched.Now = func() time.Time { return r.now }
	return ss
}

func (r *syncRig) step() scheduler.ReconcileResult {
	r.T.Helper()
	res, err := r.sched.ReconcileStep(context.Background())
	if err != nil {
		r.T.Fatalf("ReconcileStep: %v", err)
	}
	return res
}

// Protections: ReconcileStep's milestone check (reconcileUser) and its
// upload check (ReconcileDue); removing either enqueues a user this test
// says must wait.
func TestReconcileStepReconcilesOnlyWhoCanChangeSomething(t *testing.T) {
	t.Parallel()
	settings := syncjobs.SyncSettings{ReconcileDays: 14, ReconcileInterval: time.Hour, ReconcileIdle: 4 * time.Hour}
	r := newSyncRig(t, settings)
	ss := r.scheduleStore(settings)
	ctx := context.Background()
	r.profiles("u-none", "u-quiet", "u-active")
	for i, u := range []string{"u-none", "u-quiet", "u-active"} {
		r.Link(u, int64(600+i), 24*time.Hour)
	}
	r.milestone("u-quiet", r.now.AddDate(0, 0, -30), r.now.AddDate(0, 0, 30))
	r.milestone("u-active", r.now.AddDate(0, 0, -30), r.now.AddDate(0, 0, 30))
	// u-none's milestone ended before the reconcile window.
	r.milestone("u-none", r.now.AddDate(0, 0, -60), r.now.AddDate(0, 0, -20))
	// Both were reconciled an hour ago up to activity 7001; u-active
	// uploaded 7002 since.
	for _, u := range []string{"u-quiet", "u-active"} {
		if _, err := r.Budget.UpdateSyncState(ctx, u, func(cur *syncstate.SyncState) error {
			cur.State, cur.ReconciledAtUtc, cur.ReconciledActivityID = syncstate.SyncIdle, r.now.Add(-time.Hour), 7001
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range []struct {
		user string
		id   int64
	}{{"u-quiet", 7000}, {"u-quiet", 7001}, {"u-active", 7001}, {"u-active", 7002}} {
		wo := &model.Workout{UserID: w.user, AthleteID: 1, ActivityID: w.id, SportType: "Run", DistanceMeters: 1000,
			StartDateUtc: r.now.Add(-time.Duration(w.id-6990) * time.Hour), CreatedAtUtc: r.now, UpdatedAtUtc: r.now, FetchStartedAtNs: r.now.UnixNano()}
		if err := r.St.Workouts.UpsertWorkout(ctx, wo); err != nil {
			t.Fatal(err)
		}
	}

	r.step() // starts the cycle
	r.now = r.now.Add(time.Hour)
	res := r.step()
	visits, claims := ss.take()
	if res.Users != 3 || visits["u-none"] != 1 || visits["u-quiet"] != 1 || visits["u-active"] != 1 {
		t.Fatalf("got %+v visits %v, want every user come to once", res, visits)
	}
	if claims["u-none"] != 0 || claims["u-quiet"] != 0 || claims["u-active"] != 1 {
		t.Fatalf("got claims %v, want only u-active's (milestone and an upload since)", claims)
	}
	// Idle: the next cycle comes to u-quiet when its reconciliation is four
	// hours old, and the slow round-robin reconciles it. u-none never.
	for range 2 {
		r.now = r.now.Add(time.Hour)
		r.step()
	}
	_, claims = ss.take()
	if claims["u-none"] != 0 || claims["u-quiet"] != 1 {
		t.Fatalf("got claims %v over the idle interval, want u-quiet's once, u-none's never", claims)
	}
}

// Protection: the reconciliation lists with after= (sync.go page); without
// it the assertion on the list's options fails.
func TestReconcileOfAnUnchangedAthleteIsOneAfterBoundedListAndNoWrite(t *testing.T) {
	t.Parallel()
	settings := syncjobs.SyncSettings{ReconcileDays: 14, ReconcileInterval: time.Hour}
	r := newSyncRig(t, settings)
	lister := &recordingLister{ActivityLister: strava.NewClient(r.Sim.URL, nil)}
	refresher := strava.NewRefresher(strava.OAuthConfig(r.Sim.URL, r.Sim.ClientID(), r.Sim.ClientSecret(), ""), r.St.Connections, lister.ActivityLister.(*strava.Client).HTTPClient())
	r.worker.Sync = syncjobs.NewSyncer(r.counted.stores, refresher, lister, ingesttest.Log())
	r.worker.Sync.Settings = settings
	r.worker.Sync.Now = func() time.Time { return r.now }
	r.Link("u1", 95, 24*time.Hour)
	r.profiles("u1")
	r.milestone("u1", r.now.AddDate(0, 0, -30), r.now.AddDate(0, 0, 30))
	r.history(95, 8000, 5, 24*time.Hour)
	r.drain(r.backfill("u1"), 10)
	if st := r.state("u1"); st.ReconciledAtUtc.IsZero() || st.ReconciledActivityID != 8004 {
		t.Fatalf("got %s reconciled %s up to %d, want the first backfill to count as a reconciliation up to 8004", show(st), st.ReconciledAtUtc, st.ReconciledActivityID)
	}
	// An upload, through its webhook.
	r.Sim.PutActivity(stravasim.Activity{ID: 8100, AthleteID: 95, Name: "New", SportType: "Run", Distance: 2000, MovingTime: 700,
		ElapsedTime: 800, StartDate: r.now.Add(-time.Hour).Truncate(time.Second)})
	r.Deliver(r.Sim.ActivityEvent("create", 8100, 95, nil))
	r.counted.reset()
	lister.mu.Lock()
	lister.opts = nil
	lister.mu.Unlock()

	r.step()
	r.now = r.now.Add(time.Hour)
	if res := r.step(); res.Enqueued != 1 {
		t.Fatalf("got %+v, want u1 reconciled (an upload since)", res)
	}
	var cur *syncstate.ReconcileCursor
	cur, err := r.Budget.ReconcileCursor(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r.drain(keys.SyncJobKey(syncstate.SyncModeReconcile, "u1", cur.CycleStartedAtUtc), 5)
	lister.mu.Lock()
	opts := slices.Clone(lister.opts)
	lister.mu.Unlock()
	from := r.now.AddDate(0, 0, -14)
	if len(opts) != 1 || opts[0].After.IsZero() || opts[0].After.After(from) || from.Sub(opts[0].After) > time.Second || opts[0].Before.IsZero() {
		t.Fatalf("got list calls %+v, want exactly one, with after= the window's start (%s) and before= set", opts, from)
	}
	if total, _ := r.counted.writes(); total != 0 {
		t.Fatalf("got writes %v, want none for an unchanged athlete", r.counted.upserts)
	}
}

// Protection: ReconcileStep saves its cursor after every page and keys the
// job by the cycle; saving only at the end of a run (or keying by the run)
// makes the crash below visit or enqueue users twice or never.
func TestReconcileCursorResumesAfterACrashAndEnqueuesEveryUserOncePerInterval(t *testing.T) {
	t.Parallel()
	settings := syncjobs.SyncSettings{ReconcileDays: 14, ReconcileInterval: 10 * time.Hour, ReconcileBatch: 4}
	r := newSyncRig(t, settings)
	ss := r.scheduleStore(settings)
	var users []string
	for i := range 20 {
		users = append(users, fmt.Sprintf("u%02d", i))
	}
	r.profiles(users...)
	for i, u := range users {
		r.Link(u, int64(700+i), 24*time.Hour)
		r.milestone(u, r.now.AddDate(0, 0, -30), r.now.AddDate(0, 0, 30))
	}
	ss.crashSave = 4 // the third page's save (after the cycle's first)
	r.step()
	for cycle := range 2 {
		// Cycle 0 began with the step above and ends at hour 10; cycle 1
		// begins at hour 11 (the first step after) and ends at hour 21.
		for hour := range 10 + cycle {
			r.now = r.now.Add(time.Hour)
			res, err := r.sched.ReconcileStep(context.Background())
			if err != nil && !errors.Is(err, model.ErrRetryable) {
				t.Fatalf("cycle %d hour %d: %v", cycle, hour, err)
			}
			if res.Users > settings.ReconcileBatch {
				t.Fatalf("a run came to %d users, want at most the batch %d", res.Users, settings.ReconcileBatch)
			}
		}
		visits, claims := ss.take()
		for _, u := range users {
			if claims[u] != 1 {
				t.Fatalf("cycle %d: got claims %v, want every user's reconciliation enqueued exactly once", cycle, claims)
			}
			if visits[u] < 1 || (cycle == 1 && visits[u] != 1) {
				t.Fatalf("cycle %d: got visits %v, want every user come to (exactly once without a crash)", cycle, visits)
			}
		}
		// Idle users again for the next cycle: their jobs were never run.
		for _, u := range users {
			if _, err := r.Budget.UpdateSyncState(context.Background(), u, func(cur *syncstate.SyncState) error {
				cur.State = syncstate.SyncIdle
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Protections: the pacing (Syncer.pace) and the priority spread of
// deferred sync jobs (Syncer.afterReset, the pacing slot's spread).
// Without pacing the first runs take more than the allowance; without the
// spread the waiting jobs run in another order than their milestones end.
func TestSyncsArePacedAndTheSoonestEndingMilestonesGoFirst(t *testing.T) {
	t.Parallel()
	settings := syncjobs.SyncSettings{ReconcileDays: 14, ReconcileInterval: time.Hour, BudgetShare: 0.5, HeadStart: syncjobs.DefaultSyncHeadStart}
	r := newSyncRig(t, settings)
	r.now = rigNoon().Add(30 * time.Second) // 30 s into a window
	r.worker.Sync.Now = func() time.Time { return r.now }
	r.worker.Runner.Now = func() time.Time { return r.now }
	r.worker.Fetch.Now = r.worker.Runner.Now
	ctx := context.Background()
	const n = 10
	var users []string
	for i := range n {
		users = append(users, fmt.Sprintf("p%02d", i))
	}
	r.profiles(users...)
	for i, u := range users {
		r.Link(u, int64(800+i), 48*time.Hour)
		// p00's milestone ends last, p09's first.
		r.milestone(u, r.now.AddDate(0, 0, -30), r.now.Add(time.Duration(n-i)*24*time.Hour))
		r.Sim.PutActivity(stravasim.Activity{ID: int64(9000 + i), AthleteID: int64(800 + i), Name: "A", SportType: "Run",
			Distance: 1000, MovingTime: 600, ElapsedTime: 700, StartDate: r.now.Add(-24 * time.Hour).Truncate(time.Second)})
	}
	// The limits are known (a reading this window, nothing used).
	if err := r.Budget.RecordRateLimit(ctx, &ops.RateLimitState{ShortLimit: 200, DailyLimit: 2000, ReadShortLimit: 100, ReadDailyLimit: 1000,
		WindowStartedUtc: r.now.Truncate(15 * time.Minute), DayUtc: r.now.Format(time.DateOnly), UpdatedAtUtc: r.now}); err != nil {
		t.Fatal(err)
	}
	if res, err := r.sched.ReconcileAll(ctx); err != nil || res.Enqueued != n {
		t.Fatalf("ReconcileAll: %+v, %v", res, err)
	}
	w := 15 * time.Minute
	head := time.Duration(syncjobs.DefaultSyncHeadStart * float64(w))
	lists := r.Sim.Stats().ListRequests
	check := func() {
		t.Helper()
		taken := r.Sim.Stats().ListRequests - lists
		if allowed := budget.PacedAllowance(100, budget.SyncShareOf(0.5, true), r.now, w, head); taken > int64(allowed) {
			t.Fatalf("at %s syncs listed %d pages, over the paced allowance %d", r.now.Format(time.TimeOnly), taken, allowed)
		}
	}
	slot := r.now.Truncate(time.Hour)
	jobKeys := map[string]string{}
	for _, u := range users { // in the order the first runs come
		jobKeys[keys.SyncJobKey(syncstate.SyncModeReconcile, u, slot)] = u
		rec, err := r.St.Outbox.OutboxItem(ctx, keys.SyncJobKey(syncstate.SyncModeReconcile, u, slot))
		if err != nil {
			t.Fatal(err)
		}
		j, _ := ingest.DecodeJob([]byte(rec.Job))
		if err := r.worker.Run(ctx, j); err != nil {
			t.Fatal(err)
		}
		check()
	}
	first := int(r.Sim.Stats().ListRequests - lists)
	if want := budget.PacedAllowance(100, budget.SyncShareOf(0.5, true), r.now, w, head); first != want {
		t.Fatalf("got %d lists at once, want the paced allowance %d", first, want)
	}
	// The rest wait; they run as they come due (the sweeper's order).
	var order []string
	for range 5 * n {
		due, err := r.St.Pending.DueOutboxItems(ctx, r.now.Add(24*time.Hour), 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(due) == 0 {
			break
		}
		d := due[0]
		if at := d.DueAt(); at.After(r.now) {
			r.now = at
		}
		rec, err := r.St.Outbox.LeaseOutboxItem(ctx, d.IdempotencyKey, r.now, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		j, _ := ingest.DecodeJob([]byte(rec.Job))
		before := r.Sim.Stats().ListRequests
		if err := r.worker.Run(ctx, j.WithOutbox(rec)); err != nil {
			t.Fatal(err)
		}
		check()
		if r.Sim.Stats().ListRequests > before {
			order = append(order, jobKeys[d.IdempotencyKey])
		}
	}
	var want []string // the users past the first runs, soonest-ending milestone first
	for i := n - 1; i >= first; i-- {
		want = append(want, users[i])
	}
	if len(order) != n-first || !slices.Equal(order, want) {
		t.Fatalf("waiting jobs listed in the order %v, want the soonest-ending milestones first %v", order, want)
	}
	if got := r.state("p05"); got.State == syncstate.SyncReconciling {
		t.Fatalf("got %s", show(got))
	}
}

// Protection: Syncer.afterReset (sync deferrals due SyncResetDelay after
// the reset); without it the deferred sync is due with the webhook.
func TestWebhooksGoBeforeDeferredSyncsAtAReset(t *testing.T) {
	t.Parallel()
	settings := syncjobs.SyncSettings{ReconcileDays: 14, ReconcileInterval: time.Hour, BudgetShare: 0.5, HeadStart: syncjobs.DefaultSyncHeadStart}
	r := newSyncRig(t, settings)
	r.worker.Sync.Now = func() time.Time { return r.now }
	r.worker.Runner.Now = func() time.Time { return r.now }
	r.worker.Fetch.Now = r.worker.Runner.Now
	ctx := context.Background()
	r.Link("u1", 97, 48*time.Hour)
	r.profiles("u1")
	r.milestone("u1", r.now.AddDate(0, 0, -30), r.now.AddDate(0, 0, 1))
	r.Activity(9700, 97, "Run")
	// Everything spent this window: webhooks defer too.
	if err := r.Budget.RecordRateLimit(ctx, &ops.RateLimitState{ShortLimit: 200, DailyLimit: 2000, ReadShortLimit: 100, ReadDailyLimit: 1000,
		ShortUsage: 100, ReadShortUsage: 100, DailyUsage: 100, ReadDailyUsage: 100,
		WindowStartedUtc: r.now.Truncate(15 * time.Minute), DayUtc: r.now.Format(time.DateOnly), UpdatedAtUtc: r.now}); err != nil {
		t.Fatal(err)
	}
	if res, err := r.sched.ReconcileAll(ctx); err != nil || res.Enqueued != 1 {
		t.Fatalf("ReconcileAll: %+v, %v", res, err)
	}
	syncKey := keys.SyncJobKey(syncstate.SyncModeReconcile, "u1", r.now.Truncate(time.Hour))
	rec, _ := r.St.Outbox.OutboxItem(ctx, syncKey)
	sj, _ := ingest.DecodeJob([]byte(rec.Job))
	if err := r.worker.Run(ctx, sj); err != nil {
		t.Fatal(err)
	}
	hook := ingesttest.Job(r.Sim.ActivityEvent("create", 9700, 97, nil))
	hook.ReceivedAtUtc = r.now
	r.Claim(hook)
	if err := r.worker.Run(ctx, hook); err != nil {
		t.Fatal(err)
	}
	reset := r.now.Truncate(15 * time.Minute).Add(15 * time.Minute)
	hookDue, syncDue := r.Outbox(hook).DueAt(), func() time.Time { rec, _ := r.St.Outbox.OutboxItem(ctx, syncKey); return rec.DueAt() }()
	if !hookDue.Equal(reset) || syncDue.Before(reset.Add(time.Duration(syncjobs.SyncResetDelay*float64(15*time.Minute)))) {
		t.Fatalf("got webhook due %s, sync due %s; want the webhook at the reset %s and the sync after it", hookDue, syncDue, reset)
	}
	due, err := r.St.Pending.DueOutboxItems(ctx, reset.Add(time.Second), 10)
	if err != nil || len(due) != 1 || due[0].IdempotencyKey != hook.IdempotencyKey {
		t.Fatalf("due at the reset: got %v, %v; want only the webhook", due, err)
	}
}

// TestReconcileSinceCatchesWhatAnOutageDropped: Strava gave up on the
// webhooks of an outage; the operator's ReconcileSince (make syncs
// -reconcile-since) enqueues a reconciliation listing from the outage's
// start, and working it off writes the activity no webhook brought, even
// for a user whose regular reconciliation would skip it (no milestone).
// Protection: ReconcileSince's job (without it the activity waits for the
// idle round-robin).
func TestReconcileSinceCatchesWhatAnOutageDropped(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, syncjobs.SyncSettings{})
	ctx := context.Background()
	r.profiles("u1")
	r.Link("u1", 650, 24*time.Hour)
	outage := r.now.Add(-6 * time.Hour)
	r.Sim.PutActivity(stravasim.Activity{ID: 6501, AthleteID: 650, Name: "During the outage", SportType: "Run", Distance: 8000,
		MovingTime: 2400, ElapsedTime: 2500, StartDate: outage.Add(2 * time.Hour)})
	r.sched.Now = func() time.Time { return r.now }
	res, err := r.sched.ReconcileSince(ctx, outage)
	if err != nil || res.Enqueued != 1 {
		t.Fatalf("ReconcileSince = %+v, %v; want one job", res, err)
	}
	r.drain(keys.SyncJobKey(scheduler.RecoverKeyMode, "u1", outage), 10)
	if w := r.Workout("u1", 6501); w == nil || w.DistanceMeters != 8000 {
		t.Fatalf("workout %+v: want the activity the outage dropped written", w)
	}
	if _, err := r.sched.ReconcileSince(ctx, r.now.Add(time.Hour)); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("a future instant: %v, want ErrInvalid", err)
	}
}

// TestHiddenActivityComesBackThroughReconciliation: the same revival without
// any webhook: a reconciliation list that shows the activity again writes
// it (a stored tombstone counts as changed), and absence from a list still
// never deletes.
// Protection: sync.go apply treats a listed tombstone as changed; counting
// it as unchanged makes this test fail.
func TestHiddenActivityComesBackThroughReconciliation(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, syncjobs.SyncSettings{ReconcileDays: 14, ReconcileInterval: time.Hour})
	r.LinkReadOnly("u1", 94)
	if err := r.St.DB.Put(context.Background(), r.St.DB.Tables().Main, &model.Profile{UserID: "u1", AthleteID: 94}); err != nil {
		t.Fatal(err)
	}
	ids := r.history(94, 7000, 5, 24*time.Hour)
	r.drain(r.backfill("u1"), 10)
	hiddenID, goneID := ids[1], ids[3]

	r.Sim.SetPrivate(hiddenID, true)
	r.Deliver(r.Sim.ActivityEvent("delete", hiddenID, 94, nil))
	if w := r.Workout("u1", hiddenID); !w.IsDeleted || w.DeletedReason != model.WorkoutHiddenOrDeleted {
		t.Fatalf("got %s, want hidden-or-deleted", ingesttest.Brief(w))
	}
	// A reconciliation while it is private: absent from the list, kept hidden.
	r.Sim.DeleteActivity(goneID) // and one removed without any event
	r.counted.reset()
	r.now = r.now.Add(time.Hour)
	if _, err := r.sched.ReconcileAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.drain(keys.SyncJobKey(syncstate.SyncModeReconcile, "u1", r.now.Truncate(time.Hour)), 10)
	if total, _ := r.counted.writes(); total != 0 {
		t.Fatalf("got writes %v while the activity is private, want none", r.counted.upserts)
	}
	if w := r.Workout("u1", goneID); w.IsDeleted {
		t.Fatalf("got %s, want a workout absent from a list kept", ingesttest.Brief(w))
	}

	// Public again, with no webhook: the next reconciliation revives it.
	r.Sim.SetPrivate(hiddenID, false)
	r.now = r.now.Add(time.Hour)
	if _, err := r.sched.ReconcileAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.drain(keys.SyncJobKey(syncstate.SyncModeReconcile, "u1", r.now.Truncate(time.Hour)), 10)
	if total, _ := r.counted.writes(); total != 1 || r.counted.upserts[hiddenID] != 1 {
		t.Fatalf("got writes %v, want exactly one, of the revived activity %d", r.counted.upserts, hiddenID)
	}
	if w := r.Workout("u1", hiddenID); w.IsDeleted || w.DeletedReason != "" || w.DeletedAtUtc != nil || !r.IsCounted("u1", hiddenID) {
		t.Fatalf("got %s after the list showed it again, want it alive and counted", ingesttest.Brief(w))
	}
}
