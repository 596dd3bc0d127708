package consumer_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/calendar"
	"github.com/commitcollect/backend/model/ports"
	"github.com/commitcollect/backend/projections/consumer"
	"github.com/commitcollect/backend/test/fixture"
)

// TestAnEventReadsOnlyTheWeekItTouches: a four-week milestone keeps its
// week sums; a new run's event reads only the log of the run's week, and
// an edit only the week of the run edited. When that edit moves a part's
// crossing into a week taken from the sums, the part is minted only after
// the period is read whole, with its real tipping run. Protections: the
// touched weeks (Decision.Starts → Touched.Windows), the whole read before minting
// a part reached in the sums (reachedInSums).
func TestAnEventReadsOnlyTheWeekItTouches(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putModel("rocket", 10)
	const user = "u-weeks"
	// The wall clock's week and the two before it (DynamoDB Local expires
	// audit entries by the wall clock, and minted awards rest on theirs).
	k := calendar.WeekOf(time.Now())
	now := calendar.WeekStart(k).Add(36 * time.Hour)
	def := fixture.Definition(func(d *model.MilestoneDefinition) {
		end := calendar.WeekStart(k + 2)
		d.PeriodStartAtUtc, d.PeriodEndAtUtc = calendar.WeekStart(k-2), &end
	})
	e.putMilestone(user, "m1", def)
	run := func(id int64, at time.Time, km float64) *model.Workout {
		return fixture.Workout(user, id, fixture.Start(at), fixture.Km(km), fixture.Stored(now))
	}
	e.putWorkout(run(1, calendar.WeekStart(k-2).Add(24*time.Hour), 10))
	e.putWorkout(run(2, calendar.WeekStart(k-1).Add(24*time.Hour), 10))
	e.putWorkout(run(3, calendar.WeekStart(k-1).Add(48*time.Hour), 10))
	spy := e.seriesSpy()
	c := consumer.New(spy.stores, consumer.Options{Metrics: e.metrics, Now: func() time.Time { return now }})
	if resp := e.handle(c, e.newRecords()); len(resp.BatchItemFailures) != 0 { // the milestone's INSERT: all of it
		t.Fatalf("failures: %+v", resp.BatchItemFailures)
	}
	if m := e.milestone(user, "m1"); m.ProgressValue != 30000000 || m.Weeks == nil || len(m.Weeks.Sums) != 2 {
		t.Fatalf("after three runs: %+v, want 30 km and the sums of two weeks", m.Projection)
	}

	spy.reset()
	e.putWorkout(run(4, calendar.WeekStart(k).Add(time.Hour), 10))
	if resp := e.handle(c, e.newRecords()); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures: %+v", resp.BatchItemFailures)
	}
	if len(spy.windows) != 1 || len(spy.windows[0]) != 1 || !spy.windows[0][0].From.Equal(calendar.WeekStart(k)) {
		t.Fatalf("a new run read the log windows %v, want its week only (from %s)", spy.windows, calendar.WeekStart(k))
	}
	if m := e.milestone(user, "m1"); m.ProgressValue != 40000000 || m.AwardedParts != 4 {
		t.Fatalf("after the new run: %+v, want 40 km and 4 parts", m.Projection)
	}

	// Run 1 grows to 30 km: parts 4 and 5 are now reached by runs 3 and 4,
	// in weeks the event did not read.
	spy.reset()
	longer := run(1, calendar.WeekStart(k-2).Add(24*time.Hour), 30)
	longer.FetchStartedAtNs = time.Now().UnixNano()
	if err := e.s.Workouts.UpsertWorkout(e.ctx, longer); err != nil {
		t.Fatal(err)
	}
	if resp := e.handle(c, e.newRecords()); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures: %+v", resp.BatchItemFailures)
	}
	if len(spy.windows) != 2 || !spy.windows[0][0].From.Equal(calendar.WeekStart(k-2)) || spy.windows[0][0].To.After(calendar.WeekStart(k-1)) ||
		len(spy.windows[1]) != 1 || !spy.windows[1][0].From.Equal(calendar.WeekStart(k-2)) || !spy.windows[1][0].To.Equal(calendar.WeekStart(k+2)) {
		t.Fatalf("the edit read the log windows %v, want its week, then the whole period before minting", spy.windows)
	}
	tips := map[int]int64{}
	for _, a := range e.awards(user, "m1") {
		tips[a.PartIndex] = a.ActivityID
	}
	if m := e.milestone(user, "m1"); m.ProgressValue != 60000000 || m.AwardedParts != 6 || tips[4] != 3 || tips[5] != 4 {
		t.Fatalf("after the edit: %+v, tipping runs %v; want 60 km, 6 parts, part 4 by run 3 and part 5 by run 4", m.Projection, tips)
	}
	if e.handle(c, e.newRecords()); c.Stats().RecordsParked != 0 { // the projector's own writes
		t.Fatalf("%d records parked, want none", c.Stats().RecordsParked)
	}
}

// cutSpy is the real store whose first log read says the guardrail cut it.
type cutSpy struct {
	consumer.LogReader
	reads [][]model.Window
}

func (s *cutSpy) WorkoutLog(ctx context.Context, userID string, ws []model.Window) (ports.WorkoutLog, error) {
	s.reads = append(s.reads, ws)
	wl, err := s.LogReader.WorkoutLog(ctx, userID, ws)
	wl.Truncated = wl.Truncated || len(s.reads) == 1
	return wl, err
}

// TestWeeksCutByTheGuardrailAreReadWhole: a week's read that the
// guardrail cut cannot be counted whole, so the recompute reads the
// period whole instead of trusting a partial week. Protection: the
// truncated fallback in once.
func TestWeeksCutByTheGuardrailAreReadWhole(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putModel("rocket", 10)
	def := fixture.Definition()
	e.putMilestone("u1", "m1", def)
	c := e.consumer(consumer.Options{Now: func() time.Time { return at0 }})
	if resp := e.handle(c, e.newRecords()); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures: %+v", resp.BatchItemFailures)
	}
	if m := e.milestone("u1", "m1"); m.Weeks == nil {
		t.Fatalf("the milestone's insert kept no week sums: %+v", m.Projection)
	}
	// The projector's own write of sums without a week (an empty map, were
	// it stored, reads back from the stream as another value) is ignored,
	// not parked.
	if resp := e.handle(c, e.newRecords()); len(resp.BatchItemFailures) != 0 || c.Stats().RecordsParked != 0 {
		t.Fatalf("the projector's own write: failures %+v, %d parked", resp.BatchItemFailures, c.Stats().RecordsParked)
	}
	e.putWorkout(fixture.Workout("u1", 7, fixture.Day(20), fixture.Km(5)))
	st := e.stores()
	spy := &cutSpy{LogReader: st.Log}
	st.Log = spy
	c = consumer.New(st, consumer.Options{Metrics: e.metrics, Now: func() time.Time { return at0 }})
	if resp := e.handle(c, e.newRecords()); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures: %+v", resp.BatchItemFailures)
	}
	if len(spy.reads) != 2 || len(spy.reads[1]) != 1 || !spy.reads[1][0].From.Equal(def.PeriodStartAtUtc) {
		t.Fatalf("log reads %v; want the week, then the whole period", spy.reads)
	}
	if m := e.milestone("u1", "m1"); m.ProgressValue != 5000000 {
		t.Fatalf("after the run: %+v, want 5 km", m.Projection)
	}
}

// TestVerifyFindsWeekSumsThatDisagreeWithTheLog: week sums are a cache of
// the log, so verify (a dry-run recompute) reports stored sums that the log
// does not give, and a rebuild writes them again. Protection: the week sums
// line of projections.MilestoneReport.Diffs.
func TestVerifyFindsWeekSumsThatDisagreeWithTheLog(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putModel("rocket", 10)
	e.putMilestone("u1", "m1", fixture.Definition())
	e.putWorkout(fixture.Workout("u1", 1, fixture.Day(3), fixture.Km(5)))
	c := e.consumer(consumer.Options{Now: func() time.Time { return at0 }})
	if resp := e.handle(c, e.newRecords()); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures: %+v", resp.BatchItemFailures)
	}
	m := e.milestone("u1", "m1")
	if m.Weeks == nil || len(m.Weeks.Sums) != 1 {
		t.Fatalf("sums %+v, want one week's", m.Weeks)
	}
	for k, s := range m.Weeks.Sums {
		m.Weeks.Sums[k] = calendar.WeekSum{Units: s.Units + 1, Count: s.Count}
	}
	if err := e.s.DB.Put(e.ctx, e.s.DB.Tables().Main, &m); err != nil {
		t.Fatal(err)
	}
	drifted := func() []string {
		rep, err := c.RecomputeUser(e.ctx, "u1", true)
		if err != nil || len(rep.Milestones) != 1 {
			t.Fatalf("verify: %v, %+v", err, rep)
		}
		return rep.Milestones[0].Diffs()
	}
	if d := drifted(); len(d) != 1 || !strings.HasPrefix(d[0], "week sums:") {
		t.Fatalf("verify of sums off by one unit found %q, want the week sums", d)
	}
	if _, err := c.RecomputeUser(e.ctx, "u1", false); err != nil {
		t.Fatal(err)
	}
	if d := drifted(); len(d) != 0 {
		t.Fatalf("after a rebuild verify finds %q, want nothing", d)
	}
}
