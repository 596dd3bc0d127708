package respond

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestParsePage: a limit out of bounds, a cursor that is not base64, an
// empty one and one longer than any sort key are 400s naming their field.
// Protection: MaxCursorBytes (an over-long cursor reached DynamoDB and
// answered 500).
func TestParsePage(t *testing.T) {
	t.Parallel()
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	tests := []struct {
		limit, cursor string
		wantLimit     int
		wantAfter     string
		wantField     string
	}{
		{"", "", 50, "", ""},
		{"7", enc("AWARD#x"), 7, "AWARD#x", ""},
		{"0", "", 0, "", "limit"},
		{"201", "", 0, "", "limit"},
		{"ten", "", 0, "", "limit"},
		{"", "!!!", 0, "", "cursor"},
		{"", enc(strings.Repeat("k", MaxCursorBytes)), 50, strings.Repeat("k", MaxCursorBytes), ""},
		{"", enc(strings.Repeat("k", MaxCursorBytes+1)), 0, "", "cursor"},
	}
	for _, tt := range tests {
		limit, after, ve := ParsePage(tt.limit, tt.cursor, 50, 200)
		field := ""
		if ve != nil {
			field = ve.Fields[0].Field
		}
		if limit != tt.wantLimit || after != tt.wantAfter || field != tt.wantField {
			t.Errorf("ParsePage(%q, %.20q…) = %d, %.20q…, %q; want %d, %q, %q", tt.limit, tt.cursor, limit, after, field,
				tt.wantLimit, tt.wantAfter, tt.wantField)
		}
	}
}
