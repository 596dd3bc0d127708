package syncjobs

import (
	"context"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/budget"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/ops"
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
		OutboxItem(ctx context.Context, key string) (*ops.IdempotencyRecord, error)
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
