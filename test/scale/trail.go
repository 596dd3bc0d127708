package scale

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/commitcollect/backend/test/bench"
)

// A slow webhook is explained by where its lag went: waiting for a sender
// and its POST (the harness's own queue), the worker (from the
// acknowledgement to the workout written), and the stream (from the write
// to the projector being handed the record). The worker's part is told by
// what it logged about the activity, in order.

// maxTrailSteps bounds what is kept of one activity's log lines.
const maxTrailSteps = 12

// maxLateLines bounds how many slow webhooks the report spells out, and
// minSlowest is how many are explained when fewer are late.
const (
	maxLateLines = 10
	minSlowest   = 5
)

// trailAttrs are the log attributes a trail step keeps.
var trailAttrs = []string{"reason", "notBefore", "writeStatus"}

// step is one log line the stack wrote about an activity.
type step struct {
	at     time.Time
	msg    string
	detail string
}

// trail keeps, per activity id, the stack's log lines that named it.
type trail struct {
	mu sync.Mutex
	by map[int64][]step
}

func newTrail() *trail { return &trail{by: map[int64][]step{}} }

// note records r when it (or the logger's attributes) names an activity.
func (t *trail) note(attrs []slog.Attr, r slog.Record) {
	var id int64
	var detail []string
	keep := func(a slog.Attr) bool {
		switch {
		case a.Key == "activityId":
			id = a.Value.Int64()
		case slices.Contains(trailAttrs, a.Key):
			detail = append(detail, a.Key+"="+a.Value.String())
		}
		return true
	}
	for _, a := range attrs {
		keep(a)
	}
	r.Attrs(keep)
	if id == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.by[id]) < maxTrailSteps {
		t.by[id] = append(t.by[id], step{at: r.Time, msg: r.Message, detail: strings.Join(detail, " ")})
	}
}

// of returns activity id's steps.
func (t *trail) of(id int64) []step {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.by[id])
}

// since returns activity id's steps logged at or after t (an update's
// trail leaves out its create's).
func (t *trail) since(id int64, from time.Time) []step {
	return slices.DeleteFunc(t.of(id), func(s step) bool { return s.at.Before(from) })
}

// written returns when the worker logged id's workout written at or after
// from, if it did on its own (a burst's writes are logged for the burst).
func (t *trail) written(id int64, from time.Time) (time.Time, bool) {
	for _, s := range t.since(id, from) {
		if s.msg == "workout written" {
			return s.at, true
		}
	}
	return time.Time{}, false
}

// batch is one batch the projector was handed: when, how long its handler
// took, and its records by partition key.
type batch struct {
	at      time.Time
	took    time.Duration
	records int
	byPK    map[string]int
}

// busy says what the projector did between from and to: how long its
// handler ran in that time, over how many batches and records, and the
// partition with the most of them. The stream hands one shard's batches
// one after the other, so a wait behind a busy projector is a wait in the
// stream.
func (t *tracker) busy(from, to time.Time) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var took time.Duration
	n, records := 0, 0
	byPK := map[string]int{}
	for _, b := range t.batches {
		end := b.at.Add(b.took)
		if !b.at.Before(to) || !end.After(from) {
			continue
		}
		ran := end.Sub(b.at) // the part of its run inside from..to
		if b.at.Before(from) {
			ran -= from.Sub(b.at)
		}
		if end.After(to) {
			ran -= end.Sub(to)
		}
		n, records, took = n+1, records+b.records, took+ran
		for pk, c := range b.byPK {
			byPK[pk] += c
		}
	}
	if n == 0 {
		return "the projector was handed nothing meanwhile"
	}
	top, most := "", 0
	for pk, c := range byPK {
		if c > most || (c == most && pk < top) {
			top, most = pk, c
		}
	}
	return fmt.Sprintf("projector busy %s in %d batches of %d records (most of %s: %d)", ms(took), n, records, top, most)
}

// slowWebhook is where one slow (or late) webhook's lag went.
type slowWebhook struct {
	x               *expectation
	queued, worker  time.Duration // before the acknowledgement; acknowledgement → written
	stream          time.Duration // written → projector handed the record
	writtenUnlogged bool          // written by a burst: worker and stream are one figure
	projector       string        // what the projector did while the record waited (tracker.busy)
	steps           []step
	dayStart        time.Time
}

// explainSlowest splits the lag of the late webhooks (at least the
// minSlowest slowest, late or not, so that the tail is told in every run)
// and writes the report's lines: a count by kind, the medians of each
// part, and up to maxLateLines spelled out, slowest first.
func (e *Env) explainSlowest(r *Report, webhooks []*expectation, dayStart time.Time) {
	type lagged struct {
		x    *expectation
		done time.Time
		lag  time.Duration
	}
	var all []lagged
	for _, x := range webhooks {
		if since, done, ok := e.tr.result(x); ok {
			all = append(all, lagged{x, done, done.Sub(since)})
		}
	}
	slices.SortFunc(all, func(a, b lagged) int { return int(b.lag - a.lag) })
	var slow []slowWebhook
	late := 0
	for i, a := range all {
		if a.lag <= r.Window && i >= minSlowest {
			break
		}
		if a.lag > r.Window {
			late++
		}
		done, tr := a.done, e.logs.shared.trail
		l := slowWebhook{x: a.x, queued: a.x.acked.Sub(a.x.since), steps: tr.since(a.x.activity, a.x.since), dayStart: dayStart}
		if w, ok := tr.written(a.x.activity, a.x.since); ok {
			l.worker, l.stream = w.Sub(a.x.acked), done.Sub(w)
			l.projector = e.tr.busy(w, done)
		} else {
			l.worker, l.writtenUnlogged = done.Sub(a.x.acked), true
		}
		slow = append(slow, l)
	}
	if len(slow) == 0 {
		return
	}
	byKind := map[string]int{}
	var queued, worker, stream []time.Duration
	for _, l := range slow {
		byKind[l.x.kind]++
		queued, worker = append(queued, l.queued), append(worker, l.worker)
		if !l.writtenUnlogged {
			stream = append(stream, l.stream)
		}
	}
	kinds := make([]string, 0, len(byKind))
	for k, n := range byKind {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(kinds)
	r.SlowLines = append(r.SlowLines, fmt.Sprintf("slowest %d (%d late) by kind: %s; medians: sender queue + POST %s, acknowledged → written %s, written → projector %s (%d written by a burst: acknowledged → projector counted as written)",
		len(slow), late, strings.Join(kinds, ", "), ms(bench.Percentile(queued, 0.5)), ms(bench.Percentile(worker, 0.5)), ms(bench.Percentile(stream, 0.5)), len(slow)-len(stream)))
	for _, l := range slow[:min(len(slow), maxLateLines)] {
		r.SlowLines = append(r.SlowLines, l.line())
	}
}

// line spells out one slow webhook with its trail, times from its POST.
func (l slowWebhook) line() string {
	x := l.x
	var b strings.Builder
	fmt.Fprintf(&b, "%s of activity %d (athlete %d) at %s of the day (%s UTC): queue + POST %s, then %s to written", x.kind, x.activity, x.athlete,
		ms(x.since.Sub(l.dayStart)), x.since.UTC().Format("15:04:05"), ms(l.queued), ms(l.worker))
	if !l.writtenUnlogged {
		fmt.Fprintf(&b, ", %s to the projector (%s)", ms(l.stream), l.projector)
	} else {
		b.WriteString(" and handed to the projector")
	}
	b.WriteString("; worker:")
	if len(l.steps) == 0 {
		b.WriteString(" nothing logged with its id")
	}
	for _, s := range l.steps {
		fmt.Fprintf(&b, " [+%s %s", ms(s.at.Sub(x.since)), s.msg)
		if s.detail != "" {
			b.WriteString(" " + s.detail)
		}
		b.WriteString("]")
	}
	return b.String()
}
