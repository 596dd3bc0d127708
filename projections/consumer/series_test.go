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
	// Three weeks: before, last and this one; the clock is this week's
	// Friday noon UTC. It follows the wall clock: DynamoDB Local expires
	// audit entries by it (model.AuditRetentionDays), and the awards a
	// moved run leaves behind rest on their AWARD_MINTED entries. The series
	// began 260 weeks before the week before last.
	thisWeek := monday(time.Now())
	lastWeek, weekBefore := thisWeek.AddDate(0, 0, -7), thisWeek.AddDate(0, 0, -14)
	now := thisWeek.AddDate(0, 0, 4).Add(12 * time.Hour)
	def := fixture.Definition(fixture.LocalDays(date(weekBefore.AddDate(0, 0, -260*7)), ""))
	def.Recurrence, def.Metric, def.Target = "weekly", model.MetricCount, 2
	e.putMilestone(user, "s1", def)
	spy := &seriesSpy{Store: e.s}
	c := consumer.New(spy, consumer.Options{Metrics: e.metrics, Now: func() time.Time { return now }})
	if resp := e.handle(c, e.newRecords()); len(resp.BatchItemFailures) != 0 { // the series' INSERT: every period
		t.Fatalf("failures: %+v", resp.BatchItemFailures)
	}
	if len(spy.starts) != 1 || spy.starts[0] != nil {
		t.Fatalf("the series' insert read periods %v, want the whole series once", spy.starts)
	}
	spy.reset()

	run := func(id int64, day time.Time) *model.Workout {
		return fixture.Workout(user, id, fixture.Local(date(day)+"T06:00", "Australia/Sydney"))
	}
	e.putWorkout(run(1, lastWeek)) // Monday 6 am in Sydney: Sunday in UTC
	e.putWorkout(run(2, lastWeek.AddDate(0, 0, 1)))
	if resp := e.handle(c, e.newRecords()); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures: %+v", resp.BatchItemFailures)
	}
	if len(spy.starts) != 1 || !slices.Equal(spy.starts[0], []string{date(lastWeek)}) {
		t.Fatalf("two runs in last week read periods %v, want that week only", spy.starts)
	}
	for _, ws := range spy.windows {
		for _, w := range ws {
			if w.To == nil || w.To.Sub(w.From) > 7*24*time.Hour+calendarSlack {
				t.Fatalf("log windows %v: want the week's span only", ws)
			}
		}
	}
	week := func(start time.Time) model.Milestone {
		var m model.Milestone
		if err := e.s.Get(e.ctx, e.s.Tables().Main, keys.SeriesPeriodKey(user, "s1", date(start)), &m); err != nil {
			t.Fatalf("period %s: %v", date(start), err)
		}
		return m
	}
	if w := week(lastWeek); w.WorkoutsCounted != 2 || w.Status != model.StatusCompleted || w.AwardedParts != 10 {
		t.Fatalf("last week: %+v, want completed by its two runs", w.Projection)
	}
	spy.reset()

	// The athlete re-dates run 2 into this week: both weeks.
	moved := run(2, thisWeek.AddDate(0, 0, 1))
	moved.FetchStartedAtNs = time.Now().UnixNano()
	if err := e.s.UpsertWorkout(e.ctx, moved); err != nil {
		t.Fatal(err)
	}
	if resp := e.handle(c, e.newRecords()); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures: %+v", resp.BatchItemFailures)
	}
	if len(spy.starts) != 1 || !slices.Equal(spy.starts[0], []string{date(lastWeek), date(thisWeek)}) {
		t.Fatalf("a run moved between weeks read periods %v, want the two weeks", spy.starts)
	}
	if w := week(lastWeek); w.WorkoutsCounted != 1 || w.AwardedParts != 10 {
		t.Fatalf("last week after the move: %+v, want one run counted and its awards kept", w.Projection)
	}
	if w := week(thisWeek); w.WorkoutsCounted != 1 || w.AwardedParts != 5 {
		t.Fatalf("this week: %+v, want its one run and half the parts", w.Projection)
	}
	if n := len(e.seriesAwards(user, "s1", date(thisWeek))); n != 5 {
		t.Fatalf("this week holds %d awards, want its own 5", n)
	}
}

// monday is the Monday (midnight UTC) of the week that holds t's UTC date.
func monday(t time.Time) time.Time {
	d := t.UTC().Truncate(24 * time.Hour)
	return d.AddDate(0, 0, -(int(d.Weekday())+6)%7)
}

// date formats a day as the API's YYYY-MM-DD.
func date(d time.Time) string { return d.Format(time.DateOnly) }

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
