package syncjobs_test

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/budget"
	"github.com/commitcollect/backend/handlers/ingest/syncjobs"
	"github.com/commitcollect/backend/test/ingesttest"
)

// readsByClass sums the StravaReads EMF lines written to l by class.
func readsByClass(t *testing.T, l *ingesttest.LockedBuffer) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(l.String()))
	for sc.Scan() {
		var line struct {
			AWS struct {
				CloudWatchMetrics []struct {
					Namespace  string
					Dimensions [][]string
					Metrics    []struct{ Name, Unit string }
				}
			} `json:"_aws"`
			Class       string
			StravaReads int64
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("metric line %q: %v", sc.Text(), err)
		}
		m := line.AWS.CloudWatchMetrics
		if len(m) != 1 || m[0].Namespace != budget.WorkerMetricsNamespace || len(m[0].Dimensions) != 1 ||
			m[0].Dimensions[0][0] != "Class" || m[0].Metrics[0].Name != "StravaReads" {
			t.Fatalf("metric line %q is not the StravaReads EMF", sc.Text())
		}
		out[line.Class] += line.StravaReads
	}
	return out
}

// TestStravaReadsMetricByClass: every Strava read a job makes is in the
// worker's StravaReads metric under the job's class — the backfill's list
// pages under backfill, a webhook's fetch under webhook, a delete's
// confirming fetch under confirm — and the sums
// equal what the simulator served.
func TestStravaReadsMetricByClass(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, syncjobs.SyncSettings{MaxDays: 100, PageSize: 40})
	buf := &ingesttest.LockedBuffer{}
	r.worker.Runner.Metrics, r.Harness.Worker.Runner.Metrics = buf, buf
	r.Link("u1", 71, time.Hour)
	r.history(71, 1000, 50, 24*time.Hour)
	r.drain(r.backfill("u1"), 10)
	r.Activity(9001, 71, "Run")
	r.Deliver(r.Sim.ActivityEvent("create", 9001, 71, nil))
	r.Deliver(r.Sim.ActivityEvent("delete", 9001, 71, nil))

	s := r.Sim.Stats()
	got := readsByClass(t, buf)
	// The create's fetch is a webhook read; the delete is confirmed by a
	// fetch of its own (a confirm read).
	if s.ListRequests < 2 || got[ingest.ReadClassBackfill] != s.ListRequests || got[ingest.ReadClassWebhook] != 1 ||
		got[ingest.ReadClassConfirm] != 1 || s.ActivityRequests != 2 || len(got) != 3 {
		t.Fatalf("metric by class %v; want backfill = %d list requests, webhook = 1 and confirm = 1 of %d activity requests, nothing else",
			got, s.ListRequests, s.ActivityRequests)
	}
}
