package consumer_test

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/ports"
	"github.com/commitcollect/backend/projections/consumer"
)

// fakeStore is every consumer port with a function per method the tests steer
// (nil: the call is a test failure), in the style of wtf's mock package,
// as every fake of a port here is; the other methods answer as an empty,
// healthy store.
type fakeStore struct {
	t                 testing.TB
	UserMilestonesFn  func(ctx context.Context, userID string) (ports.UserMilestones, error)
	WorkoutLogFn      func(ctx context.Context, userID string, windows []model.Window) (ports.WorkoutLog, error)
	ModelPartsFn      func(ctx context.Context, modelID string) (map[int]model.ModelPart, error)
	WriteProjectionFn func(ctx context.Context, w ports.ProjectionWrite) error
}

func (f fakeStore) UserMilestones(ctx context.Context, userID string) (ports.UserMilestones, error) {
	if f.UserMilestonesFn == nil {
		f.t.Fatalf("unexpected UserMilestones(%s)", userID)
	}
	return f.UserMilestonesFn(ctx, userID)
}

func (f fakeStore) WorkoutLog(ctx context.Context, userID string, windows []model.Window) (ports.WorkoutLog, error) {
	if f.WorkoutLogFn == nil {
		f.t.Fatalf("unexpected WorkoutLog(%s)", userID)
	}
	return f.WorkoutLogFn(ctx, userID, windows)
}

func (f fakeStore) ModelParts(ctx context.Context, modelID string) (map[int]model.ModelPart, error) {
	if f.ModelPartsFn == nil {
		f.t.Fatalf("unexpected ModelParts(%s)", modelID)
	}
	return f.ModelPartsFn(ctx, modelID)
}

func (f fakeStore) WriteProjection(ctx context.Context, w ports.ProjectionWrite) error {
	if f.WriteProjectionFn == nil {
		f.t.Fatalf("unexpected WriteProjection(%s)", w.MilestoneID)
	}
	return f.WriteProjectionFn(ctx, w)
}

func (fakeStore) AwardAudits(context.Context, string, string, time.Time) (map[int]bool, error) {
	return map[int]bool{}, nil
}

func (fakeStore) AuditEntriesAt(context.Context, string, time.Time) ([]model.AuditEntry, error) {
	return nil, nil
}

func (fakeStore) AppendAudit(context.Context, *model.AuditEntry) error { return nil }

func (fakeStore) Park(context.Context, *ops.ParkedRecord) error { return nil }

func (fakeStore) RemoveGuarded(context.Context, *model.UserGuard, []model.Key) (int, error) {
	return 0, nil
}

func (fakeStore) CollectAwards(context.Context, []model.Award) error { return nil }

func (fakeStore) SeriesPeriods(context.Context, string, string, []string) (map[string]ports.SeriesPeriod, error) {
	return nil, nil
}

func (fakeStore) StartPeriod(context.Context, *model.Milestone) error { return nil }

var (
	at0 = time.Date(2026, 3, 15, 12, 0, 0, 0, time.UTC)
	// a count milestone of two parts, two runs in its period
	twoRuns = model.Milestone{UserID: "u1", MilestoneID: "m1", Version: 4, MilestoneDefinition: model.MilestoneDefinition{
		ModelID: "rocket", Title: "two runs", Metric: model.MetricCount, Target: 2, SportTypes: []string{"Run"},
		PeriodStartAtUtc: at0.AddDate(0, 0, -14), PartCount: 2}}
	runs = []model.Workout{
		{UserID: "u1", ActivityID: 2, SportType: "Run", StartDateUtc: at0.Add(-time.Hour)},
		{UserID: "u1", ActivityID: 1, SportType: "Run", StartDateUtc: at0.Add(-48 * time.Hour)},
	}
)

// conflictingStore answers the milestone and the runs, and refuses the
// first conflicts writes with a version conflict.
func conflictingStore(t testing.TB, conflicts int) (fakeStore, *[]ports.ProjectionWrite, *int) {
	var mu sync.Mutex
	var writes []ports.ProjectionWrite
	reads := 0
	return fakeStore{
		t: t,
		UserMilestonesFn: func(context.Context, string) (ports.UserMilestones, error) {
			mu.Lock()
			defer mu.Unlock()
			reads++
			return ports.UserMilestones{Milestones: []model.Milestone{twoRuns}, Awards: map[string]map[int]model.Award{}}, nil
		},
		WorkoutLogFn: func(context.Context, string, []model.Window) (ports.WorkoutLog, error) {
			return ports.WorkoutLog{Workouts: runs}, nil
		},
		ModelPartsFn: func(context.Context, string) (map[int]model.ModelPart, error) {
			return map[int]model.ModelPart{}, nil
		},
		WriteProjectionFn: func(_ context.Context, w ports.ProjectionWrite) error {
			mu.Lock()
			defer mu.Unlock()
			writes = append(writes, w)
			if len(writes) <= conflicts {
				return model.ErrConflict
			}
			return nil
		},
	}, &writes, &reads
}

func newFakeConsumer(st fakeStore, attempts int) *consumer.Consumer {
	all := consumer.Stores{Milestones: st, Series: st, Catalog: st, Log: st, Audits: st, Parked: st, Guard: st, Collection: st}
	return consumer.New(all, consumer.Options{Metrics: io.Discard, Now: func() time.Time { return at0 }, MaxAttempts: attempts,
		BackoffBase: time.Nanosecond, BackoffMax: time.Nanosecond})
}

// TestRecomputeMintsAndRetriesConflicts: two runs complete a two-part count
// milestone: one write over the version read, minting both parts with
// their AWARD_MINTED entries in the same transaction; a version conflict
// re-reads the user and writes again. Protections: the conflict retry (a
// re-read per attempt), the mint plan (awards and audits together).
func TestRecomputeMintsAndRetriesConflicts(t *testing.T) {
	t.Parallel()
	st, writes, reads := conflictingStore(t, 1)
	rep, err := newFakeConsumer(st, 3).RecomputeUser(context.Background(), "u1", false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Attempts != 2 || len(*writes) != 2 || *reads != 2 {
		t.Fatalf("attempts %d, writes %d, reads %d; want a conflict then a re-read and a second write", rep.Attempts, len(*writes), *reads)
	}
	w := (*writes)[1]
	if w.ExpectedVersion != twoRuns.Version || w.Projection.ProgressValue != 2 || w.Projection.AwardedParts != 2 ||
		w.Projection.Status != model.StatusCompleted || len(w.Awards) != 2 || len(w.Audits) != 2 || w.Token == "" {
		t.Fatalf("write %+v; want both parts minted over version %d, audited, with a request token", w, twoRuns.Version)
	}
	for i, a := range w.Awards {
		if a.PartIndex != i || w.Audits[i].EventType != consumer.EventAwardMinted {
			t.Fatalf("award %d: %+v, audit %+v", i, a, w.Audits[i])
		}
	}
	if (*writes)[0].Token != w.Token {
		t.Fatalf("tokens %q then %q: the retried transaction must carry the same token (idempotent)", (*writes)[0].Token, w.Token)
	}
}

// TestRecomputeGivesUpAfterMaxAttempts: conflicts past MaxAttempts are an
// error matching model.ErrConflict (the batch reports the record failed and
// Lambda retries it), never a silent success. Protection: the attempt bound.
func TestRecomputeGivesUpAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	st, writes, _ := conflictingStore(t, 100)
	rep, err := newFakeConsumer(st, 3).RecomputeUser(context.Background(), "u1", false)
	if !errors.Is(err, model.ErrConflict) || len(*writes) != 3 {
		t.Fatalf("report %+v, err %v, %d writes; want ErrConflict after 3", rep, err, len(*writes))
	}
}

// TestDryRunWritesNothing: a dry run reports the difference and writes
// nothing. Protection: dryRun.
func TestDryRunWritesNothing(t *testing.T) {
	t.Parallel()
	st, writes, _ := conflictingStore(t, 0)
	if _, err := newFakeConsumer(st, 3).RecomputeUser(context.Background(), "u1", true); err != nil || len(*writes) != 0 {
		t.Fatalf("err %v, %d writes; want none", err, len(*writes))
	}
}
