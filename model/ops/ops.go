// Package ops holds the records of the pipeline's own operation, apart from
// the athletes' data: the outbox's items (IdempotencyRecord), the Strava
// read counters and the shared rate reading, and parked records.
package ops

import (
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
)

// OutboxStatus is where an accepted webhook event is in its life.
type OutboxStatus string

// Outbox statuses: received → done or parked. A received item is pending:
// it carries the sparse pending-index keys until it leaves that state.
const (
	// OutboxReceived: accepted (answered 200) and not yet settled by a worker.
	OutboxReceived OutboxStatus = "received"
	// OutboxDone: the worker finished the job (written, or deliberately
	// nothing to do).
	OutboxDone OutboxStatus = "done"
	// OutboxParked: the job failed for good (poison, or bounded retries
	// spent); Reason says why.
	OutboxParked OutboxStatus = "parked"
)

// IdempotencyRecord is an accepted webhook event and the durable hand-off to
// the worker, the outbox (idempotency table, keyed by IdempotencyKey
// alone). Claiming records it as received with the job and a lease; the
// worker settles it as done or parked. While received it is listed in the
// sparse pending index (PendingPK/PendingSK, see OutboxPendingPK) under the
// instant it is next due: when the lease lapses or NotBefore passes, the
// sweeper dispatches it again. Schema 1 records (before the outbox) carry no
// status and read as done: their events were handed off at most once.
type IdempotencyRecord struct {
	model.Meta
	IdempotencyKey string       `dynamodbav:"IdempotencyKey"`
	CorrelationID  string       `dynamodbav:"correlationId"`
	CreatedAtUtc   time.Time    `dynamodbav:"createdAtUtc"`
	ExpiresAt      int64        `dynamodbav:"expiresAt"`
	Status         OutboxStatus `dynamodbav:"status,omitempty"`
	// Job is the worker's input as JSON (handlers/ingest.Job).
	Job string `dynamodbav:"job,omitempty"`
	// LeaseUntil (Unix ms): a dispatch is presumed in flight until then.
	LeaseUntil int64 `dynamodbav:"leaseUntil,omitempty"`
	// NotBefore (Unix ms): the job must not run before then (a deferral,
	// e.g. until Strava's rate-limit window resets, or a create held at the
	// claim for a burst). An item with one is the sweeper's: a redelivery
	// of its event is a duplicate until it is settled.
	NotBefore int64 `dynamodbav:"notBefore,omitempty"`
	// Dispatches counts hand-offs (the first one and every re-dispatch).
	Dispatches int `dynamodbav:"dispatches"`
	// Failures counts retryable failures; bounded, then the item is parked.
	Failures int `dynamodbav:"failures"`
	// Deferrals counts postponements that are not failures (budget, cap).
	Deferrals int `dynamodbav:"deferrals"`
	// Reason is why the item was parked, deferred or last failed.
	Reason       string    `dynamodbav:"reason,omitempty"`
	UpdatedAtUtc time.Time `dynamodbav:"updatedAtUtc"`
	// PendingPK and PendingSK exist only while Status is received.
	PendingPK string `dynamodbav:"PendingPK,omitempty"`
	PendingSK string `dynamodbav:"PendingSK,omitempty"`
	// ParkedRecord says a PARKED#WORKER record of this item's job was (or
	// was about to be) written: a later run that finishes the job removes
	// it, and only then pays for the delete.
	ParkedRecord bool `dynamodbav:"parkedRecord,omitempty"`
	// TTLSeconds is the lifetime the claim gave the item: ExpiresAt (TTL)
	// lies that long after the item's last activity, after DueAt while it
	// is received, after the settle once settled (0: claimed by older
	// code, OutboxTTL applies).
	TTLSeconds int64 `dynamodbav:"ttlSeconds,omitempty"`
}

// DueAt is when a received item is next due for dispatch: the later of its
// lease and its not-before time.
func (r *IdempotencyRecord) DueAt() time.Time {
	return time.UnixMilli(max(r.LeaseUntil, r.NotBefore)).UTC()
}

// AthleteReads counts the Strava reads made for one athlete in one 15-minute
// window (STRAVA#ATHLETE#{id} / READS#{window}); it caps what a flood of
// events for one athlete can spend. ExpiresAt (TTL) removes it after the
// window.
type AthleteReads struct {
	model.Key
	model.Meta
	AthleteID      int64     `dynamodbav:"athleteId"`
	WindowStartUtc time.Time `dynamodbav:"windowStartUtc"`
	Reads          int       `dynamodbav:"reads"`
	ExpiresAt      int64     `dynamodbav:"expiresAt"`
	// Unverified: the unverified allowance's counter (keys.UnverifiedReadsKey).
	Unverified bool `dynamodbav:"unverified,omitempty"`
}

// AthleteDayReads counts the Strava reads made for one athlete in one UTC
// day (STRAVA#ATHLETE#{id} / READSDAY#{yyyymmdd}): the daily allowance
// beside the window cap. Only athletes who read past an instance's own
// allowance have one, so the day's readers listing (GSI2, keys.ReadersPK)
// holds the heavy readers only. ExpiresAt (TTL) removes it two days later.
type AthleteDayReads struct {
	model.Key
	model.Meta
	AthleteID int64  `dynamodbav:"athleteId"`
	DayUtc    string `dynamodbav:"dayUtc"`
	Reads     int    `dynamodbav:"reads"`
	ExpiresAt int64  `dynamodbav:"expiresAt"`
	ReadersPK string `dynamodbav:"GSI2PK,omitempty"`
	ReadersSK string `dynamodbav:"GSI2SK,omitempty"`
	// Unverified: the unverified allowance's (keys.UnverifiedDayReadsKey; no GSI2).
	Unverified bool `dynamodbav:"unverified,omitempty"`
}

// RateLimitState is the shared view of Strava's per-application budget,
// updated from the X-RateLimit-* and X-ReadRateLimit-* response headers.
type RateLimitState struct {
	model.Key
	model.Meta
	ShortLimit       int       `dynamodbav:"shortLimit"`
	ShortUsage       int       `dynamodbav:"shortUsage"`
	DailyLimit       int       `dynamodbav:"dailyLimit"`
	DailyUsage       int       `dynamodbav:"dailyUsage"`
	ReadShortLimit   int       `dynamodbav:"readShortLimit"`
	ReadShortUsage   int       `dynamodbav:"readShortUsage"`
	ReadDailyLimit   int       `dynamodbav:"readDailyLimit"`
	ReadDailyUsage   int       `dynamodbav:"readDailyUsage"`
	WindowStartedUtc time.Time `dynamodbav:"windowStartedUtc"`
	DayUtc           string    `dynamodbav:"dayUtc"`
	UpdatedAtUtc     time.Time `dynamodbav:"updatedAtUtc"`
}

// ParkedRecord is a record a failure path could not process and set aside
// for inspection and redrive (the local stand-in for an SQS DLQ). Its
// payload may hold a whole workout image or job, so it names the user (and
// athlete) it belongs to, which an account deletion uses to delete it, and
// expires ParkedRetentionDays after parking.
type ParkedRecord struct {
	model.Key
	model.Meta
	Source        string    `dynamodbav:"source"`
	RecordID      string    `dynamodbav:"recordId"`
	Reason        string    `dynamodbav:"reason"`
	Payload       string    `dynamodbav:"payload"`
	CorrelationID string    `dynamodbav:"correlationId,omitempty"`
	ParkedAtUtc   time.Time `dynamodbav:"parkedAtUtc"`
	// UserID is the user the record belongs to, when the parking path knew
	// it; AthleteID the Strava athlete, when it knew that.
	UserID    string `dynamodbav:"userId,omitempty"`
	AthleteID int64  `dynamodbav:"athleteId,omitempty"`
	// ExpiresAt (TTL, epoch seconds) removes a record nobody redrove.
	ExpiresAt int64 `dynamodbav:"expiresAt,omitempty"`
}

// ItemKey implements model.Entity; the idempotency table has no sort key, so SK is
// empty.
func (r *IdempotencyRecord) ItemKey() model.Key { return model.Key{PK: r.IdempotencyKey} }

// Stamp implements model.Entity.
func (r *IdempotencyRecord) Stamp() { r.Meta = model.CurrentMeta(model.EntityIdempotency) }

// Normalize implements model.Entity. A schema 1 record (before the outbox) has no
// status: its event was handed off once and is read as done.
func (r *IdempotencyRecord) Normalize() error {
	old := r.SchemaVersion
	if err := model.NormalizeMeta(&r.Meta, model.EntityIdempotency); err != nil {
		return err
	}
	if old < 2 && r.Status == "" {
		r.Status = OutboxDone
	}
	return nil
}

// ItemKey implements model.Entity.
func (r *AthleteReads) ItemKey() model.Key {
	return keys.ReadsCounterKey(r.AthleteID, r.WindowStartUtc, r.Unverified)
}

// Stamp implements model.Entity.
func (r *AthleteReads) Stamp() {
	r.Key, r.Meta = r.ItemKey(), model.CurrentMeta(model.EntityAthleteReads)
}

// Normalize implements model.Entity.
func (r *AthleteReads) Normalize() error {
	return model.NormalizeMeta(&r.Meta, model.EntityAthleteReads)
}

// NewAthleteDayReads is the athlete's daily read counter for the UTC day
// containing at, listed under that day's readers (GSI2).
func NewAthleteDayReads(athleteID int64, at time.Time) *AthleteDayReads {
	day := at.UTC().Truncate(24 * time.Hour)
	return &AthleteDayReads{AthleteID: athleteID, DayUtc: day.Format("2006-01-02"), ExpiresAt: day.Add(72 * time.Hour).Unix(),
		ReadersPK: keys.ReadersPK(athleteID, day), ReadersSK: keys.AthletePK(athleteID)}
}

// ItemKey implements model.Entity.
func (r *AthleteDayReads) ItemKey() model.Key {
	day, _ := time.Parse("2006-01-02", r.DayUtc)
	return keys.DayReadsCounterKey(r.AthleteID, day, r.Unverified)
}

// Stamp implements model.Entity.
func (r *AthleteDayReads) Stamp() {
	r.Key, r.Meta = r.ItemKey(), model.CurrentMeta(model.EntityAthleteDayReads)
}

// Normalize implements model.Entity.
func (r *AthleteDayReads) Normalize() error {
	return model.NormalizeMeta(&r.Meta, model.EntityAthleteDayReads)
}

// ItemKey implements model.Entity.
func (r *RateLimitState) ItemKey() model.Key { return keys.RateLimitKey() }

// Stamp implements model.Entity.
func (r *RateLimitState) Stamp() {
	r.Key, r.Meta = r.ItemKey(), model.CurrentMeta(model.EntityRateLimit)
}

// Normalize implements model.Entity.
func (r *RateLimitState) Normalize() error {
	return model.NormalizeMeta(&r.Meta, model.EntityRateLimit)
}

// ItemKey implements model.Entity.
func (r *ParkedRecord) ItemKey() model.Key { return keys.ParkedKey(r.Source, r.RecordID) }

// Stamp implements model.Entity.
func (r *ParkedRecord) Stamp() { r.Key, r.Meta = r.ItemKey(), model.CurrentMeta(model.EntityParked) }

// Normalize implements model.Entity.
func (r *ParkedRecord) Normalize() error { return model.NormalizeMeta(&r.Meta, model.EntityParked) }

// Compile-time checks that every record here is a stored entity.
var (
	_ model.Entity = (*IdempotencyRecord)(nil)
	_ model.Entity = (*RateLimitState)(nil)
	_ model.Entity = (*ParkedRecord)(nil)
	_ model.Entity = (*AthleteReads)(nil)
	_ model.Entity = (*AthleteDayReads)(nil)
)
