package bff_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/commitcollect/backend/handlers/bff"
	"github.com/commitcollect/backend/handlers/bff/openapi"
	"github.com/commitcollect/backend/model/sport"
)

func TestOpenAPIListsEveryRoute(t *testing.T) {
	t.Parallel()
	spec, err := openapi.SpecRoutes()
	if err != nil {
		t.Fatal(err)
	}
	owners := map[string][]string{}
	for _, r := range spec {
		owners[r.Owner] = append(owners[r.Owner], r.Pattern)
	}
	// Routes other packages mount on the same mux are documented here too.
	for _, want := range []string{"GET /webhooks/strava", "POST /webhooks/strava"} {
		if !slices.Contains(owners["ingestion"], want) {
			t.Errorf("openapi.yaml does not document %s (ingestion)", want)
		}
	}
	if !slices.Contains(owners["page"], "GET /{$}") {
		t.Errorf("openapi.yaml does not document GET / (page): %v", owners["page"])
	}

	e := newEnv(t, envOpts{})
	if err := openapi.CheckRoutes(e.mux, bff.Routes(), "bff"); err != nil {
		t.Fatalf("openapi.yaml and the BFF routes drifted:\n%v", err)
	}
}

func TestCheckRoutesCatchesDrift(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	tests := []struct {
		name       string
		registered []string
		mux        *http.ServeMux
		want       string
	}{
		{"a served route missing from the document", append(bff.Routes(), "GET /v1/secret"), e.mux, `"GET /v1/secret" is served but not in openapi.yaml`},
		{"a documented route not registered", bff.Routes()[1:], e.mux, `documents "GET /auth/strava/login" but it is not registered`},
		{"a listed route missing from the mux", bff.Routes(), http.NewServeMux(), `resolves to "" on the mux`},
	}
	for _, tt := range tests {
		err := openapi.CheckRoutes(tt.mux, tt.registered, "bff")
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error containing %s", tt.name, err, tt.want)
		}
	}
}

// The OpenAPI document's SportType enum is exactly what the API accepts:
// Strava's sport types and the documented groups.
func TestOpenAPISportTypesMatchTheAPI(t *testing.T) {
	t.Parallel()
	got, err := openapi.SchemaEnum("SportType")
	if err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(sport.Types), sport.GroupNames()...)
	if !slices.Equal(got, want) {
		t.Fatalf("openapi SportType enum = %v\nwant %v", got, want)
	}
}
