package intake_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/intake"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/emf/emftest"
	"github.com/commitcollect/backend/model/ops"
)

// dropFunc is the webhook's DropStore as a function.
type dropFunc func(key string, subscriptionID int64) error

func (f dropFunc) DropOutboxItem(_ context.Context, key, _, _ string, subscriptionID int64, _ time.Time, _ time.Duration) (*ops.IdempotencyRecord, error) {
	return nil, f(key, subscriptionID)
}

// TestDroppedEventsAreCounted: each event of another subscription,
// recorded or found a duplicate, writes one WebhookEventsDropped metric
// (the alarm that tells the operator a new subscription's events are being
// dropped); one that cannot be recorded is a 503, as ours would be, and
// counts nothing. None is handed off. Protection: the metric in drop
// (without it events are answered and dropped with no alarm).
func TestDroppedEventsAreCounted(t *testing.T) {
	t.Parallel()
	recorded := map[string]bool{}
	broken := false
	drops := dropFunc(func(key string, sub int64) error {
		switch {
		case broken:
			return errors.New("throttled")
		case recorded[key]:
			return fmt.Errorf("drop %s: %w", key, model.ErrConflict)
		}
		recorded[key] = true
		return nil
	})
	handedOff := 0
	var metrics bytes.Buffer
	h := intake.NewWebhook(intake.WebhookConfig{VerifyToken: "v", SubscriptionID: 7}, claimStore{}, drops,
		dispatchFunc(func(ingest.Job) error { handedOff++; return nil }), slog.New(slog.NewTextHandler(io.Discard, nil)))
	h.Metrics = &metrics
	mux := http.NewServeMux()
	h.Mount(mux)
	post := func(object int) int {
		ev := fmt.Sprintf(`{"object_type":"activity","object_id":%d,"aspect_type":"create","owner_id":6,"subscription_id":8,"event_time":9}`, object)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, intake.WebhookPath, strings.NewReader(ev)))
		return rec.Code
	}
	got := []int{post(1), post(1), post(2)}
	broken = true
	got = append(got, post(3))
	if fmt.Sprint(got) != "[200 200 200 503]" || handedOff != 0 {
		t.Fatalf("answers %v, %d hand-offs; want [200 200 200 503] and none", got, handedOff)
	}
	var dropped float64
	for _, line := range bytes.Split(bytes.TrimSpace(metrics.Bytes()), []byte("\n")) {
		l, err := emftest.Parse(line)
		if err != nil || l.Namespace != intake.MetricsNamespace || l.Members["Service"] != "api" {
			t.Fatalf("metric line %s: %+v, %v", line, l, err)
		}
		v, _ := l.Members[intake.MetricEventsDropped].(float64)
		dropped += v
	}
	if dropped != 3 {
		t.Fatalf("%v events counted dropped, want 3 (the 503 counts nothing)", dropped)
	}
}

// TestADroppedAnswerTakesAsLongAsAHandOff: after hand-offs of ours that
// take at least 30 ms, a new event of another subscription waits as long
// before its answer (a replay, which ours would not hand off either, does
// not wait). Protection: the pad in drop (without it the guess is
// answered a hand-off sooner than the right id: a timing oracle).
func TestADroppedAnswerTakesAsLongAsAHandOff(t *testing.T) {
	t.Parallel()
	recorded := map[string]bool{}
	drops := dropFunc(func(key string, _ int64) error {
		if recorded[key] {
			return fmt.Errorf("drop %s: %w", key, model.ErrConflict)
		}
		recorded[key] = true
		return nil
	})
	slow := dispatchFunc(func(ingest.Job) error { time.Sleep(30 * time.Millisecond); return nil })
	h := intake.NewWebhook(intake.WebhookConfig{VerifyToken: "v", SubscriptionID: 7}, claimStore{}, drops, slow,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	h.Metrics = io.Discard
	var waited []time.Duration
	h.Sleep = func(d time.Duration) { waited = append(waited, d) }
	mux := http.NewServeMux()
	h.Mount(mux)
	post := func(object, sub int) {
		ev := fmt.Sprintf(`{"object_type":"activity","object_id":%d,"aspect_type":"create","owner_id":6,"subscription_id":%d,"event_time":9}`, object, sub)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, intake.WebhookPath, strings.NewReader(ev)))
		if rec.Code != http.StatusOK {
			t.Fatalf("object %d subscription %d: %d", object, sub, rec.Code)
		}
	}
	for i := range 3 {
		post(i+1, 7)
	}
	post(10, 8)
	post(10, 8)
	if len(waited) != 1 || waited[0] < 30*time.Millisecond {
		t.Fatalf("dropped answers waited %v; want one wait of at least the 30 ms a hand-off takes (none for the replay)", waited)
	}
}
