package consumer

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/projections"
	"github.com/commitcollect/backend/projections/consumer/trigger"
)

// recorder keeps the projector's audit entries and parked records.
//
// # Audit entries
//
// They go to CommitCollectAudit under USER#{userId} (sort key
// AUDIT#{unix seconds}#{requestId}), findable by correlation id (GSI1) and by
// event type and month (GSI2), and expire after 90 days. The consumer writes
// MILESTONE_PROGRESS_UPDATED (details: version, value, workouts counted,
// awarded parts, status) when a projection drops unjustified parts, or its
// parts or status change without their own entry (AWARD_MINTED,
// MILESTONE_COMPLETED), never for a new running value alone: the
// worker's STRAVA_ACTIVITY_* entry already records the event, the log
// explains the value and the milestone's version counts the writes, so an
// event costs at most one routine audit write. Then AWARD_MINTED (one per part, in the mint
// transaction, under the correlation id of the workout that tipped it, so an
// athlete's webhook can be followed to the awards it caused),
// MILESTONE_COMPLETED, PROJECTION_TRUNCATED and PROJECTOR_RECORD_PARKED. The
// request id is derived from what happened (event, user, milestone, version,
// part), and entries are conditional puts. A failed audit write is logged and
// never fails the projection, except AWARD_MINTED: it is part of the mint.
type recorder struct {
	audits AuditLog
	parked Parker
	log    *slog.Logger
	now    func() time.Time
}

// audit writes an entry and never fails the projection. The request id is
// derived from what happened so a replayed write audits once.
func (c recorder) audit(ctx context.Context, userID, eventType, correlationID string, at time.Time, version int64, part int, details map[string]string) {
	reqID := digest(eventType, userID, details["milestoneId"], strconv.FormatInt(version, 10), strconv.Itoa(part))
	newEntry := model.NewAuditEntry
	if eventType == EventProgressUpdated {
		newEntry = model.NewRoutineAuditEntry // one per event: no index keys
	}
	e := newEntry(keys.UserPK(userID), userID, eventType, correlationID, reqID, at, details)
	if err := c.audits.AppendAudit(ctx, e); err != nil {
		c.log.ErrorContext(ctx, "audit write failed", "eventType", eventType, "userId", userID,
			"correlationId", correlationID, "error", err)
	}
}

// projection writes the routine audit entries of a written projection:
// progress changed, milestone completed, projection newly truncated.
func (c recorder) projection(ctx context.Context, m *model.Milestone, res projections.Result, version int64, inspected, minted int, now time.Time, correlationID string) {
	details := map[string]string{
		"milestoneId": m.MilestoneID, "version": strconv.FormatInt(version, 10),
		"progressValue": strconv.FormatInt(res.Projection.ProgressValue, 10), "workoutsCounted": strconv.Itoa(res.Projection.WorkoutsCounted),
		"awardedParts": strconv.Itoa(res.Projection.AwardedParts), "status": string(res.Projection.Status),
	}
	if len(res.Unjustified) > 0 {
		details["storedAwardedParts"] = strconv.Itoa(m.AwardedParts)
		details["unjustifiedParts"] = fmt.Sprint(res.Unjustified)
	}
	if stepped(m.Projection, res, minted) {
		c.audit(ctx, m.UserID, EventProgressUpdated, correlationID, now, version, -1, details)
	}
	if res.Completed {
		c.audit(ctx, m.UserID, EventMilestoneCompleted, correlationID, now, version, -1, details)
	}
	if res.BecameTruncated {
		details["workoutsInspected"] = strconv.Itoa(inspected)
		details["exactFromUtc"] = projections.FormatInstant(res.Projection.ExactFromUtc)
		c.audit(ctx, m.UserID, EventProjectionTruncated, correlationID, now, version, -1, details)
	}
}

// stepped says whether a written projection needs its own audit entry:
// it dropped unjustified parts, its awarded parts changed without a mint in
// the same write (whose AWARD_MINTED entries say so already), or its status
// changed other than to completed (MILESTONE_COMPLETED says that). A new
// running value alone does not (see Audit entries above).
func stepped(stored model.Projection, res projections.Result, minted int) bool {
	return res.Changed && (len(res.Unjustified) > 0 || (res.Projection.AwardedParts != stored.AwardedParts && minted == 0) ||
		(res.Projection.Status != stored.Status && !res.Completed))
}

// legacyAudits looks for the AWARD_MINTED entries of unjustified award
// items that were minted before audit keys were deterministic: those were
// written after the mint, keyed at the second of the award's awardedAtUtc.
// It marks the parts it finds in held.Audited and reports whether it found
// any. One Query per distinct second, and only for award items the log
// does not justify, so the common path never pays for it.
func (c recorder) legacyAudits(ctx context.Context, m *model.Milestone, unjustified []int, held projections.Held) (bool, error) {
	if held.Audited == nil {
		return false, nil // nothing unjustified: the entries were not even needed
	}
	bySecond := map[int64][]int{}
	for _, i := range unjustified {
		if at, ok := held.Minted[i]; ok {
			bySecond[at.Unix()] = append(bySecond[at.Unix()], i)
		}
	}
	found := false
	for sec, parts := range bySecond {
		es, err := c.audits.AuditEntriesAt(ctx, m.UserID, time.Unix(sec, 0))
		if err != nil {
			return false, err
		}
		for _, e := range es {
			i, err := strconv.Atoi(e.Details["partIndex"])
			if e.EventType != EventAwardMinted || e.Details["milestoneId"] != m.MilestoneID || e.Details["periodOf"] != m.PeriodOf ||
				err != nil || !slices.Contains(parts, i) {
				continue
			}
			held.Audited[i], found = true, true
		}
	}
	return found, nil
}

// park sets a record aside (and audits it). It fails only when the record
// could not be stored, in which case the caller must report it failed so
// nothing is lost.
func (c recorder) park(ctx context.Context, rec events.DynamoDBEventRecord, d trigger.Decision, why error) error {
	payload, err := json.Marshal(rec)
	if err != nil {
		payload = []byte(fmt.Sprintf("%q", fmt.Sprint(rec)))
	}
	id := rec.EventID
	if id == "" {
		id = rec.Change.SequenceNumber
	}
	r := &ops.ParkedRecord{Source: keys.ParkSourceProjector, RecordID: id, Reason: why.Error(), Payload: string(payload),
		CorrelationID: d.CorrelationID, ParkedAtUtc: c.now(), UserID: d.UserID}
	if err := c.parked.Park(ctx, r); err != nil {
		return err
	}
	subject := keys.ParkedPK(keys.ParkSourceProjector)
	if d.UserID != "" {
		subject = keys.UserPK(d.UserID)
	}
	e := model.NewAuditEntry(subject, d.UserID, EventRecordParked, d.CorrelationID, digest(EventRecordParked, id), c.now(),
		map[string]string{"recordId": id, "sequenceNumber": rec.Change.SequenceNumber, "reason": why.Error()})
	if err := c.audits.AppendAudit(ctx, e); err != nil {
		c.log.ErrorContext(ctx, "audit write failed", "eventType", EventRecordParked, "userId", d.UserID, "error", err)
	}
	return nil
}
