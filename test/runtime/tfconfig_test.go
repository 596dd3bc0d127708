package runtime

import (
	"path/filepath"
	"slices"
	"testing"
)

func TestLoadDeployment(t *testing.T) {
	t.Parallel()
	d, err := LoadDeployment(filepath.Join("..", "..", "terraform"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("env: %v", d.Env)
	t.Logf("filters: %v", d.Filters)
	t.Logf("routes: %v", d.Routes)
	t.Logf("settings: %v, log level %q, worker retries %d", d.Settings, d.LogLevel, d.WorkerRetries)
	if d.Settings["projector"].TimeoutS == 0 || d.Settings["api"].MemoryMB == 0 || d.LogLevel == "" {
		t.Fatalf("settings = %+v, log level %q", d.Settings, d.LogLevel)
	}
	if !slices.Contains(d.Env["api"], "CC_WORKER_FUNCTION") || slices.Contains(d.Env["projector"], "STRAVA_CLIENT_ID") {
		t.Fatalf("env = %v", d.Env)
	}
}

func TestRoute(t *testing.T) {
	t.Parallel()
	routes := []string{"GET /", "GET /v1/milestones", "GET /v1/milestones/{milestoneId}", "DELETE /v1/me"}
	tests := []struct{ method, path, want string }{
		{"GET", "/", "GET /"},
		{"GET", "/v1/milestones", "GET /v1/milestones"},
		{"GET", "/v1/milestones/m-1", "GET /v1/milestones/{milestoneId}"},
		{"GET", "/v1/milestones/", ""},
		{"POST", "/v1/milestones", ""},
		{"DELETE", "/v1/me", "DELETE /v1/me"},
		{"GET", "/v1/milestones/m-1/x", ""},
		{"OPTIONS", "/v1/me", ""},
	}
	for _, tt := range tests {
		if got := route(routes, tt.method, tt.path); got != tt.want {
			t.Errorf("route(%s %s) = %q, want %q", tt.method, tt.path, got, tt.want)
		}
	}
}
