package consumer_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/test/capture"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/projections/consumer"
	"github.com/commitcollect/backend/test/fixture"
)

// A period holding more workouts than the guardrail: the milestone says so
// (truncated, exactFromUtc), the batch's metrics count it, a warning names
// it; a milestone whose period lies after the cut stays exact.
func TestTruncationIsVisible(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putModel("rocket", 10)
	n := model.MaxWorkoutsToInspect + 1
	es := make([]model.Entity, n)
	for i := range es {
		w := fixture.Workout("u1", int64(n-i), fixture.Day(0), fixture.Km(1), fixture.Corr(fmt.Sprintf("c%d", i)))
		w.StartDateUtc = march.Add(time.Duration(i) * 10 * time.Minute)
		es[i] = w
	}
	if err := e.s.DB.BatchPut(e.ctx, e.s.DB.Tables().Main, es); err != nil {
		t.Fatal(err)
	}
	e.putMilestone("u1", "march", fixture.Definition(fixture.Parts(10)))
	late := fixture.Definition(fixture.Parts(10))
	late.PeriodStartAtUtc = march.AddDate(0, 0, 15)
	e.putMilestone("u1", "late", late)

	var logs capture.Buffer
	c := e.consumer(consumer.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if resp := e.handle(c, e.newRecords()); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures: %+v", resp)
	}
	exactFrom := march.Add(10 * time.Minute) // the oldest workout is left out
	m := e.milestone("u1", "march")
	if !m.Truncated || m.ExactFromUtc == nil || !m.ExactFromUtc.Equal(exactFrom) || m.WorkoutsCounted != model.MaxWorkoutsToInspect {
		t.Fatalf("march: %+v, want truncated at %d workouts, exact from %v", m.Projection, model.MaxWorkoutsToInspect, exactFrom)
	}
	if l := e.milestone("u1", "late"); l.Truncated || l.ExactFromUtc != nil {
		t.Fatalf("late: %+v, want exact (its period starts after the cut)", l.Projection)
	}
	if got := e.metrics.String(); !strings.Contains(got, `"`+consumer.MetricMilestonesTruncated+`":1`) ||
		!strings.Contains(got, `{"Name":"`+consumer.MetricMilestonesTruncated+`","Unit":"Count"}`) {
		t.Errorf("metrics do not count the truncated milestone: %s", got)
	}
	var warned bool
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, "truncated by the guardrail") &&
			strings.Contains(line, `"milestoneId":"march"`) && strings.Contains(line, exactFrom.Format(time.RFC3339Nano)) {
			warned = true
		}
	}
	if !warned || bytes.Contains([]byte(logs.String()), []byte(`"milestoneId":"late","msg":"milestone truncated`)) {
		t.Errorf("want one warning naming milestone march and its exactFromUtc:\n%s", logs.String())
	}
	as, _, err := dynamo.QueryEntities[model.AuditEntry](e.ctx, e.s.DB, e.s.DB.Tables().Audit, keys.UserPK("u1"), keys.PrefixAudit, dynamo.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := countEvents(as, consumer.EventProjectionTruncated); got != 1 {
		t.Errorf("%d %s audit entries, want 1", got, consumer.EventProjectionTruncated)
	}
}
