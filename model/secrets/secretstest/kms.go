package secretstest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/commitcollect/backend/model/secrets"
)

// KMS is a tiny KMS-compatible endpoint (JSON 1.1 protocol, the two
// operations model/secrets/kms uses) for one key, whose data keys come from a
// LocalKeyProvider. It is not a mock of the SDK: the real KMS client
// serializes, signs and sends the requests and parses the answers (point it
// here with BaseEndpoint or AWS_ENDPOINT_URL_KMS), and the endpoint refuses
// what the IAM policy would refuse (unsigned requests, an encryption context
// other than {userId, purpose}, a key spec other than AES_256).
type KMS struct {
	// URL is the endpoint's base URL; KeyARN the only key it knows.
	URL, KeyARN string

	mu       sync.Mutex
	requests map[string]int
}

// NewKMS starts the endpoint for keyARN; it stops when t ends.
func NewKMS(t testing.TB, keyARN string) *KMS {
	t.Helper()
	key, err := secrets.ParseLocalKey(secrets.NewLocalKey())
	if err != nil {
		t.Fatal(err)
	}
	local, err := secrets.NewLocalKeyProvider(key)
	if err != nil {
		t.Fatal(err)
	}
	k := &KMS{KeyARN: keyARN, requests: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.serve(w, r, local)
	}))
	t.Cleanup(srv.Close)
	k.URL = srv.URL
	return k
}

// Requests returns how many requests of operation op (GenerateDataKey,
// Decrypt) reached the endpoint, refused ones included.
func (k *KMS) Requests(op string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.requests[op]
}

func (k *KMS) serve(w http.ResponseWriter, r *http.Request, local *secrets.LocalKeyProvider) {
	fail := func(typ, msg string) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "message": msg})
	}
	var in struct {
		KeyId             string
		KeySpec           string
		CiphertextBlob    []byte
		EncryptionContext map[string]string
	}
	if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
		fail("AccessDeniedException", "unsigned request")
		return
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		fail("ValidationException", err.Error())
		return
	}
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "TrentService.")
	k.mu.Lock()
	k.requests[op]++
	k.mu.Unlock()
	ec := secrets.Context{UserID: in.EncryptionContext["userId"], Purpose: in.EncryptionContext["purpose"]}
	if len(in.EncryptionContext) != 2 || ec.UserID == "" || ec.Purpose == "" {
		fail("AccessDeniedException", fmt.Sprintf("encryption context %v: the key policy requires userId and purpose", in.EncryptionContext))
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	switch op {
	case "GenerateDataKey":
		if in.KeyId != k.KeyARN || in.KeySpec != "AES_256" {
			fail("ValidationException", fmt.Sprintf("key %q spec %q", in.KeyId, in.KeySpec))
			return
		}
		dk, err := local.GenerateDataKey(r.Context(), ec)
		if err != nil {
			fail("KMSInternalException", err.Error())
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"KeyId": k.KeyARN, "Plaintext": dk.Plaintext, "CiphertextBlob": dk.Wrapped})
	case "Decrypt":
		if in.KeyId != k.KeyARN {
			fail("IncorrectKeyException", "wrapped by another key")
			return
		}
		pt, err := local.DecryptDataKey(r.Context(), local.KeyID(), in.CiphertextBlob, ec)
		if err != nil {
			fail("InvalidCiphertextException", "")
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"KeyId": k.KeyARN, "Plaintext": pt, "EncryptionAlgorithm": "SYMMETRIC_DEFAULT"})
	default:
		fail("UnknownOperationException", op)
	}
}
