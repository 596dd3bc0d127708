package intake_test

import (
	"context"
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
	"github.com/commitcollect/backend/model/ops"
)

// claimStore is the webhook's outbox with a function field: ClaimFn sees
// each claim as its lease ("5m0s") or, held for the sweeper, as "held"
// and the wait until due ("held 7s"); every claim is new unless ClaimFn
// says otherwise.
type claimStore struct {
	ClaimFn func(key, claim string) (*ops.IdempotencyRecord, error)
}

func (s claimStore) ClaimOutboxItem(_ context.Context, key, corr, job string, _ time.Time, lease, _ time.Duration) (*ops.IdempotencyRecord, error) {
	return s.record(key, corr, job, lease.String())
}

func (s claimStore) HoldOutboxItem(_ context.Context, key, corr, job string, now, due time.Time, _ time.Duration) (*ops.IdempotencyRecord, error) {
	return s.record(key, corr, job, "held "+due.Sub(now).String())
}

func (s claimStore) record(key, corr, job, claim string) (*ops.IdempotencyRecord, error) {
	if s.ClaimFn != nil {
		return s.ClaimFn(key, claim)
	}
	return &ops.IdempotencyRecord{IdempotencyKey: key, CorrelationID: corr, Job: job, Dispatches: 1}, nil
}

type dispatchFunc func(ingest.Job) error

func (f dispatchFunc) Dispatch(_ context.Context, j ingest.Job) error { return f(j) }

// TestCrowdedCreatesAreGatheredAtTheClaim: past ingest.CreatesBeforeGather
// creates of one athlete in a rate window, the webhook holds a create
// until the next gather tick and hands nothing off (the
// sweeper dispatches it with the others as a burst); other athletes'
// creates, and updates and deletes, are handed off as before, and without
// Gather nothing is gathered. Protection: the gathering at the claim
// (removing it hands off every create of a bulk upload, and the worker
// then defers each one, an UpdateItem more per event).
func TestCrowdedCreatesAreGatheredAtTheClaim(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 2, 6, 0, 3, 0, time.UTC) // the next 10 s tick is 7 s away
	type post struct {
		aspect string
		owner  int64
	}
	posts := []post{{"create", 1}, {"create", 1}, {"create", 1}, {"create", 1}, {"update", 1}, {"delete", 1}, {"create", 2}, {"create", 1}}
	tests := []struct {
		name   string
		gather bool
		want   string // per post: the claim's lease, and "sent" when handed off
	}{
		{"gathering on", true, "5m0s sent,5m0s sent,5m0s sent,held 7s,5m0s sent,5m0s sent,5m0s sent,held 7s"},
		{"gathering off", false, "5m0s sent,5m0s sent,5m0s sent,5m0s sent,5m0s sent,5m0s sent,5m0s sent,5m0s sent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			st := claimStore{ClaimFn: func(key, claim string) (*ops.IdempotencyRecord, error) {
				got = append(got, claim)
				return &ops.IdempotencyRecord{IdempotencyKey: key, Dispatches: 1}, nil
			}}
			d := dispatchFunc(func(ingest.Job) error { got[len(got)-1] += " sent"; return nil })
			h := intake.NewWebhook(intake.WebhookConfig{VerifyToken: "v", SubscriptionID: 7, Lease: 5 * time.Minute,
				Gather: tt.gather}, st, nil, d, slog.New(slog.NewTextHandler(io.Discard, nil)))
			h.Now = func() time.Time { return now }
			mux := http.NewServeMux()
			h.Mount(mux)
			for i, p := range posts {
				body := fmt.Sprintf(`{"object_type":"activity","object_id":%d,"aspect_type":%q,"owner_id":%d,"subscription_id":7,"event_time":%d}`,
					100+i, p.aspect, p.owner, now.Unix())
				rec := httptest.NewRecorder()
				mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, intake.WebhookPath, strings.NewReader(body)))
				if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"accepted"`) {
					t.Fatalf("post %d: %d %s, want 200 accepted", i, rec.Code, rec.Body)
				}
			}
			if s := strings.Join(got, ","); s != tt.want {
				t.Fatalf("claims\n got %s\nwant %s", s, tt.want)
			}
		})
	}
}

// TestARedeliveryDoesNotCrowdTheAthlete: a create Strava delivers twice
// (the second a duplicate) counts once, so three creates and a redelivery
// are all handed off and the fourth create is gathered. Protection: the
// webhook's Forget of a create whose claim was a duplicate (without it the
// third create is gathered, and a runtime test that drains only the worker
// never sees it written).
func TestARedeliveryDoesNotCrowdTheAthlete(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 2, 6, 0, 3, 0, time.UTC)
	seen := map[string]bool{}
	var got []string
	st := claimStore{ClaimFn: func(key, claim string) (*ops.IdempotencyRecord, error) {
		if seen[key] {
			got = append(got, "duplicate")
			return &ops.IdempotencyRecord{IdempotencyKey: key, Status: ops.OutboxReceived}, model.ErrConflict
		}
		seen[key] = true
		got = append(got, claim)
		return &ops.IdempotencyRecord{IdempotencyKey: key, Dispatches: 1}, nil
	}}
	d := dispatchFunc(func(ingest.Job) error { got[len(got)-1] += " sent"; return nil })
	h := intake.NewWebhook(intake.WebhookConfig{VerifyToken: "v", SubscriptionID: 7, Lease: 5 * time.Minute, Gather: true},
		st, nil, d, slog.New(slog.NewTextHandler(io.Discard, nil)))
	h.Now = func() time.Time { return now }
	mux := http.NewServeMux()
	h.Mount(mux)
	for _, id := range []int{1, 1, 2, 3, 4} {
		body := fmt.Sprintf(`{"object_type":"activity","object_id":%d,"aspect_type":"create","owner_id":5,"subscription_id":7,"event_time":%d}`,
			id, now.Unix())
		mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, intake.WebhookPath, strings.NewReader(body)))
	}
	if s, want := strings.Join(got, ","), "5m0s sent,duplicate,5m0s sent,5m0s sent,held 7s"; s != want {
		t.Fatalf("claims\n got %s\nwant %s", s, want)
	}
}
