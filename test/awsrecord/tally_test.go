package awsrecord

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
)

// TestTallyCountsEveryAttempt: a tallied config counts each call by
// service, operation and table (without the test run's prefix), and each
// retried attempt of a call again (what the endpoint served), with the time
// it waited. Protections: the middleware's place after the retry loop
// (Finalize), the service and table in the name.
func TestTallyCountsEveryAttempt(t *testing.T) {
	t.Parallel()
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if served.Add(1) == 1 { // the first attempt fails: the retryer tries again
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"try again"}`))
			return
		}
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	var tally Tally
	cfg := aws.Config{Region: "ap-southeast-2", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("k", "s", ""),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) { o.Backoff = noBackoff{} })
		}}
	tally.Count(&cfg)
	ctx := context.Background()
	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	for range 2 {
		if _, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("t0a1b2c3-Main"),
			Key: map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "k"}}}); err != nil {
			t.Fatalf("get item: %v", err)
		}
	}
	if _, err := dynamodbstreams.NewFromConfig(cfg).DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String("arn")}); err != nil {
		t.Fatalf("describe stream: %v", err)
	}
	want := map[string]int{"DynamoDB GetItem Main": 3, "DynamoDB Streams DescribeStream": 1}
	got := tally.Snapshot()
	counts := map[string]int{}
	for name, c := range got {
		counts[name] = c.N
	}
	if !maps.Equal(counts, want) || served.Load() != 4 {
		t.Errorf("tally %v after %d requests served, want %v after 4", counts, served.Load(), want)
	}
	if got["DynamoDB GetItem Main"].Wait <= 0 || got["DynamoDB Streams DescribeStream"].Wait <= 0 {
		t.Errorf("waits %v: want a positive wait for each call", got)
	}
}

// noBackoff retries at once.
type noBackoff struct{}

func (noBackoff) BackoffDelay(int, error) (time.Duration, error) { return 0, nil }
