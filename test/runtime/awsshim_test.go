package runtime

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/commitcollect/backend/handlers/config"
	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/handoff"
	"github.com/commitcollect/backend/model"
)

// The shim speaks the wire protocols the SDK clients use: SSM's JSON 1.1
// GetParameter (through the code that reads the secrets at cold start) and
// Lambda's REST Invoke (through the api's dispatcher).
func TestShimSpeaksTheSDKsProtocols(t *testing.T) {
	t.Parallel()
	shim := NewAWS(t, map[string]string{"arn:aws:ssm:ap-southeast-2:1:parameter/x": "s3cret"})
	cfg := aws.Config{Region: "ap-southeast-2", BaseEndpoint: aws.String(shim.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")}
	ctx := context.Background()

	read := config.SSMReader(ssm.NewFromConfig(cfg))
	if v, err := read(ctx, "arn:aws:ssm:ap-southeast-2:1:parameter/x"); err != nil || v != "s3cret" {
		t.Fatalf("GetParameter = %q, %v; want the value", v, err)
	}
	if _, err := read(ctx, "nope"); err == nil || !strings.Contains(err.Error(), "ParameterNotFound") {
		t.Fatalf("GetParameter of a missing parameter = %v, want ParameterNotFound", err)
	}

	// A function the shim does not know is refused as Lambda refuses it, and
	// the dispatcher reports it retryable (the webhook answers 503).
	d := handoff.NewLambdaDispatcher(awslambda.NewFromConfig(cfg), "no-such-worker")
	err := d.Dispatch(ctx, ingest.Job{CorrelationID: "c1"})
	if !errors.Is(err, model.ErrRetryable) || !strings.Contains(err.Error(), "ResourceNotFoundException") {
		t.Fatalf("Dispatch to an unknown function = %v, want ErrRetryable with ResourceNotFoundException", err)
	}
	if got := shim.Calls(); got["ssm:GetParameter"] != 2 || got["lambda:Invoke(unknown function)"] != 1 {
		t.Fatalf("calls = %v", got)
	}
}
