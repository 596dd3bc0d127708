package ingest_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/handoff"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/ops"
)

func TestEventIdentityAndDeauthorization(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		given      ingest.Event
		wantDeauth bool
	}{
		{"activity create", ingest.Event{ObjectType: "activity", AspectType: "create"}, false},
		{"athlete authorized false string", ingest.Event{ObjectType: "athlete", AspectType: "update", Updates: map[string]any{"authorized": "false"}}, true},
		{"athlete authorized false bool", ingest.Event{ObjectType: "athlete", AspectType: "update", Updates: map[string]any{"authorized": false}}, true},
		{"athlete authorized true", ingest.Event{ObjectType: "athlete", AspectType: "update", Updates: map[string]any{"authorized": "true"}}, false},
		{"athlete other update", ingest.Event{ObjectType: "athlete", AspectType: "update", Updates: map[string]any{"name": "x"}}, false},
		{"activity with authorized", ingest.Event{ObjectType: "activity", AspectType: "update", Updates: map[string]any{"authorized": "false"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.given.IsDeauthorization(); got != tt.wantDeauth {
				t.Fatalf("got %v, want %v", got, tt.wantDeauth)
			}
		})
	}
	a := ingest.Event{ObjectType: "activity", ObjectID: 1, AspectType: "update", OwnerID: 2, SubscriptionID: 3, EventTime: 4,
		Updates: map[string]any{"title": "a"}}
	b := a
	b.Updates = map[string]any{"title": "a"}
	if a.IdempotencyKey() != b.IdempotencyKey() {
		t.Fatal("a redelivery (same updates) must have the same key")
	}
	b.Updates = map[string]any{"title": "b"}
	if a.IdempotencyKey() == b.IdempotencyKey() {
		t.Fatal("another edit in the same second (other updates) must have another key")
	}
	b.Updates, b.EventTime = a.Updates, 5
	if a.IdempotencyKey() == b.IdempotencyKey() {
		t.Fatal("a later event must have another key")
	}
}

func TestDecodeJob(t *testing.T) {
	t.Parallel()
	job := ingest.Job{Event: ingest.Event{ObjectType: "activity", ObjectID: 1, AspectType: "create", OwnerID: 2,
		SubscriptionID: 3, EventTime: 4}, CorrelationID: "c1", IdempotencyKey: "k"}
	raw, _ := json.Marshal(job)
	got, err := ingest.DecodeJob(raw)
	if err != nil || got.CorrelationID != "c1" || !reflect.DeepEqual(got.Event, job.Event) {
		t.Fatalf("got %+v, %v; want the job back", got, err)
	}
	for _, bad := range []string{`nope`, `{}`, `{"event":{"object_type":"activity","object_id":1,"owner_id":2},"correlationId":""}`} {
		if _, err := ingest.DecodeJob([]byte(bad)); !errors.Is(err, model.ErrInvalid) {
			t.Fatalf("DecodeJob(%s): got %v, want ErrInvalid", bad, err)
		}
	}
}

// TestABurstPayloadStaysUnderLambdasLimit: a burst of MaxBurst creates fits
// an asynchronous invoke (256 KB) whatever updates a forger put on them.
// Protection: NewBurst leaving the creates' updates out.
func TestABurstPayloadStaysUnderLambdasLimit(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 10<<10)
	jobs := make([]ingest.Job, handoff.MaxBurst)
	for i := range jobs {
		ev := ingest.Event{ObjectType: "activity", ObjectID: 12345678901 + int64(i), AspectType: "create", OwnerID: 123456789,
			SubscriptionID: 123456, EventTime: 1795706724, Updates: map[string]any{"title": big}}
		jobs[i] = ingest.Job{Event: ev, CorrelationID: model.NewID(), IdempotencyKey: ev.IdempotencyKey(), ReceivedAtUtc: time.Now().UTC(),
			Gathered: true}.WithOutbox(&ops.IdempotencyRecord{Failures: 5, Dispatches: 12, ParkedRecord: true})
	}
	raw, err := json.Marshal(ingest.NewBurst(jobs, "burst-"+model.NewID()))
	if err != nil || len(raw) > 256<<10 {
		t.Fatalf("burst payload %d bytes (%v), want at most 256 KB", len(raw), err)
	}
	back, err := ingest.DecodeJob(raw)
	if err != nil || len(back.Burst) != handoff.MaxBurst || back.Burst[7].IdempotencyKey != jobs[7].IdempotencyKey {
		t.Fatalf("decoded %d creates, %v; want the burst back", len(back.Burst), err)
	}
}

// TestKindIsDecidedOnce: every pair Strava may send, and the ones it does
// not, has one kind; the problem of an unknown kind names its field.
func TestKindIsDecidedOnce(t *testing.T) {
	t.Parallel()
	revoked := map[string]any{"authorized": "false"}
	tests := []struct {
		object, aspect string
		updates        map[string]any
		want           ingest.Kind
		field          string
	}{
		{"activity", "create", nil, ingest.KindActivityCreate, ""},
		{"activity", "update", map[string]any{"title": "x"}, ingest.KindActivityUpdate, ""},
		{"activity", "delete", nil, ingest.KindActivityDelete, ""},
		{"athlete", "update", revoked, ingest.KindDeauthorization, ""},
		{"athlete", "update", map[string]any{"authorized": false}, ingest.KindDeauthorization, ""},
		{"athlete", "update", map[string]any{"authorized": "true"}, ingest.KindAthleteUpdate, ""},
		{"athlete", "update", nil, ingest.KindAthleteUpdate, ""},
		{"athlete", "create", nil, ingest.KindUnknown, "aspect_type"},
		{"activity", "upsert", nil, ingest.KindUnknown, "aspect_type"},
		{"club", "update", nil, ingest.KindUnknown, "object_type"},
		{"activity", "update", revoked, ingest.KindActivityUpdate, ""}, // an activity's "authorized" means nothing
	}
	for _, tt := range tests {
		if got := ingest.KindOf(tt.object, tt.aspect, tt.updates); got != tt.want {
			t.Errorf("KindOf(%s, %s, %v) = %d, want %d", tt.object, tt.aspect, tt.updates, got, tt.want)
		}
		if field, _ := ingest.KindProblem(tt.object, tt.aspect); field != tt.field {
			t.Errorf("KindProblem(%s, %s) names %q, want %q", tt.object, tt.aspect, field, tt.field)
		}
		ev := ingest.Event{ObjectType: tt.object, AspectType: tt.aspect, Updates: tt.updates}
		if ev.Burstable() != (tt.object == "activity" && tt.want != ingest.KindUnknown) {
			t.Errorf("%s.%s: Burstable %v", tt.object, tt.aspect, ev.Burstable())
		}
	}
}
