package calendar

import (
	"strings"
	"testing"
	"time"
)

func TestParseDate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, given, want, wantErr string
	}{
		{"a day", "2026-03-01", "2026-03-01", ""},
		{"leap day", "2028-02-29", "2028-02-29", ""},
		{"no leap day", "2026-02-29", "", "not a day of the calendar"},
		{"thirtieth of February", "2026-02-30", "", "not a day of the calendar"},
		{"month 13", "2026-13-01", "", "not a day of the calendar"},
		{"an instant", "2026-03-01T00:00:00Z", "", "not a date"},
		{"no padding", "2026-3-1", "", "not a date"},
		{"empty", "", "", "not a date"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseDate(tt.given)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseDate(%q) = %v, %v; want an error saying %q", tt.given, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || FormatDate(got) != tt.want || got.Location() != time.UTC {
				t.Fatalf("ParseDate(%q) = %v, %v; want %s at midnight UTC", tt.given, got, err, tt.want)
			}
		})
	}
}

func TestLocalStartAndDay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, given, wantStart, wantDay string
		ok                              bool
	}{
		{"Strava's misleading Z", "2026-03-01T06:00:00Z", "2026-03-01T06:00:00", "2026-03-01", true},
		{"without zone", "2026-03-01T23:59:59", "2026-03-01T23:59:59", "2026-03-01", true},
		{"an offset is not converted", "2026-03-01T06:00:00+11:00", "2026-03-01T06:00:00", "2026-03-01", true},
		{"empty", "", "", "", false},
		{"garbage", "yesterday", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			start, ok := LocalStart(tt.given)
			if start != tt.wantStart || ok != tt.ok {
				t.Fatalf("LocalStart(%q) = %q, %v; want %q, %v", tt.given, start, ok, tt.wantStart, tt.ok)
			}
			day, ok := LocalDay(start)
			if day != tt.wantDay || ok != tt.ok {
				t.Fatalf("LocalDay(%q) = %q, %v; want %q, %v", start, day, ok, tt.wantDay, tt.ok)
			}
		})
	}
}

// TestSpanOfDaysHoldsTheDayEverywhere: 1 March starts first in Kiribati
// (UTC+14) and ends last on Baker Island (UTC−12); the span holds both and
// nothing of a day that is not 1 March anywhere.
func TestSpanOfDaysHoldsTheDayEverywhere(t *testing.T) {
	t.Parallel()
	day, _ := ParseDate("2026-03-01")
	w := SpanOfDays(day, &day)
	kiribati := time.FixedZone("UTC+14", 14*3600)
	baker := time.FixedZone("UTC-12", -12*3600)
	tests := []struct {
		name string
		at   time.Time
		want bool
	}{
		{"first instant of 1 March, Kiribati", time.Date(2026, 3, 1, 0, 0, 0, 0, kiribati), true},
		{"last instant of 28 February, Kiribati", time.Date(2026, 2, 28, 23, 59, 59, 0, kiribati), false},
		{"last instant of 1 March, Baker Island", time.Date(2026, 3, 1, 23, 59, 59, 0, baker), true},
		{"first instant of 2 March, Baker Island", time.Date(2026, 3, 2, 0, 0, 0, 0, baker), false},
		{"6 am in Sydney", time.Date(2026, 3, 1, 6, 0, 0, 0, time.FixedZone("AEDT", 11*3600)), true},
	}
	for _, tt := range tests {
		if got := w.Contains(tt.at); got != tt.want {
			t.Errorf("%s: %v in %v = %v, want %v", tt.name, tt.at, w, got, tt.want)
		}
	}
	if open := SpanOfDays(day, nil); open.To != nil {
		t.Errorf("SpanOfDays without a last day = %v, want no end", open)
	}
	if got, want := DayOver(day), time.Date(2026, 3, 2, 0, 0, 0, 0, baker); !got.Equal(want) {
		t.Errorf("DayOver(1 March) = %v, want %v (midnight on Baker Island)", got, want)
	}
}
