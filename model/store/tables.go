package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/retry"
	"github.com/commitcollect/backend/model/store/capacity"
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
	// finds due work with a Query per shard, never a Scan.
	IndexPending = "Pending"
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

// projection renders the spec's projection for CreateTable/UpdateTable.
func (g IndexSpec) projection() *types.Projection {
	p := &types.Projection{ProjectionType: g.ProjectionType()}
	if p.ProjectionType == types.ProjectionTypeInclude {
		p.NonKeyAttributes = g.NonKeyAttributes
	}
	return p
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

// CreateTableInput renders the spec as an on-demand CreateTable request.
func (s TableSpec) CreateTableInput() *dynamodb.CreateTableInput {
	attrs := map[string]bool{}
	var defs []types.AttributeDefinition
	addAttr := func(name string) {
		if name != "" && !attrs[name] {
			attrs[name] = true
			defs = append(defs, types.AttributeDefinition{AttributeName: aws.String(name), AttributeType: types.ScalarAttributeTypeS})
		}
	}
	keySchema := func(hash, rng string) []types.KeySchemaElement {
		ks := []types.KeySchemaElement{{AttributeName: aws.String(hash), KeyType: types.KeyTypeHash}}
		if rng != "" {
			ks = append(ks, types.KeySchemaElement{AttributeName: aws.String(rng), KeyType: types.KeyTypeRange})
		}
		return ks
	}
	in := &dynamodb.CreateTableInput{
		TableName:   aws.String(s.Name),
		BillingMode: types.BillingModePayPerRequest,
		KeySchema:   keySchema(s.HashKey, s.RangeKey),
	}
	addAttr(s.HashKey)
	addAttr(s.RangeKey)
	for _, g := range s.GSIs {
		addAttr(g.HashKey)
		addAttr(g.RangeKey)
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{
			IndexName:  aws.String(g.Name),
			KeySchema:  keySchema(g.HashKey, g.RangeKey),
			Projection: g.projection(),
		})
	}
	for _, l := range s.LSIs {
		addAttr(l.RangeKey)
		in.LocalSecondaryIndexes = append(in.LocalSecondaryIndexes, types.LocalSecondaryIndex{
			IndexName: aws.String(l.Name),
			KeySchema: keySchema(s.HashKey, l.RangeKey),
			Projection: &types.Projection{
				ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: l.NonKeyAttributes,
			},
		})
	}
	in.AttributeDefinitions = defs
	if s.StreamView != "" {
		in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: s.StreamView}
	}
	return in
}

// CreateTables creates the four tables (skipping any that exist), waits for
// them to be active and enables TTL. PITR is left to Terraform: DynamoDB Local
// does not implement it.
func CreateTables(ctx context.Context, db *dynamodb.Client, t Tables) error {
	for _, s := range Specs(t) {
		_, err := db.CreateTable(ctx, s.CreateTableInput())
		var inUse *types.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) {
			return fmt.Errorf("create table %s: %w", s.Name, err)
		}
	}
	waiter := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 50*time.Millisecond, time.Second
	})
	for _, s := range Specs(t) {
		if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.Name)}, 2*time.Minute); err != nil {
			return fmt.Errorf("wait for table %s: %w", s.Name, err)
		}
		if err := checkLocalIndexes(ctx, db, s); err != nil {
			return err
		}
		if err := addMissingIndexes(ctx, db, s); err != nil {
			return err
		}
		if s.TTLAttribute == "" {
			continue
		}
		_, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
			TableName: aws.String(s.Name),
			TimeToLiveSpecification: &types.TimeToLiveSpecification{
				AttributeName: aws.String(s.TTLAttribute), Enabled: aws.Bool(true),
			},
		})
		// Enabling TTL twice is refused; that only means it is already on.
		if err != nil && !isAlreadyEnabled(err) {
			return fmt.Errorf("enable ttl on %s: %w", s.Name, err)
		}
	}
	return nil
}

// checkLocalIndexes fails when a table that already existed lacks one of
// the spec's LSIs: an LSI can only be created with its table, so such a
// table was created by an older version and must be migrated.
func checkLocalIndexes(ctx context.Context, db *dynamodb.Client, s TableSpec) error {
	if len(s.LSIs) == 0 {
		return nil
	}
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.Name)})
	if err != nil {
		return fmt.Errorf("describe table %s: %w", s.Name, err)
	}
	have := map[string]bool{}
	for _, l := range out.Table.LocalSecondaryIndexes {
		have[aws.ToString(l.IndexName)] = true
	}
	for _, l := range s.LSIs {
		if !have[l.Name] {
			return fmt.Errorf("table %s exists without local index %s (created by an older version; an LSI can only be created with its table): "+
				"migrate it with scripts/migrate-lsi, or start from empty tables: %w", s.Name, l.Name, model.ErrInvalid)
		}
	}
	return nil
}

// indexWaitLimit bounds how long CreateTables waits for an index it added
// to become ACTIVE, or for one it deleted to be gone (per table).
const indexWaitLimit = 5 * time.Minute

// addMissingIndexes creates the spec's GSIs a table made by older code lacks
// (a persisted local data directory), deletes and creates again those it
// has with another projection, and waits until they are active.
//
// The waits are bounded by indexWaitLimit (and ctx): an index DynamoDB never
// reports ACTIVE (or never removes) is an error naming it, not a start-up
// that hangs.
func addMissingIndexes(ctx context.Context, db *dynamodb.Client, s TableSpec) error {
	ctx, cancel := context.WithTimeout(ctx, indexWaitLimit)
	defer cancel()
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.Name)})
	if err != nil {
		return fmt.Errorf("describe table %s: %w", s.Name, err)
	}
	have := map[string]*types.Projection{}
	for _, g := range out.Table.GlobalSecondaryIndexes {
		have[aws.ToString(g.IndexName)] = g.Projection
	}
	in := s.CreateTableInput()
	added := false
	for _, g := range in.GlobalSecondaryIndexes {
		p, ok := have[aws.ToString(g.IndexName)]
		if ok && sameProjection(p, g.Projection) {
			continue
		}
		if ok {
			// Created with another projection (older code): an index's
			// projection cannot change, so it is deleted and created again.
			if err := dropIndex(ctx, db, s.Name, aws.ToString(g.IndexName)); err != nil {
				return err
			}
		}
		_, err := db.UpdateTable(ctx, &dynamodb.UpdateTableInput{
			TableName: aws.String(s.Name), AttributeDefinitions: in.AttributeDefinitions,
			GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{Create: &types.CreateGlobalSecondaryIndexAction{
				IndexName: g.IndexName, KeySchema: g.KeySchema, Projection: g.Projection,
			}}},
		})
		if err != nil {
			return fmt.Errorf("add index %s to table %s: %w", aws.ToString(g.IndexName), s.Name, err)
		}
		added = true
	}
	for added {
		out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.Name)})
		if err != nil {
			return fmt.Errorf("describe table %s: %w", s.Name, err)
		}
		var waiting []string
		for _, g := range out.Table.GlobalSecondaryIndexes {
			if g.IndexStatus != types.IndexStatusActive {
				waiting = append(waiting, fmt.Sprintf("%s %s", aws.ToString(g.IndexName), g.IndexStatus))
			}
		}
		if added = len(waiting) > 0; added {
			if err := retry.Sleep(ctx, 100*time.Millisecond); err != nil {
				return fmt.Errorf("wait for the indexes of %s to be ACTIVE (still %s): %w", s.Name, strings.Join(waiting, ", "), err)
			}
		}
	}
	return nil
}

// sameProjection compares two index projections (attribute order aside).
func sameProjection(a, b *types.Projection) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.ProjectionType == b.ProjectionType &&
		slices.Equal(slices.Sorted(slices.Values(a.NonKeyAttributes)), slices.Sorted(slices.Values(b.NonKeyAttributes)))
}

// dropIndex deletes a GSI of table and waits until it is gone.
func dropIndex(ctx context.Context, db *dynamodb.Client, table, index string) error {
	_, err := db.UpdateTable(ctx, &dynamodb.UpdateTableInput{
		TableName:                   aws.String(table),
		GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{Delete: &types.DeleteGlobalSecondaryIndexAction{IndexName: aws.String(index)}}},
	})
	if err != nil {
		return fmt.Errorf("delete index %s of table %s (to change its projection): %w", index, table, err)
	}
	for {
		out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		if err != nil {
			return fmt.Errorf("describe table %s: %w", table, err)
		}
		if !slices.ContainsFunc(out.Table.GlobalSecondaryIndexes, func(g types.GlobalSecondaryIndexDescription) bool {
			return aws.ToString(g.IndexName) == index
		}) {
			return nil
		}
		if err := retry.Sleep(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("wait for index %s of %s to be deleted: %w", index, table, err)
		}
	}
}

func isAlreadyEnabled(err error) bool {
	var ve interface{ ErrorCode() string }
	return errors.As(err, &ve) && ve.ErrorCode() == "ValidationException"
}

// DeleteTables deletes the four tables, ignoring ones that do not exist.
func DeleteTables(ctx context.Context, db *dynamodb.Client, t Tables) error {
	var errs []error
	for _, s := range Specs(t) {
		_, err := db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(s.Name)})
		var nf *types.ResourceNotFoundException
		if err != nil && !errors.As(err, &nf) {
			errs = append(errs, fmt.Errorf("delete table %s: %w", s.Name, err))
		}
	}
	return errors.Join(errs...)
}

// StreamARN returns the latest stream ARN of the main table.
func StreamARN(ctx context.Context, db *dynamodb.Client, t Tables) (string, error) {
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(t.Main)})
	if err != nil {
		return "", fmt.Errorf("describe table %s: %w", t.Main, err)
	}
	if out.Table.LatestStreamArn == nil {
		return "", fmt.Errorf("table %s has no stream", t.Main)
	}
	return *out.Table.LatestStreamArn, nil
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
