package consumer_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/commitcollect/backend/model/emf/emftest"

	"github.com/commitcollect/backend/test/capture"

	"github.com/aws/aws-lambda-go/events"

	"github.com/commitcollect/backend/model/store/metering"
	"github.com/commitcollect/backend/projections/consumer"
	"github.com/commitcollect/backend/test/fixture"
)

// Each batch is metered on its own: its EMF line carries the requests, read
// and write units of the batch's DynamoDB calls, the batch log line carries
// the same figures, and a meter the caller put in the context receives them
// too (the local stack and the bench sum batches that way).
func TestBatchCapacityIsEmitted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putModel("rocket", 10)
	e.putMilestone("u1", "m1", fixture.Definition(fixture.Parts(10)))
	e.putWorkout(fixture.Workout("u1", 101, fixture.Day(1), fixture.Km(60), fixture.Corr("corr-1")))

	var logs capture.Buffer
	c := e.consumer(consumer.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	ctx, outer := metering.StartMeter(e.ctx)
	resp, err := c.Handle(ctx, events.DynamoDBEvent{Records: e.newRecords()})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle: %v %+v", err, resp)
	}

	line, err := emftest.Parse([]byte(strings.TrimSpace(e.metrics.String())))
	if err != nil {
		t.Fatalf("one EMF line expected: %v", err)
	}
	var metric metering.Units
	requests, _ := line.Value(consumer.MetricDynamoDBRequests)
	metric.Requests = int(requests)
	metric.RCU, _ = line.Value(consumer.MetricConsumedReadUnits)
	metric.WCU, _ = line.Value(consumer.MetricConsumedWriteUnits)
	declared := map[string]bool{}
	for _, m := range line.Metrics {
		declared[m.Name] = true
	}
	for _, n := range []string{consumer.MetricDynamoDBRequests, consumer.MetricConsumedReadUnits, consumer.MetricConsumedWriteUnits} {
		if !declared[n] {
			t.Errorf("EMF line does not declare %s: %s", n, e.metrics.String())
		}
	}
	// The projection read the milestones and the log and wrote progress
	// (and awards): at least two requests, some reads, some writes.
	if metric.Requests < 2 || metric.RCU <= 0 || metric.WCU <= 0 {
		t.Errorf("EMF capacity: got requests %d rcu %v wcu %v, want all above zero", metric.Requests, metric.RCU, metric.WCU)
	}
	got := outer.Snapshot()
	if got.Requests != metric.Requests || got.RCU != metric.RCU || got.WCU != metric.WCU {
		t.Errorf("caller's meter: got %+v, want the batch's %d/%v/%v", got.Units, metric.Requests, metric.RCU, metric.WCU)
	}
	var logLine struct {
		Msg      string
		Requests int
		RCU      float64 `json:"rcu"`
		WCU      float64 `json:"wcu"`
	}
	found := false
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if json.Unmarshal([]byte(l), &logLine) == nil && logLine.Msg == "batch processed" {
			found = true
			if logLine.Requests != metric.Requests || logLine.RCU != metric.RCU || logLine.WCU != metric.WCU {
				t.Errorf("batch log line: got %d/%v/%v, want the EMF figures %d/%v/%v", logLine.Requests, logLine.RCU, logLine.WCU, metric.Requests, metric.RCU, metric.WCU)
			}
		}
	}
	if !found {
		t.Errorf("no batch log line: %s", logs.String())
	}
}
