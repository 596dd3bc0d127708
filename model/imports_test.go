package model

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// domainLeaves are the domain's own vocabulary packages the root may use:
// each is itself checked to import the standard library only.
var domainLeaves = map[string]string{
	"github.com/commitcollect/backend/model/sport":    "sport",
	"github.com/commitcollect/backend/model/keys":     "keys",
	"github.com/commitcollect/backend/model/calendar": "calendar",
	"github.com/commitcollect/backend/model/rules":    "rules",
	"github.com/commitcollect/backend/model/streak":   "streak",
}

// The domain package stays free of adapters: every non-test file imports
// the standard library only (no AWS SDK, no aws-lambda-go, nothing of ours
// but the domain's vocabulary leaves, which import the standard library
// only themselves).
func TestModelImportsOnlyTheStandardLibrary(t *testing.T) {
	t.Parallel()
	checkStdlibOnly(t, ".", true)
	for _, dir := range domainLeaves {
		checkStdlibOnly(t, dir, false)
	}
}

func checkStdlibOnly(t *testing.T, dir string, leavesAllowed bool) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			// Standard library paths have no dot in their first element.
			if _, leaf := domainLeaves[path]; leaf && leavesAllowed {
				continue
			}
			if first, _, _ := strings.Cut(path, "/"); strings.Contains(first, ".") {
				t.Errorf("%s imports %s: the domain package must use the standard library only; put adapters in a subpackage", f, path)
			}
		}
		checked++
	}
	if checked == 0 {
		t.Fatalf("no Go files found in %s", dir)
	}
}
