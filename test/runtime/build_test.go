package runtime

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/commitcollect/backend/scripts/lambdabuild"
	"github.com/commitcollect/backend/test/dynamolocal"
)

// buildLikeMake runs what `make build` runs, scripts/build, for this
// machine's architecture, and returns the zips it wrote into dist. It runs in
// a process of its own, built without the race detector: zipping four
// bootstraps inside this race-built test binary took 30 s, against 6 s.
func buildLikeMake(t *testing.T, dist string) []string {
	t.Helper()
	root, err := dynamolocal.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "run", "./scripts/build", "-out", dist, "-goarch", goruntime.GOARCH)
	cmd.Dir = root
	for _, kv := range lambdabuild.WithoutRace(os.Environ()) {
		if !strings.HasPrefix(kv, "GOOS=") && !strings.HasPrefix(kv, "GOARCH=") { // as make build's env -u GOARCH
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("go run ./scripts/build: %v\n%s", err, out.Bytes())
	}
	zips, err := filepath.Glob(filepath.Join(dist, "*.zip"))
	if err != nil {
		t.Fatal(err)
	}
	return zips
}
