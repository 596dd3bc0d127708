package fetch

import (
	"context"
	"log/slog"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/fetch/warm"
)

// effects is what processing one event learned beyond its workout write,
// applied once the event is done (apply): the instance's caches are told
// in one place, and the audit log gets its one entry. Each step of a
// fetch returns the effects it found, so a job reads forward: decide,
// fetch, write, then record.
type effects struct {
	// audit is the event's audit entry (nil: none).
	audit *auditNote
	// fetched is when a fetch of the event's activity started whose answer
	// (or 404) was written (zero: none; warm.Athletes.SawFetch).
	fetched time.Time
	// confirmed is the athlete's mapping and token a written answer
	// confirmed (nil: nothing to cache; warm.Athletes.Put).
	confirmed *warm.Entry
	// stale drops the athlete's cached mapping, token and listings: it was
	// refused, or the athlete deauthorized.
	stale bool
}

// auditNote is an audit entry before it is stamped with the job and the
// time (ingest.AuditEntry).
type auditNote struct {
	subjectPK, userID, eventType string
	details                      map[string]string
}

// apply records e for job: the athlete cache first (what later events of
// the athlete are decided by), then the audit entry (audit writes never
// fail ingestion).
func (w *Fetcher) apply(ctx context.Context, log *slog.Logger, job ingest.Job, e effects) {
	athleteID := job.Event.OwnerID
	if e.stale {
		w.athletes.Drop(athleteID)
	}
	if !e.fetched.IsZero() {
		w.athletes.SawFetch(job.Event.ObjectID, e.fetched)
	}
	if e.confirmed != nil {
		w.athletes.Put(athleteID, *e.confirmed)
	}
	if e.stale {
		w.athletes.Listed.Forget(athleteID)
	}
	if a := e.audit; a != nil {
		w.store.Audits.Audit(ctx, log, ingest.AuditEntry(a.subjectPK, a.userID, a.eventType, job, a.details, w.Now()))
	}
}
