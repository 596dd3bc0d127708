package syncjobs_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/syncjobs"
	"github.com/commitcollect/backend/handlers/ingest/syncjobs/scheduler"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/retry"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/purge"
	"github.com/commitcollect/backend/model/strava"
	"github.com/commitcollect/backend/model/syncstate"
	"github.com/commitcollect/backend/scripts/stravasim"
	"github.com/commitcollect/backend/test/ingesttest"
)

// countingSyncStore is the real store with the sync path's writes counted
// per activity, and a way to make the page's progress write fail once (a
// crash between the workout writes and the cursor).
type countingSyncStore struct {
	syncjobs.PageWorkouts
	syncjobs.SyncStates
	stores      syncjobs.SyncerStores // the real ports, these two counted
	mu          sync.Mutex
	upserts     map[int64]int
	stale       int // upserts refused by the ordered write (ErrConflict)
	failCursorN int // fail this many next progress writes
	// beforeUpsert, when set, runs before every upsert of the sync path,
	// after the page was listed and compared: tests put a change there
	// that makes the page's answer stale.
	beforeUpsert func(*model.Workout)
}

// countingStores are st's sync ports with the workouts and sync states
// counted.
func countingStores(st *store.Adapters) *countingSyncStore {
	all := app.SyncerStores(st)
	c := &countingSyncStore{PageWorkouts: all.Workouts, SyncStates: all.States, upserts: map[int64]int{}}
	all.Workouts, all.States = c, c
	c.stores = all
	return c
}

func (c *countingSyncStore) UpsertWorkout(ctx context.Context, w *model.Workout) error {
	c.mu.Lock()
	hook := c.beforeUpsert
	c.mu.Unlock()
	if hook != nil {
		hook(w)
	}
	err := c.PageWorkouts.UpsertWorkout(ctx, w)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil:
		c.upserts[w.ActivityID]++
	case errors.Is(err, model.ErrConflict):
		c.stale++
	}
	return err
}

var errCrash = fmt.Errorf("simulated crash before the cursor was saved: %w", model.ErrRetryable)

func (c *countingSyncStore) UpdateSyncState(ctx context.Context, userID string, decide func(*syncstate.SyncState) error) (*syncstate.SyncState, error) {
	c.mu.Lock()
	crash := c.failCursorN > 0
	c.mu.Unlock()
	if !crash {
		return c.SyncStates.UpdateSyncState(ctx, userID, decide)
	}
	// Only the write that moves the cursor (a page's progress) crashes.
	var moved bool
	st, err := c.SyncStates.UpdateSyncState(ctx, userID, func(cur *syncstate.SyncState) error {
		before := cur.CursorBeforeUtc
		if err := decide(cur); err != nil {
			return err
		}
		if moved = !cur.CursorBeforeUtc.Equal(before); moved {
			return errCrash
		}
		return nil
	})
	if moved {
		c.mu.Lock()
		c.failCursorN--
		c.mu.Unlock()
	}
	return st, err
}

// show prints a sync state (its embedded Key's String would hide the rest).
func show(st *syncstate.SyncState) string {
	return fmt.Sprintf("{state %s mode %s imported %d horizon %s importedFrom %s window %s cursor %s pages %d listed %d job %s reason %q}",
		st.State, st.Mode, st.ImportedCount, st.HorizonUtc.Format(time.RFC3339), st.ImportedFromUtc.Format(time.RFC3339),
		st.WindowFromUtc.Format(time.RFC3339), st.CursorBeforeUtc.Format(time.RFC3339), st.Pages, st.Listed, st.JobKey, st.DeferredReason)
}

func (c *countingSyncStore) writes() (total, max int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.upserts {
		total += n
		if n > max {
			max = n
		}
	}
	return total, max
}

func (c *countingSyncStore) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.upserts = map[int64]int{}
}

// syncRig is the sync path on DynamoDB Local and the simulator: a worker
// whose Syncer writes through a countingSyncStore, and a scheduler that
// enqueues on the outbox without dispatching (the test runs the jobs).
type syncRig struct {
	*ingesttest.Harness
	counted *countingSyncStore
	worker  *app.Worker
	sched   *scheduler.Scheduler
	now     time.Time
}

func newSyncRig(t *testing.T, settings syncjobs.SyncSettings) *syncRig {
	t.Helper()
	return syncRigOn(t, ingesttest.New(t), settings)
}

// syncRigOn is newSyncRig on a given harness (ingesttest.NewStreamed for a
// test that projects).
func syncRigOn(t *testing.T, h *ingesttest.Harness, settings syncjobs.SyncSettings) *syncRig {
	t.Helper()
	r := &syncRig{Harness: h, counted: countingStores(h.St),
		now: rigNoon()}
	r.worker = r.newSyncWorker(settings)
	r.sched = scheduler.New(app.SchedulerStores(h.St), nil, ingesttest.Log())
	r.sched.Settings = settings
	r.sched.Now = func() time.Time { return r.now }
	return r
}

// rigNoon is the rig's clock: noon UTC of the wall clock's day. It sits
// at a window's start, the same every run of a day, yet near the wall
// clock, because DynamoDB Local expires items whose TTL (set from the
// rig's clock) has passed on the wall clock: a fixed date would make the
// rig's outbox items vanish a week later.
func rigNoon() time.Time { return time.Now().UTC().Truncate(24 * time.Hour).Add(12 * time.Hour) }

// asDeployed, as SyncSettings.DayHeadStart, asks newSyncWorker for the
// production default day head start (one short window) instead of the
// whole day tests that drain pages at any hour get.
const asDeployed = -1

// newSyncWorker builds another worker whose syncer writes through the
// counting store.
//
// Unless settings choose a head start, the pacing's is a whole window: a
// test that drains several sync pages without moving time must not depend
// on where in the 15-minute window the wall clock stands (at a window's
// start the default allows 5 reads), nor on the hour of the day (just after
// midnight UTC the day's allowance is a few reads). The pacing tests set theirs.
func (r *syncRig) newSyncWorker(settings syncjobs.SyncSettings) *app.Worker {
	if settings.HeadStart == 0 {
		settings.HeadStart = 1
	}
	switch settings.DayHeadStart {
	case 0:
		settings.DayHeadStart = 1
	case asDeployed:
		settings.DayHeadStart = 0 // the production default: one short window
	}
	client := strava.NewClient(r.Sim.URL, nil)
	refresher := strava.NewRefresher(strava.OAuthConfig(r.Sim.URL, r.Sim.ClientID(), r.Sim.ClientSecret(), ""), r.St.Connections, client.HTTPClient())
	w := r.NewWorker()
	w.Sync = syncjobs.NewSyncer(r.counted.stores, refresher, client, ingesttest.Log())
	w.Sync.Settings = settings
	return w
}

// history puts n activities of athlete into the simulator, one a day back
// from the rig's now (ids from first), and returns their ids.
func (r *syncRig) history(athlete, first int64, n int, every time.Duration) []int64 {
	var ids []int64
	for i := range n {
		id := first + int64(i)
		r.Sim.PutActivity(stravasim.Activity{ID: id, AthleteID: athlete, Name: fmt.Sprintf("A%d", id), SportType: "Run",
			Distance: float64(1000 + i), TotalElevationGain: 10, MovingTime: int64(600 + i), ElapsedTime: int64(700 + i),
			StartDate: r.now.Add(-time.Duration(i+1) * every).Truncate(time.Second)})
		ids = append(ids, id)
	}
	return ids
}

// drain runs the user's received sync jobs of key until their outbox item
// settles, at most rounds runs, and returns how many runs it took.
func (r *syncRig) drain(key string, rounds int) int {
	r.T.Helper()
	ctx := context.Background()
	for i := range rounds {
		rec, err := r.St.Outbox.OutboxItem(ctx, key)
		if err != nil {
			r.T.Fatalf("outbox %s: %v", key, err)
		}
		if rec.Status != ops.OutboxReceived {
			return i
		}
		j, err := ingest.DecodeJob([]byte(rec.Job))
		if err != nil {
			r.T.Fatal(err)
		}
		if err := r.worker.Run(ctx, j); err != nil {
			r.T.Fatalf("run %s: %v", key, err)
		}
	}
	rec, _ := r.St.Outbox.OutboxItem(ctx, key)
	r.T.Fatalf("job %s not settled after %d runs (last %+v)", key, rounds, rec)
	return rounds
}

func (r *syncRig) state(user string) *syncstate.SyncState {
	r.T.Helper()
	st, err := r.Budget.SyncState(context.Background(), user)
	if err != nil {
		r.T.Fatal(err)
	}
	return st
}

func (r *syncRig) backfill(user string) string {
	r.T.Helper()
	ok, err := r.sched.EnsureBackfill(context.Background(), user, "test")
	if err != nil || !ok {
		r.T.Fatalf("EnsureBackfill: got %v, %v; want a job", ok, err)
	}
	h, err := r.sched.Horizon(context.Background(), user, r.now)
	if err != nil {
		r.T.Fatal(err)
	}
	return keys.SyncJobKey(syncstate.SyncModeBackfill, user, h)
}

func TestBackfillImportsHistoryToTheHorizonPageByPage(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, syncjobs.SyncSettings{MaxDays: 100, PageSize: 40})
	r.Link("u1", 71, time.Hour)
	ids := r.history(71, 1000, 130, 18*time.Hour) // 130 × 18 h ≈ 97.5 days: all inside 100 days
	r.Sim.PutActivity(stravasim.Activity{ID: 5, AthleteID: 71, SportType: "Run", Distance: 1, StartDate: r.now.AddDate(0, 0, -150)})
	r.Sim.PutActivity(stravasim.Activity{ID: 6, AthleteID: 72, SportType: "Run", Distance: 1, StartDate: r.now.AddDate(0, 0, -1)})
	key := r.backfill("u1")
	runs := r.drain(key, 20)

	ws := r.Workouts("u1")
	if len(ws) != len(ids) {
		t.Fatalf("got %d workouts, want %d (the one beyond the horizon and the other athlete's left out)", len(ws), len(ids))
	}
	if total, most := r.counted.writes(); total != len(ids) || most != 1 {
		t.Fatalf("got %d writes (at most %d per activity), want %d, one each", total, most, len(ids))
	}
	st := r.state("u1")
	wantHorizon := r.now.AddDate(0, 0, -100).Truncate(24 * time.Hour)
	if st.State != syncstate.SyncIdle || st.ImportedCount != len(ids) || !st.ImportedFromUtc.Equal(wantHorizon) ||
		!st.HorizonUtc.Equal(wantHorizon) || st.Mode != syncstate.SyncModeBackfill || st.LastSyncAtUtc.IsZero() {
		t.Fatalf("got state %s, want idle, %d imported back to %s", show(st), len(ids), wantHorizon)
	}
	// 130 within the horizon plus one beyond it: pages of 40 with one
	// second of overlap each are 4 pages, the last one short.
	if lists := r.Sim.Stats().ListRequests; lists != 4 || runs != 4 || st.Pages != 4 {
		t.Fatalf("got %d list requests in %d runs (state: %d pages), want 4", lists, runs, st.Pages)
	}
	if rec := r.Outbox(ingest.Job{IdempotencyKey: key}); rec.Status != ops.OutboxDone || rec.Failures != 0 {
		t.Fatalf("got outbox %+v, want done without failures", rec)
	}
	// Enqueued again for the same horizon: nothing to do.
	if ok, err := r.sched.EnsureBackfill(context.Background(), "u1", "again"); ok || err != nil {
		t.Fatalf("EnsureBackfill after the import: got %v, %v; want nothing enqueued", ok, err)
	}
	// A revocation's purge deletes the history and the sync state; the
	// reconnect's backfill imports it again under a key of its own (the
	// horizon's key was used). Protection: EnsureBackfill's reimport key.
	grant, err := r.St.Connections.StravaConnectionGrant(context.Background(), "u1")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.St.Connections.RevokeStravaConnection(context.Background(), grant, r.now, r.now, r.now); err != nil {
		t.Fatal(err)
	}
	if _, err := purge.New(r.St).PurgeStravaData(context.Background(), "u1", 71, r.now); err != nil {
		t.Fatal(err)
	}
	// The athlete signs in again (as the login does: the revocation is
	// cleared, the connection written).
	if err := r.St.Connections.ClearStravaRevocation(context.Background(), "u1", r.now, r.now); err != nil {
		t.Fatal(err)
	}
	r.Link("u1", 71, time.Hour)
	if ok, err := r.sched.EnsureBackfill(context.Background(), "u1", "strava reconnect"); !ok || err != nil {
		t.Fatalf("EnsureBackfill after a purge: got %v, %v; want a new import", ok, err)
	}
	r.drain(keys.SyncJobKey(scheduler.ReimportKeyMode, "u1", r.sched.Now().Truncate(time.Minute)), 20)
	if ws := r.Workouts("u1"); len(ws) != len(ids) {
		t.Fatalf("after the reimport: %d workouts, want %d", len(ws), len(ids))
	}
}

// TestBackfillResumesFromItsCursorAndWritesEachActivityOnce crashes a
// backfill after a page's workouts were written but before its cursor was
// saved, twice, and then carries on with another worker: every activity is
// written exactly once (the re-listed page is compared with the stored
// workouts) and no page before the cursor is listed again. The projector,
// run after every page, counts nothing after a page that is not the last
// (no projection requested), everything stored once a failure is recorded
// (a waiting job asks for its imports to be projected), and every activity
// at the end: the interrupted page converges.
func TestBackfillResumesFromItsCursorAndWritesEachActivityOnce(t *testing.T) {
	t.Parallel()
	r := syncRigOn(t, ingesttest.NewStreamed(t), syncjobs.SyncSettings{MaxDays: 365, PageSize: 50})
	r.Link("u1", 81, time.Hour)
	ids := r.history(81, 2000, 180, 24*time.Hour)
	ctx := context.Background()
	if err := r.St.DB.Put(ctx, r.St.DB.Tables().Main, &model.Milestone{UserID: "u1", MilestoneID: "year", MilestoneDefinition: model.MilestoneDefinition{
		ModelID: "rocket", Title: "A year", Metric: model.MetricCount, Target: 1000, PeriodStartAtUtc: r.now.AddDate(-1, 0, 0), PartCount: 1},
		Projection: model.Projection{Status: model.StatusActive}, CreatedAtUtc: r.now, WrittenBy: model.WriterAPI}); err != nil {
		t.Fatal(err)
	}
	counted := func() int {
		t.Helper()
		r.Project()
		var m model.Milestone
		if err := r.St.DB.Get(ctx, r.St.DB.Tables().Main, keys.MilestoneKey("u1", "year"), &m); err != nil {
			t.Fatal(err)
		}
		return m.WorkoutsCounted
	}
	if n := counted(); n != 0 { // the milestone's INSERT, projected before any import
		t.Fatalf("before the backfill the milestone counts %d, want 0", n)
	}
	key := r.backfill("u1")
	rec, _ := r.St.Outbox.OutboxItem(ctx, key)
	j, _ := ingest.DecodeJob([]byte(rec.Job))

	// Page 1 goes through; page 2 crashes twice after its writes.
	if err := r.worker.Run(ctx, j); err != nil {
		t.Fatal(err)
	}
	if n := counted(); n != 0 {
		t.Fatalf("after page 1 of 4 the milestone counts %d, want 0 (projected at the sync's end)", n)
	}
	afterFirst := r.state("u1").CursorBeforeUtc
	r.counted.failCursorN = 2
	for range 2 {
		if err := r.worker.Run(ctx, j); err != nil {
			t.Fatal(err)
		}
		if got := r.state("u1").CursorBeforeUtc; !got.Equal(afterFirst) {
			t.Fatalf("cursor moved to %s despite the crash, want %s", got, afterFirst)
		}
	}
	if n, stored := counted(), len(r.Workouts("u1")); n != stored || n < 50 {
		t.Fatalf("after the interrupted page the milestone counts %d, want every stored workout (%d): the failure asked for them", n, stored)
	}
	if rec := r.Outbox(j); rec.Status != ops.OutboxReceived || rec.Failures != 2 {
		t.Fatalf("got outbox %+v, want received after 2 failures", rec)
	}
	// A fresh worker ("after the deploy") carries on from the cursor.
	r.worker = r.newSyncWorker(syncjobs.SyncSettings{MaxDays: 365, PageSize: 50})
	r.drain(key, 20)
	if total, most := r.counted.writes(); total != len(ids) || most != 1 {
		t.Fatalf("got %d writes, at most %d for one activity; want %d, each once", total, most, len(ids))
	}
	// Pages: 1, 2 (crash), 2 (crash), 2, 3, 4 — nothing before the saved
	// cursor was listed again.
	if lists := r.Sim.Stats().ListRequests; lists != 6 {
		t.Fatalf("got %d list requests, want 6 (4 pages, the second listed 3 times)", lists)
	}
	if st := r.state("u1"); st.State != syncstate.SyncIdle || st.ImportedCount != len(ids) {
		t.Fatalf("got state %s, want idle with %d imported", show(st), len(ids))
	}
	if got := len(r.Workouts("u1")); got != len(ids) {
		t.Fatalf("got %d workouts, want %d", got, len(ids))
	}
	if n := counted(); n != len(ids) {
		t.Fatalf("the milestone counts %d, want all %d (the interrupted page converged)", n, len(ids))
	}
}

func TestSyncSpendsOnlyItsShareOfTheBudgetAndDefers(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, syncjobs.SyncSettings{BudgetShare: 0.5})
	r.Link("u1", 91, time.Hour)
	r.history(91, 3000, 5, 24*time.Hour)
	r.Activity(3999, 91, "Ride")
	key := r.backfill("u1")
	ctx := context.Background()
	// A webhook's fetch reports read usage at 50 of 100 this window: the
	// sync share is spent, the webhooks' is not.
	r.Sim.SetUsage(49, 49, 49, 49)
	r.Deliver(r.Sim.ActivityEvent("create", 3999, 91, nil))
	if w := r.Workout("u1", 3999); w.SportType != "Ride" {
		t.Fatalf("webhook workout: got %+v", w)
	}
	lists := r.Sim.Stats().ListRequests
	rec, _ := r.St.Outbox.OutboxItem(ctx, key)
	j, _ := ingest.DecodeJob([]byte(rec.Job))
	before := time.Now()
	if err := r.worker.Run(ctx, j); err != nil {
		t.Fatal(err)
	}
	if got := r.Sim.Stats().ListRequests; got != lists {
		t.Fatalf("sync listed %d pages with its budget share spent, want none", got-lists)
	}
	rec = r.Outbox(j)
	reset := before.UTC().Truncate(15 * time.Minute).Add(15 * time.Minute)
	if rec.Status != ops.OutboxReceived || rec.Failures != 0 || rec.Deferrals != 1 || rec.NotBefore < reset.UnixMilli() {
		t.Fatalf("got outbox %+v, want deferred (not failed) to the window reset %s", rec, reset)
	}
	st := r.state("u1")
	if st.State != syncstate.SyncDeferred || st.DeferredReason == "" || st.NextSyncAtUtc.Before(reset) {
		t.Fatalf("got state %s, want deferred with a reason until %s", show(st), reset)
	}
}

func TestSyncDefersOnStrava429(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, syncjobs.SyncSettings{})
	r.Link("u1", 92, time.Hour)
	r.history(92, 3100, 5, 24*time.Hour)
	key := r.backfill("u1")
	ctx := context.Background()
	r.Sim.FailNext(stravasim.EndpointList, 429, 1)
	rec, _ := r.St.Outbox.OutboxItem(ctx, key)
	j, _ := ingest.DecodeJob([]byte(rec.Job))
	if err := r.worker.Run(ctx, j); err != nil {
		t.Fatal(err)
	}
	rec = r.Outbox(j)
	if rec.Status != ops.OutboxReceived || rec.Failures != 0 || rec.Deferrals != 1 || rec.NotBefore <= time.Now().UnixMilli() {
		t.Fatalf("got outbox %+v, want deferred to the window reset, not failed", rec)
	}
	if st := r.state("u1"); st.State != syncstate.SyncDeferred || st.DeferredReason == "" {
		t.Fatalf("got state %s, want deferred with the reason", show(st))
	}
}

// TestReconcileWritesOnlyWhatDiffersAndNeverDeletesOnAbsence edits and
// removes activities in the simulator without any webhook: the next
// reconciliation writes the edited workout only, and the removed one stays.
func TestReconcileWritesOnlyWhatDiffersAndNeverDeletesOnAbsence(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, syncjobs.SyncSettings{ReconcileDays: 14, ReconcileInterval: time.Hour})
	r.Link("u1", 93, time.Hour)
	if err := r.St.DB.Put(context.Background(), r.St.DB.Tables().Main, &model.Profile{UserID: "u1", AthleteID: 93}); err != nil {
		t.Fatal(err)
	}
	ids := r.history(93, 4000, 30, 12*time.Hour) // 15 days
	r.drain(r.backfill("u1"), 10)
	r.counted.reset()
	lists := r.Sim.Stats().ListRequests

	edited, gone, old := ids[3], ids[5], ids[29] // old started 15 days ago: outside the window
	r.Sim.UpdateActivity(edited, func(a *stravasim.Activity) { a.Distance, a.MovingTime = 4321.5, 1234 })
	r.Sim.UpdateActivity(old, func(a *stravasim.Activity) { a.Distance = 1 })
	r.Sim.DeleteActivity(gone)
	r.now = r.now.Add(time.Hour)
	res, err := r.sched.ReconcileAll(context.Background())
	if err != nil || res.Enqueued != 1 || res.Users != 1 {
		t.Fatalf("ReconcileAll: got %+v, %v; want one job", res, err)
	}
	if res, _ := r.sched.ReconcileAll(context.Background()); res.Enqueued != 0 || res.Already != 1 {
		t.Fatalf("ReconcileAll in the same slot: got %+v, want nothing new", res)
	}
	r.drain(keys.SyncJobKey(syncstate.SyncModeReconcile, "u1", r.now.Truncate(time.Hour)), 10)

	if total, _ := r.counted.writes(); total != 1 || r.counted.upserts[edited] != 1 {
		t.Fatalf("got writes %v, want exactly one, of the edited activity %d", r.counted.upserts, edited)
	}
	if w := r.Workout("u1", edited); w.DistanceMeters != 4321.5 || w.MovingTimeSeconds != 1234 {
		t.Fatalf("edited workout: got %+v", w)
	}
	if w := r.Workout("u1", gone); w.IsDeleted || w.DistanceMeters == 0 {
		t.Fatalf("workout absent from the list: got %+v, want it kept as it was", w)
	}
	if w := r.Workout("u1", old); w.DistanceMeters == 1 {
		t.Fatalf("workout outside the window was rewritten: %+v", w)
	}
	if got := r.Sim.Stats().ListRequests - lists; got != 1 {
		t.Fatalf("reconciliation listed %d pages, want 1", got)
	}
	if st := r.state("u1"); st.State != syncstate.SyncIdle || st.Mode != syncstate.SyncModeReconcile || st.ImportedCount != 31 {
		t.Fatalf("got state %s, want idle after a reconciliation, 30+1 written in all", show(st))
	}
}

// TestSyncNeverOverwritesANewerFetch lists a page that Strava answers
// late with the activity as it was; meanwhile (once the list's answer is
// decided, never on a timer) the athlete edits it and the webhook's fetch
// writes the edit, then the list's answer arrives. The older must not win.
func TestSyncNeverOverwritesANewerFetch(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, syncjobs.SyncSettings{ReconcileInterval: time.Hour})
	r.Link("u1", 94, time.Hour)
	ids := r.history(94, 5000, 3, 24*time.Hour)
	r.drain(r.backfill("u1"), 10)
	r.now = r.now.Add(time.Hour)
	if err := r.St.DB.Put(context.Background(), r.St.DB.Tables().Main, &model.Profile{UserID: "u1", AthleteID: 94}); err != nil {
		t.Fatal(err)
	}
	r.Sim.UpdateActivity(ids[0], func(a *stravasim.Activity) { a.Distance = 2222 })
	decided, gate := make(chan struct{}, 1), make(chan struct{})
	r.Sim.AddFault(stravasim.Fault{Endpoint: stravasim.EndpointList, Decided: decided, Gate: gate})
	if _, err := r.sched.ReconcileAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	key := keys.SyncJobKey(syncstate.SyncModeReconcile, "u1", r.now.Truncate(time.Hour))
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.drain(key, 10)
	}()
	select {
	case <-decided: // the list's answer (2222) is decided, and held back
	case <-time.After(30 * time.Second):
		t.Fatal("the reconciliation never listed")
	}
	r.Sim.UpdateActivity(ids[0], func(a *stravasim.Activity) { a.Distance = 3333 })
	r.Deliver(r.Sim.ActivityEvent("update", ids[0], 94, map[string]string{"title": "x"}))
	close(gate) // the list's older answer arrives after the webhook's write
	<-done
	if w := r.Workout("u1", ids[0]); w.DistanceMeters != 3333 {
		t.Fatalf("got distance %v, want the webhook's newer 3333 (the list's older 2222 must lose)", w.DistanceMeters)
	}
}

func TestBackfillForAnEarlierMilestoneListsOnlyOlderHistory(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, syncjobs.SyncSettings{MaxDays: 365, PageSize: 30})
	r.Link("u1", 95, time.Hour)
	ctx := context.Background()
	start := r.now.AddDate(0, 0, -20).Truncate(24 * time.Hour)
	if err := r.St.DB.Put(ctx, r.St.DB.Tables().Main, &model.Milestone{UserID: "u1", MilestoneID: "m1",
		MilestoneDefinition: model.MilestoneDefinition{ModelID: "x", Metric: model.MetricCount, Target: 1, PeriodStartAtUtc: start, PartCount: 1},
		Projection:          model.Projection{Status: model.StatusActive}}); err != nil {
		t.Fatal(err)
	}
	ids := r.history(95, 6000, 60, 24*time.Hour) // 60 days
	r.drain(r.backfill("u1"), 10)
	if st := r.state("u1"); !st.ImportedFromUtc.Equal(start) || st.ImportedCount != 20 {
		t.Fatalf("got state %s, want 20 imported back to the milestone's start %s", show(st), start)
	}
	lists := r.Sim.Stats().ListRequests
	earlier := r.now.AddDate(0, 0, -45).Truncate(24 * time.Hour)
	if err := r.St.DB.Put(ctx, r.St.DB.Tables().Main, &model.Milestone{UserID: "u1", MilestoneID: "m2",
		MilestoneDefinition: model.MilestoneDefinition{ModelID: "x", Metric: model.MetricCount, Target: 1, PeriodStartAtUtc: earlier, PartCount: 1},
		Projection:          model.Projection{Status: model.StatusActive}}); err != nil {
		t.Fatal(err)
	}
	r.drain(r.backfill("u1"), 10)
	if got := len(r.Workouts("u1")); got != 45 {
		t.Fatalf("got %d workouts, want the 45 started in the last 45 days", got)
	}
	// Days 21..45 are 25 activities: one page of 30 from the old horizon on.
	if got := r.Sim.Stats().ListRequests - lists; got != 1 {
		t.Fatalf("the second backfill listed %d pages, want 1 (only history older than the first import)", got)
	}
	_ = ids
}

func TestSyncJobOfAnotherUserStateIsSupersededNotRunTwice(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, syncjobs.SyncSettings{})
	r.Link("u1", 96, time.Hour)
	r.history(96, 7000, 3, 24*time.Hour)
	key := r.backfill("u1")
	r.drain(key, 5)
	lists := r.Sim.Stats().ListRequests
	// A redelivered (redriven) copy of the finished job does nothing.
	rec, _ := r.St.Outbox.OutboxItem(context.Background(), key)
	j, _ := ingest.DecodeJob([]byte(rec.Job))
	j.Redrive = true
	if err := r.worker.Run(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	if got := r.Sim.Stats().ListRequests; got != lists {
		t.Fatalf("a finished job listed again (%d requests)", got-lists)
	}
	if _, err := ingest.DecodeJob([]byte(`{"correlationId":"c","sync":{"userId":"","mode":"x"}}`)); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("DecodeJob of an invalid sync job: got %v, want ErrInvalid", err)
	}
}

// TestASyncPageLandingAfterTheGuardLeavesNothing: the account is deleted
// while a backfill's list page is in flight; the page's writes land after
// the deletion's sweep and are removed by the page's one guard check, and
// the job ends. Protection: the syncer's CheckWrites after the page's writes
// (the projector leaves sync-page records to the page's end, so nothing else
// would remove them).
func TestASyncPageLandingAfterTheGuardLeavesNothing(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, syncjobs.SyncSettings{MaxDays: 365, PageSize: 50})
	r.Link("u1", 83, time.Hour)
	r.history(83, 4000, 20, 24*time.Hour)
	key := r.backfill("u1")
	ctx := context.Background()
	rec, _ := r.St.Outbox.OutboxItem(ctx, key)
	j, _ := ingest.DecodeJob([]byte(rec.Job))
	gate := make(chan struct{})
	r.Sim.AddFault(stravasim.Fault{Endpoint: stravasim.EndpointList, Gate: gate})
	listed := r.Sim.Stats().ListRequests
	done := make(chan error, 1)
	go func() { done <- r.worker.Run(ctx, j) }()
	for r.Sim.Stats().ListRequests == listed {
		if err := retry.Sleep(ctx, 5*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	// The deletion marks the guard and sweeps while the page is in flight.
	if err := r.St.Guard.MarkUserDeleted(ctx, "u1", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := r.St.Users.DeleteUserItems(ctx, "u1", keys.PrefixWorkoutStrava, nil); err != nil {
		t.Fatal(err)
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if ws := r.Workouts("u1"); len(ws) != 0 {
		t.Fatalf("%d workouts of the deleted user after the page landed, want none", len(ws))
	}
	if rec := r.Outbox(j); rec.Status != ops.OutboxDone {
		t.Fatalf("outbox %+v, want the job done", rec)
	}
}
