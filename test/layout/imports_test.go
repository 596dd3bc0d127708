package layout

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/commitcollect/backend/"

// adapter reports whether im is one of the DynamoDB adapter's packages:
// model/store and every package under it but model/store/metering, the
// metering vocabulary every service logs with.
func adapter(im string) bool {
	return im == module+"model/store" || (strings.HasPrefix(im, module+"model/store/") && im != module+"model/store/metering")
}

// storeImporters are the only folders whose product code may import the
// DynamoDB adapter (model/store and below): the wiring. Every other port
// under handlers/ and projections/ speaks model.
var storeImporters = []string{"handlers/app", "handlers/config", "handlers/api", "handlers/worker", "handlers/projector", "handlers/sweeper"}

// imports lists each non-test Go file under top with its folder and
// imports.
func imports(t *testing.T, root, top string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(filepath.Join(root, top), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			out[filepath.ToSlash(rel)] = append(out[filepath.ToSlash(rel)], path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPortsSpeakTheDomain: only the wiring imports model/store, and
// projections/ imports no AWS SDK (attribute conversion lives in
// model/records and the store), so a decision can be changed and tested
// without a database.
func TestPortsSpeakTheDomain(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	files := 0
	for _, top := range []string{"handlers", "projections"} {
		for file, ims := range imports(t, root, top) {
			files++
			dir := filepath.ToSlash(filepath.Dir(file))
			for _, im := range ims {
				if adapter(im) && !slices.Contains(storeImporters, dir) {
					t.Errorf("%s imports %s: only the wiring (%v) may; pass model types through a port", file, im, storeImporters)
				}
				if top == "projections" && strings.HasPrefix(im, "github.com/aws/aws-sdk-go-v2") {
					t.Errorf("%s imports %s: projections/ decides, model/records and the store convert", file, im)
				}
			}
		}
	}
	if files < 50 {
		t.Fatalf("read %d files: the walk did not find the product code", files)
	}
}

// TestProductCodePointsInward: no product file under handlers/, model/,
// projections/ or scripts/ imports test/ (the harnesses, the chaos, scale
// and bench suites): the tests stand on the product, never the reverse.
// The local stack's Strava simulator ships with it, in scripts/stravasim.
func TestProductCodePointsInward(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	files := 0
	for _, top := range []string{"handlers", "model", "projections", "scripts"} {
		for file, ims := range imports(t, root, top) {
			files++
			for _, im := range ims {
				if strings.HasPrefix(im, module+"test/") {
					t.Errorf("%s imports %s: product code must not stand on the tests", file, im)
				}
			}
		}
	}
	if files < 100 {
		t.Fatalf("read %d files: the walk did not find the product code", files)
	}
}

// TestNothingOfTheTestsShips: no command built from handlers/ or scripts/
// (the Lambdas, the local stack, the scripts) links the testing package, so
// nothing a test needs (fakes, the AWS-call recorder, the test helpers that
// start DynamoDB Local) is in what ships. It asks go list for each command's
// dependencies.
func TestNothingOfTheTestsShips(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: go list of every command")
	}
	root := filepath.Join("..", "..")
	list := exec.Command("go", "list", "-f", `{{if eq .Name "main"}}{{.ImportPath}}{{end}}`, "./handlers/...", "./scripts/...")
	list.Dir = root
	mains, err := list.Output()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range strings.Fields(string(mains)) {
		deps := exec.Command("go", "list", "-deps", m)
		deps.Dir = root
		out, err := deps.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", m, err)
		}
		n++
		if slices.Contains(strings.Fields(string(out)), "testing") {
			t.Errorf("%s links the testing package: something of the tests ships with it", m)
		}
	}
	t.Logf("%d commands checked", n)
	if n < 10 {
		t.Fatalf("found %d commands under handlers/ and scripts/, want the Lambdas and the scripts", n)
	}
}

// maxFileLines bounds a product file (non-test Go under handlers/, model/,
// projections/ and scripts/): past it, split by use case.
const maxFileLines = 500

// TestNoFileOverMaxLines: no product file over maxFileLines lines.
func TestNoFileOverMaxLines(t *testing.T) {
	root := filepath.Join("..", "..")
	largest, at := 0, ""
	for _, top := range []string{"handlers", "model", "projections", "scripts"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			n := strings.Count(string(b), "\n")
			if n > largest {
				largest, at = n, p
			}
			if n > maxFileLines {
				t.Errorf("%s: %d lines, over %d: split it by use case", p, n, maxFileLines)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("largest file (lines): %s %d", at, largest)
}

// TestProjectionsReachNoAdapter: nothing projections/ links, directly or
// through what it imports, is under model/store or model/streams: the
// projection decides from model types and ports, and reads its stream
// records through model/records. Fails, for one, when the consumer meters
// its batches with model/store/metering itself, or when the trigger reads
// record images through model/streams (which links model/store/dynamo).
func TestProjectionsReachNoAdapter(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: go list of the projections")
	}
	cmd := exec.Command("go", "list", "-deps", "./projections/...")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./projections/...: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, d := range deps {
		for _, room := range []string{"model/store", "model/streams"} {
			if d == module+room || strings.HasPrefix(d, module+room+"/") {
				t.Errorf("projections/ links %s: a projection reaches no adapter (pass it through a port)", d)
			}
		}
	}
	if !slices.Contains(deps, module+"projections/consumer") {
		t.Fatalf("go list found no projections/consumer among %d packages", len(deps))
	}
}

// TestNoFileNamedAfterASiblingFolder: a product file is never named after
// the folder beside it (handoff.go beside handoff/): the same noun names
// one thing, and a reader who opens either finds what the name says. It
// fails when, for one, handlers/ingest/dispatcher.go is named handoff.go
// again.
func TestNoFileNamedAfterASiblingFolder(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	files := 0
	for _, top := range []string{"handlers", "model", "projections", "scripts"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			files++
			if fi, err := os.Stat(strings.TrimSuffix(p, ".go")); err == nil && fi.IsDir() {
				rel, _ := filepath.Rel(root, p)
				t.Errorf("%s is named after the folder beside it: name the file for what it holds", filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 100 {
		t.Fatalf("read %d files: the walk did not find the product code", files)
	}
}
