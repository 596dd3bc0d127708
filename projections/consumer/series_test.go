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
	"github.com/commitcollect/backend/projections/consumer"
	"github.com/commitcollect/backend/test/fixture"
)

// seriesSpy is the real store, recording which periods of a series each
// recompute reads and which windows of the log.
type seriesSpy struct {
	consumer.SeriesStore
	consumer.LogReader
	mu      sync.Mutex
	starts  [][]string
	windows [][]model.Window
	stores  consumer.Stores // e's ports, the spy in place of its two
}

// seriesSpy wraps e's series and log ports.
func (e *env) seriesSpy() *seriesSpy {
	st := e.stores()
	spy := &seriesSpy{SeriesStore: st.Series, LogReader: st.Log}
	st.Series, st.Log = spy, spy
	spy.stores = st
	return spy
}

func (s *seriesSpy) SeriesPeriods(ctx context.Context, userID, milestoneID string, starts []string) (map[string]ports.SeriesPeriod, error) {
	s.mu.Lock()
	s.starts = append(s.starts, starts)
	s.mu.Unlock()
	return s.SeriesStore.SeriesPeriods(ctx, userID, milestoneID, starts)
}

func (s *seriesSpy) WorkoutLog(ctx context.Context, userID string, ws []model.Window) (ports.WorkoutLog, error) {
	s.mu.Lock()
	s.windows = append(s.windows, ws)
	s.mu.Unlock()
	return s.LogReader.WorkoutLog(ctx, userID, ws)
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
	e.weeklyRuns(user, "s1", weekBefore.AddDate(0, 0, -260*7))
	spy := e.seriesSpy()
	c := consumer.New(spy.stores, consumer.Options{Metrics: e.metrics, Now: func() time.Time { return now }})
	if resp := e.handle(c, e.newRecords()); len(resp.BatchItemFailures) != 0 { // the series' INSERT: every period
		t.Fatalf("failures: %+v", resp.BatchItemFailures)
	}
	if len(spy.starts) != 1 || spy.starts[0] != nil {
		t.Fatalf("the series' insert read periods %v, want the whole series once", spy.starts)
	}
	if s := e.series(user, "s1"); s.Current == nil || s.Current.PeriodOf != date(thisWeek) {
		t.Fatalf("the series' item keeps %+v, want this week", s.Current)
	}
	spy.reset()

	run := func(id int64, day time.Time) *model.Workout { return sydneyRun(user, id, day) }
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
		if err := e.s.DB.Get(e.ctx, e.s.DB.Tables().Main, keys.SeriesPeriodKey(user, "s1", date(start)), &m); err != nil {
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
	if err := e.s.Workouts.UpsertWorkout(e.ctx, moved); err != nil {
		t.Fatal(err)
	}
	if resp := e.handle(c, e.newRecords()); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures: %+v", resp.BatchItemFailures)
	}
	if len(spy.starts) != 1 || !slices.Equal(spy.starts[0], []string{date(lastWeek)}) {
		t.Fatalf("a run moved between weeks read periods %v, want last week's (this week is on the series' item)", spy.starts)
	}
	if w := week(lastWeek); w.WorkoutsCounted != 1 || w.AwardedParts != 10 {
		t.Fatalf("last week after the move: %+v, want one run counted and its awards kept", w.Projection)
	}
	if s := e.series(user, "s1"); s.Current == nil || s.Current.PeriodOf != date(thisWeek) || s.WorkoutsCounted != 1 ||
		s.AwardedParts != 5 || len(s.Current.Minted) != 5 {
		t.Fatalf("this week on the series' item: %+v %+v, want its one run, half the parts and their mirror", s.Projection, s.Current)
	}
	if n := len(e.seriesAwards(user, "s1", date(thisWeek))); n != 5 {
		t.Fatalf("this week holds %d awards, want its own 5", n)
	}

	// A run this week: the series' item holds the week, so no period is read.
	if starts := e.upload(c, spy, run(3, thisWeek.AddDate(0, 0, 2))); len(starts) != 0 {
		t.Fatalf("a run in the kept week read periods %v, want none", starts)
	}
	if s := e.series(user, "s1"); s.WorkoutsCounted != 2 || s.Status != model.StatusCompleted || len(s.Current.Minted) != 10 {
		t.Fatalf("this week after its second run: %+v %+v, want completed with its 10 parts mirrored", s.Projection, s.Current)
	}
	if n := len(e.seriesAwards(user, "s1", date(thisWeek))); n != 10 {
		t.Fatalf("this week holds %d awards, want 10", n)
	}
}

// upload writes a workout as the worker does and hands the consumer the
// stream records since the last, failing on any failure; it returns the
// periods the recompute read (spy, reset first).
func (e *env) upload(c *consumer.Consumer, spy *seriesSpy, w *model.Workout) [][]string {
	e.t.Helper()
	spy.reset()
	e.putWorkout(w)
	if resp := e.handle(c, e.newRecords()); len(resp.BatchItemFailures) != 0 {
		e.t.Fatalf("failures: %+v", resp.BatchItemFailures)
	}
	return spy.starts
}

// sydneyRun is a user's run at 6 am in Sydney on day.
func sydneyRun(user string, id int64, day time.Time) *model.Workout {
	return fixture.Workout(user, id, fixture.Local(date(day)+"T06:00", "Australia/Sydney"))
}

// weeklyRuns puts a user's series id: two runs a week on the athlete's
// days, from first.
func (e *env) weeklyRuns(user, id string, first time.Time) {
	e.t.Helper()
	def := fixture.Definition(fixture.LocalDays(date(first), ""))
	def.Recurrence, def.Metric, def.Target = "weekly", model.MetricCount, 2
	e.putMilestone(user, id, def)
}

// series reads a series' item.
func (e *env) series(user, milestoneID string) model.Milestone {
	e.t.Helper()
	var m model.Milestone
	if err := e.s.DB.Get(e.ctx, e.s.DB.Tables().Main, keys.MilestoneKey(user, milestoneID), &m); err != nil {
		e.t.Fatalf("series %s: %v", milestoneID, err)
	}
	return m
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
	ps, err := e.s.Milestones.SeriesPeriods(e.ctx, user, milestoneID, []string{start})
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

// TestSeriesItemMovesOnAndArchivesItsWeek: the series' item keeps last
// week; the first event of this week moves it onto this week, reading no
// period, and last week's state (progress, version, awards) lands on its
// own item in the same write; a late run of last week then reads and
// writes that item. Protections: the period left (Leaves) put by the
// moving write (without it last week's progress is lost), and the moving
// write made when this week's projection did not change (without it the
// late run's write finds no item of last week, a conflict every attempt).
func TestSeriesItemMovesOnAndArchivesItsWeek(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putModel("rocket", 10)
	const user = "u-move"
	thisWeek := monday(time.Now())
	lastWeek := thisWeek.AddDate(0, 0, -7)
	now := lastWeek.AddDate(0, 0, 4).Add(12 * time.Hour)
	e.weeklyRuns(user, "s2", lastWeek.AddDate(0, 0, -70))
	spy := e.seriesSpy()
	c := consumer.New(spy.stores, consumer.Options{Metrics: e.metrics, Now: func() time.Time { return now }})
	run := func(id int64, day time.Time) *model.Workout { return sydneyRun(user, id, day) }
	e.putWorkout(run(1, lastWeek))
	e.putWorkout(run(2, lastWeek.AddDate(0, 0, 1)))
	if resp := e.handle(c, e.newRecords()); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures: %+v", resp.BatchItemFailures)
	}
	before := e.series(user, "s2")
	if before.Current == nil || before.Current.PeriodOf != date(lastWeek) || before.AwardedParts != 10 {
		t.Fatalf("the series' item keeps %+v %+v, want last week completed", before.Current, before.Projection)
	}

	// This week: a ride, which the series does not count, and a late run
	// of last week in the same batch. The item moves on all the same, so
	// last week's run is written to the item the move archived.
	now = thisWeek.AddDate(0, 0, 4).Add(12 * time.Hour)
	ride := run(3, thisWeek)
	ride.SportType = "Ride"
	e.putWorkout(ride)
	if starts := e.upload(c, spy, run(4, lastWeek.AddDate(0, 0, 2))); len(starts) != 0 {
		t.Fatalf("the move read periods %v, want none", starts)
	}
	after := e.series(user, "s2")
	if after.Current == nil || after.Current.PeriodOf != date(thisWeek) || after.WorkoutsCounted != 0 || after.Version != before.Version+1 {
		t.Fatalf("after the move the item keeps %+v %+v, want this week with nothing counted", after.Current, after.Projection)
	}
	var last model.Milestone
	if err := e.s.DB.Get(e.ctx, e.s.DB.Tables().Main, keys.SeriesPeriodKey(user, "s2", date(lastWeek)), &last); err != nil {
		t.Fatalf("last week's own item: %v", err)
	}
	if last.WorkoutsCounted != 3 || last.AwardedParts != 10 || last.Status != model.StatusCompleted || last.Version != before.Version+1 ||
		!last.CreatedAtUtc.Equal(before.Current.CreatedAtUtc) || last.PeriodEndDate != date(lastWeek.AddDate(0, 0, 6)) {
		t.Fatalf("last week archived as %+v (version %d), want the item's state at version %d, then its third run", last.Projection, last.Version, before.Version)
	}
	if starts := e.upload(c, spy, run(5, thisWeek.AddDate(0, 0, 1))); len(starts) != 0 || e.series(user, "s2").WorkoutsCounted != 1 {
		t.Fatalf("a run in the week kept now read periods %v and counts %d, want none and one", starts, e.series(user, "s2").WorkoutsCounted)
	}

	if starts := e.upload(c, spy, run(6, lastWeek.AddDate(0, 0, 3))); len(starts) != 1 || !slices.Equal(starts[0], []string{date(lastWeek)}) {
		t.Fatalf("a late run of last week read periods %v, want that week", starts)
	}
	if err := e.s.DB.Get(e.ctx, e.s.DB.Tables().Main, keys.SeriesPeriodKey(user, "s2", date(lastWeek)), &last); err != nil || last.WorkoutsCounted != 4 {
		t.Fatalf("last week after its late runs: %+v, %v; want four runs", last.Projection, err)
	}
	if n := len(e.seriesAwards(user, "s2", date(lastWeek))); n != 10 {
		t.Fatalf("last week holds %d awards, want 10", n)
	}
}

// TestSeriesWrittenBeforeItemsKeptPeriodsIsTakenOver: a series whose
// periods all live on their own items (written before the series' item
// kept one) reads this week's item once, moves it onto the series' item
// with its awards mirrored and none minted again, and reads no period
// after. Protection: reading the touched periods of an item keeping none;
// without it the awards already minted would be minted again (a conflict
// on every attempt).
func TestSeriesWrittenBeforeItemsKeptPeriodsIsTakenOver(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putModel("rocket", 10)
	const user = "u-legacy"
	thisWeek := monday(time.Now())
	now := thisWeek.AddDate(0, 0, 4).Add(12 * time.Hour)
	e.weeklyRuns(user, "s3", thisWeek.AddDate(0, 0, -70))
	run := func(id int64, day time.Time) *model.Workout { return sydneyRun(user, id, day) }
	e.putWorkout(run(1, thisWeek))
	e.putWorkout(run(2, thisWeek.AddDate(0, 0, 1)))
	e.newRecords() // projected by the code before: this week's own item and its awards
	minted := now.Add(-time.Hour)
	week := model.Milestone{UserID: user, MilestoneID: "s3", MilestoneDefinition: fixture.Definition(fixture.LocalDays(date(thisWeek),
		date(thisWeek.AddDate(0, 0, 6)))), PeriodOf: date(thisWeek), Version: 3, CreatedAtUtc: minted, WrittenBy: model.WriterProjector,
		Projection: model.Projection{ProgressValue: 2, WorkoutsCounted: 2, AwardedParts: 10, Status: model.StatusCompleted}}
	week.Metric, week.Target = model.MetricCount, 2
	if err := e.s.DB.Put(e.ctx, e.s.DB.Tables().Main, &week); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		a := &model.Award{UserID: user, MilestoneID: "s3", ModelID: "rocket", PartIndex: i, AwardedAtUtc: minted, PeriodOf: date(thisWeek), Collected: true}
		if err := e.s.DB.Put(e.ctx, e.s.DB.Tables().Main, a); err != nil {
			t.Fatal(err)
		}
	}
	e.newRecords()
	spy := e.seriesSpy()
	c := consumer.New(spy.stores, consumer.Options{Metrics: e.metrics, Now: func() time.Time { return now }})
	if starts := e.upload(c, spy, run(3, thisWeek.AddDate(0, 0, 2))); len(starts) != 1 || !slices.Equal(starts[0], []string{date(thisWeek)}) {
		t.Fatalf("the first event read periods %v, want this week's own item", starts)
	}
	s := e.series(user, "s3")
	if s.Current == nil || s.Current.PeriodOf != date(thisWeek) || s.WorkoutsCounted != 3 || len(s.Current.Minted) != 10 ||
		s.Current.Minted[9] != minted.Unix() || !s.Current.CreatedAtUtc.Equal(minted) {
		t.Fatalf("taken over as %+v %+v, want this week's three runs and its ten awards as minted", s.Projection, s.Current)
	}
	for _, a := range e.seriesAwards(user, "s3", date(thisWeek)) {
		if !a.AwardedAtUtc.Equal(minted) {
			t.Fatalf("award %d minted again at %v", a.PartIndex, a.AwardedAtUtc)
		}
	}
	if starts := e.upload(c, spy, run(4, thisWeek.AddDate(0, 0, 3))); len(starts) != 0 {
		t.Fatalf("after the takeover an event read periods %v, want none", starts)
	}
}

// TestSeriesMoveRacingALateRunKeepsBoth: A reads the series' item keeping
// last week and is about to move it onto this week; B meanwhile writes a
// late run of last week to the item. A's move conflicts, re-reads, and
// archives last week with B's run: nothing is lost. Protection: the move's
// version condition on the series' item (in the same transaction as the
// period it puts); without it A archives last week without the late run.
func TestSeriesMoveRacingALateRunKeepsBoth(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putModel("rocket", 10)
	const user = "u-race"
	thisWeek := monday(time.Now())
	lastWeek := thisWeek.AddDate(0, 0, -7)
	now := lastWeek.AddDate(0, 0, 4).Add(12 * time.Hour)
	clock := func() time.Time { return now }
	e.weeklyRuns(user, "s4", lastWeek.AddDate(0, 0, -70))
	e.putWorkout(sydneyRun(user, 1, lastWeek))
	e.putWorkout(sydneyRun(user, 2, lastWeek.AddDate(0, 0, 1)))
	if resp := e.handle(e.consumer(consumer.Options{Now: clock}), e.newRecords()); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures: %+v", resp.BatchItemFailures)
	}
	now = thisWeek.AddDate(0, 0, 4).Add(12 * time.Hour)
	e.putWorkout(sydneyRun(user, 3, thisWeek))
	batchA := e.newRecords()

	p := newPaused()
	a := e.consumer(consumer.Options{Now: clock, BeforeWrite: p.beforeWrite})
	finishA := e.start(a, p, batchA)
	e.putWorkout(sydneyRun(user, 4, lastWeek.AddDate(0, 0, 2)))
	if resp := e.handle(e.consumer(consumer.Options{Now: clock}), e.newRecords()); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("B failures: %+v", resp.BatchItemFailures)
	}
	if respA := finishA(); len(respA.BatchItemFailures) != 0 || a.Stats().ConflictsRetried < 1 {
		t.Fatalf("A: failures %+v, %d conflicts retried; want none and at least one", respA.BatchItemFailures, a.Stats().ConflictsRetried)
	}
	var last model.Milestone
	if err := e.s.DB.Get(e.ctx, e.s.DB.Tables().Main, keys.SeriesPeriodKey(user, "s4", date(lastWeek)), &last); err != nil || last.WorkoutsCounted != 3 {
		t.Fatalf("last week archived as %+v (%v), want its three runs, the late one too", last.Projection, err)
	}
	if s := e.series(user, "s4"); s.Current == nil || s.Current.PeriodOf != date(thisWeek) || s.WorkoutsCounted != 1 || s.AwardedParts != 5 {
		t.Fatalf("the series' item keeps %+v %+v, want this week's one run", s.Current, s.Projection)
	}
	if n, m := len(e.seriesAwards(user, "s4", date(lastWeek))), len(e.seriesAwards(user, "s4", date(thisWeek))); n != 10 || m != 5 {
		t.Fatalf("awards: last week %d, this week %d; want 10 and 5", n, m)
	}
}

// startSpy is the real store, running after once right after the first
// StartPeriod: a second projector's whole round between the first's start
// of a period and its mint.
type startSpy struct {
	consumer.SeriesStore
	once  sync.Once
	after func()
}

func (s *startSpy) StartPeriod(ctx context.Context, p *model.Milestone) error {
	err := s.SeriesStore.StartPeriod(ctx, p)
	s.once.Do(s.after)
	return err
}

// TestTwoProjectorsStartingOnePeriodAuditUnderItsStart: a late run in a
// week never written before; two projectors with clocks a second apart
// read it, both before the week's item exists. A starts the item (its
// createdAtUtc); before A mints, B starts it too, mints and writes. Every part minted has its
// AWARD_MINTED entry under the createdAtUtc the week's item keeps, so
// verify finds them audited. Protection: StartPeriod before the mint,
// lending B the item's createdAtUtc (without it B files its entries under
// its own clock, and they are not found).
func TestTwoProjectorsStartingOnePeriodAuditUnderItsStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putModel("rocket", 10)
	const user = "u-start"
	thisWeek := monday(time.Now())
	now := thisWeek.AddDate(0, 0, 4).Add(12 * time.Hour)
	e.weeklyRuns(user, "s5", thisWeek.AddDate(0, 0, -70))
	e.putWorkout(sydneyRun(user, 1, thisWeek))
	if resp := e.handle(e.consumer(consumer.Options{Now: func() time.Time { return now }}), e.newRecords()); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures: %+v", resp.BatchItemFailures)
	}
	late := thisWeek.AddDate(0, 0, -21)
	e.putWorkout(sydneyRun(user, 2, late))
	batch := e.newRecords()
	p := newPaused()
	b := e.consumer(consumer.Options{Now: func() time.Time { return now.Add(time.Second) }, BeforeWrite: p.beforeWrite})
	finishB := e.start(b, p, batch) // B has read: no week item yet
	st := e.stores()
	spy := &startSpy{SeriesStore: st.Series, after: func() {
		if resp := finishB(); len(resp.BatchItemFailures) != 0 {
			t.Errorf("B failures: %+v", resp.BatchItemFailures)
		}
	}}
	st.Series = spy
	a := consumer.New(st, consumer.Options{Metrics: e.metrics, Now: func() time.Time { return now },
		BackoffBase: time.Millisecond, BackoffMax: 20 * time.Millisecond})
	if resp := e.handle(a, batch); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("A failures: %+v", resp.BatchItemFailures)
	}
	var week model.Milestone
	if err := e.s.DB.Get(e.ctx, e.s.DB.Tables().Main, keys.SeriesPeriodKey(user, "s5", date(late)), &week); err != nil || week.AwardedParts != 5 {
		t.Fatalf("the late week is %+v (%v), want its 5 parts", week.Projection, err)
	}
	audited, err := e.s.Milestones.AwardAudits(e.ctx, user, keys.AwardOwnerID("s5", date(late)), week.CreatedAtUtc)
	if err != nil || len(audited) != 5 {
		t.Fatalf("%d parts audited under the week's createdAtUtc %s (%v), want 5", len(audited), week.CreatedAtUtc, err)
	}
}
