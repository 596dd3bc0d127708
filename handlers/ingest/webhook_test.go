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
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/store/outbox"
	"github.com/commitcollect/backend/test/ingesttest"
)

func TestWebhookHandshake(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	intake.NewWebhook(intake.WebhookConfig{VerifyToken: ingesttest.VerifyToken, SubscriptionID: ingesttest.SubscriptionID}, nil, nil, nil, ingesttest.Log()).Mount(mux)
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
// subscription is answered as ours is, first and on replay (accepted, then
// duplicate), whichever id comes first for the same event; it is recorded
// as dropped, never handed off, and re-admitted when an operator asks.
// Ours taking over a dropped event is handed off (no event lost to a
// guess that came first). Protections: the drop record (without it a
// replay of a guess is accepted again where ours is a duplicate), the
// taken-over answer (accepted told the right id from a guess), the claim
// of a dropped item (without it our event is lost behind the guess).
func TestWebhookAnswersAnotherSubscriptionAsItsOwn(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	ctx := context.Background()
	const foreign = 999
	ev := `{"object_type":"activity","object_id":%d,"aspect_type":"update","owner_id":6,"subscription_id":%d,"event_time":7}`
	post := func(object, sub int64) string {
		t.Helper()
		resp, body := h.Post(fmt.Appendf(nil, ev, object, sub))
		if resp.StatusCode != http.StatusOK || len(body) != 2 || body["correlationId"] == "" {
			t.Fatalf("object %d, subscription %d: %d %v", object, sub, resp.StatusCode, body)
		}
		return body["status"].(string)
	}
	sequences := []struct {
		name   string
		object int64
		subs   []int64
		want   string
	}{
		{"another's, replayed", 5, []int64{foreign, foreign}, "accepted duplicate"},
		{"ours, replayed", 4, []int64{ingesttest.SubscriptionID, ingesttest.SubscriptionID}, "accepted duplicate"},
		{"another's, then ours", 3, []int64{foreign, ingesttest.SubscriptionID, foreign}, "accepted duplicate duplicate"},
		{"ours, then another's", 2, []int64{ingesttest.SubscriptionID, foreign, ingesttest.SubscriptionID}, "accepted duplicate duplicate"},
	}
	for _, sq := range sequences {
		var got []string
		for _, sub := range sq.subs {
			got = append(got, post(sq.object, sub))
		}
		if strings.Join(got, " ") != sq.want {
			t.Errorf("%s: answered %v, want %s", sq.name, got, sq.want)
		}
	}
	h.Wait()
	if n := h.Dispatch.Calls.Load(); n != 3 {
		t.Fatalf("got %d hand-offs, want 3: ours, the two of them once each (one taken over from a drop)", n)
	}
	key := func(object int64) string {
		var e ingest.Event
		if err := json.Unmarshal(fmt.Appendf(nil, ev, object, foreign), &e); err != nil {
			t.Fatal(err)
		}
		return e.IdempotencyKey()
	}
	drops := outbox.NewDrops(h.St.DB)
	listed, err := drops.DroppedOutboxItems(ctx, foreign, 10)
	if err != nil || len(listed) != 1 || listed[0].IdempotencyKey != key(5) {
		t.Fatalf("dropped for %d: %+v (%v), want object 5's event only (3's was taken over)", foreign, listed, err)
	}
	if _, err := drops.ReadmitOutboxItem(ctx, key(5), foreign, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := drops.ReadmitOutboxItem(ctx, key(5), foreign, time.Now()); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("re-admitting twice: %v, want a conflict", err)
	}
	if res := h.Sweep(time.Now().Add(time.Second)); res.Dispatched != 1 {
		t.Fatalf("sweep after the re-admission: %+v, want the dropped event dispatched", res)
	}
}

// TestWebhookServesTheSecretPath: with path secrets (the new and the
// previous one, while a new callback is registered) the webhook answers
// under /webhooks/strava/{secret} of either as under /webhooks/strava (the
// handshake and events), and any other segment is a 404 that records
// nothing. Protection: the secrets' check (without it any segment reaches
// the webhook; with one secret only, the previous callback's deliveries
// are lost during a rotation).
func TestWebhookServesTheSecretPath(t *testing.T) {
	t.Parallel()
	h := ingesttest.New(t)
	const secret, previous = "s3cret-path-0123456789", "older-secret-9876543210"
	mux := http.NewServeMux()
	intake.NewWebhook(intake.WebhookConfig{VerifyToken: ingesttest.VerifyToken, SubscriptionID: ingesttest.SubscriptionID, PathSecrets: []string{secret, previous}},
		h.St.Outbox, outbox.NewDrops(h.St.DB), h.Dispatch, ingesttest.Log()).Mount(mux)
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
	got := []int{post(intake.CallbackPath(secret), 1), post(intake.CallbackPath(previous), 4),
		post(intake.CallbackPath("s3cret-path-0123456780"), 2), post(intake.WebhookPath+"/x", 3)}
	t.Logf("right secret, previous secret, wrong secret, short segment: %v", got)
	if got[0] != http.StatusOK || got[1] != http.StatusOK || got[2] != http.StatusNotFound || got[3] != http.StatusNotFound {
		t.Fatalf("got %v, want [200 200 404 404]", got)
	}
	h.Wait()
	if n := h.Dispatch.Calls.Load(); n != 2 {
		t.Fatalf("got %d hand-offs, want 2 (the two secrets')", n)
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
	if _, err := h.St.Workouts.Workout(context.Background(), "u1", 100); err == nil {
		t.Fatal("the workout exists although the hand-off failed")
	}
	rec, err := h.St.Outbox.OutboxItem(context.Background(), ingesttest.Job(ev).IdempotencyKey)
	if err != nil || rec.Status != ops.OutboxReceived {
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
	if rec, _ := h.St.Outbox.OutboxItem(context.Background(), ingesttest.Job(ev).IdempotencyKey); rec.Status != ops.OutboxDone || rec.Dispatches != 2 {
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
	intake.NewWebhook(intake.WebhookConfig{VerifyToken: ingesttest.VerifyToken, SubscriptionID: ingesttest.SubscriptionID}, broken.Outbox, nil, h.Dispatch, ingesttest.Log()).Mount(mux)
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
