package rebuildkit

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ports"
)

// memUsers is an in-memory users index with the same paging contract as
// store.ListUsers (the DynamoDB-backed walk is tested in enumerate_test.go).
type memUsers map[int][]string

func newMemUsers(ids []string) memUsers {
	m := memUsers{}
	for _, id := range ids {
		var shard int
		_, _ = fmt.Sscanf(keys.UserListPK(id), keys.PrefixUserList+"%d", &shard)
		m[shard] = append(m[shard], id)
	}
	for _, s := range m {
		slices.Sort(s)
	}
	return m
}

func (m memUsers) ListUsers(_ context.Context, shard int, after string, limit int) (ports.UsersPage, error) {
	var p ports.UsersPage
	for _, id := range m[shard] {
		if id <= after {
			continue
		}
		if len(p.UserIDs) == limit {
			p.More = true
			break
		}
		p.UserIDs, p.Next = append(p.UserIDs, id), id
	}
	return p, nil
}

func (m memUsers) CountUsers(context.Context) (int, error) {
	n := 0
	for _, s := range m {
		n += len(s)
	}
	return n, nil
}

// recorder is a Recompute that records who it completed.
type recorder struct {
	mu      sync.Mutex
	done    []string
	failFor map[string]bool
	after   int                // cancel once this many users are done (0: never)
	cancel  context.CancelFunc // called when after is reached
}

func (r *recorder) recompute(ctx context.Context, userID string, dryRun bool) (Outcome, error) {
	select {
	case <-ctx.Done():
		return Outcome{}, ctx.Err()
	case <-time.After(time.Millisecond):
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failFor[userID] {
		return Outcome{}, fmt.Errorf("recompute %s: %w", userID, model.ErrInvalid)
	}
	r.done = append(r.done, userID)
	if r.after > 0 && len(r.done) == r.after {
		r.cancel()
	}
	o := Outcome{UserID: userID, Milestones: 2, MilestonesChanged: 1, AwardsMinted: 3}
	if dryRun {
		o.Drift = []Drift{{UserID: userID, MilestoneID: "m1", Field: FieldProgress, Stored: "1", Recomputed: "2"}}
	}
	return o, nil
}

func userIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("user-%03d", i)
	}
	return out
}

func TestRunListCountsAndRetriesFailures(t *testing.T) {
	t.Parallel()
	state := filepath.Join(t.TempDir(), "state.json")
	users := userIDs(20)
	rec := &recorder{failFor: map[string]bool{"user-003": true, "user-011": true}}
	r := &Runner{Recompute: rec.recompute, Concurrency: 3, StatePath: state}
	sum, err := r.Run(context.Background(), Target{UserIDs: users})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Users != 18 || sum.Errors != 2 || sum.MilestonesChanged != 18 || sum.AwardsMinted != 54 || sum.Milestones != 36 {
		t.Fatalf("first run: got %s, want 18 users, 2 errors, 18 changed, 54 awards", sum)
	}
	if _, ok := sum.Failures["user-011"]; !ok {
		t.Fatalf("got failures %v, want user-011 named", sum.Failures)
	}

	rec2 := &recorder{}
	r.Recompute = rec2.recompute
	sum, err = r.Run(context.Background(), Target{UserIDs: users})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(rec2.done)
	if want := []string{"user-003", "user-011"}; !slices.Equal(rec2.done, want) || sum.Skipped != 18 || sum.Errors != 0 {
		t.Fatalf("re-run: got processed %v skipped %d errors %d, want only %v re-processed", rec2.done, sum.Skipped, sum.Errors, want)
	}
	st, err := LoadState(state, Target{UserIDs: users})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Failed) != 0 || len(st.Done) != 20 || st.Completed != 20 {
		t.Fatalf("state after re-run: got failed %v, %d done, completed %d; want nothing failed and 20 done", st.Failed, len(st.Done), st.Completed)
	}
	if _, err := LoadState(state, Target{UserIDs: users[:3]}); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("state for another target: got %v, want ErrInvalid", err)
	}
}

func TestRunAllResumesAfterCancelWithoutRepeats(t *testing.T) {
	t.Parallel()
	users := userIDs(157)
	index := newMemUsers(users)
	state := filepath.Join(t.TempDir(), "state.json")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &recorder{after: 60, cancel: cancel, failFor: map[string]bool{"user-042": true}}
	r := &Runner{Recompute: rec.recompute, Users: index, Concurrency: 4, PageSize: 7, StatePath: state}
	sum1, err := r.Run(ctx, Target{All: true})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: got %v, want context.Canceled", err)
	}
	if sum1.Users < 60 || sum1.Users >= len(users) {
		t.Fatalf("first run: got %d users done, want it cancelled part-way after 60", sum1.Users)
	}

	rec2 := &recorder{}
	r.Recompute = rec2.recompute
	sum2, err := r.Run(context.Background(), Target{All: true})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, u := range append(slices.Clone(rec.done), rec2.done...) {
		seen[u]++
	}
	for u, n := range seen {
		if n > 1 {
			t.Errorf("user %s processed %d times, want once", u, n)
		}
	}
	if len(seen) != len(users) {
		t.Fatalf("got %d users processed over both runs, want %d", len(seen), len(users))
	}
	if sum2.Skipped != len(rec.done) {
		t.Fatalf("re-run: got skipped=%d, want the %d users the first run completed", sum2.Skipped, len(rec.done))
	}
	if sum2.Errors != 0 || !slices.Contains(rec2.done, "user-042") {
		t.Fatalf("re-run: got %d errors, user-042 retried=%v; want the earlier failure retried", sum2.Errors, slices.Contains(rec2.done, "user-042"))
	}
	st, err := LoadState(state, Target{All: true})
	if err != nil {
		t.Fatal(err)
	}
	for shard := range keys.UserListShards {
		if len(index[shard]) > 0 && (!st.Shards[shard].Done || st.Shards[shard].Cursor != index[shard][len(index[shard])-1]) {
			t.Errorf("shard %d: got %+v, want done at its last user", shard, st.Shards[shard])
		}
	}
	if len(st.Done) > 1 || st.Completed != len(users) {
		t.Fatalf("state: got %d users outside cursors, completed %d; want cursors to cover everything, %d completed", len(st.Done), st.Completed, len(users))
	}

	// A third run has nothing left to do.
	rec3 := &recorder{}
	r.Recompute = rec3.recompute
	if sum3, err := r.Run(context.Background(), Target{All: true}); err != nil || len(rec3.done) != 0 || sum3.Users != 0 {
		t.Fatalf("third run: got %s, %v, processed %v; want nothing processed", sum3, err, rec3.done)
	}
}

func TestRunDryRunCollectsDriftAndProgress(t *testing.T) {
	t.Parallel()
	p := &reports{}
	rec := &recorder{}
	r := &Runner{Recompute: rec.recompute, DryRun: true, Users: newMemUsers(userIDs(5)), Progress: p, Limiter: NewLimiter(1000)}
	sum, err := r.Run(context.Background(), Target{All: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Drift) != 5 || !slices.IsSortedFunc(sum.Drift, func(a, b Drift) int { return strings.Compare(a.UserID, b.UserID) }) {
		t.Fatalf("got drift %v, want one sorted line per user", sum.Drift)
	}
	if len(p.told) != 7 || p.told[0] != "start 0/5" || p.told[5] != "update 5 changed=5 errors=0" || p.told[6] != "finish 5 changed=5" {
		t.Fatalf("reported %q, want a start, one update per user and a finish", p.told)
	}
}

// reports is a Reporter that records what it was told.
type reports struct {
	mu   sync.Mutex
	told []string
}

func (r *reports) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.told = append(r.told, fmt.Sprintf(format, args...))
}

func (r *reports) Start(total, done int) { r.add("start %d/%d", done, total) }

func (r *reports) Update(processed, errors, changed int) {
	r.add("update %d changed=%d errors=%d", processed, changed, errors)
}

func (r *reports) Finish(sum Summary) {
	r.add("finish %d changed=%d", sum.Users, sum.MilestonesChanged)
}

func TestTargetValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		given Target
		want  error
	}{
		{"all", Target{All: true}, nil},
		{"list", Target{UserIDs: []string{"a", "b"}}, nil},
		{"nothing", Target{}, model.ErrInvalid},
		{"both", Target{All: true, UserIDs: []string{"a"}}, model.ErrInvalid},
		{"duplicate", Target{UserIDs: []string{"a", "a"}}, model.ErrInvalid},
		{"empty id", Target{UserIDs: []string{""}}, model.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.given.Validate(); !errors.Is(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}
