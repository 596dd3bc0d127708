package intake_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/intake"
	"github.com/commitcollect/backend/model"
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeEventValid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		given string
		want  ingest.Event
	}{
		{"activity create (Strava's example)", "activity_create.json", ingest.Event{ObjectType: "activity", ObjectID: 1360128428,
			AspectType: "create", OwnerID: 134815, SubscriptionID: 120475, EventTime: 1516126040}},
		{"activity update with updates", "activity_update.json", ingest.Event{ObjectType: "activity", ObjectID: 1360128428,
			AspectType: "update", Updates: map[string]any{"title": "Messy", "type": "Run", "private": "true"},
			OwnerID: 134815, SubscriptionID: 120475, EventTime: 1516126040}},
		{"Strava's 2017 example: string subscription_id, no updates", "strava_2017_string_subscription.json", ingest.Event{
			ObjectType: "activity", ObjectID: 1360128428, AspectType: "create", OwnerID: 134815, SubscriptionID: 1, EventTime: 1516126040}},
		{"fields Strava may add are ignored", "unknown_fields.json", ingest.Event{ObjectType: "activity", ObjectID: 1360128428,
			AspectType: "update", Updates: map[string]any{"title": "Evening Ride"}, OwnerID: 134815, SubscriptionID: 120475, EventTime: 1516126040}},
		{"ids above 2^53 read exactly", "large_ids.json", ingest.Event{ObjectType: "activity", ObjectID: 9007199254740993,
			AspectType: "create", OwnerID: 9007199254740995, SubscriptionID: 120475, EventTime: 1516126040}},
		{"athlete deauthorization", "athlete_deauthorize.json", ingest.Event{ObjectType: "athlete", ObjectID: 134815,
			AspectType: "update", Updates: map[string]any{"authorized": "false"}, OwnerID: 134815,
			SubscriptionID: 120475, EventTime: 1516126040}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := intake.DecodeEvent(fixture(t, tt.given))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDecodeEventRejects(t *testing.T) {
	t.Parallel()
	const ok = `"object_type":"activity","object_id":1,"aspect_type":"create","owner_id":2,"subscription_id":3,"event_time":4`
	tests := []struct {
		name      string
		given     string
		wantField string
	}{
		{"empty body", ``, "body"},
		{"not JSON", `hello`, "body"},
		{"truncated", `{"object_type":"activity"`, "body"},
		{"array", `[1,2]`, "body"},
		{"trailing data", `{` + ok + `} {}`, "body"},
		{"missing object_id", `{"object_type":"activity","aspect_type":"create","owner_id":2,"subscription_id":3,"event_time":4}`, "object_id"},
		{"missing owner_id", `{"object_type":"activity","object_id":1,"aspect_type":"create","subscription_id":3,"event_time":4}`, "owner_id"},
		{"missing subscription_id", `{"object_type":"activity","object_id":1,"aspect_type":"create","owner_id":2,"event_time":4}`, "subscription_id"},
		{"missing event_time", `{"object_type":"activity","object_id":1,"aspect_type":"create","owner_id":2,"subscription_id":3}`, "event_time"},
		{"missing object_type", `{"object_id":1,"aspect_type":"create","owner_id":2,"subscription_id":3,"event_time":4}`, "object_type"},
		{"missing aspect_type", `{"object_type":"activity","object_id":1,"owner_id":2,"subscription_id":3,"event_time":4}`, "aspect_type"},
		{"null object_id", `{"object_type":"activity","object_id":null,"aspect_type":"create","owner_id":2,"subscription_id":3,"event_time":4}`, "object_id"},
		{"object_id a word", `{"object_type":"activity","object_id":"one","aspect_type":"create","owner_id":2,"subscription_id":3,"event_time":4}`, "object_id"},
		{"object_id empty string", `{"object_type":"activity","object_id":"","aspect_type":"create","owner_id":2,"subscription_id":3,"event_time":4}`, "object_id"},
		{"object_id a fraction in a string", `{"object_type":"activity","object_id":"1.5","aspect_type":"create","owner_id":2,"subscription_id":3,"event_time":4}`, "object_id"},
		{"object_id boolean", `{"object_type":"activity","object_id":true,"aspect_type":"create","owner_id":2,"subscription_id":3,"event_time":4}`, "object_id"},
		{"object_id exponent", `{"object_type":"activity","object_id":1e3,"aspect_type":"create","owner_id":2,"subscription_id":3,"event_time":4}`, "object_id"},
		{"subscription_id overflow in a string", `{"object_type":"activity","object_id":1,"aspect_type":"create","owner_id":2,"subscription_id":"9223372036854775808","event_time":4}`, "subscription_id"},
		{"object_id fractional", `{"object_type":"activity","object_id":1.5,"aspect_type":"create","owner_id":2,"subscription_id":3,"event_time":4}`, "object_id"},
		{"object_id negative", `{"object_type":"activity","object_id":-1,"aspect_type":"create","owner_id":2,"subscription_id":3,"event_time":4}`, "object_id"},
		{"object_type as number", `{"object_type":1,"object_id":1,"aspect_type":"create","owner_id":2,"subscription_id":3,"event_time":4}`, "object_type"},
		{"unknown object_type", `{"object_type":"route","object_id":1,"aspect_type":"create","owner_id":2,"subscription_id":3,"event_time":4}`, "object_type"},
		{"unknown aspect_type", `{"object_type":"activity","object_id":1,"aspect_type":"archive","owner_id":2,"subscription_id":3,"event_time":4}`, "aspect_type"},
		{"athlete create", `{"object_type":"athlete","object_id":1,"aspect_type":"create","owner_id":2,"subscription_id":3,"event_time":4}`, "aspect_type"},
		{"updates not an object", `{` + ok + `,"updates":"x"}`, "updates"},
		{"nested updates value", `{` + ok + `,"updates":{"title":{"a":1}}}`, "updates.title"},
		{"owner_id overflow", `{"object_type":"activity","object_id":1,"aspect_type":"create","owner_id":99999999999999999999,"subscription_id":3,"event_time":4}`, "owner_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := intake.DecodeEvent([]byte(tt.given))
			var v *model.ValidationError
			if !errors.As(err, &v) || !errors.Is(err, model.ErrInvalid) {
				t.Fatalf("got %v, want a *model.ValidationError", err)
			}
			fields := make([]string, len(v.Fields))
			for i, f := range v.Fields {
				fields[i] = f.Field
			}
			if !strings.Contains(strings.Join(fields, " "), tt.wantField) {
				t.Fatalf("got fields %v (%v), want one naming %q", fields, err, tt.wantField)
			}
		})
	}
}

// FuzzDecodeWebhook checks that the decoder never panics, that whatever it
// accepts is valid, and that an accepted event survives a JSON round trip
// unchanged (so the Job the worker receives is the event we validated).
func FuzzDecodeWebhook(f *testing.F) {
	for _, name := range []string{"activity_create.json", "activity_update.json", "athlete_deauthorize.json",
		"strava_2017_string_subscription.json", "unknown_fields.json", "large_ids.json"} {
		f.Add(fixture(f, name))
	}
	f.Add([]byte(`{"object_type":"activity","object_id":1,"aspect_type":"delete","owner_id":2,"subscription_id":3,"event_time":4,"updates":{}}`))
	f.Add([]byte(`{"object_type":"athlete","object_id":1,"aspect_type":"update","owner_id":1,"subscription_id":3,"event_time":4,"updates":{"authorized":false}}`))
	f.Add([]byte(`{"object_id":1e3}`))
	f.Add([]byte(`{"updates":{"a":[1]}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := intake.DecodeEvent(body)
		if err != nil {
			if !errors.Is(err, model.ErrInvalid) {
				t.Fatalf("error %v does not match ErrInvalid", err)
			}
			return
		}
		if ev.ObjectID <= 0 || ev.OwnerID <= 0 || ev.SubscriptionID <= 0 || ev.EventTime <= 0 {
			t.Fatalf("accepted non-positive ids: %+v", ev)
		}
		if ev.ObjectType != ingest.ObjectActivity && ev.ObjectType != ingest.ObjectAthlete {
			t.Fatalf("accepted object type %q", ev.ObjectType)
		}
		switch ev.AspectType {
		case ingest.AspectCreate, ingest.AspectUpdate, ingest.AspectDelete:
		default:
			t.Fatalf("accepted aspect type %q", ev.AspectType)
		}
		raw, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		again, err := intake.DecodeEvent(raw)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", raw, err)
		}
		if !reflect.DeepEqual(again, ev) {
			t.Fatalf("round trip changed the event: got %+v, want %+v", again, ev)
		}
		if ev.IdempotencyKey() != again.IdempotencyKey() {
			t.Fatal("round trip changed the idempotency key")
		}
	})
}

// BenchmarkDecodeEvent measures the decoder on Strava's update example.
func BenchmarkDecodeEvent(b *testing.B) {
	body := fixture(b, "activity_update.json")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := intake.DecodeEvent(body); err != nil {
			b.Fatal(err)
		}
	}
}
