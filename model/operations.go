package model

import "time"

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
	Meta
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
	Key
	Meta
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
	Key
	Meta
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
	Key
	Meta
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
	Key
	Meta
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
