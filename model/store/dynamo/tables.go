package dynamo

import (
	"github.com/commitcollect/backend/model/store/pending"
)

// Base table names (seed 000). An environment may prefix them.
const (
	BaseMain        = "CommitCollect"
	BaseSessions    = "CommitCollectSessions"
	BaseAudit       = "CommitCollectAudit"
	BaseIdempotency = "CommitCollectIdempotency"
)

// Index names.
const (
	// IndexGSI1 is the main table's athlete → user index (GSI1PK, GSI1SK) and
	// the audit table's correlation index.
	IndexGSI1 = "GSI1"
	// IndexGSI2 is the main table's sparse users index (only profiles carry
	// GSI2PK) and the audit table's event-month index.
	IndexGSI2 = "GSI2"
	// IndexLSI1 is the main table's local secondary index on LSI1SK, the
	// workouts' date-ordered key (keys.WorkoutDateSK). Only workouts carry
	// LSI1SK, so it holds nothing else. The projector reads its log from it
	// with a key condition on the milestones' periods, strongly consistent.
	IndexLSI1 = "LSI1"
	// AttrLSI1SK is LSI1's sort key attribute.
	AttrLSI1SK = "LSI1SK"
	// IndexPending is the idempotency table's sparse index of pending outbox
	// items (PendingPK = OUTBOX#PENDING#{shard}, PendingSK = due instant and
	// key): only items in status received carry its keys, so the sweeper
	// finds due work with a Query per shard, never a Scan (model/store/pending
	// reads it).
	IndexPending = pending.IndexName
)

// Tables holds the four table names of one environment.
type Tables struct {
	Main        string
	Sessions    string
	Audit       string
	Idempotency string
}

// TableNames returns the table names with an optional environment prefix
// (e.g. "dev-" → "dev-CommitCollect").
func TableNames(prefix string) Tables {
	return Tables{
		Main:        prefix + BaseMain,
		Sessions:    prefix + BaseSessions,
		Audit:       prefix + BaseAudit,
		Idempotency: prefix + BaseIdempotency,
	}
}

// AthleteIndexAttributes are what the main table's GSI1 projects beyond
// the keys: what ResolveAthlete decodes from a Strava connection found
// through it (the user, the athlete and the schema meta). The tokens and
// everything else a token refresh rewrites stay out of the index.
var AthleteIndexAttributes = []string{"entityType", "schemaVersion", "userId", "athleteId"}

// PendingIndexAttributes are what the idempotency table's Pending index
// projects beyond the keys (IdempotencyKey, PendingPK, PendingSK): what
// DueOutboxItems and PendingOutbox read (the correlation id for the log,
// the creation instant for the backlog's age). The job itself is read by
// the lease (LeaseOutboxItem returns the whole item), so the index entry
// stays one write unit however large the job is.
var PendingIndexAttributes = []string{"entityType", "schemaVersion", "correlationId", "createdAtUtc"}
