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

// SyncStore is the persistence sync jobs need (implemented by
// model/store.Store beside model/store/limits: app.Ingestion), by use case: the sync state, the pages' workouts,
// the budget's pacing and the audit trail.
type SyncStore interface {
	SyncProgress
	PageWriter
	SyncPacing
	ingest.Auditor
}

// SyncProgress is a sync job's own state: its sync state and its outbox
// item.
type SyncProgress interface {
	// UpdateSyncState reads, decides and writes the user's sync state with
	// a version check (model.ErrSkipWrite from decide writes nothing).
	UpdateSyncState(ctx context.Context, userID string, decide func(*syncstate.SyncState) error) (*syncstate.SyncState, error)
	// OutboxItem reads the job's outbox item; ErrNotFound when none.
	OutboxItem(ctx context.Context, key string) (*model.IdempotencyRecord, error)
}

// PageWriter is what writing a list page's activities needs: the stored
// log to compare with, the ordered writes, the guard's check after them and
// the connection's flag when Strava refuses its token.
type PageWriter interface {
	// WorkoutLog reads the user's workouts started in windows (one
	// strongly consistent LSI1 query per window).
	WorkoutLog(ctx context.Context, userID string, windows []model.Window) (ports.WorkoutLog, error)
	// UpsertWorkout is the ordered conditional write (newest fetch wins,
	// a tombstone too, both ways); ErrConflict when the stored item wins.
	UpsertWorkout(ctx context.Context, w *model.Workout) error
	// CheckWrites reads the user guard once after a page's writes and
	// removes them when it holds (ErrUserDeleted, ErrStravaRevoked).
	CheckWrites(ctx context.Context, userID string, ks []model.Key) error
	// MarkNeedsReauth flags the connection; ErrNotFound when it is gone.
	MarkNeedsReauth(ctx context.Context, userID string, now time.Time) error
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

// SyncSchedulerStore is the persistence the sync scheduler needs
// (model/store.Store beside model/store/limits: app.Ingestion), by use case: what a user's sync
// decision reads, the enqueue, and the reconciliation's enumeration.
type SyncSchedulerStore interface {
	SyncView
	// ClaimOutboxItem records a job as received with a lease; ErrConflict
	// when the key is already claimed (an idempotent enqueue).
	ClaimOutboxItem(ctx context.Context, key, correlationID, job string, now time.Time, lease, ttl time.Duration) (*model.IdempotencyRecord, error)
	UserEnumeration
}

// SyncView is what deciding a user's sync reads: the sync state, the
// connection, the milestones and the stored log.
type SyncView interface {
	// SyncState reads the user's sync state; ErrNotFound when none.
	SyncState(ctx context.Context, userID string) (*syncstate.SyncState, error)
	// ConnectionStatus says whose athlete the user is and whether the
	// athlete must reconnect; ErrNotFound without a connection.
	ConnectionStatus(ctx context.Context, userID string) (int64, bool, error)
	// UserMilestones reads the user's milestones (strongly consistent).
	UserMilestones(ctx context.Context, userID string) (ports.UserMilestones, error)
	// WorkoutLog reads the user's workouts started in windows (LSI1).
	WorkoutLog(ctx context.Context, userID string, windows []model.Window) (ports.WorkoutLog, error)
}

// UserEnumeration is the reconciliation's resumable walk of the users
// index.
type UserEnumeration interface {
	// ListUsers pages through one shard of the sparse users index.
	ListUsers(ctx context.Context, shard int, after string, limit int) (ports.UsersPage, error)
	// CountUsers counts the users index (once per reconciliation cycle).
	CountUsers(ctx context.Context) (int, error)
	// ReconcileCursor reads the enumeration cursor; ErrNotFound before the
	// first cycle.
	ReconcileCursor(ctx context.Context) (*syncstate.ReconcileCursor, error)
	// SaveReconcileCursor writes it conditioned on its version;
	// ErrConflict when another run moved it.
	SaveReconcileCursor(ctx context.Context, c *syncstate.ReconcileCursor) error
}
