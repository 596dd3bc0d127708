package fetch_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/budget"
	"github.com/commitcollect/backend/handlers/ingest/fetch"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/emf/emftest"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/strava"
	"github.com/commitcollect/backend/test/capture"
)

// The fetcher's decisions (coalescing, ordering, the budget, Strava's
// answers) against function-field fakes of its ports, in the style of wtf's
// mock package: a nil function is a call the test did not expect. The
// pipeline tests in handlers/ingest run the same paths on DynamoDB Local
// and the Strava simulator.

type fakeStore struct {
	t                 *testing.T
	WorkoutFn         func(activityID int64) (*model.Workout, error)
	UpsertWorkoutFn   func(w *model.Workout) error
	MarkHiddenFn      func(activityID int64, reason string, fetchStartedAtNs int64) error
	MarkNeedsReauthFn func(userID string) error
	TakeAthleteReadFn func(athleteID int64, limit, n int) error
	windowReads       atomic.Int64 // the shared window counter (TakeAthleteReads)
	TakeDayReadsFn    func(athleteID int64, limit, n int) error
	// UnverifiedFn takes the unverified allowance's reads (window: day
	// false; the UTC day: true).
	UnverifiedFn func(athleteID int64, day bool, limit, n int) error
	audits       []string
	details      []map[string]string
}

func (f *fakeStore) ResolveAthlete(context.Context, int64) (string, error) { return "u1", nil }

func (f *fakeStore) Workout(_ context.Context, _ string, activityID int64) (*model.Workout, error) {
	if f.WorkoutFn == nil {
		f.t.Fatalf("unexpected Workout(%d)", activityID)
	}
	return f.WorkoutFn(activityID)
}

func (f *fakeStore) UpsertWorkout(_ context.Context, w *model.Workout) error {
	if f.UpsertWorkoutFn == nil {
		f.t.Fatalf("unexpected UpsertWorkout(%d)", w.ActivityID)
	}
	return f.UpsertWorkoutFn(w)
}

func (f *fakeStore) MarkWorkoutHidden(_ context.Context, _ string, _, activityID int64, _, reason string, fetchStartedAtNs int64, _ time.Time) error {
	if f.MarkHiddenFn == nil {
		f.t.Fatalf("unexpected MarkWorkoutHidden(%d)", activityID)
	}
	return f.MarkHiddenFn(activityID, reason, fetchStartedAtNs)
}

func (f *fakeStore) MarkNeedsReauth(_ context.Context, userID string, _ time.Time) error {
	if f.MarkNeedsReauthFn == nil {
		f.t.Fatalf("unexpected MarkNeedsReauth(%s)", userID)
	}
	return f.MarkNeedsReauthFn(userID)
}

// TakeAthleteReads answers TakeAthleteReadFn; what it lets through is
// counted on one shared counter, as the table's is (whose count it
// returns).
func (f *fakeStore) TakeAthleteReads(_ context.Context, athleteID int64, _ time.Time, _ time.Duration, limit, n int) (int, error) {
	if f.TakeAthleteReadFn == nil {
		f.t.Fatalf("unexpected TakeAthleteReads(%d)", athleteID)
	}
	if err := f.TakeAthleteReadFn(athleteID, limit, n); err != nil {
		return 0, err
	}
	return int(f.windowReads.Add(int64(n))), nil
}

func (f *fakeStore) TakeAthleteDayReads(_ context.Context, athleteID int64, _ time.Time, limit, n int) error {
	if f.TakeDayReadsFn == nil {
		f.t.Fatalf("unexpected TakeAthleteDayReads(%d)", athleteID)
	}
	return f.TakeDayReadsFn(athleteID, limit, n)
}

func (f *fakeStore) TakeUnverifiedReads(_ context.Context, athleteID int64, _ time.Time, _ time.Duration, limit, n int) error {
	if f.UnverifiedFn == nil {
		f.t.Fatalf("unexpected TakeUnverifiedReads(%d)", athleteID)
	}
	return f.UnverifiedFn(athleteID, false, limit, n)
}

func (f *fakeStore) TakeUnverifiedDayReads(_ context.Context, athleteID int64, _ time.Time, limit, n int) error {
	if f.UnverifiedFn == nil {
		f.t.Fatalf("unexpected TakeUnverifiedDayReads(%d)", athleteID)
	}
	return f.UnverifiedFn(athleteID, true, limit, n)
}

func (f *fakeStore) RateLimitState(context.Context) (*ops.RateLimitState, error) {
	return nil, model.ErrNotFound
}

func (f *fakeStore) RecordRateLimit(context.Context, *ops.RateLimitState) error { return nil }

func (f *fakeStore) Audit(_ context.Context, _ *slog.Logger, e *model.AuditEntry) {
	f.audits = append(f.audits, e.EventType)
	f.details = append(f.details, e.Details)
}

// roomy is an athlete's read allowance with room: every take succeeds.
func roomy(int64, int, int) error { return nil }

type tokens func(ctx context.Context, userID string) (string, error)

func (t tokens) AccessToken(ctx context.Context, userID string) (string, error) {
	return t(ctx, userID)
}

type fakeStrava struct {
	calls         int
	GetActivityFn func(id int64) (strava.Activity, error)
}

func (s *fakeStrava) GetActivity(_ context.Context, _ string, id int64) (strava.Activity, strava.RateLimit, error) {
	s.calls++
	if s.GetActivityFn == nil {
		return strava.Activity{}, strava.RateLimit{}, fmt.Errorf("unexpected GetActivity(%d)", id)
	}
	a, err := s.GetActivityFn(id)
	return a, strava.RateLimit{}, err
}

var (
	now      = time.Date(2026, 3, 1, 12, 7, 0, 0, time.UTC)
	received = now.Add(-time.Minute)
)

func newFetcher(t *testing.T, st *fakeStore, s *fakeStrava) *fetch.Fetcher {
	f := fetch.NewFetcher(st.stores(), budget.NewReads(st, st, slog.New(slog.DiscardHandler)), tokens(func(context.Context, string) (string, error) { return "tok", nil }), s,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	f.Now = func() time.Time { return now }
	return f
}

func event(aspect string) ingest.Job {
	return ingest.Job{CorrelationID: "c1", ReceivedAtUtc: received,
		Event: ingest.Event{ObjectType: ingest.ObjectActivity, ObjectID: 7, AspectType: aspect, OwnerID: 9, EventTime: received.Unix()}}
}

func run(a strava.Activity) func(int64) (strava.Activity, error) {
	return func(int64) (strava.Activity, error) { return a, nil }
}

var run5k = strava.Activity{ID: 7, Athlete: strava.ActivityAthlete{ID: 9}, SportType: "Run", Distance: 5000, MovingTime: 1500,
	StartDate: now.Add(-2 * time.Hour)}

func TestAnUpdateFetchedAfterItsReceiptIsNotFetchedAgain(t *testing.T) {
	t.Parallel()
	st := &fakeStore{t: t, WorkoutFn: func(int64) (*model.Workout, error) {
		return &model.Workout{ActivityID: 7, FetchStartedAtNs: received.Add(time.Second).UnixNano()}, nil
	}}
	s := &fakeStrava{GetActivityFn: run(run5k)}
	if err := newFetcher(t, st, s).Process(context.Background(), event(ingest.AspectUpdate)); err != nil || s.calls != 0 {
		t.Fatalf("got %v after %d fetches; want nil without a fetch (coalesced)", err, s.calls)
	}
}

func TestAnUpdateFetchedBeforeItsReceiptIsFetchedAndWrittenInFetchOrder(t *testing.T) {
	t.Parallel()
	var written *model.Workout
	st := &fakeStore{t: t,
		WorkoutFn: func(int64) (*model.Workout, error) {
			return &model.Workout{ActivityID: 7, FetchStartedAtNs: received.Add(-time.Second).UnixNano()}, nil
		},
		UpsertWorkoutFn: func(w *model.Workout) error { written = w; return nil },
	}
	s := &fakeStrava{GetActivityFn: run(run5k)}
	if err := newFetcher(t, st, s).Process(context.Background(), event(ingest.AspectUpdate)); err != nil {
		t.Fatal(err)
	}
	if s.calls != 1 || written == nil || written.FetchStartedAtNs != now.UnixNano() || written.DistanceMeters != 5000 {
		t.Fatalf("%d fetches, wrote %+v; want one fetch written with its fetch start", s.calls, written)
	}
	if len(st.audits) != 1 || st.audits[0] != ingest.AuditActivityUpdate {
		t.Fatalf("audits %v, want one update", st.audits)
	}
}

func TestACreateSkipsTheCoalescingRead(t *testing.T) {
	t.Parallel()
	writes := 0
	st := &fakeStore{t: t, UpsertWorkoutFn: func(*model.Workout) error { writes++; return nil }} // no WorkoutFn: a read fails the test
	s := &fakeStrava{GetActivityFn: run(run5k)}
	if err := newFetcher(t, st, s).Process(context.Background(), event(ingest.AspectCreate)); err != nil || writes != 1 {
		t.Fatalf("got %v, %d writes; want one write without a stored read", err, writes)
	}
}

func TestA404HidesTheWorkoutWithItsFetchStart(t *testing.T) {
	t.Parallel()
	var reason string
	var at int64
	st := &fakeStore{t: t,
		WorkoutFn:    func(int64) (*model.Workout, error) { return nil, model.ErrNotFound },
		MarkHiddenFn: func(_ int64, r string, ns int64) error { reason, at = r, ns; return nil },
	}
	s := &fakeStrava{GetActivityFn: func(int64) (strava.Activity, error) {
		return strava.Activity{}, fmt.Errorf("strava 404: %w", model.ErrNotFound)
	}}
	if err := newFetcher(t, st, s).Process(context.Background(), event(ingest.AspectDelete)); err != nil {
		t.Fatal(err)
	}
	if reason != model.WorkoutHiddenOrDeleted || at != now.UnixNano() {
		t.Fatalf("hidden with %q at %d; want %q at the fetch start", reason, at, model.WorkoutHiddenOrDeleted)
	}
}

func TestADeleteStravaStillServesIsWrittenNotDeleted(t *testing.T) {
	t.Parallel()
	writes := 0
	st := &fakeStore{t: t,
		WorkoutFn:       func(int64) (*model.Workout, error) { return nil, model.ErrNotFound },
		UpsertWorkoutFn: func(*model.Workout) error { writes++; return nil },
	}
	s := &fakeStrava{GetActivityFn: run(run5k)}
	if err := newFetcher(t, st, s).Process(context.Background(), event(ingest.AspectDelete)); err != nil || writes != 1 {
		t.Fatalf("got %v, %d writes; want the live activity written", err, writes)
	}
}

func TestAnAthleteAtItsReadCapWaitsWithoutAFetch(t *testing.T) {
	t.Parallel()
	st := &fakeStore{t: t, TakeAthleteReadFn: func(int64, int, int) error { return model.ErrConflict }}
	s := &fakeStrava{GetActivityFn: run(run5k)}
	f := newFetcher(t, st, s)
	f.Reads.PerWindow = 1 // no read within the instance's own allowance
	err := f.Process(context.Background(), event(ingest.AspectCreate))
	var de *ingest.DeferError
	if !errors.As(err, &de) || s.calls != 0 || !de.Until.Equal(now.Truncate(15*time.Minute).Add(15*time.Minute)) {
		t.Fatalf("got %v after %d fetches; want a deferral to the next window, no fetch", err, s.calls)
	}
}

func TestStravas429DefersTheJob(t *testing.T) {
	t.Parallel()
	st := &fakeStore{t: t}
	s := &fakeStrava{GetActivityFn: func(int64) (strava.Activity, error) {
		return strava.Activity{}, &strava.APIError{Status: http.StatusTooManyRequests}
	}}
	var de *ingest.DeferError
	if err := newFetcher(t, st, s).Process(context.Background(), event(ingest.AspectCreate)); !errors.As(err, &de) {
		t.Fatalf("got %v, want a deferral", err)
	}
}

func TestAnOlderAnswerIsDroppedQuietly(t *testing.T) {
	t.Parallel()
	st := &fakeStore{t: t, UpsertWorkoutFn: func(*model.Workout) error { return fmt.Errorf("stored fetch is newer: %w", model.ErrConflict) }}
	s := &fakeStrava{GetActivityFn: run(run5k)}
	if err := newFetcher(t, st, s).Process(context.Background(), event(ingest.AspectCreate)); err != nil || len(st.audits) != 0 {
		t.Fatalf("got %v, audits %v; want nil and no audit (the newer answer stands)", err, st.audits)
	}
}

func TestAnotherAthletesActivityIsPoison(t *testing.T) {
	t.Parallel()
	other := run5k
	other.Athlete.ID = 10
	st := &fakeStore{t: t}
	s := &fakeStrava{GetActivityFn: run(other)}
	if err := newFetcher(t, st, s).Process(context.Background(), event(ingest.AspectCreate)); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("got %v, want ErrInvalid (nothing written)", err)
	}
}

// TestAthleteReadCounterIsTouchedOnlyNearTheCap: an instance reads an
// athlete's first localReadAllowance (3) activities of a window without
// writing the shared counter; the 4th adds all four, later ones one each,
// and a refusal keeps the unshared reads for the next attempt. Protection:
// the instance's read tally (removing it writes the counter for every read).
func TestAthleteReadCounterIsTouchedOnlyNearTheCap(t *testing.T) {
	t.Parallel()
	var adds []int
	refuse := false
	st := &fakeStore{t: t, TakeAthleteReadFn: func(_ int64, limit, n int) error {
		if want := budget.DefaultAthleteReadsPerWindow * 2 / 3; limit != want { // an update's share
			t.Errorf("cap %d, want %d", limit, want)
		}
		adds = append(adds, n)
		if refuse {
			return model.ErrConflict
		}
		return nil
	},
		WorkoutFn:       func(int64) (*model.Workout, error) { return nil, model.ErrNotFound },
		UpsertWorkoutFn: func(*model.Workout) error { return nil },
		TakeDayReadsFn:  roomy,
	}
	s := &fakeStrava{GetActivityFn: run(run5k)}
	f := newFetcher(t, st, s)
	ctx := context.Background()
	for i := range 5 {
		if err := f.Process(ctx, event(ingest.AspectUpdate)); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	if fmt.Sprint(adds) != "[4 1]" || s.calls != 5 {
		t.Fatalf("counter additions %v after %d reads; want [4 1] after 5 (3 unseen, then 4 at once, then 1)", adds, s.calls)
	}
	refuse = true
	var de *ingest.DeferError
	if err := f.Process(ctx, event(ingest.AspectUpdate)); !errors.As(err, &de) || s.calls != 5 {
		t.Fatalf("at the cap: got %v after %d reads, want a deferral without a read", err, s.calls)
	}
	// Another athlete, or the next window, starts its own allowance.
	f.Now = func() time.Time { return now.Add(15 * time.Minute) }
	if err := f.Process(ctx, event(ingest.AspectUpdate)); err != nil || len(adds) != 3 {
		t.Fatalf("next window: got %v, additions %v; want the read within the new allowance", err, adds)
	}
}

// TestReadShareReportsTheSharedCount: two instances read one athlete, four
// reads each; the AthleteReadShare metric the second writes counts all
// eight (the shared counter's answer), not its own four. Protection:
// reportShare taking the counter's count (with the instance's tally the
// alarm sees half the athlete's share).
func TestReadShareReportsTheSharedCount(t *testing.T) {
	t.Parallel()
	st := &fakeStore{t: t, TakeAthleteReadFn: func(int64, int, int) error { return nil }, TakeDayReadsFn: roomy,
		WorkoutFn: func(int64) (*model.Workout, error) { return nil, model.ErrNotFound }, UpsertWorkoutFn: func(*model.Workout) error { return nil }}
	var metrics [2]capture.Buffer
	for i := range 2 {
		f := newFetcher(t, st, &fakeStrava{GetActivityFn: run(run5k)})
		f.Reads.Metrics = &metrics[i]
		for range 4 {
			if err := f.Process(context.Background(), event(ingest.AspectUpdate)); err != nil {
				t.Fatal(err)
			}
		}
	}
	lines, err := emftest.ParseAll(strings.NewReader(metrics[1].String()))
	if err != nil || len(lines) != 1 {
		t.Fatalf("second instance's metric lines %v, %v; want one", lines, err)
	}
	want := float64(8 * 100 / budget.DefaultReadShortLimit)
	if got, ok := lines[0].Value(budget.MetricAthleteReadShare); !ok || got != want {
		t.Fatalf("AthleteReadShare %v, want %v (8 reads of both instances)", got, want)
	}
}

// TestUpdatesCannotSpendTheUploadsReserve: thirty updates naming one
// athlete (activity ids are public: anyone can send them) take two thirds
// of the window's cap and then wait; the athlete's new upload is still
// fetched at once from the third kept for uploads. Protection: editsShare
// (without it the updates take the whole cap and the upload waits for the
// next window).
func TestUpdatesCannotSpendTheUploadsReserve(t *testing.T) {
	t.Parallel()
	st := &fakeStore{t: t, TakeDayReadsFn: roomy,
		WorkoutFn: func(int64) (*model.Workout, error) { return nil, model.ErrNotFound }, UpsertWorkoutFn: func(*model.Workout) error { return nil }}
	st.TakeAthleteReadFn = func(_ int64, limit, n int) error {
		if int(st.windowReads.Load())+n > limit {
			return model.ErrConflict
		}
		return nil
	}
	s := &fakeStrava{GetActivityFn: run(run5k)}
	f := newFetcher(t, st, s)
	ctx := context.Background()
	held := 0
	for range budget.DefaultAthleteReadsPerWindow {
		var de *ingest.DeferError
		switch err := f.Process(ctx, event(ingest.AspectUpdate)); {
		case errors.As(err, &de) && de.AthleteCap:
			held++
		case err != nil:
			t.Fatal(err)
		}
	}
	if want := budget.DefaultAthleteReadsPerWindow / 3; held != want || s.calls != 20 {
		t.Fatalf("updates: %d held back after %d fetches; want %d held back after 20 (two thirds of the cap)", held, s.calls, want)
	}
	if err := f.Process(ctx, event(ingest.AspectCreate)); err != nil || s.calls != 21 {
		t.Fatalf("the athlete's upload: %v after %d fetches; want it fetched from the reserve", err, s.calls)
	}
}

// stores hands f as every port of the fetcher.
func (f *fakeStore) stores() fetch.Stores {
	return fetch.Stores{Athletes: f, Workouts: f, Connections: f, Audits: f}
}
