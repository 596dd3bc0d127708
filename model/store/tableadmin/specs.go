package tableadmin

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/metering"
)

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
func Specs(t dynamo.Tables) []TableSpec {
	return []TableSpec{
		{
			Name: t.Main, HashKey: "PK", RangeKey: "SK",
			GSIs: []IndexSpec{
				{Name: dynamo.IndexGSI1, HashKey: "GSI1PK", RangeKey: "GSI1SK",
					Projection: types.ProjectionTypeInclude, NonKeyAttributes: dynamo.AthleteIndexAttributes},
				{Name: dynamo.IndexGSI2, HashKey: "GSI2PK", RangeKey: "GSI2SK"},
			},
			LSIs: []LocalIndexSpec{
				{Name: dynamo.IndexLSI1, RangeKey: dynamo.AttrLSI1SK, NonKeyAttributes: store.WorkoutLogNonKeyAttributes()},
			},
			TTLAttribute: "expiresAt",
			StreamView:   types.StreamViewTypeNewAndOldImages,
			PITR:         true,
		},
		{Name: t.Sessions, HashKey: "PK", RangeKey: "SK", TTLAttribute: "expiresAtUtc", PITR: true},
		{
			Name: t.Audit, HashKey: "PK", RangeKey: "SK",
			GSIs: []IndexSpec{
				{Name: dynamo.IndexGSI1, HashKey: "GSI1PK", RangeKey: "GSI1SK"},
				{Name: dynamo.IndexGSI2, HashKey: "GSI2PK", RangeKey: "GSI2SK"},
			},
			TTLAttribute: "expiresAt",
			PITR:         true,
		},
		{
			Name: t.Idempotency, HashKey: "IdempotencyKey",
			GSIs: []IndexSpec{{Name: dynamo.IndexPending, HashKey: "PendingPK", RangeKey: "PendingSK",
				Projection: types.ProjectionTypeInclude, NonKeyAttributes: dynamo.PendingIndexAttributes}},
			TTLAttribute: "expiresAt",
			PITR:         true,
		},
	}
}

// KeySchemas are the keys of specs' tables and indexes, as the write-key
// accounting needs them (metering.NewWriteKeys).
func KeySchemas(specs []TableSpec) []metering.KeySchema {
	out := make([]metering.KeySchema, 0, len(specs))
	for _, s := range specs {
		k := metering.KeySchema{Name: s.Name, HashKey: s.HashKey}
		for _, g := range s.GSIs {
			k.GSIs = append(k.GSIs, metering.Index{Name: g.Name, Key: g.HashKey})
		}
		for _, l := range s.LSIs {
			k.LSIs = append(k.LSIs, metering.Index{Name: l.Name, Key: l.RangeKey})
		}
		out = append(out, k)
	}
	return out
}
