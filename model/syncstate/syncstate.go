// Package syncstate holds the items of Strava syncs (backfill and
// reconciliation): a user's sync state and cursor, the sync share's read
// counters, and the reconciliation scheduler's cursor.
package syncstate

import (
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
)

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
	model.Key
	model.Meta
	UserID    string     `dynamodbav:"userId"`
	AthleteID int64      `dynamodbav:"athleteId"`
	State     SyncStatus `dynamodbav:"state"`
	// Mode is the running or last job's kind: SyncModeBackfill or
	// SyncModeReconcile.
	Mode string `dynamodbav:"mode"`
	// ImportedCount is how many activities backfill and reconciliation
	// wrote so far (unchanged ones are not counted: they cost no write).
	ImportedCount int `dynamodbav:"importedCount"`
	// ProjectedCount is the ImportedCount at which the sync last asked for
	// a projection (RequestProjection): the projector recomputes the user
	// when it grows (projections/consumer), so a backfill of many pages
	// costs one recompute at its end (and one per ProjectEveryImported
	// imports on the way), not one per page.
	ProjectedCount int `dynamodbav:"projectedCount"`
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
	// ListedMaxActivityID is the highest activity id the running job listed
	// (Strava's ids grow with every upload).
	ListedMaxActivityID int64 `dynamodbav:"listedMaxActivityId,omitempty"`
	// ReconciledAtUtc is when the last job that listed the recent window
	// from now completed (a reconciliation, or the first backfill); zero
	// before one did. The reconciliation scheduler reconciles again only
	// after an upload since (ReconciledActivityID) or CC_RECONCILE_IDLE.
	ReconciledAtUtc time.Time `dynamodbav:"reconciledAtUtc"`
	// ReconciledActivityID is the highest activity id that job listed: a
	// stored workout with a higher id was uploaded since.
	ReconciledActivityID int64 `dynamodbav:"reconciledActivityId,omitempty"`
	// MilestoneEndUtc is the end of the soonest-ending active milestone of
	// the running job (its priority while it waits for the budget; zero:
	// none, waits last).
	MilestoneEndUtc time.Time `dynamodbav:"milestoneEndUtc"`
	// Version grows with every write (optimistic concurrency).
	Version int64 `dynamodbav:"version"`
}

// Running reports whether a job is under way (running, due or deferred).
func (s *SyncState) Running() bool {
	return s.State == SyncBackfilling || s.State == SyncReconciling || s.State == SyncDeferred
}

// ItemKey implements Entity.
func (s *SyncState) ItemKey() model.Key { return keys.SyncStateKey(s.UserID) }

// Stamp implements Entity.
func (s *SyncState) Stamp() { s.Key, s.Meta = s.ItemKey(), model.CurrentMeta(model.EntitySyncState) }

// Normalize implements Entity. An item without a state reads as idle.
func (s *SyncState) Normalize() error {
	if err := model.NormalizeMeta(&s.Meta, model.EntitySyncState); err != nil {
		return err
	}
	if s.State == "" {
		s.State = SyncIdle
	}
	return nil
}

var _ model.Entity = (*SyncState)(nil)

// SyncReads counts the Strava reads sync jobs took in one budget window
// (one shard of it: SyncReadsKey): the pacing of the sync share
// (handlers/ingest) takes a read only while the count is under the share
// allowed so far in the window. ExpiresAt (TTL) removes it after the
// window.
type SyncReads struct {
	model.Key
	model.Meta
	WindowStartUtc time.Time     `dynamodbav:"windowStartUtc"`
	WindowLen      time.Duration `dynamodbav:"windowLenNs"`
	Shard          int           `dynamodbav:"shard"`
	Reads          int           `dynamodbav:"reads"`
	ExpiresAt      int64         `dynamodbav:"expiresAt"`
}

// ItemKey implements Entity.
func (r *SyncReads) ItemKey() model.Key {
	return keys.SyncReadsKey(r.WindowStartUtc, r.WindowLen, r.Shard)
}

// Stamp implements Entity.
func (r *SyncReads) Stamp() { r.Key, r.Meta = r.ItemKey(), model.CurrentMeta(model.EntitySyncReads) }

// Normalize implements Entity.
func (r *SyncReads) Normalize() error { return model.NormalizeMeta(&r.Meta, model.EntitySyncReads) }

// ReconcileCursor is where the reconciliation's enumeration of users stands
// (RECONCILE#STRAVA / CURSOR): a cycle walks the sparse users index shard
// by shard in user id order, once per CC_RECONCILE_INTERVAL, a page per
// save, so a run that dies resumes from the last saved page and every user
// comes up once per cycle.
type ReconcileCursor struct {
	model.Key
	model.Meta
	// CycleStartedAtUtc is when the current cycle began; the next one
	// begins one interval later (or when this one ends, if later).
	CycleStartedAtUtc time.Time `dynamodbav:"cycleStartedAtUtc"`
	// CycleUsers is how many users the index held when the cycle began:
	// the pace is CycleUsers per interval.
	CycleUsers int `dynamodbav:"cycleUsers"`
	// Visited counts the users this cycle has come to.
	Visited int `dynamodbav:"visited"`
	// Shard and After are the position: the next user is the first of
	// shard Shard after user id After ("" from the start).
	Shard int    `dynamodbav:"shard"`
	After string `dynamodbav:"after"`
	// Done says the cycle reached the end of the last shard.
	Done         bool      `dynamodbav:"done"`
	UpdatedAtUtc time.Time `dynamodbav:"updatedAtUtc"`
	// Version grows with every write (optimistic concurrency).
	Version int64 `dynamodbav:"version"`
}

// ItemKey implements Entity.
func (c *ReconcileCursor) ItemKey() model.Key { return keys.ReconcileCursorKey() }

// Stamp implements Entity.
func (c *ReconcileCursor) Stamp() {
	c.Key, c.Meta = c.ItemKey(), model.CurrentMeta(model.EntityReconcileCursor)
}

// Normalize implements Entity.
func (c *ReconcileCursor) Normalize() error {
	return model.NormalizeMeta(&c.Meta, model.EntityReconcileCursor)
}

var (
	_ model.Entity = (*SyncReads)(nil)
	_ model.Entity = (*ReconcileCursor)(nil)
)

// ProjectEveryImported is how many imports a running sync makes between two
// projections: an athlete sees a long backfill's progress on the way, and a
// short one costs one recompute.
const ProjectEveryImported = 1000

// RequestProjection asks the projector to recompute the user for every
// import so far (see ProjectedCount).
func (s *SyncState) RequestProjection() { s.ProjectedCount = max(s.ProjectedCount, s.ImportedCount) }
