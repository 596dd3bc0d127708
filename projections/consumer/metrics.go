package consumer

import (
	"log/slog"
	"time"

	"github.com/commitcollect/backend/model/emf"
)

// MetricsNamespace is the CloudWatch namespace of the consumer's metrics.
//
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
const MetricsNamespace = "CommitCollect/Projector"

// MetricMilestonesTruncated counts, per batch, the projected milestones whose
// period holds more workouts than the guardrail (model.MaxWorkoutsToInspect)
// let the projector read; Terraform alarms when it is above zero.
const MetricMilestonesTruncated = "MilestonesTruncated"

// Capacity metrics, per batch: what the batch's DynamoDB calls cost, summed
// by the store's meter (Options.Meter). Terraform's dashboard shows them.
const (
	MetricDynamoDBRequests   = "DynamoDBRequests"
	MetricConsumedReadUnits  = "ConsumedReadUnits"
	MetricConsumedWriteUnits = "ConsumedWriteUnits"
)

// Cost is what a batch's DynamoDB calls cost, as the store's meter counts
// them (Options.Meter).
type Cost struct {
	Requests int
	RCU, WCU float64
	// Log is the count as the batch's log line shows it (by operation).
	Log slog.Attr
}

type batchMetrics struct {
	// capacity is what the batch's DynamoDB calls cost.
	capacity                                                Cost
	seen, ignored, parked, failed, users, conflicts, minted int
	// truncated counts projected milestones whose period holds more
	// workouts than the guardrail let the projector read.
	truncated        int
	maxLag, duration time.Duration
}

// emit writes one CloudWatch Embedded Metric Format line for a batch.
// Failing to write metrics never fails the batch.
func (c *Consumer) emit(m batchMetrics) {
	count := func(name string, v int) emf.Value { return emf.Value{Name: name, Unit: "Count", Value: float64(v)} }
	_ = emf.Write(c.o.Metrics, MetricsNamespace, c.o.Now(), "Service", "projector", []emf.Value{
		count("RecordsSeen", m.seen), count("RecordsIgnored", m.ignored), count("RecordsParked", m.parked),
		count("RecordsFailed", m.failed), count("UsersProjected", m.users), count("ConflictsRetried", m.conflicts),
		count("AwardsMinted", m.minted), count(MetricMilestonesTruncated, m.truncated),
		{Name: "ProjectionLag", Unit: "Milliseconds", Value: float64(m.maxLag.Milliseconds())},
		{Name: "BatchDuration", Unit: "Milliseconds", Value: float64(m.duration.Milliseconds())},
		{Name: MetricDynamoDBRequests, Unit: "Count", Value: float64(m.capacity.Requests)},
		{Name: MetricConsumedReadUnits, Unit: "Count", Value: m.capacity.RCU},
		{Name: MetricConsumedWriteUnits, Unit: "Count", Value: m.capacity.WCU},
	})
}
