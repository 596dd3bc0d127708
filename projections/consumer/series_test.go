package consumer_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ports"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/projections/consumer"
	"github.com/commitcollect/backend/test/fixture"
)

// seriesSpy is the real store, recording which periods of a series each
// recompute reads and which windows of the log.
type seriesSpy struct {
	*store.Store
	mu      sync.Mutex
	starts  [][]string
	windows [][]model.Window
}

func (s *seriesSpy) SeriesPeriods(ctx context.Context, userID, milestoneID string, starts []string) (map[string]ports.SeriesPeriod, error) {
	s.mu.Lock()
	s.starts = append(s.starts, starts)
	s.mu.Unlock()
	return s.Store.SeriesPeriods(ctx, userID, milestoneID, starts)
}

func (s *seriesSpy) WorkoutLog(ctx context.Context, userID string, ws []model.Window) (ports.WorkoutLog, error) {
	s.mu.Lock()
	s.windows = append(s.windows, ws)
	s.mu.Unlock()
	return s.Store.WorkoutLog(ctx, userID, ws)
}

func (s *seriesSpy) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.starts, s.windows = nil, nil
}

// TestSeriesEventTouchesOnlyItsPeriods: a weekly series begun 260 weeks
// ago; a workout's event reads and writes only the week that holds its
// local day, and an edit that moves a workout to another week touches both
// weeks and no other, so an event's cost does not grow with the series'
// past. Each week has its own progress and awards. Protection: the
// touched days (Decision.Days → seriesPeriods); without them every period
// is read.
func TestSeriesEventTouchesOnlyItsPeriods(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putModel("rocket", 10)
	const user = "u-series"
	// Weeks of March 2026: 2–8, 9–15, 16–22. The series began 260 weeks
	// before the week of 2 March.
	def := fixture.Definition(fixture.LocalDays("2021-03-08", ""))
	def.Recurrence, def.Metric, def.Target = "weekly", model.MetricCount, 2
	e.putMilestone(user, "s1", def)
	spy := &seriesSpy{Store: e.s}
	c := consumer.New(spy, consumer.Options{Metrics: e.metrics, Now: func() time.Time { return time.Date(2026, 3, 20, 12, 0, 0, 0, time.UTC) }})
	if resp := e.handle(c, e.newRecords()); len(resp.BatchItemFailures) != 0 { // the series' INSERT: every period
		t.Fatalf("failures: %+v", resp.BatchItemFailures)
	}
	if len(spy.starts) != 1 || spy.starts[0] != nil {
		t.Fatalf("the series' insert read periods %v, want the whole series once", spy.starts)
	}
	spy.reset()

	run := func(id int64, local string) *model.Workout {
		return fixture.Workout(user, id, fixture.Local(local, "Australia/Sydney"))
	}
	e.putWorkout(run(1, "2026-03-09T06:00")) // Monday 6 am in Sydney: Sunday 8 March in UTC
	e.putWorkout(run(2, "2026-03-10T06:00"))
	if resp := e.handle(c, e.newRecords()); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures: %+v", resp.BatchItemFailures)
	}
	if len(spy.starts) != 1 || !slices.Equal(spy.starts[0], []string{"2026-03-09"}) {
		t.Fatalf("two runs in the week of 9 March read periods %v, want that week only", spy.starts)
	}
	for _, ws := range spy.windows {
		for _, w := range ws {
			if w.To == nil || w.To.Sub(w.From) > 7*24*time.Hour+calendarSlack {
				t.Fatalf("log windows %v: want the week's span only", ws)
			}
		}
	}
	week := func(start string) model.Milestone {
		var m model.Milestone
		if err := e.s.Get(e.ctx, e.s.Tables().Main, keys.SeriesPeriodKey(user, "s1", start), &m); err != nil {
			t.Fatalf("period %s: %v", start, err)
		}
		return m
	}
	if w := week("2026-03-09"); w.WorkoutsCounted != 2 || w.Status != model.StatusCompleted || w.AwardedParts != 10 {
		t.Fatalf("week of 9 March: %+v, want completed by its two runs", w.Projection)
	}
	spy.reset()

	// The athlete re-dates run 2 into the week of 16 March: both weeks.
	moved := run(2, "2026-03-17T06:00")
	moved.FetchStartedAtNs = time.Now().UnixNano()
	if err := e.s.UpsertWorkout(e.ctx, moved); err != nil {
		t.Fatal(err)
	}
	if resp := e.handle(c, e.newRecords()); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures: %+v", resp.BatchItemFailures)
	}
	if len(spy.starts) != 1 || !slices.Equal(spy.starts[0], []string{"2026-03-09", "2026-03-16"}) {
		t.Fatalf("a run moved between weeks read periods %v, want the two weeks", spy.starts)
	}
	if w := week("2026-03-09"); w.WorkoutsCounted != 1 || w.AwardedParts != 10 {
		t.Fatalf("week of 9 March after the move: %+v, want one run counted and its awards kept", w.Projection)
	}
	if w := week("2026-03-16"); w.WorkoutsCounted != 1 || w.AwardedParts != 5 {
		t.Fatalf("week of 16 March: %+v, want its one run and half the parts", w.Projection)
	}
	if n := len(e.seriesAwards(user, "s1", "2026-03-16")); n != 5 {
		t.Fatalf("week of 16 March holds %d awards, want its own 5", n)
	}
}

// seriesAwards reads the award items of one period of a series.
func (e *env) seriesAwards(user, milestoneID, start string) []model.Award {
	e.t.Helper()
	ps, err := e.s.SeriesPeriods(e.ctx, user, milestoneID, []string{start})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []model.Award
	for _, a := range ps[start].Awards {
		out = append(out, a)
	}
	return out
}

// calendarSlack is how much longer than its days a local period's UTC
// span is: its first day starts 14 hours ahead of UTC, its last ends 12
// hours behind.
const calendarSlack = 26 * time.Hour
