package cli

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commitcollect/backend/scripts/rebuildkit"
)

func TestRenderProgress(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                              string
		bar                               bool
		done, total, ran, errors, changed int
		elapsed                           time.Duration
		want                              string
	}{
		{
			name: "plain with eta", done: 120, total: 200, ran: 100, errors: 1, changed: 30, elapsed: 10 * time.Second,
			want: "rebuild: users=120/200 (60%) changed=30 errors=1 rate=10.0/s eta=8s",
		},
		{
			name: "plain unknown total", done: 5, ran: 5, elapsed: time.Second,
			want: "rebuild: users=5 changed=0 errors=0 rate=5.0/s eta=?",
		},
		{
			name: "bar half way", bar: true, done: 50, total: 100, ran: 50, elapsed: 5 * time.Second,
			want: "rebuild [###############---------------] 50/100  50%  changed 0  errors 0  10.0/s  ETA 5s",
		},
		{
			name: "bar complete", bar: true, done: 100, total: 100, ran: 100, changed: 7, elapsed: 5 * time.Second,
			want: "rebuild [##############################] 100/100 100%  changed 7  errors 0  20.0/s  ETA 0s",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := RenderProgress(tt.bar, "rebuild", tt.done, tt.total, tt.ran, tt.errors, tt.changed, tt.elapsed)
			if got != tt.want {
				t.Fatalf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestProgressBarRedrawsInPlace(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	p := NewProgress(&out, true, "rebuild")
	clock := &fakeClock{now: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
	p.Now = clock.Now
	p.Start(4, 0)
	clock.Advance(100 * time.Millisecond)
	p.Update(1, 0, 1) // too soon: not drawn
	clock.Advance(200 * time.Millisecond)
	p.Update(2, 0, 2)
	p.Finish(rebuildkit.Summary{Users: 4, MilestonesChanged: 4})
	got := out.String()
	if n := strings.Count(got, "\r"); n != 3 || !strings.HasSuffix(got, "\n") || strings.Count(got, "\n") != 1 {
		t.Fatalf("got %q, want three redraws (start, one update, finish) and one final newline", got)
	}
	if !strings.Contains(got, "2/4  50%") || !strings.Contains(got, "4/4 100%") {
		t.Fatalf("got %q, want the 2/4 and 4/4 states drawn", got)
	}
}

// fakeClock is a clock advanced by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
