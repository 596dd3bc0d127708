package calendar

import (
	"fmt"
	"testing"
	"time"
)

func TestMergeWindows(t *testing.T) {
	t.Parallel()
	day := func(d int) time.Time { return time.Date(2026, 3, d, 0, 0, 0, 0, time.UTC) }
	p := func(t time.Time) *time.Time { return &t }
	tests := []struct {
		name  string
		given []Window
		want  []Window
	}{
		{"none", nil, nil},
		{"disjoint, newest first", []Window{{day(1), p(day(3))}, {day(5), p(day(7))}}, []Window{{day(5), p(day(7))}, {day(1), p(day(3))}}},
		{"touching merge", []Window{{day(1), p(day(3))}, {day(3), p(day(7))}}, []Window{{day(1), p(day(7))}}},
		{"contained", []Window{{day(1), p(day(9))}, {day(3), p(day(4))}}, []Window{{day(1), p(day(9))}}},
		{"open end swallows later", []Window{{day(2), nil}, {day(5), p(day(7))}, {day(1), p(day(3))}}, []Window{{day(1), nil}}},
		{"empty dropped", []Window{{day(3), p(day(3))}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := MergeWindows(tt.given)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("MergeWindows = %v, want %v", got, tt.want)
			}
		})
	}
}
