package ingest_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/budget"
	"github.com/commitcollect/backend/handlers/ingest/syncjobs"
	"github.com/commitcollect/backend/model/syncstate"
)

// lockedBuffer is a bytes.Buffer safe for the queue's worker goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// readsByClass sums the StravaReads EMF lines written to l by class.
func (l *lockedBuffer) readsByClass(t *testing.T) map[string]int64 {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(l.b.String()))
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
	buf := &lockedBuffer{}
	r.worker.Runner.Metrics, r.harness.worker.Runner.Metrics = buf, buf
	r.link("u1", 71, time.Hour)
	r.history(71, 1000, 50, 24*time.Hour)
	r.drain(r.backfill("u1"), 10)
	r.activity(9001, 71, "Run")
	r.deliver(r.sim.ActivityEvent("create", 9001, 71, nil))
	r.deliver(r.sim.ActivityEvent("delete", 9001, 71, nil))

	s := r.sim.Stats()
	got := buf.readsByClass(t)
	// The create's fetch is a webhook read; the delete is confirmed by a
	// fetch of its own (a confirm read).
	if s.ListRequests < 2 || got[ingest.ReadClassBackfill] != s.ListRequests || got[ingest.ReadClassWebhook] != 1 ||
		got[ingest.ReadClassConfirm] != 1 || s.ActivityRequests != 2 || len(got) != 3 {
		t.Fatalf("metric by class %v; want backfill = %d list requests, webhook = 1 and confirm = 1 of %d activity requests, nothing else",
			got, s.ListRequests, s.ActivityRequests)
	}
}

func TestReadClass(t *testing.T) {
	for _, tc := range []struct {
		job  ingest.Job
		want string
	}{
		{ingest.Job{Event: ingest.Event{ObjectType: "activity", AspectType: "create"}}, ingest.ReadClassWebhook},
		{ingest.Job{Event: ingest.Event{ObjectType: "activity", AspectType: "update"}}, ingest.ReadClassWebhook},
		{ingest.Job{Event: ingest.Event{ObjectType: "activity", AspectType: "delete"}}, ingest.ReadClassConfirm},
		{ingest.Job{Event: ingest.Event{ObjectType: "athlete", AspectType: "update"}}, ingest.ReadClassConfirm},
		{ingest.Job{Sync: &ingest.SyncJob{Mode: syncstate.SyncModeBackfill}}, ingest.ReadClassBackfill},
		{ingest.Job{Sync: &ingest.SyncJob{Mode: syncstate.SyncModeReconcile}}, ingest.ReadClassReconcile},
	} {
		if got := ingest.ReadClass(tc.job); got != tc.want {
			t.Errorf("%+v: got %s, want %s", tc.job.Event, got, tc.want)
		}
	}
}
