package chaos_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/commitcollect/backend/test/chaos"
	"github.com/commitcollect/backend/test/dynamolocal"
)

// TestNoisyNeighbours runs the noisy-neighbours scenario in its reduced size
// (a 30 s flood of 300 forged creates by three athletes, ten honest uploads
// and a bulk upload of 250, Strava's stand-in at 60 reads a minute) against
// `make run`'s binary, and fails unless every target holds: honest uploads
// counted within 150 s, the bulk upload within 4 minutes for at most 10
// reads, at most 0.2 reads per forged create, nothing pending 5 minutes
// after the flood, nothing of a forged create kept for good. `make test`
// runs it in its chaos step (CC_CHAOS=reduced); `make chaos` runs the full
// size (two minutes, 1,800 forged creates) in TestChaos. It prints the
// figures. Protections it covers, each failing it when removed: the
// gathering of crowded creates and the list walk (reads per forged create,
// bulk reads), the not-found settle (pending after the flood), the
// tombstone's expiry (permanent forged items).
func TestNoisyNeighbours(t *testing.T) {
	if os.Getenv("CC_CHAOS") != "reduced" {
		t.Skip("runs with CC_CHAOS=reduced (make test's chaos step, after the parallel tests: it loads the machine for a minute); make chaos runs the full scenario")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	work := t.TempDir()
	bin, err := chaos.BuildRun(ctx, work)
	if err != nil {
		t.Fatal(err)
	}
	h := chaos.New(bin, dynamolocal.Endpoint(t), work, t.Logf)
	for _, sc := range chaos.Scenarios {
		if sc.Name != "noisy-neighbours" {
			continue
		}
		f, err := h.Run(ctx, sc, false)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Println("chaos:", f)
		if !f.OK() {
			t.Fatalf("noisy neighbours: %s", f)
		}
		return
	}
	t.Fatal("no noisy-neighbours scenario")
}
