package streams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Checkpoint is how far one shard has been processed.
type Checkpoint struct {
	// SequenceNumber is the last record handled successfully.
	SequenceNumber string `json:"sequenceNumber,omitempty"`
	// Done is true once a closed shard has been read to its end.
	Done bool `json:"done,omitempty"`
}

// CheckpointStore persists checkpoints per shard so a restarted reader
// resumes where it stopped.
type CheckpointStore interface {
	// Load returns the shard's checkpoint (zero when none is stored).
	Load(ctx context.Context, shardID string) (Checkpoint, error)
	// Save stores the shard's checkpoint.
	Save(ctx context.Context, shardID string, cp Checkpoint) error
}

// MemoryCheckpoints keeps checkpoints in memory (tests, one-off replays).
type MemoryCheckpoints struct {
	mu sync.Mutex
	m  map[string]Checkpoint
}

// Load implements CheckpointStore.
func (c *MemoryCheckpoints) Load(_ context.Context, shardID string) (Checkpoint, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[shardID], nil
}

// Save implements CheckpointStore.
func (c *MemoryCheckpoints) Save(_ context.Context, shardID string, cp Checkpoint) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]Checkpoint{}
	}
	c.m[shardID] = cp
	return nil
}

// FileCheckpoints keeps checkpoints in one JSON file, rewritten atomically
// (write to a temporary file, then rename) on every save.
type FileCheckpoints struct {
	Path string
	mu   sync.Mutex
}

func (c *FileCheckpoints) read() (map[string]Checkpoint, error) {
	b, err := os.ReadFile(c.Path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]Checkpoint{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoints %s: %w", c.Path, err)
	}
	m := map[string]Checkpoint{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("parse checkpoints %s: %w", c.Path, err)
	}
	return m, nil
}

// Load implements CheckpointStore.
func (c *FileCheckpoints) Load(_ context.Context, shardID string) (Checkpoint, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, err := c.read()
	if err != nil {
		return Checkpoint{}, err
	}
	return m[shardID], nil
}

// Save implements CheckpointStore.
func (c *FileCheckpoints) Save(_ context.Context, shardID string, cp Checkpoint) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, err := c.read()
	if err != nil {
		return err
	}
	m[shardID] = cp
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encode checkpoints: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(c.Path), 0o755); err != nil {
		return fmt.Errorf("save checkpoints %s: %w", c.Path, err)
	}
	tmp := c.Path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("save checkpoints %s: %w", c.Path, err)
	}
	if err := os.Rename(tmp, c.Path); err != nil {
		return fmt.Errorf("save checkpoints %s: %w", c.Path, err)
	}
	return nil
}
