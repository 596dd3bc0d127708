package ingest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/intake"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/test/ingesttest"
)

func TestWebhookHandshake(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	intake.NewWebhook(intake.WebhookConfig{VerifyToken: ingesttest.VerifyToken, SubscriptionID: ingesttest.SubscriptionID}, nil, nil, ingesttest.Log()).Mount(mux)
	tests := []struct {
		name       string
		given      url.Values
		wantStatus int
	}{
		{"valid", url.Values{"hub.mode": {"subscribe"}, "hub.verify_token": {ingesttest.VerifyToken}, "hub.challenge": {"15f7d1a91c1f40f8a748fd134752feb3"}}, 200},
		{"wrong token", url.Values{"hub.mode": {"subscribe"}, "hub.verify_token": {"nope"}, "hub.challenge": {"c"}}, 403},
		{"wrong mode", url.Values{"hub.mode": {"unsubscribe"}, "hub.verify_token": {ingesttest.VerifyToken}, "hub.challenge": {"c"}}, 403},
		{"no challenge", url.Values{"hub.mode": {"subscribe"}, "hub.verify_token": {ingesttest.VerifyToken}}, 403},
		{"nothing", url.Values{}, 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, intake.WebhookPath+"?"+tt.given.Encode(), nil))
			if rec.Code != tt.wantStatus {
				t.Fatalf("got %d, want %d", rec.Code, tt.wantStatus)
			}
			if tt.wantStatus == 200 {
				var got map[string]string
				if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got["hub.challenge"] != tt.given.Get("hub.challenge") {
					t.Fatalf("got body %s, want the challenge echoed", rec.Body)
				}
			}
		})
	}
	// Through the simulator, as Strava does it when the subscription is created.
	srv := httptest.NewServer(mux)
	defer srv.Close()
	h := ingesttest.New(t)
	if err := h.Sim.VerifyCallback(context.Background(), srv.URL+intake.WebhookPath, ingesttest.VerifyToken); err != nil {
		t.Fatal(err)
	}
}

func TestWebhookRejectsBadEvents(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	valid := `{"object_type":"activity","object_id":1,"aspect_type":"create","owner_id":2,"subscription_id":120475,"event_time":4}`
	tests := []struct {
		name       string
		given      string
		wantStatus int
		wantError  string
		wantReason string
	}{
		{"not JSON", `{{`, 400, "invalid_event", "malformed JSON"},
		{"unknown object type", strings.Replace(valid, `"activity"`, `"route"`, 1), 400, "invalid_event", "unknown object type"},
		{"unknown aspect type", strings.Replace(valid, `"create"`, `"archive"`, 1), 400, "invalid_event", "unknown aspect type"},
		{"wrong type", strings.Replace(valid, `"object_id":1`, `"object_id":"one"`, 1), 400, "invalid_event", "object_id"},
		{"missing field", strings.Replace(valid, `"owner_id":2,`, ``, 1), 400, "invalid_event", "owner_id: is required"},
		{"too large", `{"updates":{"title":"` + strings.Repeat("a", intake.MaxEventBytes) + `"}}`, 413, "body_too_large", "64 KiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := h.Post([]byte(tt.given))
			if resp.StatusCode != tt.wantStatus || body["error"] != tt.wantError {
				t.Fatalf("got %d %v, want %d %s", resp.StatusCode, body, tt.wantStatus, tt.wantError)
			}
			if reason, _ := body["reason"].(string); !strings.Contains(reason, tt.wantReason) {
				t.Fatalf("got reason %q, want it to mention %q", reason, tt.wantReason)
			}
			if resp.Header.Get(ingest.HeaderCorrelationID) == "" {
				t.Fatal("no correlation id on the answer")
			}
		})
	}
	if n := h.Dispatch.Calls.Load(); n != 0 {
		t.Fatalf("got %d hand-offs for bad events, want 0", n)
	}
	// Nothing was claimed: the valid event is still new.
	if resp, body := h.Post([]byte(valid)); resp.StatusCode != 200 || body["status"] != "accepted" {
		t.Fatalf("got %d %v, want accepted", resp.StatusCode, body)
	}
}

// TestWebhookAnswersAnotherSubscriptionAsItsOwn: an event of another
// subscription gets the answer an accepted event gets (the same status and
// fields), so trying ids tells nothing of ours, and it is neither recorded
// nor handed off. Protection: the drop's answer (a 403 told a guess from
// the right id).
func TestWebhookAnswersAnotherSubscriptionAsItsOwn(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	ev := `{"object_type":"activity","object_id":%d,"aspect_type":"update","owner_id":6,"subscription_id":%d,"event_time":7}`
	other, otherBody := h.Post(fmt.Appendf(nil, ev, 5, 999))
	ours, oursBody := h.Post(fmt.Appendf(nil, ev, 4, ingesttest.SubscriptionID))
	t.Logf("another subscription: %d %v; ours: %d %v", other.StatusCode, otherBody, ours.StatusCode, oursBody)
	if other.StatusCode != ours.StatusCode || otherBody["status"] != oursBody["status"] || len(otherBody) != len(oursBody) || otherBody["correlationId"] == "" {
		t.Fatalf("another subscription answered %d %v, ours %d %v: want the same answer", other.StatusCode, otherBody, ours.StatusCode, oursBody)
	}
	h.Wait()
	if n := h.Dispatch.Calls.Load(); n != 1 {
		t.Fatalf("got %d hand-offs, want 1 (ours only)", n)
	}
	var e ingest.Event
	if err := json.Unmarshal(fmt.Appendf(nil, ev, 5, 999), &e); err != nil {
		t.Fatal(err)
	}
	if _, err := h.St.OutboxItem(context.Background(), e.IdempotencyKey()); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("another subscription's event in the outbox: %v; want nothing recorded", err)
	}
}

// TestWebhookServesTheSecretPath: with a path secret the webhook answers
// under /webhooks/strava/{secret} as under /webhooks/strava (the handshake
// and events), and any other segment is a 404 that records nothing.
// Protection: the secret's check (without it any segment reaches the
// webhook, and in AWS the route key is what keeps the throttle apart).
func TestWebhookServesTheSecretPath(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	const secret = "s3cret-path-0123456789"
	mux := http.NewServeMux()
	intake.NewWebhook(intake.WebhookConfig{VerifyToken: ingesttest.VerifyToken, SubscriptionID: ingesttest.SubscriptionID, PathSecret: secret},
		h.St, h.Dispatch, ingesttest.Log()).Mount(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	if err := h.Sim.VerifyCallback(context.Background(), srv.URL+intake.CallbackPath(secret), ingesttest.VerifyToken); err != nil {
		t.Fatalf("handshake at the secret path: %v", err)
	}
	post := func(path string, id int64) int {
		ev := fmt.Sprintf(`{"object_type":"activity","object_id":%d,"aspect_type":"update","owner_id":6,"subscription_id":%d,"event_time":7}`, id, ingesttest.SubscriptionID)
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(ev))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	got := []int{post(intake.CallbackPath(secret), 1), post(intake.CallbackPath("s3cret-path-0123456780"), 2), post(intake.WebhookPath+"/x", 3)}
	t.Logf("right secret, wrong secret, short segment: %v", got)
	if got[0] != http.StatusOK || got[1] != http.StatusNotFound || got[2] != http.StatusNotFound {
		t.Fatalf("got %v, want [200 404 404]", got)
	}
	h.Wait()
	if n := h.Dispatch.Calls.Load(); n != 1 {
		t.Fatalf("got %d hand-offs, want 1 (the right secret's)", n)
	}
}

func TestWebhookSameEventThreeTimesIsOneWrite(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	h.Link("u1", 10, time.Hour)
	h.Activity(100, 10, "Run")
	ev := h.Sim.ActivityEvent("create", 100, 10, nil)
	var first string
	for i := range 3 {
		resp, body := h.Post(ingesttest.MustJSON(t, ev))
		want := "duplicate"
		if i == 0 {
			want, first = "accepted", body["correlationId"].(string)
		}
		if resp.StatusCode != 200 || body["status"] != want {
			t.Fatalf("delivery %d: got %d %v, want 200 %s", i, resp.StatusCode, body, want)
		}
	}
	h.Wait()
	if n := h.Dispatch.Calls.Load(); n != 1 {
		t.Fatalf("got %d hand-offs, want 1", n)
	}
	if n := h.Sim.Stats().ActivityFetches; n != 1 {
		t.Fatalf("got %d Strava fetches, want 1", n)
	}
	a := h.Audits(keys.UserPK("u1"))
	if len(a[ingest.AuditActivityCreate]) != 1 || len(a[ingest.AuditActivityUpdate]) != 0 {
		t.Fatalf("got audits %v, want exactly one %s", a, ingest.AuditActivityCreate)
	}
	// The correlation id of the accepting request is on the workout and the audit entry.
	w := h.Workout("u1", 100)
	if w.CorrelationID != first || a[ingest.AuditActivityCreate][0].CorrelationID != first {
		t.Fatalf("got workout correlation %q, audit %q; want %q", w.CorrelationID, a[ingest.AuditActivityCreate][0].CorrelationID, first)
	}
	// A routine entry (one per event) stays out of the audit indexes: it
	// is found by user and time above, not through the correlation index.
	byCorr, _, err := storeQueryAuditByCorrelation(h, first)
	if err != nil || len(byCorr) != 0 {
		t.Fatalf("audit by correlation: got %d entries, %v; want 0 (routine entries are not indexed)", len(byCorr), err)
	}
	if len(h.Workouts("u1")) != 1 {
		t.Fatal("want exactly one workout item")
	}
}

// TestWebhookHandOffFailureIsRepairedBySweeper: a failed hand-off (local
// queue full, Lambda invoke refused) is answered 200, because the event is
// already durable in the outbox; the sweeper dispatches it once its lease
// lapses. Protection: the outbox claim before the hand-off, and the sweeper.
func TestWebhookHandOffFailureIsRepairedBySweeper(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	h.Link("u1", 10, time.Hour)
	h.Activity(100, 10, "Run")
	h.Dispatch.Fail.Store(1)
	ev := h.Sim.ActivityEvent("create", 100, 10, nil)
	d := h.Deliver(ev)
	if d.Attempts != 1 || d.Statuses[0] != http.StatusOK {
		t.Fatalf("got delivery %+v, want 200 at once", d)
	}
	if _, err := h.St.Workout(context.Background(), "u1", 100); err == nil {
		t.Fatal("the workout exists although the hand-off failed")
	}
	rec, err := h.St.OutboxItem(context.Background(), ingesttest.Job(ev).IdempotencyKey)
	if err != nil || rec.Status != model.OutboxReceived {
		t.Fatalf("got %+v, %v; want the event received in the outbox", rec, err)
	}
	// Within its lease a redelivery is a duplicate (the hand-off may be in flight).
	if resp, body := h.Post(ingesttest.MustJSON(t, ev)); resp.StatusCode != 200 || body["status"] != "duplicate" {
		t.Fatalf("got %d %v, want duplicate within the lease", resp.StatusCode, body)
	}
	res := h.Sweep(rec.DueAt())
	if res.Due != 1 || res.Dispatched != 1 {
		t.Fatalf("got sweep %+v, want the item dispatched", res)
	}
	h.Wait()
	if w := h.Workout("u1", 100); w.SportType != "Run" || w.IsDeleted {
		t.Fatalf("got %+v, want the workout written by the sweeper's dispatch", w)
	}
	if rec, _ := h.St.OutboxItem(context.Background(), ingesttest.Job(ev).IdempotencyKey); rec.Status != model.OutboxDone || rec.Dispatches != 2 {
		t.Fatalf("got %+v, want done after 2 dispatches", rec)
	}
	if n := h.Sim.Stats().ActivityFetches; n != 1 {
		t.Fatalf("got %d fetches, want 1", n)
	}
}

func TestWebhookStoreUnavailableIs503(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	// A webhook pointed at tables that do not exist cannot record the key.
	mux := http.NewServeMux()
	broken := newBrokenStore(t)
	intake.NewWebhook(intake.WebhookConfig{VerifyToken: ingesttest.VerifyToken, SubscriptionID: ingesttest.SubscriptionID}, broken, h.Dispatch, ingesttest.Log()).Mount(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Post(srv.URL+intake.WebhookPath, "application/json",
		strings.NewReader(string(ingesttest.MustJSON(t, h.Sim.ActivityEvent("create", 1, 2, nil)))))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || h.Dispatch.Calls.Load() != 0 {
		t.Fatalf("got %d with %d hand-offs, want 503 and none", resp.StatusCode, h.Dispatch.Calls.Load())
	}
}
