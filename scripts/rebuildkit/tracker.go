package rebuildkit

import (
	"maps"
	"slices"
	"sync"
)

// listShard marks a user that comes from an explicit list or from the
// previous run's failures rather than from a users-index shard.
const listShard = -1

type status int

const (
	statusPending status = iota
	statusDone
	statusFailed
)

// walk is the in-flight part of one shard: users listed but not yet passed
// by the shard's cursor, in listing (ascending id) order.
type walk struct {
	pending []string
	status  map[string]status
	listed  bool // the listing reached the end of the shard
}

// tracker turns completions (in any order) into a State that a re-run can
// trust: a shard's cursor only moves over a contiguous prefix of finished
// users, and users finished beyond it are kept in Done.
type tracker struct {
	mu     sync.Mutex
	st     *State
	done   map[string]bool
	walks  map[int]*walk
	failed map[string]bool // Failed as loaded: retried first, passed over by the walk
}

func newTracker(st *State) *tracker {
	t := &tracker{st: st, done: map[string]bool{}, walks: map[int]*walk{}, failed: map[string]bool{}}
	for _, u := range st.Done {
		t.done[u] = true
	}
	for u := range st.Failed {
		t.failed[u] = true
	}
	return t
}

// previouslyFailed returns the users a previous run failed, sorted.
func (t *tracker) previouslyFailed() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Sorted(maps.Keys(t.failed))
}

// isDone reports whether u was completed by an earlier run (list targets).
func (t *tracker) isDone(u string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.done[u]
}

// list registers u as listed from shard and reports whether it must be
// processed (false: an earlier run did it, or the retry phase owns it).
func (t *tracker) list(shard int, u string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.walk(shard)
	w.pending = append(w.pending, u)
	switch {
	case t.done[u]:
		w.status[u] = statusDone
	case t.failed[u]:
		w.status[u] = statusFailed
	default:
		return true
	}
	t.advance(shard)
	return false
}

// listed marks the end of shard's listing.
func (t *tracker) listed(shard int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.walk(shard).listed = true
	t.advance(shard)
}

func (t *tracker) complete(shard int, u string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.st.Completed++
	delete(t.st.Failed, u)
	t.done[u] = true
	if shard != listShard {
		t.walk(shard).status[u] = statusDone
		t.advance(shard)
	}
}

func (t *tracker) fail(shard int, u string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.st.Failed[u] = err.Error()
	if shard != listShard {
		t.walk(shard).status[u] = statusFailed
		t.advance(shard)
	}
}

func (t *tracker) walk(shard int) *walk {
	w := t.walks[shard]
	if w == nil {
		w = &walk{status: map[string]status{}}
		t.walks[shard] = w
	}
	return w
}

// advance moves shard's cursor over finished users at the head of its walk.
func (t *tracker) advance(shard int) {
	w := t.walk(shard)
	ss := t.st.Shards[shard]
	for len(w.pending) > 0 && w.status[w.pending[0]] != statusPending {
		u := w.pending[0]
		w.pending = w.pending[1:]
		delete(w.status, u)
		delete(t.done, u) // covered by the cursor from now on
		ss.Cursor = u
	}
	if w.listed && len(w.pending) == 0 {
		ss.Done = true
	}
	t.st.Shards[shard] = ss
}

// shard returns the saved walk of one shard.
func (t *tracker) shard(shard int) ShardState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.st.Shards[shard]
}

// snapshot copies the state for saving.
func (t *tracker) snapshot() *State {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := *t.st
	s.Shards = maps.Clone(t.st.Shards)
	s.Failed = maps.Clone(t.st.Failed)
	s.Done = slices.Sorted(maps.Keys(t.done))
	return &s
}
