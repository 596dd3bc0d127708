package jsontext_test

import (
	"strings"
	"testing"

	"github.com/commitcollect/backend/handlers/jsontext"
)

type body struct {
	Title      string   `json:"title"`
	Target     *float64 `json:"target"`
	SportTypes []string `json:"sportTypes"`
}

// TestStrict: what a lenient reader would take one way and a proxy or a log
// another is refused, naming the field. Protections: JSON v2's duplicate
// and case-sensitive names, RejectUnknownMembers, the single-value rule.
func TestStrict(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, given string
		field       string // "" when accepted
	}{
		{"valid", `{"title":"Ride","target":10,"sportTypes":["Ride"]}`, ""},
		{"a key given twice", `{"title":"Ride","title":"Run"}`, "title"},
		{"a known key in another case", `{"Title":"Ride"}`, "Title"},
		{"an unknown key", `{"colour":"red"}`, "colour"},
		{"data after the value", `{"title":"Ride"} {"title":"x"}`, "body"},
		{"a bracket after the value", `{"title":"Ride"}]`, "body"},
		{"a wrong type", `{"target":"ten"}`, "target"},
		{"a wrong type in a list", `{"sportTypes":["Run",1]}`, "sportTypes[1]"},
		{"empty", " ", "body"},
		{"not json", "{", "body"},
		{"invalid UTF-8", "{\"title\":\"R\xff\"}", "title"},
	}
	for _, tt := range tests {
		var b body
		ve := jsontext.Strict([]byte(tt.given), &b)
		switch {
		case tt.field == "" && ve != nil:
			t.Errorf("%s: refused: %v", tt.name, ve)
		case tt.field != "" && (ve == nil || len(ve.Fields) == 0 || ve.Fields[0].Field != tt.field):
			t.Errorf("%s: got %v, want a refusal naming %q", tt.name, ve, tt.field)
		case tt.field != "" && strings.TrimSpace(ve.Fields[0].Message) == "":
			t.Errorf("%s: a refusal without a reason", tt.name)
		}
	}
}
