package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestHelpDocumentsEveryFlag(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if got := run([]string{"--help"}, strings.NewReader(""), &out, &out); got != 0 {
		t.Fatalf("got exit %d, want 0", got)
	}
	for _, flag := range []string{"-env", "-backend-config", "-var-file", "-var ", "-plan-out", "-allow-destroy", "-yes",
		"-plan-only", "-skip-build", "-dist", "-handlers", "-terraform", "Exit status"} {
		if !strings.Contains(out.String(), flag) {
			t.Errorf("--help does not document %q:\n%s", flag, out.String())
		}
	}
}

func TestMissingZipsStopBeforeTerraform(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	got := run([]string{"--skip-build", "--dist", t.TempDir(), "--terraform", "/nonexistent/terraform"}, strings.NewReader(""), &stdout, &stderr)
	if got != 1 || !strings.Contains(stderr.String(), "missing Lambda zips") {
		t.Fatalf("got exit %d, stderr %q; want 1 and the missing zips named", got, stderr.String())
	}
}

func TestUnknownFlagFails(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if got := run([]string{"--destroy-everything"}, strings.NewReader(""), &out, &out); got != 1 {
		t.Fatalf("got exit %d, want 1", got)
	}
}
