package consumer

// # Metrics
//
// One CloudWatch Embedded Metric Format line per batch (namespace
// CommitCollect/Projector): RecordsSeen, RecordsIgnored, RecordsParked,
// RecordsFailed, UsersProjected, ConflictsRetried, AwardsMinted,
// ProjectionLag (age of the oldest record in the batch, ms), BatchDuration
// and MilestonesTruncated (alarmed when above 0).
//
// # Benchmarks
//
// Handle/users=1/records=100: one batch of 100 workout INSERT records read
// from the real stream, all for one new user (one recompute, the milestone
// completed, 10 awards minted in one transaction, audit entries).
// Handle/users=10/records=100: the same batch size over 10 new users (10
// recomputes, 4 at a time, one award each). RecomputeUser3000: re-projecting
// one user at the guardrail (two strongly consistent queries, the
// projection, a version-checked write; one workout changes before each op so
// every op writes). records/s and users/s are what one projector instance
// sustains when batches arrive back to back; workouts/s is the log
// throughput of a guardrail recompute.

import (
	"encoding/json"
	"time"

	"github.com/commitcollect/backend/model/store/capacity"
)

// MetricsNamespace is the CloudWatch namespace of the consumer's metrics.
const MetricsNamespace = "CommitCollect/Projector"

// MetricMilestonesTruncated counts, per batch, the projected milestones whose
// period holds more workouts than the guardrail (model.MaxWorkoutsToInspect)
// let the projector read; Terraform alarms when it is above zero.
const MetricMilestonesTruncated = "MilestonesTruncated"

// Capacity metrics, per batch: what the batch's DynamoDB calls cost, summed
// by the store's meter (capacity.StartMeter). Terraform's dashboard shows them.
const (
	MetricDynamoDBRequests   = "DynamoDBRequests"
	MetricConsumedReadUnits  = "ConsumedReadUnits"
	MetricConsumedWriteUnits = "ConsumedWriteUnits"
)

type batchMetrics struct {
	// capacity is what the batch's DynamoDB calls cost.
	capacity                                                capacity.Snapshot
	seen, ignored, parked, failed, users, conflicts, minted int
	// truncated counts projected milestones whose period holds more
	// workouts than the guardrail let the projector read.
	truncated        int
	maxLag, duration time.Duration
}

type emfMetric struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

// emit writes one CloudWatch Embedded Metric Format line for a batch.
// Failing to write metrics never fails the batch.
func (c *Consumer) emit(m batchMetrics) {
	counts := []string{"RecordsSeen", "RecordsIgnored", "RecordsParked", "RecordsFailed", "UsersProjected", "ConflictsRetried", "AwardsMinted", MetricMilestonesTruncated}
	defs := make([]emfMetric, 0, len(counts)+2)
	for _, n := range counts {
		defs = append(defs, emfMetric{n, "Count"})
	}
	defs = append(defs, emfMetric{"ProjectionLag", "Milliseconds"}, emfMetric{"BatchDuration", "Milliseconds"},
		emfMetric{MetricDynamoDBRequests, "Count"}, emfMetric{MetricConsumedReadUnits, "Count"}, emfMetric{MetricConsumedWriteUnits, "Count"})
	line := map[string]any{
		"_aws": map[string]any{
			"Timestamp": c.o.Now().UnixMilli(),
			"CloudWatchMetrics": []map[string]any{{
				"Namespace":  MetricsNamespace,
				"Dimensions": [][]string{{"Service"}},
				"Metrics":    defs,
			}},
		},
		"Service":                 "projector",
		"RecordsSeen":             m.seen,
		"RecordsIgnored":          m.ignored,
		"RecordsParked":           m.parked,
		"RecordsFailed":           m.failed,
		"UsersProjected":          m.users,
		"ConflictsRetried":        m.conflicts,
		"AwardsMinted":            m.minted,
		MetricMilestonesTruncated: m.truncated,
		"ProjectionLag":           m.maxLag.Milliseconds(),
		"BatchDuration":           m.duration.Milliseconds(),
		MetricDynamoDBRequests:    m.capacity.Requests,
		MetricConsumedReadUnits:   m.capacity.RCU,
		MetricConsumedWriteUnits:  m.capacity.WCU,
	}
	b, err := json.Marshal(line)
	if err != nil {
		return
	}
	_, _ = c.o.Metrics.Write(append(b, '\n'))
}
