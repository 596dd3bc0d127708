// Package lambdabuild builds the Lambda zips: one static linux `bootstrap`
// (built with -tags lambda.norpc, as provided.al2023 runs it) per
// handlers/<name> package, zipped as <out>/<name>.zip. The architecture is
// arm64, what Terraform deploys, unless a caller asks for another one (the
// runtime-emulator tests build for the machine they run on). Used by `make
// build`, scripts/deploy and test/runtime.
package lambdabuild

import (
	"archive/zip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Handlers lists the Lambda packages under dir (folders holding main.go).
func Handlers(dir string) ([]string, error) {
	mains, err := filepath.Glob(filepath.Join(dir, "*", "main.go"))
	if err != nil {
		return nil, fmt.Errorf("list handlers in %s: %w", dir, err)
	}
	names := make([]string, 0, len(mains))
	for _, m := range mains {
		names = append(names, filepath.Base(filepath.Dir(m)))
	}
	sort.Strings(names)
	return names, nil
}

// DeployArch is the architecture Terraform deploys (modules/function
// architectures = ["arm64"]).
const DeployArch = "arm64"

// Arches are the GOARCH values Lambda runs (x86_64 and arm64).
var Arches = []string{"amd64", "arm64"}

// BuildAll builds every handler in dir for DeployArch and returns the zip
// paths.
func BuildAll(dir, out string) ([]string, error) { return BuildAllFor(dir, out, DeployArch) }

// BuildAllFor builds every handler in dir for goarch ("amd64" or "arm64")
// and returns the zip paths.
func BuildAllFor(dir, out, goarch string) ([]string, error) {
	names, err := Handlers(dir)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no handlers found under %s", dir)
	}
	var zips []string
	for _, n := range names {
		z, err := BuildFor(filepath.Join(dir, n), out, goarch)
		if err != nil {
			return nil, err
		}
		zips = append(zips, z)
	}
	return zips, nil
}

// Build compiles one handler package for DeployArch and zips its bootstrap.
func Build(pkgDir, out string) (string, error) { return BuildFor(pkgDir, out, DeployArch) }

// BuildFor compiles one handler package for linux/goarch and zips its
// bootstrap as <out>/<name>.zip. It refuses an architecture Lambda does not
// run.
func BuildFor(pkgDir, out, goarch string) (string, error) {
	name := filepath.Base(pkgDir)
	if !slices.Contains(Arches, goarch) {
		return "", fmt.Errorf("build %s: GOARCH %q: Lambda runs %v", name, goarch, Arches)
	}
	binDir := filepath.Join(out, name)
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", fmt.Errorf("build %s: %w", name, err)
	}
	bin := filepath.Join(binDir, "bootstrap")
	cmd := exec.Command("go", "build", "-trimpath", "-tags", "lambda.norpc", "-ldflags", "-s -w", "-o", bin, "./"+filepath.ToSlash(pkgDir))
	cmd.Env = append(WithoutRace(os.Environ()), "GOOS=linux", "GOARCH="+goarch, "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build %s: go build: %w", name, err)
	}
	zipPath := filepath.Join(out, name+".zip")
	if err := zipFile(bin, zipPath); err != nil {
		return "", fmt.Errorf("build %s: %w", name, err)
	}
	return zipPath, nil
}

// WithoutRace is env with -race left out of its GOFLAGS, for a build the
// race detector cannot or need not instrument: a bootstrap is static
// (CGO_ENABLED=0), and a tool (the Terraform checks' schema provider) has
// nothing of ours to race. make test sets GOFLAGS=-race for every other
// build of the run.
func WithoutRace(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GOFLAGS="); ok {
			flags := slices.DeleteFunc(strings.Fields(v), func(f string) bool { return f == "-race" || f == "-race=true" })
			kv = "GOFLAGS=" + strings.Join(flags, " ")
		}
		out = append(out, kv)
	}
	return out
}

// zipFile writes a zip holding src as an executable "bootstrap".
func zipFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("zip: %w", err)
	}
	defer in.Close()
	f, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("zip: %w", err)
	}
	zw := zip.NewWriter(f)
	h := &zip.FileHeader{Name: "bootstrap", Method: zip.Deflate}
	h.SetMode(0o755)
	w, err := zw.CreateHeader(h)
	if err == nil {
		_, err = io.Copy(w, in)
	}
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("zip %s: %w", dst, err)
	}
	return nil
}
