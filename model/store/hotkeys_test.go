package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/store"
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
			Header:  http.Header{"Content-Type": {"application/x-amz-json-1.0"}, "X-Amzn-Requestid": {"throttled"}},
			Body:    io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: r}, nil
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
	s := store.New(db, dynamolocal.MustCreateTables(t, db))
	var metrics, logs bytes.Buffer
	s.AuditMetrics = &metrics
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	ctx := context.Background()
	now := time.Now().UTC()

	s.Audit(ctx, log, model.NewRoutineAuditEntry(model.UserPK("u1"), "u1", "STRAVA_SYNC_PAGE", "c1", "r1", now, nil))
	if got := s.AuditWritesDropped(); got != 0 {
		t.Fatalf("got %d dropped before any throttling, want 0", got)
	}
	tr.armed.Store(true)
	s.Audit(ctx, log, model.NewRoutineAuditEntry(model.UserPK("u1"), "u1", "STRAVA_SYNC_PAGE", "c2", "r2", now, nil))
	tr.armed.Store(false)
	if tr.throttled.Load() < 2 {
		t.Fatalf("transport throttled %d calls, want the write and its retry", tr.throttled.Load())
	}
	if got := s.AuditWritesDropped(); got != 1 {
		t.Fatalf("got %d dropped audit writes, want 1 (the throttled one)", got)
	}
	var line struct {
		AWS struct {
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name string }
			}
		} `json:"_aws"`
		TableName string
		Dropped   int `json:"AuditWritesDropped"`
	}
	if err := json.Unmarshal(metrics.Bytes(), &line); err != nil {
		t.Fatalf("EMF line %q: %v", metrics.String(), err)
	}
	cw := line.AWS.CloudWatchMetrics
	if len(cw) != 1 || cw[0].Namespace != store.AuditMetricsNamespace || len(cw[0].Metrics) != 1 ||
		cw[0].Metrics[0].Name != store.MetricAuditWritesDropped || line.Dropped != 1 || line.TableName != s.Tables().Audit {
		t.Fatalf("got EMF line %s, want %s %s=1 for table %s", metrics.String(), store.AuditMetricsNamespace,
			store.MetricAuditWritesDropped, s.Tables().Audit)
	}
	if !strings.Contains(logs.String(), `"level":"WARN","msg":"`+store.LogAuditDropped+`"`) {
		t.Fatalf("got logs %s, want a warn %q", logs.String(), store.LogAuditDropped)
	}
}
