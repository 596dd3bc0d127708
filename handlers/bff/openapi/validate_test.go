package openapi_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/commitcollect/backend/handlers/bff/openapi"
)

// TestDocumentIsValidOpenAPI: kin-openapi loads and validates the document.
func TestDocumentIsValidOpenAPI(t *testing.T) {
	t.Parallel()
	doc, _, err := openapi.Load()
	if err != nil {
		t.Fatal(err)
	}
	if doc.Paths.Len() < 10 {
		t.Fatalf("%d paths: the document lost its routes", doc.Paths.Len())
	}
}

// TestCheckResponse: an answer the document describes passes; one whose
// body breaks the schema, or whose status or route is not documented,
// fails. Protection: CheckResponse's schema validation.
func TestCheckResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, path string
		status     int
		body       string
		ok         bool
	}{
		{"documented error", "/v1/me", http.StatusUnauthorized, `{"error":{"code":"unauthorized","message":"sign in"}}`, true},
		{"body off the schema", "/v1/me", http.StatusUnauthorized, `{"oops":true}`, false},
		{"undocumented status", "/v1/me", http.StatusTeapot, `{}`, false},
		{"undocumented route", "/v1/nowhere", http.StatusOK, `{}`, false},
	}
	for _, tt := range tests {
		req := httptest.NewRequest(http.MethodGet, "https://api.test"+tt.path, nil)
		h := http.Header{"Content-Type": []string{"application/json"}}
		if err := openapi.CheckResponse(req, tt.status, h, []byte(tt.body)); (err == nil) != tt.ok {
			t.Errorf("%s: %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}
