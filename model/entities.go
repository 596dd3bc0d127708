package model

import (
	"time"

	"github.com/commitcollect/backend/model/calendar"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/rules"
	"github.com/commitcollect/backend/model/streak"
)

// Key is the primary key of an item in a PK/SK table (built and parsed only
// by model/keys).
type Key = keys.Key

// EntityType names the kind of an item; every item stores it as entityType.
type EntityType string

// The entity types. Each has a current schema version in schemaVersions.
const (
	EntityProfile          EntityType = "PROFILE"
	EntityStravaConnection EntityType = "STRAVA_CONNECTION"
	EntityAthleteOwner     EntityType = "STRAVA_ATHLETE_OWNER"
	EntityWorkout          EntityType = "WORKOUT"
	EntityMilestone        EntityType = "MILESTONE"
	// EntityMilestonePeriod is one period of a series (Milestone.PeriodOf).
	EntityMilestonePeriod EntityType = "MILESTONE_PERIOD"
	EntityAward           EntityType = "AWARD"
	EntityModelMeta       EntityType = "MODEL_META"
	EntityModelPart       EntityType = "MODEL_PART"
	EntitySession         EntityType = "SESSION"
	EntityAudit           EntityType = "AUDIT"
	EntityIdempotency     EntityType = "IDEMPOTENCY"
	EntityRateLimit       EntityType = "RATE_LIMIT"
	EntityParked          EntityType = "PARKED_RECORD"
	EntityAthleteReads    EntityType = "STRAVA_ATHLETE_READS"
	EntityAthleteDayReads EntityType = "STRAVA_ATHLETE_DAY_READS"
	EntityUserGuard       EntityType = "USER_GUARD"
	EntityMilestoneCount  EntityType = "MILESTONE_COUNT"
	// The sync items (model/syncstate).
	EntitySyncState       EntityType = "SYNC_STATE"
	EntitySyncReads       EntityType = "SYNC_READS"
	EntityReconcileCursor EntityType = "RECONCILE_CURSOR"
)

// Meta is carried by every item: what it is and which schema wrote it.
type Meta struct {
	EntityType    EntityType `dynamodbav:"entityType"`
	SchemaVersion int        `dynamodbav:"schemaVersion"`
}

// Entity is implemented by every stored item type (as a pointer).
type Entity interface {
	// ItemKey is the item's primary key, derived from its identifiers.
	ItemKey() Key
	// Stamp sets the keys, entityType and current schemaVersion before a write.
	Stamp()
	// Normalize upgrades an item read from storage to the current in-memory
	// shape. It returns ErrUnsupportedSchema (a *SchemaVersionError) when the
	// item was written by a newer schema, and ErrInvalid when its entityType
	// is wrong.
	Normalize() error
}

// Profile is a CommitCollect user (USER#{userId} / PROFILE). It carries the
// sparse users-index keys so rebuilds can list users without a Scan.
type Profile struct {
	Key
	Meta
	UserID       string    `dynamodbav:"userId"`
	AthleteID    int64     `dynamodbav:"athleteId"`
	DisplayName  string    `dynamodbav:"displayName"`
	CreatedAtUtc time.Time `dynamodbav:"createdAtUtc"`
	// RevokedAthleteHash is set while the athlete's grant stays revoked:
	// the keyed hash naming the mapping a reconnect finds the user by
	// (keys.RevokedAthleteKey), so an account deletion can remove it.
	RevokedAthleteHash string `dynamodbav:"revokedAthleteHash,omitempty"`
	UserListPK         string `dynamodbav:"GSI2PK"`
	UserListSK         string `dynamodbav:"GSI2SK"`
}

// StravaConnection holds a user's Strava tokens (USER#{userId} /
// STRAVA#CONNECTION). TokenVersion grows with every persisted refresh so two
// workers racing to refresh cannot lose a rotated refresh token. GSI1PK makes
// the connection findable by athlete.
type StravaConnection struct {
	Key
	Meta
	UserID    string `dynamodbav:"userId"`
	AthleteID int64  `dynamodbav:"athleteId"`
	// AccessToken and RefreshToken are the plaintext tokens, in memory
	// only: the store seals them into SealedTokens on write and opens them
	// on read. They are never marshalled.
	AccessToken  string `dynamodbav:"-"`
	RefreshToken string `dynamodbav:"-"`
	// SealedTokens is the token pair sealed with envelope encryption under
	// the context (userId, strava-tokens) (schema version 2).
	SealedTokens *SealedSecret `dynamodbav:"sealedTokens,omitempty"`
	// PlainAccessToken and PlainRefreshToken are the schema version 1
	// (plain text) tokens: Normalize moves them into AccessToken and
	// RefreshToken, and no write keeps them (scripts/sealtokens rewrites
	// the items still holding them).
	PlainAccessToken  string    `dynamodbav:"accessToken,omitempty"`
	PlainRefreshToken string    `dynamodbav:"refreshToken,omitempty"`
	ExpiresAtUtc      time.Time `dynamodbav:"expiresAtUtc"`
	Scopes            []string  `dynamodbav:"scopes"`
	TokenVersion      int64     `dynamodbav:"tokenVersion"`
	NeedsReauth       bool      `dynamodbav:"needsReauth"`
	// NeedsReauthAtUtc is when Strava's refusal flagged NeedsReauth.
	NeedsReauthAtUtc *time.Time `dynamodbav:"needsReauthAtUtc,omitempty"`
	UpdatedAtUtc     time.Time  `dynamodbav:"updatedAtUtc"`
	// GrantedAtUtc is when the athlete granted this connection: the OAuth
	// login that wrote its tokens (token refreshes leave it). A
	// deauthorization event older than the grant is stale. Connections
	// written before it existed use UpdatedAtUtc (GrantTime).
	GrantedAtUtc *time.Time `dynamodbav:"grantedAtUtc,omitempty"`
	// HonouredAtUtc is when a deauthorization's confirmation last found
	// the grant alive (Strava refreshed it and answered its authenticated
	// call; the time is taken before asking). A deauthorization event
	// older than that did not revoke this grant.
	HonouredAtUtc *time.Time `dynamodbav:"honouredAtUtc,omitempty"`
	// DeauthCheckAtMs is when a deauthorization's confirmation last began
	// (epoch milliseconds): one confirmation per athlete at a time, however
	// many deauthorizations name it (store.ClaimDeauthCheck).
	DeauthCheckAtMs int64  `dynamodbav:"deauthCheckAtMs,omitempty"`
	AthleteGSI1PK   string `dynamodbav:"GSI1PK"`
	AthleteGSI1SK   string `dynamodbav:"GSI1SK"`
}

// GrantTime is when the athlete granted the connection: GrantedAtUtc, else
// (an item written before it existed) UpdatedAtUtc, which is never later
// than a real revocation of that grant: only logins and successful refreshes
// move it (a refresh cannot succeed once the grant is revoked; flagging
// needsReauth leaves it, and sealing copies it into GrantedAtUtc first).
func (c *StravaConnection) GrantTime() time.Time {
	if c.GrantedAtUtc != nil && !c.GrantedAtUtc.IsZero() {
		return *c.GrantedAtUtc
	}
	return c.UpdatedAtUtc
}

// AthleteOwner maps a Strava athlete to the one user it belongs to
// (STRAVA#ATHLETE#{athleteId} / OWNER).
type AthleteOwner struct {
	Key
	Meta
	AthleteID    int64     `dynamodbav:"athleteId"`
	UserID       string    `dynamodbav:"userId"`
	CreatedAtUtc time.Time `dynamodbav:"createdAtUtc"`
}

// Workout is a normalized Strava activity (USER#{userId} /
// WORKOUT#STRAVA#{activityId}). Deleted activities are marked, never removed;
// ExpiresAt (TTL) is set only when Strava's terms require the data to go.
// A mark (isDeleted) is a tombstone that can come back: it is written only
// when Strava answered 404 (DeletedReason WorkoutHiddenOrDeleted: deleted,
// or made private, which Strava does not tell apart), ordered by its fetch
// like any answer, and a later fetch or list that shows the activity
// clears it. DeletedReason says why a workout is marked (absent on live
// workouts and on tombstones written before reasons were recorded).
type Workout struct {
	Key
	Meta
	UserID             string    `dynamodbav:"userId"`
	AthleteID          int64     `dynamodbav:"athleteId"`
	ActivityID         int64     `dynamodbav:"activityId"`
	Name               string    `dynamodbav:"name,omitempty"`
	SportType          string    `dynamodbav:"sportType"`
	DistanceMeters     float64   `dynamodbav:"distanceMeters"`
	TotalElevationGain float64   `dynamodbav:"totalElevationGain"`
	MovingTimeSeconds  int64     `dynamodbav:"movingTimeSeconds"`
	ElapsedTimeSeconds int64     `dynamodbav:"elapsedTimeSeconds,omitempty"`
	StartDateUtc       time.Time `dynamodbav:"startDateUtc"`
	// Flags are Strava's manual, trainer and commute marks, which rules
	// read (model/counting); nil on workouts stored before they were kept.
	Flags *rules.Flags `dynamodbav:"flags,omitempty"`
	// StartDateLocal is Strava's start_date_local (calendar.LocalStart: the
	// wall clock where it was recorded) and Timezone Strava's name of that
	// zone; empty on workouts stored before they were kept (LocalDate).
	StartDateLocal string     `dynamodbav:"startDateLocal,omitempty"`
	Timezone       string     `dynamodbav:"timezone,omitempty"`
	IsDeleted      bool       `dynamodbav:"isDeleted"`
	DeletedAtUtc   *time.Time `dynamodbav:"deletedAtUtc,omitempty"`
	DeletedReason  string     `dynamodbav:"deletedReason,omitempty"`
	CreatedAtUtc   time.Time  `dynamodbav:"createdAtUtc"`
	UpdatedAtUtc   time.Time  `dynamodbav:"updatedAtUtc"`
	CorrelationID  string     `dynamodbav:"correlationId"`
	ExpiresAt      int64      `dynamodbav:"expiresAt,omitempty"`
	// DateSK is the date-ordered key (LSI1SK, see WorkoutDateSK) the
	// projector queries its log by. Stamp sets it from StartDateUtc and
	// ActivityID whenever the workout is written.
	DateSK string `dynamodbav:"LSI1SK,omitempty"`
	// FetchStartedAtNs (Unix nanoseconds) is when the Strava fetch this item
	// was written from started (for a tombstone: the fetch that answered
	// 404). Writes are ordered by it: an answer whose fetch started earlier
	// than the stored one's is dropped. Absent on items (and tombstones)
	// written before it existed.
	FetchStartedAtNs int64 `dynamodbav:"fetchStartedAtNs,omitempty"`
	// SyncJobKey names the sync job whose list page wrote this version of
	// the item (absent when a webhook fetch or a 404 wrote it). The
	// projector leaves such writes to the page's end, which projects the
	// whole page at once (the sync state's importedCount grows).
	SyncJobKey string `dynamodbav:"syncJobKey,omitempty"`
}

// WorkoutHiddenOrDeleted is the DeletedReason of a workout whose activity
// Strava answered 404 for: deleted, or made private (invisible to an
// activity:read grant). Strava's answer does not tell the two apart, so the
// tombstone comes back when a later fetch or list shows the activity.
const WorkoutHiddenOrDeleted = "hidden-or-deleted"

// NotFoundTombstoneTTL is how long a tombstone of an activity that was never
// stored lives (a create Strava answered 404 for, such as a forged one): it
// only orders fetches still in flight, which end within the outbox's lease
// and retries, so it expires instead of staying for good.
const NotFoundTombstoneTTL = 24 * time.Hour

// FetchStarted is FetchStartedAtNs as a time (zero when absent).
func (w *Workout) FetchStarted() time.Time {
	if w.FetchStartedAtNs == 0 {
		return time.Time{}
	}
	return time.Unix(0, w.FetchStartedAtNs).UTC()
}

// MilestoneStatus is where a milestone is in its life.
type MilestoneStatus string

// Milestone statuses; active → completed, never back. StatusEnded is never
// stored: readers show it once an active period is over (StatusAt).
const (
	StatusActive    MilestoneStatus = "active"
	StatusCompleted MilestoneStatus = "completed"
	StatusEnded     MilestoneStatus = "ended"
)

// MilestoneDefinition is what the athlete committed to. Changing it re-triggers
// the projection. The period is in UTC instants (PeriodStartAtUtc, optional
// PeriodEndAtUtc, end excluded) or in the athlete's local calendar
// (PeriodStartDate, optional PeriodEndDate, YYYY-MM-DD, both days included).
type MilestoneDefinition struct {
	ModelID          string     `dynamodbav:"modelId" json:"modelId"`
	Title            string     `dynamodbav:"title" json:"title"`
	Metric           Metric     `dynamodbav:"metric" json:"metric"`
	Target           float64    `dynamodbav:"target" json:"target"`
	SportTypes       []string   `dynamodbav:"sportTypes" json:"sportTypes"`
	PeriodStartAtUtc time.Time  `dynamodbav:"periodStartAtUtc" json:"periodStartAtUtc"`
	PeriodEndAtUtc   *time.Time `dynamodbav:"periodEndAtUtc,omitempty" json:"periodEndAtUtc,omitempty"`
	PeriodStartDate  string     `dynamodbav:"periodStartDate,omitempty" json:"periodStartDate,omitempty"`
	PeriodEndDate    string     `dynamodbav:"periodEndDate,omitempty" json:"periodEndDate,omitempty"`
	// Recurrence (weekly, monthly, yearly; local days only) makes the
	// milestone a series: one period per week, month or year, each with
	// its own progress and awards (period items, Milestone.PeriodOf).
	Recurrence string `dynamodbav:"recurrence,omitempty" json:"recurrence,omitempty"`
	PartCount  int    `dynamodbav:"partCount" json:"partCount"`
	// Rules are the conditions each activity must meet (nil: none).
	Rules *rules.Rules `dynamodbav:"rules,omitempty" json:"rules,omitempty"`
	// Streak is how a streak milestone counts (MetricStreak only).
	Streak *streak.Rule `dynamodbav:"streak,omitempty" json:"streak,omitempty"`
}

// Projection is the derived part of a milestone, always recomputable from
// the workout log. ProgressValue is in integer units: millimetres for
// distance and elevation, seconds for moving_time, workouts for count.
type Projection struct {
	ProgressValue   int64           `dynamodbav:"progressValue"`
	WorkoutsCounted int             `dynamodbav:"workoutsCounted"`
	AwardedParts    int             `dynamodbav:"awardedParts"`
	Status          MilestoneStatus `dynamodbav:"status"`
	Truncated       bool            `dynamodbav:"truncated"`
	// ExactFromUtc is set when Truncated: the value is exact for workouts
	// started at or after it; older workouts of the period were left out by
	// the guardrail.
	ExactFromUtc   *time.Time         `dynamodbav:"exactFromUtc,omitempty"`
	ProjectedAtUtc *time.Time         `dynamodbav:"projectedAtUtc,omitempty"`
	Weeks          *calendar.WeekSums `dynamodbav:"weeks,omitempty"` // a few weeks' period: sums per week; nil: unknown
	// Excluded counts the period's workouts that did not count, by reason
	// (rules.Reason); nil when none. A streak counts days instead: those
	// on which nothing counted, by the reason of the first left out.
	Excluded map[string]int `dynamodbav:"excluded,omitempty"`
	// Days are a streak's active days (streak.Days); nil: unknown.
	Days *streak.Days `dynamodbav:"days,omitempty"`
}

// Milestone is a user's commitment plus its projected progress (USER#{userId}
// / MILESTONE#{milestoneId}). Version is the optimistic-concurrency counter:
// every projected write is conditioned on it and increments it.
type Milestone struct {
	Key
	Meta
	UserID      string `dynamodbav:"userId"`
	MilestoneID string `dynamodbav:"milestoneId"`
	MilestoneDefinition
	Projection
	Version      int64     `dynamodbav:"version"`
	CreatedAtUtc time.Time `dynamodbav:"createdAtUtc"`
	// PeriodOf, on a period item of a series (USER#{userId} /
	// SERIES#{milestoneId}#{first day}), is the period's first day: the
	// definition's local days are then the period's and Recurrence is empty.
	PeriodOf string `dynamodbav:"periodOf,omitempty"`
	// Current, on a series' item, names the period whose state the item's
	// projection and version hold (projections.Occurrence).
	Current *CurrentPeriod `dynamodbav:"current,omitempty"`
	// WrittenBy says who wrote the item last: WriterAPI for definition writes,
	// WriterProjector for projected progress. The stream filter and the
	// projector use it so the projector's own writes never re-trigger it.
	WrittenBy string `dynamodbav:"writtenBy"`
}

// CurrentPeriod is the newest projected period of a series, kept on the
// series' item, which every event reads anyway. Minted mirrors its award
// items (SERIES#…#AWARD#…): part → awardedAtUtc in Unix seconds, enough to
// justify an award (projections.Held) in about 10 bytes a part.
type CurrentPeriod struct {
	PeriodOf     string        `dynamodbav:"periodOf"`
	CreatedAtUtc time.Time     `dynamodbav:"createdAtUtc"`
	Minted       map[int]int64 `dynamodbav:"minted,omitempty"`
}

// Writers of a milestone item (Milestone.WrittenBy).
const (
	WriterAPI       = "api"
	WriterProjector = "projector"
)

// Award is one minted part of a milestone's model (USER#{userId} /
// MILESTONE#{milestoneId}#AWARD#{partIndex}), with a copy of its part's name
// and metadata as they were at the mint. Awards are permanent: each is also
// filed in the user's collection (CollectedKey), where it stays when its
// milestone is deleted.
type Award struct {
	Key
	Meta
	UserID        string            `dynamodbav:"userId"`
	MilestoneID   string            `dynamodbav:"milestoneId"`
	ModelID       string            `dynamodbav:"modelId"`
	PartIndex     int               `dynamodbav:"partIndex"`
	PartName      string            `dynamodbav:"partName"`
	PartMetadata  map[string]string `dynamodbav:"partMetadata,omitempty"`
	AwardedAtUtc  time.Time         `dynamodbav:"awardedAtUtc"`
	ActivityID    int64             `dynamodbav:"activityId"`
	CorrelationID string            `dynamodbav:"correlationId"`
	// PeriodOf is the first day of the series' period the award belongs
	// to (empty for a milestone that does not repeat).
	PeriodOf string `dynamodbav:"periodOf,omitempty"`
	// Collected says the award's entry in the user's collection
	// (CollectedKey) exists; awards minted before the collection lack it
	// until the projector files them.
	Collected bool `dynamodbav:"collected,omitempty"`
}

// CollectedKey addresses the award's entry in the user's collection: the
// same award filed by the time it was minted, which outlives its milestone.
func (a *Award) CollectedKey() Key {
	return keys.CollectedAwardKey(a.UserID, a.AwardedAtUtc, keys.AwardOwnerID(a.MilestoneID, a.PeriodOf), a.PartIndex)
}

// ModelMeta describes a collectible model (MODEL#{modelId} / META).
type ModelMeta struct {
	Key
	Meta
	ModelID        string `dynamodbav:"modelId" json:"modelId"`
	Name           string `dynamodbav:"name" json:"name"`
	Description    string `dynamodbav:"description,omitempty" json:"description,omitempty"`
	PartCount      int    `dynamodbav:"partCount" json:"partCount"`
	CatalogVersion int    `dynamodbav:"catalogVersion" json:"catalogVersion"`
}

// ModelPart is one part of a model (MODEL#{modelId} / PART#{index}); awards
// copy its metadata.
type ModelPart struct {
	Key
	Meta
	ModelID     string            `dynamodbav:"modelId" json:"modelId"`
	PartIndex   int               `dynamodbav:"partIndex" json:"partIndex"`
	Name        string            `dynamodbav:"name" json:"name"`
	Description string            `dynamodbav:"description,omitempty" json:"description,omitempty"`
	Metadata    map[string]string `dynamodbav:"metadata,omitempty" json:"metadata,omitempty"`
}

// Session backs the BFF's session cookie (SESSION#{id} / META in the sessions
// table). ExpiresAtUtc is epoch seconds, the table's TTL attribute.
type Session struct {
	Key
	Meta
	// SessionID is the SessionHash of the cookie value, never the cookie.
	SessionID    string    `dynamodbav:"sessionId"`
	UserID       string    `dynamodbav:"userId"`
	CreatedAtUtc time.Time `dynamodbav:"createdAtUtc"`
	ExpiresAtUtc int64     `dynamodbav:"expiresAtUtc"`
}

// Expired reports whether the session is past its expiry at now (TTL deletion
// is lazy, so readers must check).
func (s *Session) Expired(now time.Time) bool { return now.Unix() >= s.ExpiresAtUtc }

// AuditEntry is one line of the audit trail (audit table). SubjectPK is the
// user's partition, or the athlete's when no user is known.
type AuditEntry struct {
	Key
	Meta
	UserID        string            `dynamodbav:"userId,omitempty"`
	EventType     string            `dynamodbav:"eventType"`
	CorrelationID string            `dynamodbav:"correlationId"`
	RequestID     string            `dynamodbav:"requestId"`
	OccurredAtUtc time.Time         `dynamodbav:"occurredAtUtc"`
	Details       map[string]string `dynamodbav:"details,omitempty"`
	CorrelationPK string            `dynamodbav:"GSI1PK,omitempty"`
	CorrelationSK string            `dynamodbav:"GSI1SK,omitempty"`
	EventMonthPK  string            `dynamodbav:"GSI2PK,omitempty"`
	EventMonthSK  string            `dynamodbav:"GSI2SK,omitempty"`
	ExpiresAt     int64             `dynamodbav:"expiresAt"`
	// Routine marks an entry written for nearly every event (a workout
	// written, progress updated): Stamp gives it no index keys, so it lands
	// in neither audit index (1 WCU instead of 3). No code path queries the
	// audit indexes; they serve operators looking for the rare entries
	// (awards, completions, truncations, deauthorizations, rejections) by
	// correlation id or by event type and month. A routine entry is still
	// found by user and time (the table's key) and its correlation id is
	// on the workout, the outbox item and every log line. Not stored.
	Routine bool `dynamodbav:"-"`
	// KeyAtUtc, when set, is the instant the sort key is built from instead
	// of OccurredAtUtc: entries that need a deterministic key (AWARD_MINTED,
	// see AwardMintedAuditKey) set it to something stable.
	KeyAtUtc *time.Time `dynamodbav:"keyAtUtc,omitempty"`
}

// UserGuard is the per-user state checked after every in-flight write of
// user data (USER#{userId} / GUARD, right before the milestones so the
// projector reads it with them; deleting a user's items always keeps it):
//
//   - DeletedAtUtc: the account was deleted (DELETE /v1/me). A write that
//     lands afterwards removes what it wrote: deletion is final. The guard
//     then expires (ExpiresAt, UserGuardRetentionDays) long after anything in
//     flight could still land.
//   - StravaRevokedAtUtc / StravaDataExpiresAt: a confirmed deauthorization
//     (the event's time; when its purge began): a workout written afterwards
//     removes itself. A reconnect clears both.
//
// A user without a guard item has no restriction.
type UserGuard struct {
	Key
	Meta
	UserID              string    `dynamodbav:"userId"`
	DeletedAtUtc        time.Time `dynamodbav:"deletedAtUtc,omitempty"`
	StravaRevokedAtUtc  time.Time `dynamodbav:"stravaRevokedAtUtc,omitempty"`
	StravaDataExpiresAt int64     `dynamodbav:"stravaDataExpiresAt,omitempty"`
	UpdatedAtUtc        time.Time `dynamodbav:"updatedAtUtc"`
	ExpiresAt           int64     `dynamodbav:"expiresAt,omitempty"`
}

// Deleted says whether the user's account was deleted.
func (g *UserGuard) Deleted() bool { return !g.DeletedAtUtc.IsZero() }

// Revoked says whether a confirmed deauthorization holds (no reconnect since).
func (g *UserGuard) Revoked() bool {
	return !g.StravaRevokedAtUtc.IsZero() && g.StravaDataExpiresAt > 0
}

// MilestoneCount counts a user's milestones (USER#{userId} /
// COUNT#MILESTONES) so that creating one can be refused past
// MaxMilestonesPerUser with a conditional write: the count and the new
// milestone are written in one transaction.
type MilestoneCount struct {
	Key
	Meta
	UserID       string    `dynamodbav:"userId"`
	Count        int       `dynamodbav:"count"`
	UpdatedAtUtc time.Time `dynamodbav:"updatedAtUtc"`
}

// OutboxTTL is how long an accepted event's outbox item (its idempotency
// key) is kept after its last change: long past Strava's retries.
const OutboxTTL = 7 * 24 * time.Hour
