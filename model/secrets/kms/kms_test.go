package kms_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awskms "github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/secrets"
	"github.com/commitcollect/backend/model/secrets/kms"
	"github.com/commitcollect/backend/model/secrets/secretstest"
)

const keyARN = "arn:aws:kms:ap-southeast-2:111122223333:key/0b0c0d0e-test"

// kmsEndpoint is a KMS client pointed at secretstest.KMS, the local
// KMS-compatible endpoint for keyARN (the real client signs, sends and
// parses; the endpoint refuses what the IAM policy would refuse).
func kmsEndpoint(t *testing.T) (*awskms.Client, *secretstest.KMS) {
	t.Helper()
	ep := secretstest.NewKMS(t, keyARN)
	return awskms.NewFromConfig(aws.Config{
		Region: "ap-southeast-2", Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	}, func(o *awskms.Options) { o.BaseEndpoint = aws.String(ep.URL) }), ep
}

// TestKMSProviderContract runs the provider contract through the real KMS
// client against the local endpoint.
func TestKMSProviderContract(t *testing.T) {
	client, ep := kmsEndpoint(t)
	secretstest.Contract(t, kms.New(client, keyARN))
	if ep.Requests("GenerateDataKey") == 0 || ep.Requests("Decrypt") == 0 {
		t.Fatalf("requests GenerateDataKey %d, Decrypt %d; want both to reach the endpoint", ep.Requests("GenerateDataKey"), ep.Requests("Decrypt"))
	}
}

func TestKMSProviderReportsKMSFailures(t *testing.T) {
	client, _ := kmsEndpoint(t)
	p := kms.New(client, "arn:aws:kms:ap-southeast-2:111122223333:key/unknown")
	_, err := p.GenerateDataKey(context.Background(), secrets.Context{UserID: "u", Purpose: model.PurposeStravaTokens})
	if err == nil || errors.Is(err, secrets.ErrUndecryptable) {
		t.Fatalf("generate under an unknown key: %v; want a KMS error that is not ErrUndecryptable", err)
	}
}
