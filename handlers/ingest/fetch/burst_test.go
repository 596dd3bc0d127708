package fetch_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/commitcollect/backend/handlers/ingest/budget"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/fetch"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/strava"
)

// Bursts against function-field fakes: what is gathered, what a list page
// settles, what is left to a fetch of its own, and what the caps hold back.

// fakeLister serves an athlete's activities newest first, 200 a page, like
// GET /athlete/activities.
type fakeLister struct {
	mu    sync.Mutex
	acts  []strava.Activity // newest first
	pages []int
}

func (l *fakeLister) ListActivities(_ context.Context, _ string, o strava.ListOptions) ([]strava.Activity, strava.RateLimit, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pages = append(l.pages, o.Page)
	acts := l.acts
	if !o.Before.IsZero() || !o.After.IsZero() { // as Strava: exclusive bounds; After alone lists oldest first
		acts = nil
		for _, a := range l.acts {
			if (o.Before.IsZero() || a.StartDate.Before(o.Before)) && (o.After.IsZero() || a.StartDate.After(o.After)) {
				acts = append(acts, a)
			}
		}
		if o.Before.IsZero() {
			slices.Reverse(acts)
		}
	}
	lo := min(len(acts), (o.Page-1)*o.PerPage)
	return acts[lo:min(len(acts), lo+o.PerPage)], strava.RateLimit{}, nil
}

func history(n int, firstID int64) []strava.Activity {
	out := make([]strava.Activity, n)
	for i := range out {
		out[i] = strava.Activity{ID: firstID + int64(i), Athlete: strava.ActivityAthlete{ID: 9}, SportType: "Run",
			Distance: 5000, MovingTime: 1500, StartDate: now.Add(-time.Duration(i+1) * time.Hour)}
	}
	return out
}

func creates(ids ...int64) []ingest.Job {
	out := make([]ingest.Job, len(ids))
	for i, id := range ids {
		out[i] = ingest.Job{CorrelationID: fmt.Sprintf("c%d", id), ReceivedAtUtc: received, IdempotencyKey: fmt.Sprintf("k%d", id),
			Event: ingest.Event{ObjectType: ingest.ObjectActivity, ObjectID: id, AspectType: ingest.AspectCreate, OwnerID: 9}}
	}
	return out
}

func span(from int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = from + int64(i)
	}
	return out
}

// unseenBefore marks jobs as the sweeper dispatches events that a complete
// walk at at did not list (ingest.UnseenReason).
func unseenBefore(jobs []ingest.Job, at time.Time) []ingest.Job {
	for i := range jobs {
		jobs[i] = jobs[i].WithOutbox(&ops.IdempotencyRecord{Reason: ingest.UnseenReason(at)})
	}
	return jobs
}

// TestOneWalkIsNotEvidenceEnough: an activity event that one complete walk
// does not list is gathered again, remembering that walk; a walk within
// unseenGap of it does not settle it either; when the list shows it late
// (Strava's lag) it is written; missed by two walks far enough apart it is
// settled unseen, and the burst's audit entry names it. Protection: the
// second walk (removing it settles the late upload unseen on the first).
func TestOneWalkIsNotEvidenceEnough(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	written := map[int64]bool{}
	st := &fakeStore{t: t, UpsertWorkoutFn: func(w *model.Workout) error { mu.Lock(); defer mu.Unlock(); written[w.ActivityID] = true; return nil }}
	l := &fakeLister{acts: history(3, 10)}
	clock := now
	f := burstFetcher(t, st, &fakeStrava{}, l)
	f.Now = func() time.Time { return clock }
	burst := func(jobs []ingest.Job) []error {
		return f.Serve(context.Background(), ingest.NewBurst(jobs, "b"))
	}
	redispatch := func(job ingest.Job, err error) ingest.Job {
		t.Helper()
		var de *ingest.DeferError
		if !errors.As(err, &de) || !de.Gathered {
			t.Fatalf("activity %d: got %v, want it gathered for another walk", job.Event.ObjectID, err)
		}
		return job.WithOutbox(&ops.IdempotencyRecord{Reason: de.Reason})
	}
	jobs := creates(900, 901) // 900 is uploaded late, 901 never
	outs := burst(jobs)
	jobs = []ingest.Job{redispatch(jobs[0], outs[0]), redispatch(jobs[1], outs[1])}
	if len(written) != 0 || jobs[0].UnseenAtUtc == nil || !jobs[0].UnseenAtUtc.Equal(now) {
		t.Fatalf("after one walk: written %v, unseen at %v; want nothing settled, the walk remembered", written, jobs[0].UnseenAtUtc)
	}
	clock = now.Add(30 * time.Second) // within the gap: not evidence enough
	outs = burst(jobs)
	jobs = []ingest.Job{redispatch(jobs[0], outs[0]), redispatch(jobs[1], outs[1])}
	if !jobs[1].UnseenAtUtc.Equal(now) {
		t.Fatalf("a walk within the gap moved the first miss to %v", jobs[1].UnseenAtUtc)
	}
	l.mu.Lock()
	l.acts = append([]strava.Activity{{ID: 900, Athlete: strava.ActivityAthlete{ID: 9}, SportType: "Run", Distance: 5000,
		MovingTime: 1500, StartDate: now.Add(-time.Minute)}}, l.acts...)
	l.mu.Unlock()
	clock = now.Add(5 * time.Minute)
	outs = burst(jobs)
	if outs[0] != nil || outs[1] != nil || !written[900] || len(written) != 1 {
		t.Fatalf("second walk: outcomes %v, written %v; want the late upload written and the other settled unseen", outs, written)
	}
	last := st.details[len(st.details)-1]
	if st.audits[len(st.audits)-1] != ingest.AuditBurstServed || last["notFoundIds"] != "901" {
		t.Fatalf("audit %v %v; want the burst's entry naming 901", st.audits, last)
	}
}

// burstRig is a fetcher and its bursts, as the worker wires them.
type burstRig struct {
	*fetch.Fetcher
	*fetch.Bursts
}

func burstFetcher(t *testing.T, st *fakeStore, s *fakeStrava, l *fakeLister) *burstRig {
	if st.UnverifiedFn == nil { // deeper pages and second looks: room, unless the test says
		st.UnverifiedFn = func(int64, bool, int, int) error { return nil }
	}
	f := newFetcher(t, st, s)
	f.Gather = true
	return &burstRig{f, fetch.NewBursts(f, l)}
}

// TestCrowdedCreatesAreGatheredForABurst: past ingest.CreatesBeforeGather creates of
// one athlete in a window, a create is deferred to the gather grid, not
// fetched; a gathered one (dispatched by the sweeper) is fetched. Protection:
// the gathering (removing it fetches every create of a flood alone).
func TestCrowdedCreatesAreGatheredForABurst(t *testing.T) {
	t.Parallel()
	st := &fakeStore{t: t, UpsertWorkoutFn: func(*model.Workout) error { return nil }, TakeAthleteReadFn: roomy, TakeDayReadsFn: roomy}
	s := &fakeStrava{GetActivityFn: run(run5k)}
	f := burstFetcher(t, st, s, &fakeLister{})
	ctx := context.Background()
	var outcomes []string
	for _, job := range creates(span(100, 6)...) {
		err := f.Process(ctx, job)
		var de *ingest.DeferError
		switch {
		case err == nil:
			outcomes = append(outcomes, "fetched")
		case errors.As(err, &de) && de.Gathered && de.Until.Equal(now.Truncate(10*time.Second).Add(10*time.Second)):
			outcomes = append(outcomes, "gathered")
		default:
			t.Fatalf("create %d: %v", job.Event.ObjectID, err)
		}
	}
	if fmt.Sprint(outcomes) != "[fetched fetched fetched gathered gathered gathered]" || s.calls != 3 {
		t.Fatalf("outcomes %v after %d fetches; want 3 fetched, then gathered to the next quarter window", outcomes, s.calls)
	}
	job := creates(200)[0]
	job.Gathered = true
	if err := f.Process(ctx, job); err != nil || s.calls != 4 {
		t.Fatalf("a gathered create: %v after %d fetches; want it fetched", err, s.calls)
	}
}

// TestABulkUploadIsServedByTwoListPages: 250 creates of an athlete whose
// history is those 250 are written from two list pages (200 + a short 50),
// no fetch. Protection: the list walk (removing it costs 250 fetches).
func TestABulkUploadIsServedByTwoListPages(t *testing.T) {
	t.Parallel()
	st, written := recordWrites(t)
	l := &fakeLister{acts: history(250, 1000)}
	s := &fakeStrava{}
	f := burstFetcher(t, st, s, l)
	outs := f.Serve(context.Background(), ingest.NewBurst(creates(span(1000, 250)...), "b1"))
	for i, err := range outs {
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	if fmt.Sprint(l.pages) != "[1 2]" || s.calls != 0 || len(written) != 250 || written[1000] != now.UnixNano() {
		t.Fatalf("pages %v, %d fetches, %d written; want pages [1 2], no fetch, 250 written in page order", l.pages, s.calls, len(written))
	}
}

// TestForgedCreatesSettleAsNotFoundForOnePage: creates for ids the athlete's
// whole history (one short page) does not show are done, nothing stored; a
// create received less than notFoundMargin before the page was read is
// gathered again, never settled unseen nor fetched. Protections: the
// not-found settle (removing it fetches each forged id) and its margin.
func TestForgedCreatesSettleAsNotFoundForOnePage(t *testing.T) {
	t.Parallel()
	st := &fakeStore{t: t, UpsertWorkoutFn: func(*model.Workout) error { return nil },
		MarkHiddenFn: func(int64, string, int64) error { return nil }}
	l := &fakeLister{acts: history(3, 10)}
	s := &fakeStrava{GetActivityFn: func(int64) (strava.Activity, error) { return strava.Activity{}, model.ErrNotFound }}
	jobs := unseenBefore(creates(append(span(5000, 300), 10)...), now.Add(-5*time.Minute))
	young := creates(6000)[0]
	young.ReceivedAtUtc = now.Add(-10 * time.Second)
	jobs = append(jobs, young)
	outs := burstFetcher(t, st, s, l).Serve(context.Background(), ingest.NewBurst(jobs, "b1"))
	for i, err := range outs[:len(outs)-1] {
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	var de *ingest.DeferError
	if err := outs[len(outs)-1]; !errors.As(err, &de) || !de.Gathered {
		t.Fatalf("a create received 10 s before the page: got %v, want it gathered again", err)
	}
	if len(l.pages) != 1 || s.calls != 0 {
		t.Fatalf("%d pages, %d fetches; want one page for 301 creates, no fetch", len(l.pages), s.calls)
	}
}

// TestALongHistoryLeavesTheRestToFetches: when maxBurstPages full pages do
// not show a create, it is fetched alone (never settled unseen).
func TestALongHistoryLeavesTheRestToFetches(t *testing.T) {
	t.Parallel()
	st := &fakeStore{t: t, UpsertWorkoutFn: func(*model.Workout) error { return nil }, TakeAthleteReadFn: roomy, TakeDayReadsFn: roomy}
	l := &fakeLister{acts: history(1200, 1)}
	s := &fakeStrava{GetActivityFn: run(strava.Activity{ID: 1150, Athlete: strava.ActivityAthlete{ID: 9}, SportType: "Run",
		Distance: 5000, MovingTime: 1500, StartDate: now.Add(-1150 * time.Hour)})}
	outs := burstFetcher(t, st, s, l).Serve(context.Background(), ingest.NewBurst(creates(3, 1150), "b1"))
	if outs[0] != nil || outs[1] != nil || len(l.pages) != 5 || s.calls != 1 {
		t.Fatalf("outcomes %v, pages %v, %d fetches; want 5 pages, the unlisted create fetched alone", outs, l.pages, s.calls)
	}
}

// TestABurstStopsFetchingAloneWhenItsTimeIsUp: ten creates past a long
// history's five pages are fetched alone, each taking ten seconds, until
// the burst's budget (30 s) is spent; the other seven are gathered again
// for the next burst, so the burst ends in time and never runs again whole.
// Protection: burstOver.
func TestABurstStopsFetchingAloneWhenItsTimeIsUp(t *testing.T) {
	t.Parallel()
	st := &fakeStore{t: t, UpsertWorkoutFn: func(*model.Workout) error { return nil }, TakeAthleteReadFn: roomy, TakeDayReadsFn: roomy}
	l := &fakeLister{acts: history(1200, 1)}
	clock := now
	s := &fakeStrava{GetActivityFn: func(id int64) (strava.Activity, error) {
		clock = clock.Add(10 * time.Second)
		return strava.Activity{ID: id, Athlete: strava.ActivityAthlete{ID: 9}, SportType: "Run", Distance: 5000, MovingTime: 1500,
			StartDate: now.Add(-time.Duration(id) * time.Hour)}, nil
	}}
	f := burstFetcher(t, st, s, l)
	f.Now = func() time.Time { return clock }
	f.BurstBudget = 30 * time.Second
	outs := f.Serve(context.Background(), ingest.NewBurst(creates(span(1101, 10)...), "b-budget"))
	gathered := 0
	for _, err := range outs {
		var de *ingest.DeferError
		if errors.As(err, &de) && de.Gathered {
			gathered++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d fetched alone in %s, %d gathered again", s.calls, clock.Sub(now), gathered)
	if s.calls != 3 || gathered != 7 {
		t.Fatalf("%d fetched alone, %d gathered again; want 3 within the 30 s budget and 7 left to the next burst", s.calls, gathered)
	}
}

// TestTheDailyAllowanceHoldsAnAthleteBack: a read the day counter refuses
// defers the job to the next UTC day, marked as the athlete's cap.
// Protection: the daily allowance.
func TestTheDailyAllowanceHoldsAnAthleteBack(t *testing.T) {
	t.Parallel()
	var dayAdds []int
	st := &fakeStore{t: t, UpsertWorkoutFn: func(*model.Workout) error { return nil },
		WorkoutFn: func(int64) (*model.Workout, error) { return nil, model.ErrNotFound },
		TakeDayReadsFn: func(_ int64, limit, n int) error {
			dayAdds = append(dayAdds, n)
			if want := budget.DefaultAthleteReadsPerDay - budget.DefaultAthleteReadsPerDay/3; limit != want { // an update's share
				t.Errorf("daily cap %d, want %d", limit, want)
			}
			if len(dayAdds) > 1 {
				return model.ErrConflict
			}
			return nil
		}}
	s := &fakeStrava{GetActivityFn: run(run5k)}
	f := newFetcher(t, st, s)
	f.Reads.PerWindow = 0 // only the day counts
	var err error
	for i := 0; i < 20 && err == nil; i++ {
		err = f.Process(context.Background(), event(ingest.AspectUpdate))
	}
	var de *ingest.DeferError
	if !errors.As(err, &de) || !de.AthleteCap || !de.Until.Equal(now.Truncate(24*time.Hour).Add(24*time.Hour)) {
		t.Fatalf("got %v; want a deferral to the next UTC day marked as the athlete's cap", err)
	}
	if fmt.Sprint(dayAdds) != "[7 7]" || s.calls != 13 {
		t.Fatalf("day additions %v after %d reads; want [7 7] after 13 (6 unseen each time, the 14th refused)", dayAdds, s.calls)
	}
}

// TestUnknownActivityEventsAreGatheredNotFetched: an update or a delete of
// an activity we never stored (athlete and activity ids are public) is not
// fetched and takes no read of the athlete's cap: it is gathered for a
// burst; gathered already (the sweeper's lone dispatch), it is fetched.
// Protection: neverStored's gather (removing it spends one read of the
// named athlete's cap on every forged update or delete).
func TestUnknownActivityEventsAreGatheredNotFetched(t *testing.T) {
	t.Parallel()
	reads := 0
	st := &fakeStore{t: t,
		WorkoutFn:         func(int64) (*model.Workout, error) { return nil, model.ErrNotFound },
		TakeAthleteReadFn: func(int64, int, int) error { reads++; return nil },
		MarkHiddenFn:      func(int64, string, int64) error { return nil },
	}
	s := &fakeStrava{GetActivityFn: func(int64) (strava.Activity, error) { return strava.Activity{}, model.ErrNotFound }}
	f := burstFetcher(t, st, s, &fakeLister{})
	for _, aspect := range []string{ingest.AspectUpdate, ingest.AspectDelete} {
		job := event(aspect)
		job.IdempotencyKey = "k-" + aspect
		var de *ingest.DeferError
		if err := f.Process(context.Background(), job); !errors.As(err, &de) || !de.Gathered {
			t.Fatalf("%s of an activity never stored: %v; want it gathered", aspect, err)
		}
	}
	if s.calls != 0 || reads != 0 {
		t.Fatalf("%d fetches, %d reads of the athlete's cap; want none", s.calls, reads)
	}
	job := event(ingest.AspectDelete)
	job.IdempotencyKey, job.Gathered = "k-gathered", true
	if err := f.Process(context.Background(), job); err != nil || s.calls != 1 {
		t.Fatalf("a gathered delete: %v after %d fetches; want it fetched", err, s.calls)
	}
}

// TestABurstSettlesEveryKindOfEventFromItsPages: one burst of an athlete
// whose whole history is one page holds a listed create, a listed delete
// (Strava serves it: written, not confirmed), a forged update and a forged
// delete of ids that never existed, and an update of a stored workout
// Strava no longer lists. One page settles all five without a fetch: the
// forged update stores nothing, the forged delete and the stored workout
// are marked hidden at the walk's start (as a 404 then), so a create's
// fetch in flight loses to the tombstone. Protection: unlisted.
func TestABurstSettlesEveryKindOfEventFromItsPages(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	written, hidden := map[int64]bool{}, map[int64]int64{}
	st := &fakeStore{t: t,
		WorkoutFn: func(id int64) (*model.Workout, error) {
			if id == 30 {
				return &model.Workout{ActivityID: 30}, nil
			}
			return nil, model.ErrNotFound
		},
		UpsertWorkoutFn: func(w *model.Workout) error { mu.Lock(); defer mu.Unlock(); written[w.ActivityID] = true; return nil },
		MarkHiddenFn:    func(id int64, _ string, ns int64) error { mu.Lock(); defer mu.Unlock(); hidden[id] = ns; return nil },
	}
	l := &fakeLister{acts: history(3, 10)} // ids 10, 11, 12
	s := &fakeStrava{}
	f := burstFetcher(t, st, s, l)
	jobs := unseenBefore(creates(10, 11, 900, 901, 30), now.Add(-5*time.Minute))
	for i, aspect := range []string{ingest.AspectCreate, ingest.AspectDelete, ingest.AspectUpdate, ingest.AspectDelete, ingest.AspectUpdate} {
		jobs[i].Event.AspectType = aspect
	}
	outs := f.Serve(context.Background(), ingest.NewBurst(jobs, "b-kinds"))
	for i, err := range outs {
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	t.Logf("pages %v, fetches %d, written %v, hidden %v", l.pages, s.calls, written, hidden)
	if len(l.pages) != 1 || s.calls != 0 || !written[10] || !written[11] || len(written) != 2 {
		t.Fatalf("pages %v, %d fetches, written %v; want one page writing the two listed activities", l.pages, s.calls, written)
	}
	if len(hidden) != 2 || hidden[901] != now.UnixNano() || hidden[30] != now.UnixNano() {
		t.Fatalf("hidden %v; want the forged delete and the unlisted stored workout, at the walk's start", hidden)
	}
}

// rechecks is a fake UnseenRechecks: it records the bookings and answers
// err.
type rechecks struct {
	mu     sync.Mutex
	booked []string
	err    error
}

func (r *rechecks) RecheckUnseen(_ context.Context, userID string, athleteID int64, _ time.Time) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.booked = append(r.booked, fmt.Sprintf("%s/%d", userID, athleteID))
	return r.err == nil, r.err
}

// TestUnseenIsSettledOnlyWithItsRecheckBooked: a burst settles events two
// walks did not list only once the athlete's recheck is booked (one
// booking for the burst, and the audit names every id); when the booking
// fails nothing is settled: the events fail, retryable, and come back.
// Protection: settleUnseen's booking first (without it a real activity
// settled unseen is lost for good; without the failure check it is lost
// when the booking fails).
func TestUnseenIsSettledOnlyWithItsRecheckBooked(t *testing.T) {
	t.Parallel()
	for _, fail := range []bool{false, true} {
		st := &fakeStore{t: t}
		f := burstFetcher(t, st, &fakeStrava{}, &fakeLister{acts: history(3, 10)})
		rc := &rechecks{}
		if fail {
			rc.err = errors.New("outbox unavailable")
		}
		f.Rechecks = rc
		f.Now = func() time.Time { return now.Add(5 * time.Minute) }
		outs := f.Serve(context.Background(), ingest.NewBurst(unseenBefore(creates(901, 902), now), "b"))
		if len(rc.booked) != 1 || rc.booked[0] != "u1/9" {
			t.Fatalf("fail=%v: bookings %v, want one for the athlete", fail, rc.booked)
		}
		last := st.details[len(st.details)-1]
		for i, err := range outs {
			switch {
			case !fail && err != nil:
				t.Fatalf("activity %d: %v, want it settled unseen", 901+i, err)
			case fail && !errors.Is(err, model.ErrRetryable):
				t.Fatalf("activity %d: %v, want a retryable failure while the recheck is not booked", 901+i, err)
			}
		}
		if want := map[bool]string{false: "901,902", true: ""}[fail]; last["notFoundIds"] != want {
			t.Fatalf("fail=%v: audit names %q, want %q", fail, last["notFoundIds"], want)
		}
	}
}

// TestAnImportOfOldDatedActivitiesIsServedByDeeperWalks: an athlete
// imports old-dated activities; a burst of 500 of their creates lies past
// the first five pages of a 2,100-activity history. The walk goes on, a
// page for every five events, and writes all 500 from 11 pages with no
// fetch alone. A burst of 50 creates for ids that do not exist, named for
// an athlete with 10,000 activities, reads 10 pages, never more: 0.2 reads
// per event. Protection: burstPages (without it, 5 pages and 400 fetches
// alone at the athlete's caps, or a forged burst walking the whole
// history).
func TestAnImportOfOldDatedActivitiesIsServedByDeeperWalks(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	written := 0
	st := &fakeStore{t: t, UpsertWorkoutFn: func(*model.Workout) error { mu.Lock(); defer mu.Unlock(); written++; return nil },
		TakeAthleteReadFn: roomy, TakeDayReadsFn: roomy}
	l := &fakeLister{acts: history(2100, 1)}
	s := &fakeStrava{}
	var ids []int64
	for id := int64(1600); id < 2100; id++ {
		ids = append(ids, id)
	}
	outs := burstFetcher(t, st, s, l).Serve(context.Background(), ingest.NewBurst(creates(ids...), "import"))
	for i, err := range outs {
		if err != nil {
			t.Fatalf("activity %d: %v, want written", ids[i], err)
		}
	}
	if len(l.pages) != 11 || s.calls != 0 || written != 500 {
		t.Fatalf("import: %d pages, %d fetches alone, %d written; want 11 pages, none alone, all 500", len(l.pages), s.calls, written)
	}

	forged := &fakeLister{acts: history(10000, 1)}
	gone := &fakeStrava{GetActivityFn: func(int64) (strava.Activity, error) { return strava.Activity{}, model.ErrNotFound }}
	st.MarkHiddenFn = func(int64, string, int64) error { return nil }
	ids = ids[:0]
	for id := int64(20000); id < 20050; id++ {
		ids = append(ids, id)
	}
	burstFetcher(t, st, gone, forged).Serve(context.Background(), ingest.NewBurst(creates(ids...), "forged"))
	if len(forged.pages) != 10 {
		t.Fatalf("a forged burst of 50 read %d pages, want 10", len(forged.pages))
	}
}

// TestForgedCreatesSpendTheUnverifiedAllowanceNotTheAthletes: twenty forged
// creates naming an athlete with a long history cost that athlete's caps
// nothing: their burst's first page lists none of them and moves to the
// unverified allowance, as do the deeper pages and the fetches alone of
// what the walk did not list (eight reads here) until it is spent; then
// they wait for it. The athlete's real upload, in a burst with twenty more
// forged creates, is listed on the first page (the athlete's one read) and
// written at once; a second look at forged creates is all unverified.
// Protections: takeWalkRead's deeper pages and second looks, the fetch
// alone's Unlisted and MoveReadToUnverified (each on the athlete's caps
// fails it: the caps' fake refuses past 3 reads here, and the athlete's
// counter would hold 2).
func TestForgedCreatesSpendTheUnverifiedAllowanceNotTheAthletes(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	athleteReads, unverified := 0, 0
	written := map[int64]bool{}
	st := &fakeStore{t: t,
		UpsertWorkoutFn: func(w *model.Workout) error { mu.Lock(); defer mu.Unlock(); written[w.ActivityID] = true; return nil },
		MarkHiddenFn:    func(int64, string, int64) error { return nil },
		TakeDayReadsFn:  roomy,
		TakeAthleteReadFn: func(_ int64, _, n int) error {
			mu.Lock()
			defer mu.Unlock()
			if athleteReads+n > 3 {
				return model.ErrConflict
			}
			athleteReads += n
			return nil
		},
		UnverifiedFn: func(_ int64, day bool, limit, n int) error {
			mu.Lock()
			defer mu.Unlock()
			if day {
				return nil
			}
			if limit < math.MaxInt32 && unverified+n > 8 { // a read moved here is counted past the cap
				return model.ErrConflict
			}
			unverified += n
			return nil
		},
		WorkoutFn: func(int64) (*model.Workout, error) { return nil, model.ErrNotFound },
	}
	l := &fakeLister{acts: history(1200, 1000)} // ids 1000…2199, newest first
	s := &fakeStrava{GetActivityFn: func(int64) (strava.Activity, error) { return strava.Activity{}, model.ErrNotFound }}
	f := burstFetcher(t, st, s, l)
	f.Reads.PerWindow, f.Reads.PerDay = 1, 100 // every read reaches the fakes' counters
	ctx := context.Background()
	heldBack := func(outs []error) int {
		n := 0
		for _, err := range outs {
			var de *ingest.DeferError
			if errors.As(err, &de) && de.AthleteCap {
				n++
			}
		}
		return n
	}
	forged := f.Serve(ctx, ingest.NewBurst(creates(span(900000, 20)...), "forged"))
	if held := heldBack(forged); fmt.Sprint(l.pages) != "[1 2 3 4 5]" || s.calls != 3 || held != 17 {
		t.Fatalf("forged burst: pages %v, %d fetched alone, %d held back; want 5 pages, 3 fetched alone on the unverified allowance, 17 waiting for it",
			l.pages, s.calls, held)
	}
	mixed := f.Serve(ctx, ingest.NewBurst(append(creates(1000), creates(span(900100, 20)...)...), "mixed"))
	// With the allowance spent, the walk probes twice (probe.go): each
	// reads a forged create by id on the athlete's caps, is not found, and
	// moves to the unverified allowance past its cap, settling that create.
	if mixed[0] != nil || !written[1000] || heldBack(mixed) != 18 || s.calls != 5 {
		t.Fatalf("the real upload: %v, written %v, %d forged held back, %d read by id; want it written from the first page, 2 forged probed, 18 waiting",
			mixed[0], written[1000], heldBack(mixed), s.calls)
	}
	// A second look (every event missed by a walk before) is unverified
	// from its first page: with the allowance spent, no page is read; two
	// probes settle two forged creates, and the rest wait.
	again := f.Serve(ctx, ingest.NewBurst(unseenBefore(creates(span(900200, 5)...), now.Add(-time.Hour)), "second-look"))
	if heldBack(again) != 3 || len(l.pages) != 6 || s.calls != 7 {
		t.Fatalf("second look: %d held back, pages %v, %d read by id; want 3 waiting, no page read, 2 probed", heldBack(again), l.pages, s.calls)
	}
	t.Logf("athlete's caps: %d reads; unverified allowance: %d reads; pages %v", athleteReads, unverified, l.pages)
	// The allowance: 8 reads to its cap, then past it what was read on the
	// caps for unverified events only: the mixed burst's first page (its
	// real upload was written from the memory of the forged walk's pages)
	// and the four probes.
	if athleteReads != 1 || unverified != 13 {
		t.Fatalf("athlete's caps took %d reads, the unverified allowance %d; want 1 (the real upload's first page) and 13", athleteReads, unverified)
	}
}

// recordWrites is a store that records each upserted workout's fetch start
// by activity id; the map is read once the fetcher has returned.
func recordWrites(t *testing.T) (*fakeStore, map[int64]int64) {
	var mu sync.Mutex
	written := map[int64]int64{}
	return &fakeStore{t: t, UpsertWorkoutFn: func(w *model.Workout) error {
		mu.Lock()
		defer mu.Unlock()
		written[w.ActivityID] = w.FetchStartedAtNs
		return nil
	}}, written
}
