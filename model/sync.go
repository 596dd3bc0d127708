package model

import "time"

// EntitySyncState is the entity type of a user's Strava sync state.
const EntitySyncState EntityType = "SYNC_STATE"

// SyncStatus is where a user's Strava sync (backfill or reconciliation) is.
type SyncStatus string

// Sync statuses. backfilling and reconciling mean a job is running (or due);
// deferred means it waits for Strava's budget window to reset (the job is
// kept and resumes by itself); idle means no job is running; failed means the
// last job was parked (an operator can restart it, scripts/syncs).
const (
	SyncBackfilling SyncStatus = "backfilling"
	SyncReconciling SyncStatus = "reconciling"
	SyncDeferred    SyncStatus = "deferred"
	SyncIdle        SyncStatus = "idle"
	SyncFailed      SyncStatus = "failed"
)

// Sync modes (SyncState.Mode): the kind of the running or last job.
const (
	// SyncModeBackfill imports history back to a horizon (first connect, or
	// a milestone whose period starts before what was imported).
	SyncModeBackfill = "backfill"
	// SyncModeReconcile re-lists recent activities to catch edits Strava
	// never pushes (distance, time, crops).
	SyncModeReconcile = "reconcile"
)

// SyncState is a user's Strava sync: the state shown to the athlete and the
// cursor a running job resumes from (USER#{userId} / SYNC#STRAVA). One item
// per user; Version is its optimistic-concurrency counter. The sync jobs
// themselves travel through the outbox like webhook jobs; this item is where
// they keep their progress between pages, so a crash or a deploy resumes
// from CursorBeforeUtc.
type SyncState struct {
	Key
	Meta
	UserID    string     `dynamodbav:"userId"`
	AthleteID int64      `dynamodbav:"athleteId"`
	State     SyncStatus `dynamodbav:"state"`
	// Mode is the running or last job's kind: SyncModeBackfill or
	// SyncModeReconcile.
	Mode string `dynamodbav:"mode"`
	// ImportedCount is how many activities backfill and reconciliation
	// wrote so far (unchanged ones are not counted: they cost no write).
	ImportedCount int `dynamodbav:"importedCount"`
	// HorizonUtc is how far back history is imported, or is being imported
	// while a backfill runs.
	HorizonUtc time.Time `dynamodbav:"horizonUtc"`
	// ImportedFromUtc is how far back a backfill has completed (zero before
	// the first one completes): a milestone starting before it needs a new
	// backfill.
	ImportedFromUtc time.Time `dynamodbav:"importedFromUtc"`
	// LastSyncAtUtc is when the last job completed.
	LastSyncAtUtc time.Time `dynamodbav:"lastSyncAtUtc"`
	// NextSyncAtUtc is when the next page or job is due: the deferral's end
	// while deferred, the next reconciliation while idle.
	NextSyncAtUtc time.Time `dynamodbav:"nextSyncAtUtc"`
	// DeferredReason says why the job waits (while deferred) or why it
	// failed (while failed).
	DeferredReason string    `dynamodbav:"deferredReason,omitempty"`
	UpdatedAtUtc   time.Time `dynamodbav:"updatedAtUtc"`

	// JobKey is the outbox key of the running (or last) job; a job whose key
	// is not this one has been superseded and stops.
	JobKey string `dynamodbav:"jobKey,omitempty"`
	// JobStartedAtUtc is when the running (or last) job started.
	JobStartedAtUtc time.Time `dynamodbav:"jobStartedAtUtc"`
	// WindowFromUtc is the oldest start date the running job lists (the
	// backfill's horizon, or now minus the reconciliation window).
	WindowFromUtc time.Time `dynamodbav:"windowFromUtc"`
	// CursorBeforeUtc is the running job's cursor: the next page lists
	// activities started before it (zero: from now). It is persisted after
	// every page.
	CursorBeforeUtc time.Time `dynamodbav:"cursorBeforeUtc"`
	// Pages and Listed count the running job's pages and listed activities.
	Pages  int `dynamodbav:"pages"`
	Listed int `dynamodbav:"listed"`
	// Version grows with every write (optimistic concurrency).
	Version int64 `dynamodbav:"version"`
}

// Running reports whether a job is under way (running, due or deferred).
func (s *SyncState) Running() bool {
	return s.State == SyncBackfilling || s.State == SyncReconciling || s.State == SyncDeferred
}

// ItemKey implements Entity.
func (s *SyncState) ItemKey() Key { return SyncStateKey(s.UserID) }

// Stamp implements Entity.
func (s *SyncState) Stamp() { s.Key, s.Meta = s.ItemKey(), current(EntitySyncState) }

// Normalize implements Entity. An item without a state reads as idle.
func (s *SyncState) Normalize() error {
	if err := normalize(&s.Meta, EntitySyncState); err != nil {
		return err
	}
	if s.State == "" {
		s.State = SyncIdle
	}
	return nil
}

var _ Entity = (*SyncState)(nil)
