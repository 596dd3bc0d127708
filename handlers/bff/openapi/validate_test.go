package openapi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/commitcollect/backend/handlers/bff/openapi"
	"github.com/commitcollect/backend/model"
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

// TestMetricEnumIsTheModels: every schema property named metric lists
// exactly model.Metrics. Protection: the OpenAPI check of the one Metric.
func TestMetricEnumIsTheModels(t *testing.T) {
	t.Parallel()
	doc, _, err := openapi.Load()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, m := range model.Metrics {
		want = append(want, string(m))
	}
	found := 0
	for name, ref := range doc.Components.Schemas {
		p, ok := ref.Value.Properties["metric"]
		if !ok {
			continue
		}
		found++
		var got []string
		for _, e := range p.Value.Enum {
			got = append(got, fmt.Sprint(e))
		}
		if !slices.Equal(got, want) {
			t.Errorf("schema %s: metric enum %v, want model.Metrics %v", name, got, want)
		}
	}
	if found == 0 {
		t.Fatal("no schema has a metric property")
	}
}
