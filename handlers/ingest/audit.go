package ingest

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/commitcollect/backend/model"
)

// Audit event types of sync jobs.
const (
	// AuditSyncPage records one listed page: what was written, unchanged,
	// dropped as stale and rejected (details writtenIds lists the writes;
	// recoveredIds the writes of an earlier run of the page that stopped
	// before recording it).
	AuditSyncPage = "STRAVA_SYNC_PAGE"
	// AuditSyncCompleted records a finished backfill or reconciliation.
	AuditSyncCompleted = "STRAVA_SYNC_COMPLETED"
)

// Audit event types written by the ingestion path.
const (
	AuditActivityCreate     = "STRAVA_ACTIVITY_CREATE"
	AuditActivityUpdate     = "STRAVA_ACTIVITY_UPDATE"
	AuditActivityDelete     = "STRAVA_ACTIVITY_DELETE"
	AuditAthleteDeauthorize = "STRAVA_ATHLETE_DEAUTHORIZED"
	AuditDeauthStale        = "STRAVA_DEAUTH_STALE"
	AuditDeauthUnconfirmed  = "STRAVA_DEAUTH_UNCONFIRMED"
	AuditAthleteNotLinked   = "STRAVA_ATHLETE_NOT_LINKED"
	AuditNeedsReauth        = "STRAVA_CONNECTION_NEEDS_REAUTH"
	AuditEventRejected      = "STRAVA_EVENT_REJECTED"
	// AuditBurstServed records one burst of an athlete's activity events served
	// from list pages (counts only: pages, written, not found, fetched
	// alone; never the ids of creates Strava does not know).
	AuditBurstServed = "STRAVA_BURST_SERVED"
)

// AuditEntry is the audit entry of eventType about job (subject subjectPK,
// user userID when known), its details completed with the event's athlete,
// object and aspect types. An activity's create, update and delete entries
// are routine (one per event: no index keys).
func AuditEntry(subjectPK, userID, eventType string, job Job, details map[string]string, now time.Time) *model.AuditEntry {
	if details == nil {
		details = map[string]string{}
	}
	details["athleteId"] = strconv.FormatInt(job.Event.OwnerID, 10)
	details["objectType"] = job.Event.ObjectType
	details["aspectType"] = job.Event.AspectType
	newEntry := model.NewAuditEntry
	switch eventType {
	case AuditActivityCreate, AuditActivityUpdate, AuditActivityDelete, AuditBurstServed:
		newEntry = model.NewRoutineAuditEntry
	}
	return newEntry(subjectPK, userID, eventType, job.CorrelationID, model.NewID(), now, details)
}

// Auditor writes the audit trail (model/store.Audits): the port every step
// of ingestion that audits declares.
type Auditor interface {
	// Audit writes an audit entry and never fails.
	Audit(ctx context.Context, log *slog.Logger, e *model.AuditEntry)
}
