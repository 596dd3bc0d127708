package syncjobs

import (
	"context"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/budget"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/ports"
	"github.com/commitcollect/backend/model/strava"
	"github.com/commitcollect/backend/model/syncstate"
)

// SyncerStores are the adapters a Syncer is handed, each behind the port
// of what a sync job does with it.
type SyncerStores struct {
	// States hold the users' sync states (the job's cursor).
	States SyncStates
	// Outbox holds the job's outbox item (its failures so far).
	Outbox interface {
		// OutboxItem reads the job's outbox item; ErrNotFound when none.
		OutboxItem(ctx context.Context, key string) (*model.IdempotencyRecord, error)
	}
	// Workouts are the stored log a page is compared with, and written.
	Workouts PageWorkouts
	// Guard removes a page's writes made while the user's guard held.
	Guard interface {
		// CheckWrites reads the user guard once after a page's writes and
		// removes them when it holds (ErrUserDeleted, ErrStravaRevoked).
		CheckWrites(ctx context.Context, userID string, ks []model.Key) error
	}
	// Connections are flagged when Strava refuses a token.
	Connections interface {
		// MarkNeedsReauth flags the connection; ErrNotFound when it is gone.
		MarkNeedsReauth(ctx context.Context, userID string, now time.Time) error
	}
	// Pacing is the shared budget's reading and the sync reads' counters.
	Pacing SyncPacing
	// Audits write the sync jobs' audit entries.
	Audits ingest.Auditor
}

// SyncStates read, decide and write a user's sync state with a version
// check (model.ErrSkipWrite from decide writes nothing).
type SyncStates interface {
	UpdateSyncState(ctx context.Context, userID string, decide func(*syncstate.SyncState) error) (*syncstate.SyncState, error)
}

// PageWorkouts are what writing a list page's activities reads and writes.
type PageWorkouts interface {
	// WorkoutLog reads the user's workouts started in windows (one
	// strongly consistent LSI1 query per window).
	WorkoutLog(ctx context.Context, userID string, windows []model.Window) (ports.WorkoutLog, error)
	// UpsertWorkout is the ordered conditional write (newest fetch wins,
	// a tombstone too, both ways); ErrConflict when the stored item wins.
	UpsertWorkout(ctx context.Context, w *model.Workout) error
}

// SyncPacing is the shared budget's reading and the sync reads' counters
// (pacing.go).
type SyncPacing interface {
	budget.RateStore
	// TakeSyncRead counts a sync read in the window of length windowLen
	// containing now unless allowed were counted there (split over shards
	// counters, tried from pick); ErrConflict then.
	TakeSyncRead(ctx context.Context, now time.Time, windowLen time.Duration, allowed, shards int, pick uint64) error
}

// TokenProvider hands out valid access tokens (strava.Refresher).
type TokenProvider interface {
	// AccessToken returns a valid token; ErrUnauthorized when the athlete
	// must reconnect, ErrNotFound without a connection.
	AccessToken(ctx context.Context, userID string) (string, error)
}

// ActivityLister lists an athlete's activities (strava.Client).
type ActivityLister interface {
	// ListActivities reads one page; errors match ErrUnauthorized or
	// ErrRetryable (a 429 is a *strava.APIError).
	ListActivities(ctx context.Context, accessToken string, o strava.ListOptions) ([]strava.Activity, strava.RateLimit, error)
}

// SchedulerStores are the adapters a SyncScheduler is handed, each behind
// the port of what deciding, enqueueing and reconciling syncs does with it.
type SchedulerStores struct {
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
	ClaimOutboxItem(ctx context.Context, key, correlationID, job string, now time.Time, lease, ttl time.Duration) (*model.IdempotencyRecord, error)
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
