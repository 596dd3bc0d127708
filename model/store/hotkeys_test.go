package store_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/commitcollect/backend/model/emf/emftest"
	"github.com/commitcollect/backend/model/store/dynamo"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/tableadmin"
	"github.com/commitcollect/backend/test/dynamolocal"
)

// throttleTarget is an HTTP transport in front of DynamoDB Local that
// answers ProvisionedThroughputExceededException, like a hot partition, to
// every call of one operation (X-Amz-Target suffix) while armed.
type throttleTarget struct {
	op        string
	armed     atomic.Bool
	throttled atomic.Int64
}

func (tt *throttleTarget) RoundTrip(r *http.Request) (*http.Response, error) {
	if tt.armed.Load() && strings.HasSuffix(r.Header.Get("X-Amz-Target"), "."+tt.op) {
		tt.throttled.Add(1)
		body := `{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",` +
			`"message":"The level of configured provisioned throughput for the table was exceeded."}`
		return &http.Response{StatusCode: http.StatusBadRequest, Status: "400 Bad Request", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}, "X-Amzn-Requestid": {"throttled"}},
			Body:   io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: r}, nil
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestThrottledAuditWriteIsCounted: Store.Audit never fails the caller, but
// an entry throttled past the SDK's retries is counted, logged at warn with
// a stable message and written as an EMF AuditWritesDropped line for the
// alarm. Protection: the accounting in Store.Audit.
func TestThrottledAuditWriteIsCounted(t *testing.T) {
	t.Parallel()
	tr := &throttleTarget{op: "PutItem"}
	db := dynamodb.NewFromConfig(dynamolocal.Config(dynamolocal.Endpoint(t)), func(o *dynamodb.Options) {
		o.HTTPClient = &http.Client{Transport: tr}
		o.RetryMaxAttempts = 2 // the standard retryer retries throttling; keep the test short
	})
	s := store.New(db, dynamolocal.MustCreateUnstreamedTables(t, db))
	var metrics, logs bytes.Buffer
	s.DB.AuditMetrics = &metrics
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	ctx := context.Background()
	now := time.Now().UTC()

	s.Audits.Audit(ctx, log, model.NewRoutineAuditEntry(keys.UserPK("u1"), "u1", "STRAVA_SYNC_PAGE", "c1", "r1", now, nil))
	if got := s.Audits.AuditWritesDropped(); got != 0 {
		t.Fatalf("got %d dropped before any throttling, want 0", got)
	}
	tr.armed.Store(true)
	s.Audits.Audit(ctx, log, model.NewRoutineAuditEntry(keys.UserPK("u1"), "u1", "STRAVA_SYNC_PAGE", "c2", "r2", now, nil))
	tr.armed.Store(false)
	if tr.throttled.Load() < 2 {
		t.Fatalf("transport throttled %d calls, want the write and its retry", tr.throttled.Load())
	}
	if got := s.Audits.AuditWritesDropped(); got != 1 {
		t.Fatalf("got %d dropped audit writes, want 1 (the throttled one)", got)
	}
	line, err := emftest.Parse(metrics.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	dropped, _ := line.Value(store.MetricAuditWritesDropped)
	if _, declared := line.Declares(store.MetricAuditWritesDropped); line.Namespace != store.AuditMetricsNamespace || len(line.Metrics) != 1 ||
		!declared || dropped != 1 || line.Dimension("TableName") != s.DB.Tables().Audit {
		t.Fatalf("got EMF line %s, want %s %s=1 for table %s", metrics.String(), store.AuditMetricsNamespace,
			store.MetricAuditWritesDropped, s.DB.Tables().Audit)
	}
	if !strings.Contains(logs.String(), `"level":"WARN","msg":"`+store.LogAuditDropped+`"`) {
		t.Fatalf("got logs %s, want a warn %q", logs.String(), store.LogAuditDropped)
	}
}

// TestAthleteIndexProjectsOnlyTheLookup: GSI1 on the main table is not ALL;
// its entry of a connection holds no tokens (a token write does not write
// the index entry again in full), and ResolveAthlete still resolves through
// it. Protection: GSI1's INCLUDE projection (store.AthleteIndexAttributes).
func TestAthleteIndexProjectsOnlyTheLookup(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	for _, spec := range tableadmin.Specs(s.DB.Tables()) {
		for _, g := range spec.GSIs {
			if spec.Name == s.DB.Tables().Main && g.Name == dynamo.IndexGSI1 && g.ProjectionType() == "ALL" {
				t.Fatalf("main table %s projects ALL, want only what the lookup reads", g.Name)
			}
		}
	}
	seedConnection(t, s, "u1", 4242, 1)
	if err := s.DB.Delete(ctx, s.DB.Tables().Main, keys.AthleteOwnerKey(4242)); err != nil {
		t.Fatal(err)
	}
	got, err := s.Users.ResolveAthlete(ctx, 4242)
	if err != nil || got != "u1" {
		t.Fatalf("ResolveAthlete through GSI1: got %q, %v; want u1", got, err)
	}
	res, err := s.DB.QueryPrefix(ctx, s.DB.Tables().Main, keys.AthletePK(4242), "", dynamo.QueryOptions{Index: dynamo.IndexGSI1})
	if err != nil || len(res.Items) != 1 {
		t.Fatalf("GSI1 query: got %d items, %v; want the connection", len(res.Items), err)
	}
	for attr := range res.Items[0] {
		if strings.Contains(strings.ToLower(attr), "token") {
			t.Fatalf("GSI1 entry carries %s: the index copies the token write", attr)
		}
	}
}

// TestParkedRecordsSpreadOverShards: parked records spread over the
// source's shards; Parked, Unpark and DeleteUserParked find them all,
// including records parked before the shards (the unsharded PARKED#WORKER
// partition). Protections: keys.ParkedKey's shard and the readers' walk
// over keys.ParkedPartitions.
func TestParkedRecordsSpreadOverShards(t *testing.T) {
	t.Parallel()
	s := dynamolocal.NewStore(t)
	ctx := context.Background()
	const n = 40
	for i := range n {
		user := []string{"u1", "u2"}[i%2]
		if err := s.Parked.Park(ctx, &ops.ParkedRecord{Source: keys.ParkSourceWorker, RecordID: fmt.Sprintf("job-%d", i),
			Reason: "poison", UserID: user}); err != nil {
			t.Fatal(err)
		}
	}
	// Two records parked by older code, under the unsharded partition.
	var legacy []dynamo.Item
	for _, r := range []*ops.ParkedRecord{
		{Source: keys.ParkSourceWorker, RecordID: "old-1", Reason: "poison", UserID: "u1", ParkedAtUtc: time.Now().UTC()},
		{Source: keys.ParkSourceWorker, RecordID: "old-2", Reason: "poison", UserID: "u2", ParkedAtUtc: time.Now().UTC()},
	} {
		it, err := dynamo.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		k := keys.LegacyParkedKey(r.Source, r.RecordID)
		it["PK"], it["SK"] = &types.AttributeValueMemberS{Value: k.PK}, &types.AttributeValueMemberS{Value: k.SK}
		legacy = append(legacy, it)
	}
	if err := s.DB.BatchPutItems(ctx, s.DB.Tables().Main, legacy); err != nil {
		t.Fatal(err)
	}

	recs, err := s.Parked.Parked(ctx, keys.ParkSourceWorker)
	if err != nil {
		t.Fatal(err)
	}
	partitions := map[string]int{}
	for _, r := range recs {
		partitions[r.PK]++
	}
	if len(recs) != n+2 || partitions[keys.ParkedPK(keys.ParkSourceWorker)] != 2 {
		t.Fatalf("Parked listed %d records (%v), want %d with the 2 legacy ones", len(recs), partitions, n+2)
	}
	if len(partitions) < 5 {
		t.Fatalf("%d parked records in %d partitions %v, want them spread over the %d shards", n, len(partitions), partitions, keys.ParkedShards)
	}
	for pk, c := range partitions {
		if c > n/2 {
			t.Fatalf("partition %s holds %d of %d parked records", pk, c, n)
		}
	}
	// Redrive removes a legacy record by source and id.
	if err := s.Parked.Unpark(ctx, keys.ParkSourceWorker, "old-2"); err != nil {
		t.Fatal(err)
	}
	// The worker removes a done job's record from its shard alone: it
	// writes nothing to the legacy partition (old-1 stays, and is counted
	// by the account deletion below).
	if err := s.Parked.RemoveParked(ctx, keys.ParkSourceWorker, "job-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Parked.RemoveParked(ctx, keys.ParkSourceWorker, "old-1"); err != nil {
		t.Fatal(err)
	}
	// The account deletion finds u1's in every shard and the legacy one.
	got, err := s.Parked.DeleteUserParked(ctx, "u1", 0)
	if err != nil || got != n/2+1 {
		t.Fatalf("DeleteUserParked(u1): got %d, %v; want %d", got, err, n/2+1)
	}
	recs, err = s.Parked.Parked(ctx, keys.ParkSourceWorker)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != n/2-1 {
		t.Fatalf("after unparking 2 and deleting u1's: %d records left, want %d", len(recs), n/2-1)
	}
	for _, r := range recs {
		if r.UserID != "u2" || r.RecordID == "old-2" || r.RecordID == "job-1" {
			t.Fatalf("left over: %+v", r)
		}
	}
}

// TestCreateTablesReplacesAnIndexWithAnOldProjection: a local table whose
// Pending index was created ALL (older code) gets it deleted and created
// again with the spec's projection. Protection: addMissingIndexes'
// projection comparison.
func TestCreateTablesReplacesAnIndexWithAnOldProjection(t *testing.T) {
	t.Parallel()
	db := dynamolocal.Private(t) // an index built on a table that exists: see Private
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tables := dynamo.TableNames(dynamolocal.UniquePrefix())
	t.Cleanup(func() { _ = tableadmin.DeleteTables(context.Background(), db, tables) })
	for _, spec := range tableadmin.Specs(tables) {
		if spec.Name != tables.Idempotency {
			continue
		}
		in := tableadmin.CreateTableInput(spec)
		in.GlobalSecondaryIndexes[0].Projection = &types.Projection{ProjectionType: types.ProjectionTypeAll}
		if _, err := db.CreateTable(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	if err := tableadmin.CreateTables(ctx, db, tables); err != nil {
		t.Fatal(err)
	}
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &tables.Idempotency})
	if err != nil {
		t.Fatal(err)
	}
	if g := out.Table.GlobalSecondaryIndexes; len(g) != 1 || g[0].Projection.ProjectionType != types.ProjectionTypeInclude ||
		len(g[0].Projection.NonKeyAttributes) != len(dynamo.PendingIndexAttributes) {
		t.Fatalf("got index %+v, want Pending recreated INCLUDE %v", g, dynamo.PendingIndexAttributes)
	}
}
