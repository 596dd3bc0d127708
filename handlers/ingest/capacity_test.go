package ingest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/commitcollect/backend/handlers/ingest/budget"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/model/store/metering"
	"github.com/commitcollect/backend/test/ingesttest"
)

// Each job is metered on its own: the worker's "job finished" line carries
// the requests, read and write units of the job's DynamoDB calls, and a
// meter the caller put in the context receives them too.
func TestWorkerJobCapacityIsLogged(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	h.Link("u1", 10, time.Hour)
	h.Activity(100, 10, "Run")
	var logs lockedLog
	w := app.NewStravaWorker(h.St, app.StravaSettings{
		BaseURL: h.Sim.URL, ClientID: h.Sim.ClientID(), ClientSecret: h.Sim.ClientSecret(),
		AthleteReadsPerWindow: budget.DefaultAthleteReadsPerWindow,
	}, slog.New(slog.NewJSONHandler(&logs, nil)))
	ctx, outer := metering.StartMeter(context.Background())
	if err := w.Run(ctx, ingesttest.Job(h.Sim.ActivityEvent("create", 100, 10, nil))); err != nil {
		t.Fatal(err)
	}
	if _, err := h.St.Workouts.Workout(context.Background(), "u1", 100); err != nil {
		t.Fatalf("workout not written: %v", err)
	}
	got := outer.Snapshot()
	// At least: athlete → user, the connection, the workout write.
	if got.Requests < 3 || got.RCU <= 0 || got.WCU <= 0 {
		t.Errorf("job capacity: got %+v, want ≥ 3 requests and both kinds of units", got.Units)
	}
	var line struct {
		Msg, CorrelationID string
		ActivityID         int64
		Requests           int
		RCU                float64 `json:"rcu"`
		WCU                float64 `json:"wcu"`
	}
	found := false
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if json.Unmarshal([]byte(l), &line) == nil && line.Msg == "job finished" {
			found = true
			if line.Requests != got.Requests || line.RCU != got.RCU || line.WCU != got.WCU || line.ActivityID != 100 || line.CorrelationID == "" {
				t.Errorf("job line: got %+v, want the job's %+v with its ids", line, got.Units)
			}
		}
	}
	if !found {
		t.Errorf("no job line: %s", logs.String())
	}
}

// lockedLog is a log sink safe for the worker's goroutines.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
