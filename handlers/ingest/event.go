package ingest

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
)

// Object and aspect types of Strava webhook events.
const (
	ObjectActivity = "activity"
	ObjectAthlete  = "athlete"
	AspectCreate   = "create"
	AspectUpdate   = "update"
	AspectDelete   = "delete"
)

// Event is a Strava webhook event, with Strava's field names.
type Event struct {
	ObjectType     string         `json:"object_type"`
	ObjectID       int64          `json:"object_id"`
	AspectType     string         `json:"aspect_type"`
	Updates        map[string]any `json:"updates,omitempty"`
	OwnerID        int64          `json:"owner_id"`
	SubscriptionID int64          `json:"subscription_id"`
	EventTime      int64          `json:"event_time"`
}

// IdempotencyKey is the event's deterministic identity (model's
// WebhookIdempotencyKey, updates included): a redelivery of the same event
// has the same key.
func (e Event) IdempotencyKey() string {
	var updates map[string]string
	if len(e.Updates) > 0 {
		updates = make(map[string]string, len(e.Updates))
		for k, v := range e.Updates {
			updates[k] = fmt.Sprint(v)
		}
	}
	return keys.WebhookIdempotencyKey(e.ObjectType, e.ObjectID, e.AspectType, e.OwnerID, e.EventTime, updates)
}

// Kind is what an event asks of the worker, decided once, here, from its
// object type, aspect type and (for an athlete) updates: the webhook's
// validation, the worker's routing, the sweeper's fair plan, the read
// classes and the logs all ask it.
type Kind int

// The kinds of events Strava sends.
const (
	// KindUnknown is not an event Strava sends: refused at the door.
	KindUnknown Kind = iota
	// KindActivityCreate, KindActivityUpdate and KindActivityDelete are an
	// activity's events: each is confirmed by reading the activity (a
	// fetch, or a burst's list pages).
	KindActivityCreate
	KindActivityUpdate
	KindActivityDelete
	// KindAthleteUpdate is an athlete update other than a deauthorization:
	// nothing of it is kept.
	KindAthleteUpdate
	// KindDeauthorization says the athlete revoked access (object_type
	// athlete, updates.authorized "false"): confirmed at Strava, then purged.
	KindDeauthorization
)

// KindOf is the kind of an event of objectType and aspect with updates.
func KindOf(objectType, aspect string, updates map[string]any) Kind {
	switch {
	case objectType == ObjectActivity && aspect == AspectCreate:
		return KindActivityCreate
	case objectType == ObjectActivity && aspect == AspectUpdate:
		return KindActivityUpdate
	case objectType == ObjectActivity && aspect == AspectDelete:
		return KindActivityDelete
	case objectType == ObjectAthlete && aspect == AspectUpdate && revoked(updates):
		return KindDeauthorization
	case objectType == ObjectAthlete && aspect == AspectUpdate:
		return KindAthleteUpdate
	}
	return KindUnknown
}

// revoked reports whether an athlete update's updates say authorized
// "false" (Strava sends a string; a boolean is read the same way).
func revoked(updates map[string]any) bool {
	switch a := updates["authorized"].(type) {
	case string:
		return a == "false"
	case bool:
		return !a
	}
	return false
}

// Activity reports whether the kind is an activity's event.
func (k Kind) Activity() bool {
	return k == KindActivityCreate || k == KindActivityUpdate || k == KindActivityDelete
}

// Burstable reports whether events of the kind may be served from the
// athlete's list pages with the athlete's other such events (a burst,
// handlers/ingest/fetch/burst.go): any activity event, since a list page
// confirms a create, an update or a delete as a fetch would (listed: alive;
// absent from the whole history: gone or private, as a 404). Athlete events
// (a deauthorization) are not.
func (k Kind) Burstable() bool { return k.Activity() }

// Kind is the event's kind (KindOf).
func (e Event) Kind() Kind { return KindOf(e.ObjectType, e.AspectType, e.Updates) }

// Burstable reports whether the event may be served in a burst (Kind.Burstable).
func (e Event) Burstable() bool { return e.Kind().Burstable() }

// IsDeauthorization reports whether the event says the athlete revoked
// access (KindDeauthorization).
func (e Event) IsDeauthorization() bool { return e.Kind() == KindDeauthorization }

// KindProblem says what makes an event of objectType and aspect not one
// Strava sends (KindUnknown): the field at fault and why; empty for a known
// kind. The webhook answers it in its 4xx.
func KindProblem(objectType, aspect string) (field, reason string) {
	switch {
	case objectType != ObjectActivity && objectType != ObjectAthlete:
		return "object_type", fmt.Sprintf("unknown object type %q", objectType)
	case aspect != AspectCreate && aspect != AspectUpdate && aspect != AspectDelete:
		return "aspect_type", fmt.Sprintf("unknown aspect type %q", aspect)
	case objectType == ObjectAthlete && aspect != AspectUpdate:
		return "aspect_type", fmt.Sprintf("athlete events are updates only, got %q", aspect)
	}
	return "", ""
}

// Time is the event time.
func (e Event) Time() time.Time { return time.Unix(e.EventTime, 0).UTC() }

// Job is what the webhook hands to the worker: the validated event and the
// correlation id of the request that accepted it. It travels as JSON (the
// worker Lambda's input).
type Job struct {
	Event          Event     `json:"event"`
	CorrelationID  string    `json:"correlationId"`
	IdempotencyKey string    `json:"idempotencyKey"`
	ReceivedAtUtc  time.Time `json:"receivedAtUtc"`
	// Redrive marks a parked job sent back by an operator (redrive): it runs
	// even though its outbox item is settled as parked.
	Redrive bool `json:"redrive,omitempty"`
	// Sync, when set, makes this a sync job (backfill or reconciliation,
	// see SyncJob) instead of a webhook event; Event then only carries the
	// athlete (owner_id) and the mode (aspect_type) for logs.
	Sync *SyncJob `json:"sync,omitempty"`
	// OutboxFailures is the failure count of the job's outbox item as the
	// dispatcher's claim or lease returned it (the item was received then).
	// The worker then trusts it instead of reading the item (one GetItem
	// less per event); its settle stays conditional on the item being
	// received. Absent (an older payload, a redrive): the worker reads the
	// item. Set at dispatch, never stored in the outbox item's job.
	OutboxFailures *int `json:"outboxFailures,omitempty"`
	// Gathered says the sweeper dispatched this activity event after
	// gathering the athlete's due ones (a lone one, or one a burst could not
	// settle): it is fetched as it is, never deferred to be gathered again.
	Gathered bool `json:"gathered,omitempty"`
	// Burst, when set, makes this a burst job: one athlete's gathered
	// activity events, served together from list pages (the sweeper leases
	// the athlete's burst, or each one's outbox item; the runner settles
	// each). Event, Sync and IdempotencyKey are then unset; CorrelationID
	// names the burst.
	Burst []Job `json:"burst,omitempty"`
	// BurstLeaseUntil is the first end of the athlete's burst lease the
	// sweeper took for this burst, its token (zero: each item was leased):
	// the runner renews that lease for BurstLeaseFor while the burst runs,
	// stops the burst if the lease was taken again, and releases it once
	// the burst's outcomes are recorded.
	BurstLeaseUntil time.Time `json:"burstLeaseUntil,omitzero"`
	// BurstLeaseFor is the burst lease's length, each renewal's too.
	BurstLeaseFor time.Duration `json:"burstLeaseFor,omitempty"`
	// OutboxDispatches is the dispatch count of the job's outbox item as
	// the same claim or lease returned it (set with OutboxFailures).
	OutboxDispatches int `json:"outboxDispatches,omitempty"`
	// OutboxParkedRecord says the job's outbox item is marked as parked
	// once (ops.IdempotencyRecord.ParkedRecord; a local queue's on-failure
	// destination, or a park whose settle failed): done now, its
	// PARKED#WORKER record is removed, so a redrive never re-runs done
	// work. Set at dispatch, never stored in the outbox item's job.
	OutboxParkedRecord bool `json:"outboxParkedRecord,omitempty"`
	// Unlisted says a burst's walk read the athlete's recent pages and did
	// not list the event's activity, so its fetch alone is unverified work
	// (the athlete's unverified allowance, not their caps). Never encoded.
	Unlisted bool `json:"-"`
	// Kind names the kind of a job whose kind was added after event, sync
	// and burst (KindOf); its payload travels in Work.
	Kind JobKind `json:"kind,omitempty"`
	// Work is the payload of a job of such a Kind, as its handler decodes
	// it.
	Work json.RawMessage `json:"work,omitempty"`
	// UnseenAtUtc, when set, is when a complete list walk did not show the
	// event's activity (its outbox item was deferred with UnseenReason): a
	// second walk, far enough apart, must miss it too before it is settled
	// unseen. Set at dispatch, never stored in the outbox item's job.
	UnseenAtUtc *time.Time `json:"unseenAtUtc,omitempty"`
}

// WithOutbox returns the job carrying rec's failure and dispatch counts (see
// OutboxFailures), for the dispatcher that just claimed or leased rec.
func (j Job) WithOutbox(rec *ops.IdempotencyRecord) Job {
	n := rec.Failures
	j.OutboxFailures = &n
	j.OutboxDispatches = rec.Dispatches
	j.OutboxParkedRecord = rec.ParkedRecord
	j.UnseenAtUtc = unseenAt(rec.Reason)
	return j
}

// unseenPrefix starts UnseenReason.
const unseenPrefix = "not listed by a complete list walk at "

// UnseenReason is the deferral reason of an activity event that a complete
// list walk at at did not show: it is gathered for another walk, and the
// dispatch that follows carries at (Job.UnseenAtUtc).
func UnseenReason(at time.Time) string {
	return unseenPrefix + at.UTC().Format(time.RFC3339Nano)
}

// unseenAt reads UnseenReason's instant back (nil for any other reason).
func unseenAt(reason string) *time.Time {
	at, err := time.Parse(time.RFC3339Nano, strings.TrimPrefix(reason, unseenPrefix))
	if !strings.HasPrefix(reason, unseenPrefix) || err != nil {
		return nil
	}
	return &at
}

// DecodeJob reads a Job from the worker's input. It returns an error
// matching model.ErrInvalid when the input is not a valid job (a poison
// input: retrying it cannot help).
func DecodeJob(raw []byte) (Job, error) {
	var j Job
	if err := json.Unmarshal(raw, &j); err != nil {
		return Job{}, fmt.Errorf("decode job: %v: %w", err, model.ErrInvalid)
	}
	var v model.ValidationError
	if len(j.Burst) > 0 {
		return j, validateBurst(j)
	}
	if j.Sync != nil {
		j.Sync.validate(&v)
		if j.CorrelationID == "" {
			v.Add("correlationId", "is required")
		}
		if err := v.Err(); err != nil {
			return Job{}, fmt.Errorf("decode job: %w", err)
		}
		return j, nil
	}
	if j.Event.ObjectID <= 0 {
		v.Add("event.object_id", "must be positive")
	}
	if j.Event.OwnerID <= 0 {
		v.Add("event.owner_id", "must be positive")
	}
	if field, reason := KindProblem(j.Event.ObjectType, j.Event.AspectType); field != "" {
		v.Add("event."+field, "%s", reason)
	}
	if j.CorrelationID == "" {
		v.Add("correlationId", "is required")
	}
	if err := v.Err(); err != nil {
		return Job{}, fmt.Errorf("decode job: %w", err)
	}
	return j, nil
}

// validateBurst checks a burst job: a correlation id, and burstable events
// (activity events) of one athlete, each with its outbox key.
func validateBurst(j Job) error {
	var v model.ValidationError
	if j.CorrelationID == "" {
		v.Add("correlationId", "is required")
	}
	owner := j.Burst[0].Event.OwnerID
	for i, b := range j.Burst {
		if !b.Event.Burstable() || b.Event.OwnerID != owner ||
			b.Event.OwnerID <= 0 || b.Event.ObjectID <= 0 || b.IdempotencyKey == "" || len(b.Burst) > 0 || b.Sync != nil {
			v.Add(fmt.Sprintf("burst[%d]", i), "must be an activity event of athlete %d with its outbox key", owner)
		}
	}
	if err := v.Err(); err != nil {
		return fmt.Errorf("decode job: %w", err)
	}
	return nil
}

// NewBurst is the burst job of jobs, one athlete's gathered activity events (see
// Job.Burst): its Event names the athlete and the aspect for logs, audit
// entries and the read class.
//
// A create's updates (free-form, sized by whoever posted the event) are left
// out: a create is served from Strava's answer, and the outbox key already
// names the event, so a burst's payload is bounded by its size (about 400
// bytes a create).
func NewBurst(jobs []Job, correlationID string) Job {
	owner := jobs[0].Event.OwnerID
	for i := range jobs {
		jobs[i].Event.Updates = nil
	}
	return Job{Event: Event{ObjectType: ObjectActivity, AspectType: AspectCreate, OwnerID: owner},
		CorrelationID: correlationID, ReceivedAtUtc: jobs[0].ReceivedAtUtc, Burst: jobs}
}

// JobLog is log with the job's correlation id, event type, athlete and, for
// an activity, the activity id.
func JobLog(log *slog.Logger, job Job) *slog.Logger {
	l := log.With("correlationId", job.CorrelationID, "eventType", job.Event.ObjectType+"."+job.Event.AspectType,
		"athleteId", job.Event.OwnerID)
	if job.Event.Kind().Activity() {
		l = l.With("activityId", job.Event.ObjectID)
	}
	return l
}
