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
	if !slices.Contains(d.Env["api"], "CC_WORKER_FUNCTION") || slices.Contains(d.Env["projector"], "STRAVA_CLIENT_ID") {
		t.Fatalf("env = %v", d.Env)
	}
}
