package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/calendar"
	"github.com/commitcollect/backend/model/counting"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ports"
	"github.com/commitcollect/backend/model/store/dynamo"
)

// Workouts holds the workout log: ordered writes, tombstones, the LSI1 log read, expiry at a revocation.
type Workouts struct {
	DB *dynamo.DB
}

// UpsertWorkout writes the full normalized workout, keeping the stored
// createdAtUtc when the item exists (w.CreatedAtUtc is used only for a new
// item); a workout Strava shows loses the expiry of a not-found tombstone
// (expiresAt) unless w sets one. It does not read
// the user guard: the projector (or, for a sync page, CheckWrites) removes
// a workout written after a deletion or deauthorization (guard.go).
//
// Writes are ordered by w.FetchStartedAtNs (when set): the write is refused
// with ErrConflict unless the stored item has no fetch instant or an older
// one, so an answer fetched earlier never overwrites one fetched later. The
// order alone decides, whether the stored item is a tombstone or not: a
// tombstone (MarkWorkoutHidden, or a legacy one without a fetch instant)
// is revived by a newer answer that shows the activity (isDeleted false,
// deletedAtUtc and deletedReason removed), and a tombstone confirmed by a
// newer fetch refuses an older answer. Without FetchStartedAtNs (callers
// that do not order) a workout marked deleted stays deleted (ErrConflict).
func (s *Workouts) UpsertWorkout(ctx context.Context, w *model.Workout) error {
	item, err := dynamo.Marshal(w)
	if err != nil {
		return err
	}
	var upd expression.UpdateBuilder
	for name, v := range item {
		switch name {
		case "PK", "SK":
			continue
		case attrCreatedAtUtc:
			upd = upd.Set(expression.Name(name), expression.IfNotExists(expression.Name(name), expression.Value(v)))
		default:
			upd = upd.Set(expression.Name(name), expression.Value(v))
		}
	}
	if !w.IsDeleted {
		// Strava shows the activity: whatever hid it no longer holds, and
		// a not-found tombstone's expiry (MarkWorkoutHidden) goes with it.
		upd = upd.Remove(expression.Name(attrDeletedAtUtc)).Remove(expression.Name(attrDeletedReason))
		if w.ExpiresAt == 0 {
			upd = upd.Remove(expression.Name(attrExpiresAt))
		}
	}
	if w.SyncJobKey == "" {
		upd = upd.Remove(expression.Name(attrSyncJobKey)) // this version is not a sync page's
	}
	var cond expression.ConditionBuilder
	if w.FetchStartedAtNs > 0 {
		fetched := expression.Name(attrFetchStartedAtNs)
		cond = expression.Or(expression.AttributeNotExists(fetched),
			fetched.LessThan(expression.Value(w.FetchStartedAtNs)))
	} else {
		cond = expression.Or(expression.AttributeNotExists(expression.Name("PK")),
			expression.AttributeNotExists(expression.Name(attrIsDeleted)),
			expression.Name(attrIsDeleted).NotEqual(expression.Value(true)))
	}
	if err := s.DB.Update(ctx, w.ItemKey(), upd, cond); err != nil {
		if isConflict(err) {
			return fmt.Errorf("upsert workout %d of %s: an answer fetched later (or, unordered, a tombstone) is stored: %w", w.ActivityID, w.UserID, err)
		}
		return fmt.Errorf("upsert workout %d of %s: %w", w.ActivityID, w.UserID, err)
	}
	return nil
}

// MarkWorkoutHidden records that Strava answered 404 for the activity in a
// fetch that started at fetchStartedAtNs (Unix ns, > 0): it sets isDeleted,
// deletedReason = reason (model.WorkoutHiddenOrDeleted) and the fetch
// instant (never a physical delete), creating a tombstone when the workout
// was never written (a 404 whose write overtook the create's, or a create
// event for an activity that never existed). Such a tombstone holds nothing
// but the order of in-flight fetches, so it expires (expiresAt,
// model.NotFoundTombstoneTTL after now) unless a fetch shows the activity
// first; a tombstone of a stored workout never expires. Like
// UpsertWorkout it is ordered by the fetch: it is refused with ErrConflict
// when the stored item holds an answer fetched later, so the newest fetch
// wins both ways (a later fetch that shows the activity revives it; a 404
// confirmed later wins over older answers). createdAtUtc and deletedAtUtc
// keep their first values.
func (s *Workouts) MarkWorkoutHidden(ctx context.Context, userID string, athleteID, activityID int64, correlationID, reason string, fetchStartedAtNs int64, now time.Time) error {
	if fetchStartedAtNs <= 0 {
		return fmt.Errorf("mark workout %d of %s hidden: no fetch instant: %w", activityID, userID, model.ErrInvalid)
	}
	w := &model.Workout{UserID: userID, AthleteID: athleteID, ActivityID: activityID}
	w.Stamp()
	now = now.UTC()
	fetched := expression.Name(attrFetchStartedAtNs)
	// A builder per attempt: an UpdateBuilder shares its operations map
	// with the builders derived from it.
	tombstone := func() expression.UpdateBuilder {
		u := expression.Set(expression.Name("entityType"), expression.Value(w.EntityType)).
			Set(expression.Name("schemaVersion"), expression.Value(w.SchemaVersion)).
			Set(expression.Name("userId"), expression.Value(userID)).
			Set(expression.Name("athleteId"), expression.Value(athleteID)).
			Set(expression.Name("activityId"), expression.Value(activityID)).
			Set(expression.Name(attrIsDeleted), expression.Value(true)).
			Set(expression.Name(attrDeletedReason), expression.Value(reason)).
			Set(expression.Name(attrDeletedAtUtc), expression.IfNotExists(expression.Name(attrDeletedAtUtc), expression.Value(now))).
			Set(expression.Name(attrCreatedAtUtc), expression.IfNotExists(expression.Name(attrCreatedAtUtc), expression.Value(now))).
			Set(expression.Name("updatedAtUtc"), expression.Value(now)).
			Set(expression.Name("correlationId"), expression.Value(correlationID)).
			Set(fetched, expression.Value(fetchStartedAtNs)).
			Remove(expression.Name(attrSyncJobKey))
		for _, a := range tombstoneDrops {
			u = u.Remove(expression.Name(a))
		}
		return u
	}
	// First as a new item with its expiry (one write for a create nothing
	// answered), else ordered against the stored one, which keeps no expiry
	// of its own making.
	fresh := tombstone().Set(expression.Name(attrExpiresAt), expression.Value(now.Add(model.NotFoundTombstoneTTL).Unix()))
	err := s.DB.Update(ctx, w.ItemKey(), fresh, expression.AttributeNotExists(expression.Name("PK")))
	if isConflict(err) {
		cond := expression.Or(expression.AttributeNotExists(fetched), fetched.LessThan(expression.Value(fetchStartedAtNs)))
		err = s.DB.Update(ctx, w.ItemKey(), tombstone(), cond)
	}
	switch {
	case isConflict(err):
		return fmt.Errorf("mark workout %d of %s hidden: an answer fetched later is stored: %w", activityID, userID, err)
	case err != nil:
		return fmt.Errorf("mark workout %d of %s hidden: %w", activityID, userID, err)
	}
	return nil
}

// tombstoneDrops are the attributes a tombstone does not keep: the
// activity's content (deleted, or made private, on Strava) and its date
// key, so it leaves LSI1 and the log. Only the ids, the mark and the fetch
// order stay.
var tombstoneDrops = []string{"name", "sportType", "distanceMeters", "totalElevationGain", "movingTimeSeconds",
	"elapsedTimeSeconds", "flags", "startDateUtc", "startDateLocal", "timezone", dynamo.AttrLSI1SK}

// Workout reads one workout. It returns ErrNotFound when it does not exist.
func (s *Workouts) Workout(ctx context.Context, userID string, activityID int64) (*model.Workout, error) {
	var w model.Workout
	if err := s.DB.Get(ctx, s.DB.Tables().Main, keys.WorkoutKey(userID, activityID), &w); err != nil {
		return nil, fmt.Errorf("read workout %d of %s: %w", activityID, userID, err)
	}
	return &w, nil
}

// WorkoutLog reads the user's workouts started inside windows (their union;
// a window without end reads to the newest workout) from LSI1 with a key
// condition per merged window, newest first, strongly consistent, projected
// to WorkoutLogFields, and stops at the MaxWorkoutsToInspect guardrail. So
// whatever the guardrail leaves out is older than everything it keeps; the
// workouts sharing the start date of the newest one left out are dropped
// too, so that Log.ExactFrom is exact. No windows read nothing. Only the
// projected fields are set on the returned workouts. It fails closed with
// ErrUnsupportedSchema when a workout read was written by newer code.
func (s *Workouts) WorkoutLog(ctx context.Context, userID string, windows []model.Window) (ports.WorkoutLog, error) {
	var (
		items   []dynamo.Item
		dropped dynamo.Item
		budget  = model.MaxWorkoutsToInspect
	)
	for _, w := range calendar.MergeWindows(windows) {
		lo, hi := keys.WorkoutDateRange(w.From, w.To)
		kc := expression.Key("PK").Equal(expression.Value(keys.UserPK(userID))).
			And(expression.Key(dynamo.AttrLSI1SK).Between(expression.Value(lo), expression.Value(hi)))
		ex, err := expression.NewBuilder().WithKeyCondition(kc).Build()
		if err != nil {
			return ports.WorkoutLog{}, fmt.Errorf("read workout log of user %s: build query: %w", userID, err)
		}
		// LSI1 projects exactly WorkoutLogFields: ask for what it holds
		// (ALL_PROJECTED_ATTRIBUTES), not for a list of names, which
		// DynamoDB Local bills as a fetch from the table per item (7 RCU
		// instead of 1 for 6 workouts).
		res, err := s.DB.QueryPages(ctx, &dynamodb.QueryInput{
			TableName: aws.String(s.DB.Tables().Main), IndexName: aws.String(dynamo.IndexLSI1), ConsistentRead: aws.Bool(true),
			KeyConditionExpression: ex.KeyCondition(), Select: types.SelectAllProjectedAttributes,
			ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
			ScanIndexForward: aws.Bool(false),
		}, budget)
		if err != nil {
			return ports.WorkoutLog{}, fmt.Errorf("read workout log of user %s in %s..%s: %w", userID, lo, hi, err)
		}
		items = append(items, res.Items...)
		budget -= len(res.Items)
		if res.Truncated {
			dropped = res.Next
			break
		}
	}
	out := ports.WorkoutLog{Workouts: make([]model.Workout, len(items))}
	for i, item := range items {
		if err := dynamo.Unmarshal(item, &out.Workouts[i]); err != nil {
			return ports.WorkoutLog{}, fmt.Errorf("read workout log of user %s: %w", userID, err)
		}
	}
	if dropped == nil {
		return out, nil
	}
	var d model.Workout
	if err := dynamo.Unmarshal(dropped, &d); err != nil {
		return ports.WorkoutLog{}, fmt.Errorf("read workout log of user %s: %w", userID, err)
	}
	out.Workouts, out.ExactFrom = cutAtInstant(out.Workouts, d.StartDateUtc)
	out.Truncated = true
	return out, nil
}

// WorkoutLogFields are the only workout attributes a projection reads (the
// projection expression of WorkoutLog): keys and meta for normalization,
// then what the milestone math and award attribution need. LSI1 projects
// exactly these (plus its own key), so the log never reads the table.
var WorkoutLogFields = append(append([]string{"PK", "SK", "entityType", "schemaVersion", "userId", "activityId"},
	counting.LogFields...), "correlationId")

// WorkoutLogNonKeyAttributes are WorkoutLogFields without the table's keys:
// LSI1's INCLUDE projection.
func WorkoutLogNonKeyAttributes() []string {
	return slices.DeleteFunc(slices.Clone(WorkoutLogFields), func(f string) bool { return f == "PK" || f == "SK" })
}

// cutAtInstant completes a log read newest first that stopped at a
// guardrail: left is the start of the newest workout left out. Workouts
// kept at that very instant are only part of it, so they go too; exactFrom
// is the instant from which kept holds every workout (the oldest start
// kept, or just after left when none is).
func cutAtInstant(ws []model.Workout, left time.Time) (kept []model.Workout, exactFrom time.Time) {
	for len(ws) > 0 && !ws[len(ws)-1].StartDateUtc.After(left) {
		ws = ws[:len(ws)-1]
	}
	if len(ws) == 0 {
		return ws, left.UTC().Add(time.Nanosecond)
	}
	return ws, ws[len(ws)-1].StartDateUtc.UTC()
}
