package ingest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/intake"
	"github.com/commitcollect/backend/model/store/outbox"
	"github.com/commitcollect/backend/test/ingesttest"
)

// TestAPIGatewayV2Adapter drives the mounted routes through the same
// adapter the api Lambda uses, with HTTP API (payload v2) events.
func TestAPIGatewayV2Adapter(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	h.Link("u1", 10, time.Hour)
	h.Activity(900, 10, "Run")
	mux := http.NewServeMux()
	intake.NewWebhook(intake.WebhookConfig{VerifyToken: ingesttest.VerifyToken, SubscriptionID: ingesttest.SubscriptionID}, h.St.Outbox, outbox.NewDrops(h.St.DB), h.Dispatch, ingesttest.Log()).Mount(mux)
	adapter := httpadapter.NewV2(mux)
	ctx := context.Background()
	req := func(method, query, body string) events.APIGatewayV2HTTPRequest {
		r := events.APIGatewayV2HTTPRequest{Version: "2.0", RouteKey: "$default", RawPath: intake.WebhookPath,
			RawQueryString: query, Headers: map[string]string{"content-type": "application/json"}, Body: body}
		r.RequestContext.HTTP.Method, r.RequestContext.HTTP.Path = method, intake.WebhookPath
		r.RequestContext.RequestID = "req-1"
		return r
	}

	resp, err := adapter.ProxyWithContext(ctx, req(http.MethodGet,
		"hub.mode=subscribe&hub.verify_token="+ingesttest.VerifyToken+"&hub.challenge=abc", ""))
	if err != nil || resp.StatusCode != 200 || resp.Body != "{\"hub.challenge\":\"abc\"}\n" {
		t.Fatalf("handshake: got %d %q, %v", resp.StatusCode, resp.Body, err)
	}
	ev := h.Sim.ActivityEvent("create", 900, 10, nil)
	body := string(ingesttest.MustJSON(t, ev))
	resp, err = adapter.ProxyWithContext(ctx, req(http.MethodPost, "", body))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("post: got %d %q, %v", resp.StatusCode, resp.Body, err)
	}
	var got map[string]string
	_ = json.Unmarshal([]byte(resp.Body), &got)
	if got["status"] != "accepted" || resp.Headers[ingest.HeaderCorrelationID] != got["correlationId"] {
		t.Fatalf("post: got %v headers %v", got, resp.Headers)
	}
	resp, _ = adapter.ProxyWithContext(ctx, req(http.MethodPost, "", `{"object_type":1}`))
	if resp.StatusCode != 400 {
		t.Fatalf("bad event: got %d, want 400", resp.StatusCode)
	}
	resp, _ = adapter.ProxyWithContext(ctx, req(http.MethodDelete, "", ""))
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("DELETE: got %d, want 405", resp.StatusCode)
	}
	h.Wait()
	if w := h.Workout("u1", 900); w.CorrelationID != got["correlationId"] {
		t.Fatalf("got workout correlation %q, want %q", w.CorrelationID, got["correlationId"])
	}
}

// BenchmarkWebhookAccept measures one accepted POST over HTTP: decode,
// conditional idempotency put on DynamoDB Local, queue hand-off. Strava wants
// an answer within 2 s.
func BenchmarkWebhookAccept(b *testing.B) {
	h := ingesttest.New(b)
	ev := h.Sim.ActivityEvent("create", 1, 10, nil) // athlete not linked: the worker only audits
	i := int64(0)
	for b.Loop() {
		i++
		ev.EventTime = i
		resp, body := h.Post(ingesttest.MustJSON(b, ev))
		if resp.StatusCode != 200 || body["status"] != "accepted" {
			b.Fatalf("got %d %v", resp.StatusCode, body)
		}
	}
	b.StopTimer()
	h.Wait()
}

// BenchmarkWorkerCreate measures one create event in the worker: resolve,
// stored-workout read (coalescing), budget check, athlete read counter,
// token, Strava fetch (simulator), upsert, audit.
func BenchmarkWorkerCreate(b *testing.B) {
	h := ingesttest.New(b)
	h.Link("u1", 10, 24*time.Hour)
	// Usage is reset every iteration so the benchmark never meets the budget;
	// the athlete's read cap is out of reach but still counted every op.
	h.Worker.Fetch.Reads.PerWindow = 1 << 30
	ctx := context.Background()
	for i := range 5000 {
		h.Activity(int64(i+1), 10, "Run")
	}
	i := 0
	for b.Loop() {
		i++
		if i > 5000 {
			b.Fatal("benchmark ran past the prepared activities")
		}
		h.Sim.SetUsage(0, 0, 0, 0)
		if err := h.Worker.Process(ctx, ingesttest.Job(h.Sim.ActivityEvent("create", int64(i), 10, nil))); err != nil {
			b.Fatal(fmt.Errorf("iteration %d: %w", i, err))
		}
	}
}
