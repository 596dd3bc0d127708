package rebuildkit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/commitcollect/backend/model"
)

// Target is the set of users a run covers: every user in the sparse users
// index (All), or an explicit list.
type Target struct {
	All     bool
	UserIDs []string
}

// Key identifies the target in a state file, so a state file written for
// another target is refused instead of silently skipping users.
func (t Target) Key() string {
	if t.All {
		return "all"
	}
	h := sha256.Sum256([]byte(strings.Join(t.UserIDs, "\n")))
	return fmt.Sprintf("list:%d:%s", len(t.UserIDs), hex.EncodeToString(h[:8]))
}

// Validate reports a target that names no users, or names one twice.
func (t Target) Validate() error {
	if t.All {
		if len(t.UserIDs) > 0 {
			return fmt.Errorf("target: --all and a user list together: %w", model.ErrInvalid)
		}
		return nil
	}
	if len(t.UserIDs) == 0 {
		return fmt.Errorf("target: no users (use --user, --users-file or --all): %w", model.ErrInvalid)
	}
	seen := make(map[string]bool, len(t.UserIDs))
	for _, id := range t.UserIDs {
		if id == "" {
			return fmt.Errorf("target: empty user id: %w", model.ErrInvalid)
		}
		if seen[id] {
			return fmt.Errorf("target: user %s listed twice: %w", id, model.ErrInvalid)
		}
		seen[id] = true
	}
	return nil
}

// ShardState is how far a run has walked one shard of the users index.
type ShardState struct {
	// Cursor is the last user id such that every user of the shard up to
	// and including it is done (or recorded in Failed).
	Cursor string `json:"cursor,omitempty"`
	// Done is true once the whole shard is done.
	Done bool `json:"done,omitempty"`
}

// State is what a resumable run persists: enough to continue after a kill
// without processing a completed user again.
type State struct {
	// Target is Target.Key() of the run that wrote the file.
	Target string `json:"target"`
	// Shards is the users-index walk of an --all run, per shard.
	Shards map[int]ShardState `json:"shards,omitempty"`
	// Done holds completed users not covered by a shard cursor (for a list
	// run: every completed user).
	Done []string `json:"done,omitempty"`
	// Failed holds users whose recompute failed, with the error; a re-run
	// retries them first.
	Failed map[string]string `json:"failed,omitempty"`
	// Completed counts users completed by every run so far.
	Completed int `json:"completed"`
	// UpdatedAtUtc is when the file was last written.
	UpdatedAtUtc time.Time `json:"updatedAtUtc"`
}

// LoadState reads the state file at path for target; a missing file yields
// a fresh state. It returns an error matching model.ErrInvalid when the file
// is unreadable or was written for another target.
func LoadState(path string, target Target) (*State, error) {
	fresh := &State{Target: target.Key(), Shards: map[int]ShardState{}, Failed: map[string]string{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return fresh, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state %s: %w", path, err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("parse state %s: %v: %w", path, err, model.ErrInvalid)
	}
	if s.Target != target.Key() {
		return nil, fmt.Errorf("state %s was written for target %q, not %q (use another --state file): %w",
			path, s.Target, target.Key(), model.ErrInvalid)
	}
	if s.Shards == nil {
		s.Shards = map[int]ShardState{}
	}
	if s.Failed == nil {
		s.Failed = map[string]string{}
	}
	return &s, nil
}

// Save writes the state atomically (temporary file, then rename), so a kill
// mid-write leaves the previous state intact.
func (s *State) Save(path string, now time.Time) error {
	s.UpdatedAtUtc = now.UTC()
	slices.Sort(s.Done)
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("save state %s: %w", path, err)
		}
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("save state %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("save state %s: %w", path, err)
	}
	return nil
}
