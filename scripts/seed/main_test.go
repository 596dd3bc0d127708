package main

import (
	"context"
	"strings"
	"testing"

	"github.com/commitcollect/backend/model/catalog"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/test/dynamolocal"
)

func TestMain(m *testing.M) { dynamolocal.Main(m) }

func TestSeedCommandIsIdempotent(t *testing.T) {
	db, _ := dynamolocal.Clients(t)
	tables := dynamolocal.MustCreateTables(t, db)
	prefix := strings.TrimSuffix(tables.Main, dynamo.BaseMain)
	env := map[string]string{"DYNAMODB_ENDPOINT": dynamolocal.Endpoint(t)}
	// Credentials for DynamoDB Local, so the default chain never probes IMDS.
	t.Setenv("AWS_ACCESS_KEY_ID", "local")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "local")
	getenv := func(k string) string { return env[k] }
	ctx := context.Background()

	cat, _ := catalog.Default()
	want := 0
	for _, m := range cat.Models {
		want += 1 + m.PartCount
	}
	n, err := run(ctx, []string{"-table-prefix", prefix}, getenv)
	if err != nil || n != want {
		t.Fatalf("first run changed %d (%v), want %d", n, err, want)
	}
	if n, err := run(ctx, []string{"-table-prefix", prefix}, getenv); err != nil || n != 0 {
		t.Fatalf("second run changed %d (%v), want 0", n, err)
	}
	meta, err := store.New(db, tables).Milestones.ModelMeta(ctx, "endeavour")
	if err != nil || meta.PartCount != 12 {
		t.Fatalf("endeavour = %+v, %v", meta, err)
	}
	if _, err := run(ctx, []string{"-catalog", "/does/not/exist"}, getenv); err == nil {
		t.Fatal("missing catalog file: no error")
	}
}
