package budget_test

import (
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/ingest/budget"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/strava"
)

func TestBudgetExhausted(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 2, 9, 7, 0, 0, time.UTC)
	win := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	state := func(readShort, readDaily, short, daily int, window time.Time, day string) *ops.RateLimitState {
		return &ops.RateLimitState{ShortLimit: 200, DailyLimit: 2000, ReadShortLimit: 100, ReadDailyLimit: 1000,
			ShortUsage: short, DailyUsage: daily, ReadShortUsage: readShort, ReadDailyUsage: readDaily,
			WindowStartedUtc: window, DayUtc: day}
	}
	tests := []struct {
		name  string
		given *ops.RateLimitState
		want  string // substring; "" = budget available
	}{
		{"fresh", state(0, 0, 0, 0, win, "2026-03-02"), ""},
		{"read short below reserve", state(94, 94, 94, 94, win, "2026-03-02"), ""},
		{"read short at reserve", state(95, 95, 95, 95, win, "2026-03-02"), "read 15-minute usage 95 of 100"},
		{"read short spent in an old window", state(100, 100, 100, 100, win.Add(-15*time.Minute), "2026-03-02"), ""},
		{"overall short at reserve", state(10, 10, 190, 190, win, "2026-03-02"), "15-minute usage 190 of 200"},
		{"read daily at reserve", state(1, 950, 1, 950, win.Add(-time.Hour), "2026-03-02"), "read daily usage 950 of 1000"},
		{"read daily spent yesterday", state(1, 1000, 1, 1000, win.Add(-24*time.Hour), "2026-03-01"), ""},
		{"overall daily at reserve", state(1, 10, 1, 1900, win.Add(-time.Hour), "2026-03-02"), "daily usage 1900 of 2000"},
		{"no limits known", &ops.RateLimitState{WindowStartedUtc: win, DayUtc: "2026-03-02", ReadShortUsage: 1000}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := budget.ExhaustedIn(tt.given, now, budget.DefaultReserve, keys.AthleteReadsWindow)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestNextBudgetReset(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 2, 9, 7, 0, 0, time.UTC)
	win := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	quarter := time.Date(2026, 3, 2, 9, 15, 0, 0, time.UTC)
	midnight := time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC)
	state := func(readShort, readDaily, short, daily int) *ops.RateLimitState {
		return &ops.RateLimitState{ShortLimit: 200, DailyLimit: 2000, ReadShortLimit: 100, ReadDailyLimit: 1000,
			ShortUsage: short, DailyUsage: daily, ReadShortUsage: readShort, ReadDailyUsage: readDaily,
			WindowStartedUtc: win, DayUtc: "2026-03-02"}
	}
	tests := []struct {
		name  string
		given *ops.RateLimitState
		want  time.Time
	}{
		{"read 15-minute budget spent: the next quarter hour", state(100, 300, 100, 300), quarter},
		{"overall 15-minute budget spent", state(10, 300, 200, 300), quarter},
		{"read daily budget spent: midnight UTC", state(100, 1000, 100, 1000), midnight},
		{"overall daily budget spent", state(1, 10, 1, 2000), midnight},
		{"a 429 whose headers show nothing spent: the next quarter hour", state(3, 3, 3, 3), quarter},
		{"a 429 without headers", &ops.RateLimitState{}, quarter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got, why := budget.NextResetIn(tt.given, now, 0, keys.AthleteReadsWindow); !got.Equal(tt.want) || why == "" {
				t.Fatalf("got %v (%q), want %v", got, why, tt.want)
			}
		})
	}
}

func TestAfterRefusal(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 2, 9, 7, 0, 0, time.UTC)
	tests := []struct {
		name string
		rl   strava.RateLimit
		want time.Time
	}{
		{"a 429 with the daily reads spent waits for midnight UTC",
			strava.RateLimit{ReadShortLimit: 100, ReadShortUsage: 40, ReadDailyLimit: 1000, ReadDailyUsage: 1000},
			time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC)},
		{"a 429 with the window's reads spent waits for the quarter hour",
			strava.RateLimit{ReadShortLimit: 100, ReadShortUsage: 100, ReadDailyLimit: 1000, ReadDailyUsage: 400},
			time.Date(2026, 3, 2, 9, 15, 0, 0, time.UTC)},
		{"a 429 whose headers show 95 % spent still waits only for the quarter hour: no reserve",
			strava.RateLimit{ReadShortLimit: 100, ReadShortUsage: 10, ReadDailyLimit: 1000, ReadDailyUsage: 960},
			time.Date(2026, 3, 2, 9, 15, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got, why := budget.AfterRefusal(tt.rl, now, keys.AthleteReadsWindow); !got.Equal(tt.want) || why == "" {
				t.Fatalf("got %v (%q), want %v", got, why, tt.want)
			}
		})
	}
}

func TestRateLimitStateFrom(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 2, 23, 59, 30, 0, time.UTC)
	got := budget.StateIn(strava.RateLimit{ShortLimit: 200, DailyLimit: 2000, ShortUsage: 3, DailyUsage: 4,
		ReadShortLimit: 100, ReadDailyLimit: 1000, ReadShortUsage: 1, ReadDailyUsage: 2}, now, keys.AthleteReadsWindow)
	want := &ops.RateLimitState{ShortLimit: 200, DailyLimit: 2000, ShortUsage: 3, DailyUsage: 4, ReadShortLimit: 100,
		ReadDailyLimit: 1000, ReadShortUsage: 1, ReadDailyUsage: 2,
		WindowStartedUtc: time.Date(2026, 3, 2, 23, 45, 0, 0, time.UTC), DayUtc: "2026-03-02", UpdatedAtUtc: now}
	if *got != *want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestPacedAllowance(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	w := 15 * time.Minute
	head := 90 * time.Second
	tests := []struct {
		name  string
		limit int
		share float64
		at    time.Duration
		want  int
	}{
		{"window start: the head start", 100, 0.5, 0, 5},
		{"half way", 100, 0.5, w / 2, 30},
		{"near the end: the whole share", 100, 0.5, w - time.Second, 50},
		{"share 1 keeps one read", 100, 1, w - time.Second, 99},
		{"tiny limit", 2, 0.5, w / 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := budget.PacedAllowance(tt.limit, tt.share, start.Add(tt.at), w, head); got != tt.want {
				t.Fatalf("got %d, want %d", got, tt.want)
			}
		})
	}
}
