package tableadmin_test

import (
	"context"
	"errors"
	"strings"
	"testing"

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
