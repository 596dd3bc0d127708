package jsontext_test

import (
	"slices"
	"testing"

	"github.com/commitcollect/backend/handlers/jsontext"
)

func TestInvalidUTF8(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		given string
		want  []string
	}{
		{"valid text", `{"title":"Run 100 km ✓","sportTypes":["Run"]}`, nil},
		{"a real replacement character is text", `{"title":"a � b \uFFFD"}`, nil},
		{"invalid byte in a value", "{\"title\":\"bad \xff byte\"}", []string{"title"}},
		{"truncated sequence", "{\"modelId\":\"x\",\"title\":\"\xe2\x82\"}", []string{"title"}},
		{"in a list", "{\"sportTypes\":[\"Run\",\"R\xc3\"]}", []string{"sportTypes[1]"}},
		{"nested object", "{\"updates\":{\"title\":\"\xfe\",\"type\":\"Run\"}}", []string{"updates.title"}},
		{"escaped lone surrogate", `{"title":"x\ud800y"}`, []string{"title"}},
		{"escaped pair is fine", `{"title":"\ud83d\ude00"}`, nil},
		{"bad key", "{\"t\xffitle\":\"x\"}", []string{"t\ufffditle (key)"}},
		{"several", "{\"a\":\"\xff\",\"b\":[1,{\"c\":\"\xff\"}],\"d\":\"ok\"}", []string{"a", "b[1].c"}},
		{"top-level string", "\"\xff\"", []string{"body"}},
		{"not JSON at all", "\xff\xff", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := jsontext.InvalidUTF8([]byte(tc.given)); !slices.Equal(got, tc.want) {
				t.Fatalf("InvalidUTF8(%q) = %q, want %q", tc.given, got, tc.want)
			}
		})
	}
}
