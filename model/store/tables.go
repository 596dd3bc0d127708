package store

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model/store/capacity"
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

// IndexSpec describes a global secondary index. Projection is ALL when
// empty; INCLUDE projects the keys plus NonKeyAttributes, KEYS_ONLY the
// table's and the index's keys. A narrow projection makes each index write
// smaller (an ALL index writes every item twice, whole), so an index
// projects only what its readers decode.
//
// Migration: DynamoDB cannot change the projection of an existing GSI. A
// deployment whose index was created with another projection (GSI1 and
// Pending were ALL before index projections changed) must delete the index and create it
// again (two UpdateTable calls; Terraform plans exactly that when the
// projection changes, and CreateTables does it for a local table, see
// addMissingIndexes). While the new index backfills, queries of it fail
// (ResolveAthlete fails, and its job is retried, for an athlete without an
// OWNER item; the sweeper finds no due items until it is ACTIVE): do it in
// a quiet period.
type IndexSpec struct {
	Name             string
	HashKey          string
	RangeKey         string
	Projection       types.ProjectionType
	NonKeyAttributes []string
}

// ProjectionType is the index's projection (ALL when unset).
func (g IndexSpec) ProjectionType() types.ProjectionType {
	if g.Projection == "" {
		return types.ProjectionTypeAll
	}
	return g.Projection
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

// LocalIndexSpec describes a local secondary index: the table's hash key
// with another sort key, projecting the keys plus NonKeyAttributes
// (projection INCLUDE). An LSI can only be created with its table.
type LocalIndexSpec struct {
	Name             string
	RangeKey         string
	NonKeyAttributes []string
}

// TableSpec is the single source of truth for one table's shape: the local
// stack and tests create tables from it, and the Terraform checks compare
// terraform/ against it. All key attributes are strings.
type TableSpec struct {
	Name         string
	HashKey      string
	RangeKey     string // empty for a hash-only table
	GSIs         []IndexSpec
	LSIs         []LocalIndexSpec
	TTLAttribute string // empty when the table has no TTL
	StreamView   types.StreamViewType
	PITR         bool
}

// Specs returns the specs of the four tables named by t.
func Specs(t Tables) []TableSpec {
	return []TableSpec{
		{
			Name: t.Main, HashKey: "PK", RangeKey: "SK",
			GSIs: []IndexSpec{
				{Name: IndexGSI1, HashKey: "GSI1PK", RangeKey: "GSI1SK",
					Projection: types.ProjectionTypeInclude, NonKeyAttributes: AthleteIndexAttributes},
				{Name: IndexGSI2, HashKey: "GSI2PK", RangeKey: "GSI2SK"},
			},
			LSIs: []LocalIndexSpec{
				{Name: IndexLSI1, RangeKey: AttrLSI1SK, NonKeyAttributes: workoutLogNonKeyAttributes()},
			},
			TTLAttribute: "expiresAt",
			StreamView:   types.StreamViewTypeNewAndOldImages,
			PITR:         true,
		},
		{Name: t.Sessions, HashKey: "PK", RangeKey: "SK", TTLAttribute: "expiresAtUtc", PITR: true},
		{
			Name: t.Audit, HashKey: "PK", RangeKey: "SK",
			GSIs: []IndexSpec{
				{Name: IndexGSI1, HashKey: "GSI1PK", RangeKey: "GSI1SK"},
				{Name: IndexGSI2, HashKey: "GSI2PK", RangeKey: "GSI2SK"},
			},
			TTLAttribute: "expiresAt",
			PITR:         true,
		},
		{
			Name: t.Idempotency, HashKey: "IdempotencyKey",
			GSIs: []IndexSpec{{Name: IndexPending, HashKey: "PendingPK", RangeKey: "PendingSK",
				Projection: types.ProjectionTypeInclude, NonKeyAttributes: PendingIndexAttributes}},
			TTLAttribute: "expiresAt",
			PITR:         true,
		},
	}
}

// KeySchemas are the keys of specs' tables and indexes, as the write-key
// accounting needs them (capacity.NewWriteKeys).
func KeySchemas(specs []TableSpec) []capacity.KeySchema {
	out := make([]capacity.KeySchema, 0, len(specs))
	for _, s := range specs {
		k := capacity.KeySchema{Name: s.Name, HashKey: s.HashKey}
		for _, g := range s.GSIs {
			k.GSIs = append(k.GSIs, capacity.Index{Name: g.Name, Key: g.HashKey})
		}
		for _, l := range s.LSIs {
			k.LSIs = append(k.LSIs, capacity.Index{Name: l.Name, Key: l.RangeKey})
		}
		out = append(out, k)
	}
	return out
}
