package intake_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/commitcollect/backend/handlers/ingest/intake"
	"github.com/commitcollect/backend/model"
)

// TestDecodeEventRefusesInvalidUTF8: text in an event that is not valid
// UTF-8 (a new activity title in updates, above all) is refused naming the
// field, instead of being decoded with U+FFFD in its place.
func TestDecodeEventRefusesInvalidUTF8(t *testing.T) {
	t.Parallel()
	const ok = `"object_type":"activity","object_id":1,"aspect_type":"update","owner_id":2,"subscription_id":3,"event_time":4`
	tests := []struct {
		name, given string
		want        []string
	}{
		{"invalid byte in updates.title", "{" + ok + ",\"updates\":{\"title\":\"Morning \xff run\"}}", []string{"updates.title"}},
		{"lone surrogate in updates.type", "{" + ok + `,"updates":{"type":"Run\ud800"}}`, []string{"updates.type"}},
		{"invalid aspect_type text", "{\"object_type\":\"activity\",\"object_id\":1,\"aspect_type\":\"upd\xc3\",\"owner_id\":2,\"subscription_id\":3,\"event_time\":4}", []string{"aspect_type"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := intake.DecodeEvent([]byte(tt.given))
			var v *model.ValidationError
			if !errors.As(err, &v) {
				t.Fatalf("got %v, want a *model.ValidationError", err)
			}
			var got []string
			for _, f := range v.Fields {
				got = append(got, f.Field)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("fields %v (%v), want %v", got, err, tt.want)
			}
		})
	}
}
