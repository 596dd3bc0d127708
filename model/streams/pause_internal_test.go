package streams

import (
	"testing"
	"time"
)

func TestPauseAfterARound(t *testing.T) {
	t.Parallel()
	o := Options{BatchSize: 100, PollInterval: 200 * time.Millisecond, BatchingWindow: time.Second}
	for _, c := range []struct {
		name       string
		progressed bool
		delivered  int
		full       bool
		want       time.Duration
	}{
		{"nothing found: poll again after the interval", false, 0, false, o.PollInterval},
		{"a lone record and its writes: read on at once", true, busyRound - 1, false, 0},
		{"a busy round: gather the rest of the burst", true, busyRound, false, o.BatchingWindow},
		{"a full batch: the shard holds more, read it at once", true, 100, true, 0},
		{"a full batch among lighter shards: read on at once", true, 130, true, 0},
	} {
		if got := pauseAfter(o, c.progressed, c.delivered, c.full); got != c.want {
			t.Errorf("%s: pauseAfter = %s, want %s", c.name, got, c.want)
		}
	}
}
