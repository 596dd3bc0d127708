// Package periodlog reads one page of a user's workouts started inside a
// milestone period, newest first, from LSI1: what GET
// /v1/milestones/{id}/workouts shows with each workout's verdict, what a
// timeline adds up, and the newest workout's zone (the athlete's today).
// It is an adapter of its own, handed only to those use cases.
package periodlog

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/calendar"
	"github.com/commitcollect/backend/model/counting"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store/dynamo"
)

// Log reads period pages of the workout log.
type Log struct {
	db *dynamo.DB
}

// New returns a Log over db.
func New(db *dynamo.DB) *Log { return &Log{db: db} }

// fields are what a page shows beyond what Judge reads: the local start
// and the name come from the table (LSI1 does not project them), one read
// per workout of the page.
var fields = append([]string{"PK", "SK", "entityType", "schemaVersion", "userId", "activityId", dynamo.AttrLSI1SK,
	"startDateLocal", "name"}, counting.LogFields...)

// PeriodWorkouts reads up to limit of the user's workouts started in w
// (tombstones are not in LSI1), newest first, after the cursor a previous
// page returned (empty: from the newest). next is the cursor of the
// following page, empty on the last. A cursor that is not a workout's date
// key inside w is model.ErrInvalid.
func (l *Log) PeriodWorkouts(ctx context.Context, userID string, w model.Window, after string, limit int) (ws []model.Workout, next string, err error) {
	lo, hi := keys.WorkoutDateRange(w.From, w.To)
	if after != "" {
		if _, ok := keys.ParseWorkoutDateSK(after); !ok || after < lo || after > hi {
			return nil, "", fmt.Errorf("workouts of user %s after %q: not a cursor of this period: %w", userID, after, model.ErrInvalid)
		}
		hi = after
	}
	kc := expression.Key("PK").Equal(expression.Value(keys.UserPK(userID))).
		And(expression.Key(dynamo.AttrLSI1SK).Between(expression.Value(lo), expression.Value(hi)))
	pb := expression.NamesList(expression.Name(fields[0]))
	for _, f := range fields[1:] {
		pb = pb.AddNames(expression.Name(f))
	}
	ex, err := expression.NewBuilder().WithKeyCondition(kc).WithProjection(pb).Build()
	if err != nil {
		return nil, "", fmt.Errorf("workouts of user %s: build query: %w", userID, err)
	}
	want := limit + 1 // one more tells whether a next page exists
	if after != "" {
		want++ // the cursor's own workout comes first
	}
	res, err := l.db.QueryPages(ctx, &dynamodb.QueryInput{
		TableName: aws.String(l.db.Tables().Main), IndexName: aws.String(dynamo.IndexLSI1),
		KeyConditionExpression: ex.KeyCondition(), ProjectionExpression: ex.Projection(),
		ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(), ScanIndexForward: aws.Bool(false),
	}, want)
	if err != nil {
		return nil, "", fmt.Errorf("workouts of user %s in %s..%s: %w", userID, lo, hi, err)
	}
	for _, item := range res.Items {
		var wo model.Workout
		if err := dynamo.Unmarshal(item, &wo); err != nil {
			return nil, "", fmt.Errorf("workouts of user %s: %w", userID, err)
		}
		if after != "" && wo.DateSK == after {
			continue
		}
		if len(ws) == limit {
			return ws, ws[len(ws)-1].DateSK, nil
		}
		ws = append(ws, wo)
	}
	if res.Truncated && len(ws) > 0 { // the cursor was not among what was read
		return ws, ws[len(ws)-1].DateSK, nil
	}
	return ws, "", nil
}

// zoneLookback is how many of the newest workouts LatestZone reads: the
// newest may be tombstones, which keep no wall clock.
const zoneLookback = 5

// LatestZone is the offset from UTC of the user's newest stored workout
// that names its wall clock (start_date_local): where the athlete is, as
// far as the log knows. It is false when none of the newest does.
func (l *Log) LatestZone(ctx context.Context, userID string) (time.Duration, bool, error) {
	ws, _, err := l.PeriodWorkouts(ctx, userID, model.Window{}, "", zoneLookback)
	if err != nil {
		return 0, false, fmt.Errorf("zone of user %s: %w", userID, err)
	}
	for _, w := range ws {
		if off, ok := calendar.Offset(w.StartDateUtc, w.StartDateLocal); ok && !w.IsDeleted {
			return off, true, nil
		}
	}
	return 0, false, nil
}
