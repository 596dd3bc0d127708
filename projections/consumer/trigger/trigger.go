// Package trigger decides, once per stream record and at the boundary,
// what the projector does with it: recompute the record's user (naming the
// days and weeks a workout record concerns), ignore it, or park it.
package trigger

import (
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/counting"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/records"
	"github.com/commitcollect/backend/model/syncstate"
)

// Action is what the consumer does with one stream record.
type Action int

// The actions Classify decides between.
const (
	// Ignore: not a trigger (awards, the projector's own progress writes,
	// REMOVE records of anything but a workout, parked or rate-limit
	// items, …).
	Ignore Action = iota
	// Recompute: the record's user must be re-projected from the log.
	Recompute
	// Park: the record can never be processed (undecodable, or written by a
	// newer schema); it is audited and set aside for redrive.
	Park
)

func (a Action) String() string {
	switch a {
	case Ignore:
		return "ignore"
	case Recompute:
		return "recompute"
	case Park:
		return "park"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Decision is what Classify learned from a record.
type Decision struct {
	Action Action
	// UserID whose milestones the record concerns (empty when unknown).
	UserID string
	// CorrelationID of the workout that triggered the record, if any.
	CorrelationID string
	// ActivityID of a workout record, MilestoneID of a milestone record.
	ActivityID  int64
	MilestoneID string
	// Written: the record is a webhook fetch's write of that workout
	// (INSERT or MODIFY), removed again when the user's guard holds.
	Written bool
	// Days are the local days (YYYY-MM-DD) a workout record concerns: its
	// start before and after the change (none for a tombstone that never
	// held one). Only for workout records: any other trigger (a milestone,
	// a sync page's request) projects every period of a series.
	Days []string
	// DaysKnown says Days names everything the record concerns.
	DaysKnown bool
	// Starts are the UTC starts of a workout record's images (before and
	// after the change), known when DaysKnown: the weeks it touches.
	Starts []time.Time
	// Reason says why, for logs.
	Reason string
	// Err is why a record must be parked (matches model.ErrInvalid or
	// model.ErrUnsupportedSchema).
	Err error
}

// Classify decodes a stream record once, at the boundary, into model types
// and decides what to do with it. Triggers: INSERT/MODIFY/REMOVE of a
// Strava workout (a REMOVE is a TTL deletion or an account sweep: the log
// lost it) unless a sync page wrote it; a sync's projection request (the
// sync state's projectedCount grew); INSERT of a milestone; MODIFY of a milestone whose definition
// changed (the projector's own writes never change it, and mark the item
// writtenBy = projector). Everything else is ignored. Records that can never
// be decoded are parked (Decision.Err says why). It never panics.
//
// # Triggers
//
// Classify decodes each stream record once, at the boundary:
//
//	INSERT or MODIFY of USER#…/WORKOUT#STRAVA#… (a 404 is a MODIFY
//	  setting isDeleted, a revival one clearing it)             → recompute the user
//	                                                              (and remove it if the guard holds)
//	  … written by a sync page (syncJobKey set)                 → ignore: the sync's request projects it
//	INSERT or MODIFY of USER#…/SYNC#STRAVA whose projectedCount
//	  grew (a sync's projection request)                        → recompute the user
//	REMOVE of USER#…/WORKOUT#STRAVA#… (a confirmed deauthorization's
//	  purge, an account deletion's sweep, or DynamoDB's TTL)    → recompute the user
//	INSERT of a milestone                                       → recompute the user
//	MODIFY of a milestone whose definition changed              → recompute the user
//	MODIFY of a milestone with the same definition (the projector's own
//	  writes, writtenBy = projector), award items, other REMOVEs, anything else → ignore
//	a workout or milestone record that cannot be decoded (bad key, bad
//	  image, newer schemaVersion)                               → park
//
// The Lambda's event source mapping applies a coarser filter on the same
// lines (workout key prefix with INSERT, MODIFY or REMOVE, the sync state's
// key with INSERT or MODIFY, milestone INSERT, milestone MODIFY not
// writtenBy = projector; terraform/modules/commitcollect, checked by
// test/terraform against keys.PrefixWorkoutStrava, model.EntityMilestone
// and model.WriterProjector), so the projector's own writes never invoke it;
// Classify repeats them because a replay or redrive reads the unfiltered
// stream.
func Classify(rec events.DynamoDBEventRecord) Decision {
	park := func(d Decision, err error) Decision {
		d.Action, d.Err, d.Reason = Park, err, "undecodable"
		// Best effort, so the parked record still joins its trace.
		if v, ok := rec.Change.NewImage["correlationId"]; ok && v.DataType() == events.DataTypeString {
			d.CorrelationID = v.String()
		}
		return d
	}
	k, err := records.RecordKey(rec.Change.Keys)
	if err != nil {
		return park(Decision{}, fmt.Errorf("keys: %w", err))
	}
	p, err := keys.ParseKey(k)
	if err != nil {
		// A malformed key that claims to be a trigger cannot be processed;
		// any other unknown user item is simply not ours.
		if strings.HasPrefix(k.PK, keys.PrefixUser) &&
			(strings.HasPrefix(k.SK, keys.PrefixWorkoutStrava) || strings.HasPrefix(k.SK, keys.PrefixMilestone)) {
			return park(Decision{}, err)
		}
		return Decision{Action: Ignore, Reason: "unknown key"}
	}
	d := Decision{UserID: p.UserID, ActivityID: p.ActivityID, MilestoneID: p.MilestoneID}
	if rec.EventName == string(events.DynamoDBOperationTypeRemove) && p.Kind == keys.KindWorkout {
		// The log lost a workout (TTL after a deauthorization, or an account
		// sweep): the projection must follow. No image is needed.
		d.Action, d.Reason = Recompute, "workout removed"
		if v, ok := rec.Change.OldImage["correlationId"]; ok && v.DataType() == events.DataTypeString {
			d.CorrelationID = v.String()
		}
		d.Days, d.Starts = workoutDays(rec.Change.OldImage)
		d.DaysKnown = true
		if rec.UserIdentity != nil && rec.UserIdentity.PrincipalID != "" {
			d.Reason += " by " + rec.UserIdentity.PrincipalID // dynamodb.amazonaws.com: TTL
		}
		return d
	}
	if rec.EventName != string(events.DynamoDBOperationTypeInsert) && rec.EventName != string(events.DynamoDBOperationTypeModify) {
		d.Reason = "event " + rec.EventName
		return d
	}
	switch p.Kind {
	case keys.KindWorkout:
		var w model.Workout
		if err := decodeImage(rec.Change.NewImage, &w); err != nil {
			return park(d, fmt.Errorf("workout new image: %w", err))
		}
		d.CorrelationID = w.CorrelationID
		if w.SyncJobKey != "" {
			// The page's end projects it (the sync state record below), and
			// the syncer checked the guard for the page.
			d.Reason = "workout written by sync page of " + w.SyncJobKey
			return d
		}
		d.Action, d.Written, d.Reason = Recompute, true, "workout "+strings.ToLower(rec.EventName)
		newDays, newStarts := workoutDays(rec.Change.NewImage)
		oldDays, oldStarts := workoutDays(rec.Change.OldImage)
		d.Days, d.Starts = append(newDays, oldDays...), append(newStarts, oldStarts...)
		// A MODIFY without its old image hides the day it moved from.
		d.DaysKnown = rec.EventName == string(events.DynamoDBOperationTypeInsert) || len(rec.Change.OldImage) > 0
		return d
	case keys.KindSyncState:
		return classifySyncState(rec, d)
	case keys.KindMilestone:
		var m model.Milestone
		if err := decodeImage(rec.Change.NewImage, &m); err != nil {
			return park(d, fmt.Errorf("milestone new image: %w", err))
		}
		return classifyMilestone(rec, d, &m)
	}
	d.Reason = "not a trigger"
	return d
}

// classifyMilestone decides on a milestone record whose new image m was
// read: an insert, or a change of its definition, is a trigger.
func classifyMilestone(rec events.DynamoDBEventRecord, d Decision, m *model.Milestone) Decision {
	if rec.EventName == string(events.DynamoDBOperationTypeInsert) {
		d.Action, d.Reason = Recompute, "milestone insert"
		return d
	}
	var old model.Milestone
	if err := decodeImage(rec.Change.OldImage, &old); err != nil {
		// Without the old image we cannot tell what changed: recompute,
		// which is always safe.
		d.Action, d.Reason = Recompute, "milestone modify without readable old image"
		return d
	}
	if counting.SameDefinition(old.MilestoneDefinition, m.MilestoneDefinition) {
		d.Reason = "milestone modify by " + m.WrittenBy + " without definition change"
		return d
	}
	d.Action, d.Reason = Recompute, "milestone definition changed by "+m.WrittenBy
	return d
}

// classifySyncState makes a sync's projection request a trigger: the sync
// state's projectedCount grew (its last page, every
// syncstate.ProjectEveryImported imports, or a wait, failure or stop), so the
// user is projected once for every page imported since.
func classifySyncState(rec events.DynamoDBEventRecord, d Decision) Decision {
	var cur, old syncstate.SyncState
	if err := decodeImage(rec.Change.NewImage, &cur); err != nil {
		// Not a milestone or workout: nothing to park, but a page's end
		// must not be lost: recompute, which is always safe.
		d.Action, d.Reason = Recompute, "sync state unreadable: "+err.Error()
		return d
	}
	if rec.EventName == string(events.DynamoDBOperationTypeModify) {
		if err := decodeImage(rec.Change.OldImage, &old); err != nil {
			d.Action, d.Reason = Recompute, "sync state modify without readable old image"
			return d
		}
	}
	if cur.ProjectedCount <= old.ProjectedCount {
		d.Reason = "sync state without a projection request"
		return d
	}
	d.Action = Recompute
	d.Reason = fmt.Sprintf("sync asks to project %d imported workouts", cur.ProjectedCount-old.ProjectedCount)
	return d
}

// workoutDays is the local day and the UTC start of a workout image (none
// for an image without a start: a tombstone, or no image; a start only
// when the image carries it).
func workoutDays(img map[string]events.DynamoDBAttributeValue) ([]string, []time.Time) {
	var w model.Workout
	if len(img) == 0 || decodeImage(img, &w) != nil || (w.StartDateUtc.IsZero() && w.DateSK == "") {
		return nil, nil
	}
	if w.StartDateUtc.IsZero() {
		return []string{w.LocalDate()}, nil
	}
	return []string{w.LocalDate()}, []time.Time{w.StartDateUtc}
}

func decodeImage(img map[string]events.DynamoDBAttributeValue, e model.Entity) error {
	return records.DecodeImage(img, e)
}
