// Package tableadmin creates, upgrades and deletes the four tables as
// Specs (specs.go) describe them (the local stack, tests, migrations; in AWS,
// Terraform does this), and finds the main table's stream.
package tableadmin

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
	"github.com/commitcollect/backend/model/store/dynamo"
)

// CreateTables creates the four tables (skipping any that exist), waits for
// them to be active and enables TTL. PITR is left to Terraform: DynamoDB Local
// does not implement it.
func CreateTables(ctx context.Context, db *dynamodb.Client, t dynamo.Tables) error {
	return CreateTablesFrom(ctx, db, Specs(t))
}

// CreateTablesFrom is CreateTables for specs derived from Specs, such as
// tests' tables without the main table's stream.
func CreateTablesFrom(ctx context.Context, db *dynamodb.Client, specs []TableSpec) error {
	for _, s := range specs {
		_, err := db.CreateTable(ctx, CreateTableInput(s))
		var inUse *types.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) {
			return fmt.Errorf("create table %s: %w", s.Name, err)
		}
	}
	waiter := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 50*time.Millisecond, time.Second
	})
	for _, s := range specs {
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
// the spec's LSIs, or projects other attributes into it (a log read would
// fetch the missing ones from the table, item by item): an LSI can only be
// created with its table, so such a table was created by an older version
// and must be migrated.
func checkLocalIndexes(ctx context.Context, db *dynamodb.Client, s TableSpec) error {
	if len(s.LSIs) == 0 {
		return nil
	}
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.Name)})
	if err != nil {
		return fmt.Errorf("describe table %s: %w", s.Name, err)
	}
	have := map[string][]string{}
	for _, l := range out.Table.LocalSecondaryIndexes {
		have[aws.ToString(l.IndexName)] = []string{}
		if l.Projection != nil {
			have[aws.ToString(l.IndexName)] = slices.Sorted(slices.Values(l.Projection.NonKeyAttributes))
		}
	}
	for _, l := range s.LSIs {
		attrs, ok := have[l.Name]
		why := "without local index " + l.Name
		if ok && !slices.Equal(attrs, slices.Sorted(slices.Values(l.NonKeyAttributes))) {
			ok, why = false, fmt.Sprintf("with local index %s projecting %v, not %v", l.Name, attrs, l.NonKeyAttributes)
		}
		if !ok {
			return fmt.Errorf("table %s exists %s (created by an older version; an LSI can only be created with its table): "+
				"migrate it with scripts/migrate-lsi, or start from empty tables: %w", s.Name, why, model.ErrInvalid)
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
	in := CreateTableInput(s)
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
func DeleteTables(ctx context.Context, db *dynamodb.Client, t dynamo.Tables) error {
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
func StreamARN(ctx context.Context, db *dynamodb.Client, t dynamo.Tables) (string, error) {
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(t.Main)})
	if err != nil {
		return "", fmt.Errorf("describe table %s: %w", t.Main, err)
	}
	if out.Table.LatestStreamArn == nil {
		return "", fmt.Errorf("table %s has no stream", t.Main)
	}
	return *out.Table.LatestStreamArn, nil
}

// CreateTableInput renders the spec as an on-demand CreateTable request.
func CreateTableInput(s TableSpec) *dynamodb.CreateTableInput {
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
			Projection: projection(g),
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

// projection renders the spec's projection for CreateTable/UpdateTable.
func projection(g IndexSpec) *types.Projection {
	p := &types.Projection{ProjectionType: g.ProjectionType()}
	if p.ProjectionType == types.ProjectionTypeInclude {
		p.NonKeyAttributes = g.NonKeyAttributes
	}
	return p
}
