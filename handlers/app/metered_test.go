package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/store/metering"
	"github.com/commitcollect/backend/test/dynamolocal"
)

func TestMain(m *testing.M) { dynamolocal.Main(m) }

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

// Each request is metered on its own and logged with its capacity; the
// server's base context meter (the local stack's) receives the sum.
func TestMeteredLogsEachRequestsCapacity(t *testing.T) {
	t.Parallel()
	st := dynamolocal.NewStore(t)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /things", func(w http.ResponseWriter, r *http.Request) {
		p := &model.Profile{UserID: r.URL.Query().Get("id"), CreatedAtUtc: time.Now().UTC()}
		if err := st.DB.Put(r.Context(), st.DB.Tables().Main, p); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	var logs lockedLog
	srv := httptest.NewUnstartedServer(app.Metered(mux, slog.New(slog.NewJSONHandler(&logs, nil))))
	base, total := metering.StartMeter(context.Background())
	srv.Config.BaseContext = func(net.Listener) context.Context { return base }
	srv.Start()
	defer srv.Close()
	for _, id := range []string{"a", "b"} {
		resp, err := http.Post(srv.URL+"/things?id="+id+"&code=secret", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST: got %d, want 201", resp.StatusCode)
		}
	}
	var lines int
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var line struct {
			Msg, Method, Path string
			Status, Requests  int
			WCU               float64 `json:"wcu"`
		}
		if json.Unmarshal([]byte(l), &line) != nil || line.Msg != "request served" {
			continue
		}
		lines++
		// A profile lands in the table and the sparse users index (GSI2).
		if line.Method != "POST" || line.Path != "/things" || line.Status != 201 || line.Requests != 1 || line.WCU < 1 {
			t.Errorf("request line: got %+v, want POST /things 201, 1 request, ≥ 1 WCU", line)
		}
	}
	if lines != 2 {
		t.Errorf("got %d request lines, want 2: %s", lines, logs.String())
	}
	if strings.Contains(logs.String(), "secret") {
		t.Errorf("the query string was logged: %s", logs.String())
	}
	if got := total.Snapshot(); got.Requests != 2 {
		t.Errorf("base meter: got %+v, want the 2 requests", got.Units)
	}
}

// TestLoggedPathHidesTheWebhookSecret: a path under the webhook's shows
// {secret} for its last segment, the right one or a guess; other paths
// show as they are. Protection: LoggedPath in Metered's log line (the
// segment reached a log on every delivery).
func TestLoggedPathHidesTheWebhookSecret(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]string{
		"/webhooks/strava/s3cret-path-0123456789": "/webhooks/strava/{secret}",
		"/webhooks/strava/guess/deeper":           "/webhooks/strava/{secret}",
		"/webhooks/strava":                        "/webhooks/strava",
		"/webhooks/strava/":                       "/webhooks/strava/",
		"/v1/milestones/m1":                       "/v1/milestones/m1",
	} {
		if got := app.LoggedPath(path); got != want {
			t.Errorf("%s logged as %s, want %s", path, got, want)
		}
	}
}
