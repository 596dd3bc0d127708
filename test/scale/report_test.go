package scale

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/model/store/metering"
)

func TestReportFigures(t *testing.T) {
	t.Parallel()
	r := Report{Athletes: 200, Window: 5 * time.Second, SyncShare: 10,
		Lags:           []time.Duration{time.Second, 5 * time.Second, 6 * time.Second},
		Windows:        []Window{{List: 10}, {List: 11}, {List: 0}},
		EditsMilestone: 8, CaughtMilestone: 6, MissedEdits: []string{"scale-7's edit at 1m0s of the day, never caught"},
		HotKeys: []metering.HotKey{
			{Scope: "p-CommitCollect", Writes: 1000, Key: "USER#1", Count: 20},
			{Scope: "p-CommitCollect/GSI1", Writes: 99, Key: "A", Count: 99}, // too few writes to count
			{Scope: "p-CommitCollectIdempotency/Pending", Writes: 400, Key: "OUTBOX#PENDING#0", Count: 100},
		},
	}
	if got := r.Late(); got != 1 {
		t.Errorf("Late() = %d, want 1 (only the lag past one window)", got)
	}
	if got := r.Exceeded(); got != 1 {
		t.Errorf("Exceeded() = %d, want 1 (the share itself is allowed)", got)
	}
	if got := r.EditsCaught(); got != 0.75 {
		t.Errorf("EditsCaught() = %v, want 0.75", got)
	}
	if h, ok := r.Hottest(); !ok || h.Key != "OUTBOX#PENDING#0" {
		t.Errorf("Hottest() = %+v, want the Pending shard (GSI1 has fewer than %d writes)", h, MinWritesForHotKey)
	}
	want := "scale: athletes=200 webhooks_late=1 share_exceeded=1 edits_caught=75.0% hottest_key_share=25.0%"
	if got := r.LastLine(); got != want {
		t.Errorf("LastLine() = %q, want %q", got, want)
	}
	var b strings.Builder
	r.Print(&b)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if last := lines[len(lines)-1]; last != want || !LastLinePattern.MatchString(last) {
		t.Errorf("Print's last line %q, want %q matching the pattern", last, want)
	}
	if !strings.Contains(b.String(), "  missed: scale-7's edit") {
		t.Errorf("Print does not list the missed edit:\n%s", b.String())
	}
	if !strings.Contains(b.String(), "MISSED") {
		t.Errorf("Print does not say a target was missed:\n%s", b.String())
	}
}

func TestArrivalsFollowTheCurve(t *testing.T) {
	t.Parallel()
	s := Reduced
	s.Day = 24 * time.Hour // one hour per hour
	times := s.arrivals(newRand(), 20000)
	var night, evening int
	for _, at := range times {
		if at < 0 || at >= s.Day {
			t.Fatalf("arrival %s outside the day", at)
		}
		switch h := int(at.Hours()); {
		case h == 2:
			night++
		case h == 19:
			evening++
		}
	}
	if ratio := float64(evening) / float64(max(night, 1)); ratio < 0.7*s.PeakFactor || ratio > 1.3*s.PeakFactor {
		t.Errorf("19:00 has %d arrivals, 02:00 %d: ratio %.2f, want about the peak factor %.1f", evening, night, ratio, s.PeakFactor)
	}
}

func newRand() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }
