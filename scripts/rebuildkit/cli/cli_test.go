package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/commitcollect/backend/model"
)

func TestReadUsersFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "users.txt")
	_ = os.WriteFile(good, []byte("# incident 42\nu1\n\n  u2  \n#u3\n"), 0o644)
	got, err := ReadUsersFile(good)
	if err != nil || !slices.Equal(got, []string{"u1", "u2"}) {
		t.Fatalf("got %v, %v; want [u1 u2]", got, err)
	}
	bad := filepath.Join(dir, "bad.txt")
	_ = os.WriteFile(bad, []byte("u1\nUSER#u2\n"), 0o644)
	if _, err := ReadUsersFile(bad); !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("got %v, want ErrInvalid naming line 2", err)
	}
}

func TestCommandsHelpAndBadFlags(t *testing.T) {
	t.Parallel()
	noSetup := func(context.Context, string) (*Env, error) {
		t.Error("setup called, want the command to stop at its flags")
		return nil, errors.New("no setup")
	}
	type command func(context.Context, []string, IO, Setup) int
	tests := []struct {
		name string
		cmd  command
		args []string
		want int
		says []string
	}{
		{"rebuild help", RebuildMain, []string{"--help"}, ExitOK, []string{"-users-file", "-all", "-concurrency", "-rps", "-state", "-table-prefix", "DYNAMODB_ENDPOINT"}},
		{"verify help", VerifyMain, []string{"-h"}, ExitOK, []string{"-json", "-all", "Exit status: 0 no drift, 1 drift"}},
		{"replay help", ReplayMain, []string{"--help"}, ExitOK, []string{"-from", "-checkpoint", "-dry-run", "-invoke-function", "-user"}},
		{"redrive help", RedriveMain, []string{"--help"}, ExitOK, []string{"-queue-url", "-source", "-invoke-worker"}},
		{"rebuild without target", RebuildMain, nil, ExitError, []string{"no users"}},
		{"rebuild list and all", RebuildMain, []string{"--all", "--user", "u1"}, ExitError, []string{"--all and a user list"}},
		{"verify unknown flag", VerifyMain, []string{"--frobnicate"}, ExitError, []string{"frobnicate"}},
		{"replay bad start", ReplayMain, []string{"--from", "yesterday"}, ExitError, []string{"trim-horizon or latest"}},
		{"replay dry run invoking", ReplayMain, []string{"--dry-run", "--invoke-function", "p"}, ExitError, []string{"never invokes"}},
		{"stray argument", RebuildMain, []string{"--all", "now"}, ExitError, []string{"unexpected arguments"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			got := tt.cmd(context.Background(), tt.args, IO{Out: &out, Err: &errOut}, noSetup)
			if got != tt.want {
				t.Fatalf("exit: got %d, want %d (stderr %s)", got, tt.want, errOut.String())
			}
			for _, s := range tt.says {
				if !strings.Contains(errOut.String(), s) {
					t.Errorf("stderr does not mention %q:\n%s", s, errOut.String())
				}
			}
		})
	}
}
