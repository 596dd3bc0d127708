package lambdabuild_test

import (
	"archive/zip"
	"bytes"
	"debug/elf"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/commitcollect/backend/scripts/lambdabuild"
)

// machines are the ELF machines of the architectures Lambda runs.
var machines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// TestBuildAllForZipsAStaticBootstrapPerLambda builds every Lambda under
// handlers/ for this machine, as the runtime-emulator test does, and reads
// each zip as provided.al2023 would: one entry, an executable `bootstrap`,
// a statically linked linux ELF of the architecture asked for. In make test
// it runs in the race step, so the runtime-emulator test, which runs later
// beside the chaos suite, builds the same binaries from the Go cache.
// Protections: the zip's single executable entry, the static linux build.
func TestBuildAllForZipsAStaticBootstrapPerLambda(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds every Lambda")
	}
	t.Parallel()
	if !slices.Contains(lambdabuild.Arches, runtime.GOARCH) {
		t.Skipf("Lambda runs %v, this machine is %s", lambdabuild.Arches, runtime.GOARCH)
	}
	handlers := filepath.Join("..", "..", "handlers")
	want, err := lambdabuild.Handlers(handlers)
	if err != nil || len(want) == 0 {
		t.Fatalf("handlers: %v, %v", want, err)
	}
	zips, err := lambdabuild.BuildAllFor(handlers, t.TempDir(), runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	if len(zips) != len(want) {
		t.Fatalf("zips %v, want one per handler %v", zips, want)
	}
	for i, z := range zips {
		if name := strings.TrimSuffix(filepath.Base(z), ".zip"); name != want[i] {
			t.Errorf("zip %d is %s, want %s.zip", i, z, want[i])
		}
		checkBootstrap(t, z, machines[runtime.GOARCH])
	}
}

// checkBootstrap fails t unless the zip at path holds only an executable
// `bootstrap` that is a static linux ELF for machine.
func checkBootstrap(t *testing.T, path string, machine elf.Machine) {
	t.Helper()
	r, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if len(r.File) != 1 || r.File[0].Name != "bootstrap" {
		t.Fatalf("%s: entries %v, want only bootstrap", path, r.File)
	}
	if mode := r.File[0].Mode(); mode&0o111 == 0 {
		t.Errorf("%s: bootstrap mode %v, want executable", path, mode)
	}
	rc, err := r.File[0].Open()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("%s: bootstrap is not an ELF binary: %v", path, err)
	}
	defer f.Close()
	if f.Machine != machine || f.Type != elf.ET_EXEC {
		t.Errorf("%s: bootstrap is %v %v, want an %v executable", path, f.Machine, f.Type, machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s: bootstrap is dynamically linked (%v): provided.al2023 wants a static binary", path, p.Type)
		}
	}
}

// TestBuildForRefusesAnArchitectureLambdaDoesNotRun: a typo in -goarch is
// an error before anything is built.
func TestBuildForRefusesAnArchitectureLambdaDoesNotRun(t *testing.T) {
	t.Parallel()
	_, err := lambdabuild.BuildFor(filepath.Join("..", "..", "handlers", "api"), t.TempDir(), "386")
	if err == nil || !strings.Contains(err.Error(), "Lambda runs") {
		t.Fatalf("build for 386: %v, want a refusal naming the architectures Lambda runs", err)
	}
}
