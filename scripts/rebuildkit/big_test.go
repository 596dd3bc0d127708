package rebuildkit_test

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/commitcollect/backend/scripts/rebuildkit"
	"github.com/commitcollect/backend/scripts/rebuildkit/cli"
)

// TestRebuildManyUsersResumesAfterKill rebuilds 100 users × 60 workouts,
// killed (its context cancelled) half way, then re-run with the same state
// file: no user is processed twice, every user ends correct.
func TestRebuildManyUsersResumesAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("6,000 workouts: not in -short mode")
	}
	t.Parallel()
	const nUsers, nWorkouts, killAfter = 100, 60, 50
	h := newPrivateHarness(t)
	users := names("big", nUsers)
	start := time.Now()
	seedModel(t, h.st)
	seedUsers(t, h.st, users, nWorkouts)
	t.Logf("seeded %d users × %d workouts with BatchPut in %s", nUsers, nWorkouts, time.Since(start).Round(time.Millisecond))

	real := h.env.Recompute
	var (
		mu   sync.Mutex
		done [2][]string
		run  int
	)
	ctx, kill := context.WithCancel(context.Background())
	defer kill()
	h.env.Recompute = func(ctx context.Context, userID string, dryRun bool) (rebuildkit.Outcome, error) {
		out, err := real(ctx, userID, dryRun)
		if err != nil || dryRun {
			return out, err
		}
		mu.Lock()
		defer mu.Unlock()
		done[run] = append(done[run], userID)
		if run == 0 && len(done[0]) == killAfter {
			kill()
		}
		return out, nil
	}
	state := filepath.Join(t.TempDir(), "rebuild-state.json")
	args := []string{"--all", "--state", state, "--concurrency", "4", "--rps", "0"}

	start = time.Now()
	var out, errOut bytes.Buffer
	code := cli.RebuildMain(ctx, args, cli.IO{Out: &out, Err: &errOut}, h.setup)
	first := time.Since(start)
	if code != cli.ExitError || len(done[0]) < killAfter || len(done[0]) >= nUsers {
		t.Fatalf("killed run: exit %d after %d users, want %d (interrupted) part-way\n%s\n%s", code, len(done[0]), cli.ExitError, out.String(), errOut.String())
	}
	t.Logf("first run killed after %d users in %s", len(done[0]), first.Round(time.Millisecond))

	mu.Lock()
	run = 1
	mu.Unlock()
	out.Reset()
	errOut.Reset()
	start = time.Now()
	code = cli.RebuildMain(context.Background(), args, cli.IO{Out: &out, Err: &errOut}, h.setup)
	second := time.Since(start)
	if code != cli.ExitOK {
		t.Fatalf("resumed run: exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	t.Logf("resumed run did the other %d users in %s: %s", len(done[1]), second.Round(time.Millisecond), bytes.TrimSpace(out.Bytes()))

	all := append(slices.Clone(done[0]), done[1]...)
	slices.Sort(all)
	if dup := len(all) - len(slices.Compact(slices.Clone(all))); dup > 0 {
		t.Fatalf("%d users processed twice across the killed and the resumed run", dup)
	}
	if !slices.Equal(slices.Compact(all), users) {
		t.Fatalf("got %d distinct users processed, want all %d", len(slices.Compact(all)), nUsers)
	}

	start = time.Now()
	code, rep := h.verifyJSON(t, "--all", "--rps", "0", "--concurrency", "4")
	if code != cli.ExitOK || rep.Summary.Users != nUsers || rep.Summary.Milestones != 2*nUsers {
		t.Fatalf("verify after the resumed rebuild: exit %d %s %v", code, rep.Summary, rep.Drift[:min(5, len(rep.Drift))])
	}
	t.Logf("verify --all of %d users in %s", nUsers, time.Since(start).Round(time.Millisecond))
}
