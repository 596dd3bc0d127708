package consumer_test

import (
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/calendar"
	"github.com/commitcollect/backend/model/streak"
	"github.com/commitcollect/backend/projections/consumer"
	"github.com/commitcollect/backend/test/fixture"
)

// TestAStreakEventReadsOnlyItsDay: a day streak begun 400 days ago keeps
// its active days; a late upload's event reads only the log of its own
// local day (that day's span in every zone), heals the streak and writes
// the days; a new milestone's INSERT reads the whole period. Protection:
// the touched days (Touched.Windows for a streak that uses its days);
// without them every event reads the whole period.
func TestAStreakEventReadsOnlyItsDay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putModel("rocket", 10)
	const user = "u-streak"
	today, _ := calendar.ParseDate(time.Now().UTC().Format(time.DateOnly))
	now := today.Add(12 * time.Hour)
	first := today.AddDate(0, 0, -400)
	def := fixture.Definition(fixture.LocalDays(calendar.FormatDate(first), ""), func(d *model.MilestoneDefinition) {
		d.Metric, d.Target, d.Streak = model.MetricStreak, 1000, &streak.Rule{Unit: streak.Day}
	})
	e.putMilestone(user, "s1", def)
	run := func(id int64, day time.Time) *model.Workout {
		w := fixture.Workout(user, id, fixture.Start(day.Add(7*time.Hour)), fixture.Stored(now))
		w.StartDateLocal = day.Add(7 * time.Hour).Format("2006-01-02T15:04:05")
		return w
	}
	for i := 1; i <= 10; i++ { // the ten days before today but the fifth
		if i != 5 {
			e.putWorkout(run(int64(i), today.AddDate(0, 0, -i)))
		}
	}
	spy := e.seriesSpy()
	c := consumer.New(spy.stores, consumer.Options{Metrics: e.metrics, Now: func() time.Time { return now }})
	if resp := e.handle(c, e.newRecords()); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures: %+v", resp.BatchItemFailures)
	}
	if m := e.milestone(user, "s1"); m.ProgressValue != 5 || m.Days == nil || m.WorkoutsCounted != 9 {
		t.Fatalf("after nine days: %+v, want the longest run 5 of 9 active days, and the days kept", m.Projection)
	}
	spy.reset()
	missed := today.AddDate(0, 0, -5)
	e.putWorkout(run(5, missed))
	if resp := e.handle(c, e.newRecords()); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures: %+v", resp.BatchItemFailures)
	}
	want := calendar.SpanOfDays(missed, &missed)
	if len(spy.windows) != 1 || len(spy.windows[0]) != 1 || !spy.windows[0][0].From.Equal(want.From) || !spy.windows[0][0].To.Equal(*want.To) {
		t.Fatalf("a late upload read the log windows %v, want its day's span only (%v)", spy.windows, want)
	}
	if m := e.milestone(user, "s1"); m.ProgressValue != 10 || m.WorkoutsCounted != 10 {
		t.Fatalf("after the late upload: %+v, want the ten days healed into one run", m.Projection)
	}
}
