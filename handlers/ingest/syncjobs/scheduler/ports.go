package scheduler

import (
	"context"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/model/ports"
	"github.com/commitcollect/backend/model/syncstate"
)

// Stores are the adapters a Scheduler is handed, each behind
// the port of what deciding, enqueueing and reconciling syncs does with it.
type Stores struct {
	// States are the users' sync states.
	States interface {
		// SyncState reads the user's sync state; ErrNotFound when none.
		SyncState(ctx context.Context, userID string) (*syncstate.SyncState, error)
	}
	// Connections say whose athlete a user is.
	Connections interface {
		// ConnectionStatus says whose athlete the user is and whether the
		// athlete must reconnect; ErrNotFound without a connection.
		ConnectionStatus(ctx context.Context, userID string) (int64, bool, error)
	}
	// Milestones are what a sync is for.
	Milestones MilestoneReader
	// Log is the user's stored workouts.
	Log interface {
		// WorkoutLog reads the user's workouts started in windows (LSI1).
		WorkoutLog(ctx context.Context, userID string, windows []model.Window) (ports.WorkoutLog, error)
	}
	// Outbox takes the jobs the scheduler enqueues.
	Outbox OutboxClaimer
	// Users are the reconciliation's walk of the users index, and its
	// cursor.
	Users  UserEnumeration
	Cursor ReconcileCursors
}

// MilestoneReader reads a user's milestones (strongly consistent).
type MilestoneReader interface {
	UserMilestones(ctx context.Context, userID string) (ports.UserMilestones, error)
}

// OutboxClaimer records a job as received with a lease; ErrConflict when
// the key is already claimed (an idempotent enqueue).
type OutboxClaimer interface {
	ClaimOutboxItem(ctx context.Context, key, correlationID, job string, now time.Time, lease, ttl time.Duration) (*ops.IdempotencyRecord, error)
}

// UserEnumeration is the reconciliation's resumable walk of the users
// index.
type UserEnumeration interface {
	// ListUsers pages through one shard of the sparse users index.
	ListUsers(ctx context.Context, shard int, after string, limit int) (ports.UsersPage, error)
	// CountUsers counts the users index (once per reconciliation cycle).
	CountUsers(ctx context.Context) (int, error)
}

// ReconcileCursors are where the reconciliation's walk stands.
type ReconcileCursors interface {
	// ReconcileCursor reads the enumeration cursor; ErrNotFound before the
	// first cycle.
	ReconcileCursor(ctx context.Context) (*syncstate.ReconcileCursor, error)
	// SaveReconcileCursor writes it conditioned on its version;
	// ErrConflict when another run moved it.
	SaveReconcileCursor(ctx context.Context, c *syncstate.ReconcileCursor) error
}
