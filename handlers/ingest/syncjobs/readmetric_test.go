package syncjobs_test

import (
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/model/emf/emftest"
	"github.com/commitcollect/backend/test/capture"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/budget"
	"github.com/commitcollect/backend/handlers/ingest/syncjobs"
)

// readsByClass sums the StravaReads EMF lines written to l by class.
func readsByClass(t *testing.T, l *capture.Buffer) map[string]int64 {
	t.Helper()
	lines, err := emftest.ParseAll(strings.NewReader(l.String()))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, line := range lines {
		reads, ok := line.Value("StravaReads")
		if _, declared := line.Declares("StravaReads"); line.Namespace != budget.WorkerMetricsNamespace || len(line.Dimensions) != 1 ||
			line.Dimensions[0][0] != "Class" || !declared || !ok {
			t.Fatalf("metric line %+v is not the StravaReads EMF", line)
		}
		out[line.Dimension("Class")] += int64(reads)
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
	buf := &capture.Buffer{}
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
