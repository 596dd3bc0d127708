package kms_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
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

// kmsEndpoint is a tiny KMS-compatible endpoint (JSON 1.1 protocol, the two
// operations the provider uses) whose keys come from a LocalKeyProvider. It
// is not a mock of the SDK: the real *kms.Client serializes, signs and sends
// the requests and parses the answers, and the endpoint refuses what the IAM
// policy would refuse (no encryption context, a key spec other than AES_256).
// requests counts calls per operation.
func kmsEndpoint(t *testing.T, requests map[string]int) *awskms.Client {
	t.Helper()
	key, err := secrets.ParseLocalKey(secrets.NewLocalKey())
	if err != nil {
		t.Fatal(err)
	}
	local, err := secrets.NewLocalKeyProvider(key)
	if err != nil {
		t.Fatal(err)
	}
	fail := func(w http.ResponseWriter, typ, msg string) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "message": msg})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			KeyId             string
			KeySpec           string
			CiphertextBlob    []byte
			EncryptionContext map[string]string
		}
		if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
			fail(w, "AccessDeniedException", "unsigned request")
			return
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			fail(w, "ValidationException", err.Error())
			return
		}
		op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "TrentService.")
		requests[op]++
		ec := model.SecretContext{UserID: in.EncryptionContext["userId"], Purpose: in.EncryptionContext["purpose"]}
		if len(in.EncryptionContext) != 2 || ec.UserID == "" || ec.Purpose == "" {
			fail(w, "AccessDeniedException", fmt.Sprintf("encryption context %v: the key policy requires userId and purpose", in.EncryptionContext))
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		switch op {
		case "GenerateDataKey":
			if in.KeyId != keyARN || in.KeySpec != "AES_256" {
				fail(w, "ValidationException", fmt.Sprintf("key %q spec %q", in.KeyId, in.KeySpec))
				return
			}
			dk, err := local.GenerateDataKey(r.Context(), ec)
			if err != nil {
				fail(w, "KMSInternalException", err.Error())
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"KeyId": keyARN, "Plaintext": dk.Plaintext, "CiphertextBlob": dk.Wrapped})
		case "Decrypt":
			if in.KeyId != keyARN {
				fail(w, "IncorrectKeyException", "wrapped by another key")
				return
			}
			pt, err := local.DecryptDataKey(r.Context(), local.KeyID(), in.CiphertextBlob, ec)
			if err != nil {
				fail(w, "InvalidCiphertextException", "")
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"KeyId": keyARN, "Plaintext": pt, "EncryptionAlgorithm": "SYMMETRIC_DEFAULT"})
		default:
			fail(w, "UnknownOperationException", op)
		}
	}))
	t.Cleanup(srv.Close)
	return awskms.NewFromConfig(aws.Config{
		Region: "ap-southeast-2", Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	}, func(o *awskms.Options) { o.BaseEndpoint = aws.String(srv.URL) })
}

// TestKMSProviderContract runs the provider contract through the real KMS
// client against the local endpoint.
func TestKMSProviderContract(t *testing.T) {
	requests := map[string]int{}
	secretstest.Contract(t, kms.New(kmsEndpoint(t, requests), keyARN))
	if requests["GenerateDataKey"] == 0 || requests["Decrypt"] == 0 {
		t.Fatalf("requests %v; want GenerateDataKey and Decrypt to reach the endpoint", requests)
	}
}

func TestKMSProviderReportsKMSFailures(t *testing.T) {
	p := kms.New(kmsEndpoint(t, map[string]int{}), "arn:aws:kms:ap-southeast-2:111122223333:key/unknown")
	_, err := p.GenerateDataKey(context.Background(), model.SecretContext{UserID: "u", Purpose: model.PurposeStravaTokens})
	if err == nil || errors.Is(err, secrets.ErrUndecryptable) {
		t.Fatalf("generate under an unknown key: %v; want a KMS error that is not ErrUndecryptable", err)
	}
}
