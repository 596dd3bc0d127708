package tableadmin_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/tableadmin"
	"github.com/commitcollect/backend/test/dynamolocal"
)

func TestMain(m *testing.M) { dynamolocal.Main(m) }

// TestAnOlderLogIndexIsRefused: a main table whose LSI1 projects fewer
// attributes than the log reads (made before Strava's marks were kept) is
// refused with the migration named, not used: its log reads would fetch
// every missing attribute from the table, item by item. Protection: the
// projection comparison in checkLocalIndexes.
func TestAnOlderLogIndexIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := dynamolocal.Clients(t)
	tables := dynamo.TableNames(dynamolocal.UniquePrefix())
	main := tableadmin.Specs(tables)[0]
	if main.Name != tables.Main || len(main.LSIs) != 1 {
		t.Fatalf("first spec %s with %d local indexes, want the main table with LSI1", main.Name, len(main.LSIs))
	}
	older := main
	older.LSIs = []tableadmin.LocalIndexSpec{main.LSIs[0]}
	older.LSIs[0].NonKeyAttributes = main.LSIs[0].NonKeyAttributes[:len(main.LSIs[0].NonKeyAttributes)-2]
	if _, err := db.CreateTable(ctx, tableadmin.CreateTableInput(older)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tableadmin.DeleteTables(context.Background(), db, tables) })
	err := tableadmin.CreateTables(ctx, db, tables)
	if !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), "projecting") || !strings.Contains(err.Error(), "migrate-lsi") {
		t.Fatalf("CreateTables over an older LSI1: %v, want ErrInvalid naming the projection and migrate-lsi", err)
	}
}

// TestCreateTablesFromKeepsWhatTheSpecsSay: CreateTables gives the main
// table its stream; CreateTablesFrom with the stream taken out of the
// specs (the tests' tables that never read it) gives none, and the rest of
// the table is the same: its indexes and TTL.
func TestCreateTablesFromKeepsWhatTheSpecsSay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := dynamolocal.Clients(t)
	streamed, plain := dynamo.TableNames(dynamolocal.UniquePrefix()), dynamo.TableNames(dynamolocal.UniquePrefix())
	specs := tableadmin.Specs(plain)
	for i := range specs {
		specs[i].StreamView = ""
	}
	t.Cleanup(func() {
		_ = tableadmin.DeleteTables(context.Background(), db, streamed)
		_ = tableadmin.DeleteTables(context.Background(), db, plain)
	})
	if err := tableadmin.CreateTables(ctx, db, streamed); err != nil {
		t.Fatal(err)
	}
	if err := tableadmin.CreateTablesFrom(ctx, db, specs); err != nil {
		t.Fatal(err)
	}
	if _, err := tableadmin.StreamARN(ctx, db, streamed); err != nil {
		t.Fatalf("CreateTables: %v, want the main table's stream", err)
	}
	if arn, err := tableadmin.StreamARN(ctx, db, plain); err == nil {
		t.Fatalf("CreateTablesFrom without a stream: stream %s, want none", arn)
	}
	for _, tb := range []dynamo.Tables{streamed, plain} {
		out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(tb.Main)})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Table.GlobalSecondaryIndexes) != 2 || len(out.Table.LocalSecondaryIndexes) != 1 {
			t.Errorf("%s: %d global and %d local indexes, want 2 and 1", tb.Main,
				len(out.Table.GlobalSecondaryIndexes), len(out.Table.LocalSecondaryIndexes))
		}
		ttl, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(tb.Main)})
		if err != nil {
			t.Fatal(err)
		}
		if ttl.TimeToLiveDescription.TimeToLiveStatus != types.TimeToLiveStatusEnabled {
			t.Errorf("%s: TTL %s, want ENABLED", tb.Main, ttl.TimeToLiveDescription.TimeToLiveStatus)
		}
	}
}
