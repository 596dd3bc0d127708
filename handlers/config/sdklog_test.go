package config_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/commitcollect/backend/test/capture"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/logging"

	"github.com/commitcollect/backend/handlers/config"
)

// TestSDKLogsAreJSON: the AWS config every process builds logs the SDK's own
// lines (a warning, and the retry lines of a real DynamoDB call that got a
// 500) as JSON through slog, and a client of a local endpoint logs no
// response-checksum warnings.
func TestSDKLogsAreJSON(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"try again"}`))
			return
		}
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "local")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "local")
	out := &capture.Buffer{}
	c := config.Config{DynamoDBEndpoint: srv.URL, LogOutput: out, LogLevel: slog.LevelDebug}
	ctx := context.Background()
	cfg, err := c.AWS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger.Logf(logging.Warn, "Response has no supported checksum. Not validating response payload.")
	cfg.ClientLogMode = aws.LogRetries
	db, _ := c.DynamoDB(cfg)
	if _, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("t"),
		Key: map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "k"}}}); err != nil {
		t.Fatalf("get item after one 500: %v", err)
	}
	lines := out.Lines()
	// A DynamoDB-compatible endpoint (DynamoDB Local, this fake) sends no
	// x-amz-crc32 the SDK could match: with the check on, every body closed
	// logged "failed to close HTTP response body … did not match expected
	// checksum" (thousands per scale run). The client for such an endpoint
	// does not validate it.
	if strings.Contains(strings.Join(lines, "\n"), "did not match expected checksum") {
		t.Errorf("the local endpoint's client validated DynamoDB's response checksum: %q", lines)
	}
	if len(lines) < 2 {
		t.Fatalf("SDK log lines %q; want the warning and at least one retry line", lines)
	}
	for i, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %d is not JSON: %q", i, l)
		}
		if m["source"] != "aws-sdk" {
			t.Errorf("line %d: source %v, want aws-sdk: %q", i, m["source"], l)
		}
	}
	var warn map[string]any
	_ = json.Unmarshal([]byte(lines[0]), &warn)
	if warn["level"] != "WARN" || !strings.Contains(warn["msg"].(string), "checksum") {
		t.Errorf("warning line %q; want level WARN and the SDK's message", lines[0])
	}
}
