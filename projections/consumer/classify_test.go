package consumer_test

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/ops"
	"github.com/commitcollect/backend/projections/consumer"
	"github.com/commitcollect/backend/projections/consumer/trigger"
	"github.com/commitcollect/backend/test/fixture"
)

var update = flag.Bool("update", false, "rewrite testdata/*.json from records captured on DynamoDB Local")

// classifyCase is one kind of stream record: how to produce it on DynamoDB
// Local, and what Classify must decide about it. TestClassifyCaptured
// produces each record for real (and with -update saves it under testdata/);
// TestClassifyFixtures decodes the saved JSON exactly as Lambda would.
type classifyCase struct {
	name     string
	write    func(t *testing.T, e *env)
	pick     func(recs []events.DynamoDBEventRecord) events.DynamoDBEventRecord
	want     trigger.Action
	wantUser string
	wantCorr string
	wantErr  error
}

func last(recs []events.DynamoDBEventRecord) events.DynamoDBEventRecord { return recs[len(recs)-1] }

func classifyCases() []classifyCase {
	return []classifyCase{
		{name: "workout_insert", want: trigger.Recompute, wantUser: "u1", wantCorr: "c1",
			write: func(t *testing.T, e *env) {
				e.putWorkout(fixture.Workout("u1", 1, fixture.Day(1), fixture.Km(10), fixture.Corr("c1")))
			}},
		{name: "workout_modify", want: trigger.Recompute, wantUser: "u1", wantCorr: "c1b",
			write: func(t *testing.T, e *env) {
				e.putWorkout(fixture.Workout("u1", 1, fixture.Day(1), fixture.Km(12), fixture.Corr("c1b")))
			}},
		{name: "workout_marked_deleted", want: trigger.Recompute, wantUser: "u1", wantCorr: "c1d",
			write: func(t *testing.T, e *env) {
				w := fixture.Workout("u1", 1, fixture.Day(1), fixture.Km(12), fixture.Corr("c1d"))
				w.IsDeleted = true
				e.putWorkout(w)
			}},
		// A tombstone that comes back (Strava shows the activity again after
		// a 404): a MODIFY flipping isDeleted true → false recomputes.
		{name: "workout_revived", want: trigger.Recompute, wantUser: "u1", wantCorr: "c1r",
			write: func(t *testing.T, e *env) {
				e.putWorkout(fixture.Workout("u1", 1, fixture.Day(1), fixture.Km(12), fixture.Corr("c1r")))
			}},
		{name: "workout_remove", want: trigger.Recompute, wantUser: "u1", wantCorr: "c1r",
			write: func(t *testing.T, e *env) {
				if err := e.s.DB.Delete(e.ctx, e.s.DB.Tables().Main, keys.WorkoutKey("u1", 1)); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "milestone_insert", want: trigger.Recompute, wantUser: "u1",
			write: func(t *testing.T, e *env) { e.putMilestone("u1", "m1", fixture.Definition(fixture.Parts(2))) }},
		{name: "milestone_modify_by_projector", want: trigger.Ignore, wantUser: "u1",
			write: func(t *testing.T, e *env) {
				e.putWorkout(fixture.Workout("u1", 2, fixture.Day(1), fixture.Km(60), fixture.Corr("c2")))
				e.newRecords()
				if _, err := e.consumer(consumer.Options{}).RecomputeUser(e.ctx, "u1", false); err != nil {
					t.Fatal(err)
				}
			},
			pick: func(recs []events.DynamoDBEventRecord) events.DynamoDBEventRecord {
				for _, r := range recs {
					if r.EventName == "MODIFY" {
						return r
					}
				}
				return last(recs)
			}},
		{name: "award_insert", want: trigger.Ignore, wantUser: "u1",
			write: func(t *testing.T, e *env) {
				a := &model.Award{UserID: "u1", MilestoneID: "m1", ModelID: "rocket", PartIndex: 1, PartName: "fin", ActivityID: 2, CorrelationID: "c2"}
				if err := e.s.DB.Put(e.ctx, e.s.DB.Tables().Main, a); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "milestone_definition_change", want: trigger.Recompute, wantUser: "u1",
			write: func(t *testing.T, e *env) {
				m := e.milestone("u1", "m1")
				m.Target, m.WrittenBy = 200000, model.WriterAPI
				if err := e.s.DB.Put(e.ctx, e.s.DB.Tables().Main, &m); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "milestone_modify_same_definition", want: trigger.Ignore, wantUser: "u1",
			write: func(t *testing.T, e *env) {
				m := e.milestone("u1", "m1")
				m.CreatedAtUtc = april // not part of the definition
				if err := e.s.DB.Put(e.ctx, e.s.DB.Tables().Main, &m); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "profile_insert", want: trigger.Ignore, wantUser: "u1",
			write: func(t *testing.T, e *env) {
				if err := e.s.DB.Put(e.ctx, e.s.DB.Tables().Main, &model.Profile{UserID: "u1", AthleteID: 77}); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "parked_insert", want: trigger.Ignore,
			write: func(t *testing.T, e *env) {
				if err := e.s.Parked.Park(e.ctx, &ops.ParkedRecord{Source: "WORKER", RecordID: "r1", Reason: "x", Payload: "{}"}); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "ratelimit_insert", want: trigger.Ignore,
			write: func(t *testing.T, e *env) {
				if err := e.s.DB.Put(e.ctx, e.s.DB.Tables().Main, &ops.RateLimitState{ShortLimit: 200, DailyLimit: 2000}); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "workout_newer_schema", want: trigger.Park, wantUser: "u2", wantCorr: "c9", wantErr: model.ErrUnsupportedSchema,
			write: func(t *testing.T, e *env) {
				e.putRaw(rawWorkout(t, fixture.Workout("u2", 9, fixture.Day(1), fixture.Km(10), fixture.Corr("c9")), func(item map[string]types.AttributeValue) {
					item["schemaVersion"] = &types.AttributeValueMemberN{Value: "99"}
				}))
			}},
		{name: "workout_malformed", want: trigger.Park, wantUser: "u2", wantCorr: "c10", wantErr: model.ErrInvalid,
			write: func(t *testing.T, e *env) {
				e.putRaw(rawWorkout(t, fixture.Workout("u2", 10, fixture.Day(1), fixture.Km(10), fixture.Corr("c10")), func(item map[string]types.AttributeValue) {
					item["startDateUtc"] = &types.AttributeValueMemberBOOL{Value: true}
				}))
			}},
		{name: "workout_bad_key", want: trigger.Park, wantErr: model.ErrInvalid,
			write: func(t *testing.T, e *env) {
				e.putRaw(map[string]types.AttributeValue{
					"PK": &types.AttributeValueMemberS{Value: "USER#u2"}, "SK": &types.AttributeValueMemberS{Value: "WORKOUT#STRAVA#abc"},
				})
			}},
	}
}

func check(t *testing.T, tc classifyCase, rec events.DynamoDBEventRecord) {
	t.Helper()
	d := trigger.Classify(rec)
	if d.Action != tc.want || d.UserID != tc.wantUser || d.CorrelationID != tc.wantCorr {
		t.Errorf("%s: got %v user %q corr %q (%s, %v), want %v user %q corr %q",
			tc.name, d.Action, d.UserID, d.CorrelationID, d.Reason, d.Err, tc.want, tc.wantUser, tc.wantCorr)
	}
	if tc.wantErr != nil && !errors.Is(d.Err, tc.wantErr) {
		t.Errorf("%s: error %v, want %v", tc.name, d.Err, tc.wantErr)
	}
	if tc.wantErr == nil && d.Err != nil {
		t.Errorf("%s: unexpected error %v", tc.name, d.Err)
	}
}

// TestClassifyCaptured produces every kind of record on DynamoDB Local and
// classifies the records read back from the stream.
func TestClassifyCaptured(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putModel("rocket", 2)
	e.newRecords()
	for _, tc := range classifyCases() {
		tc.write(t, e)
		recs := e.newRecords()
		if len(recs) == 0 {
			t.Fatalf("%s: no stream record", tc.name)
		}
		pick := tc.pick
		if pick == nil {
			pick = last
		}
		rec := pick(recs)
		check(t, tc, rec)
		if *update {
			b, err := json.MarshalIndent(events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{rec}}, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join("testdata", tc.name+".json"), append(b, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestClassifyFixtures decodes captured records from JSON, as the Lambda
// runtime does, and classifies them.
func TestClassifyFixtures(t *testing.T) {
	t.Parallel()
	for _, tc := range classifyCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, err := os.ReadFile(filepath.Join("testdata", tc.name+".json"))
			if err != nil {
				t.Fatalf("fixture (regenerate with go test -run TestClassifyCaptured -update): %v", err)
			}
			var ev events.DynamoDBEvent
			if err := json.Unmarshal(b, &ev); err != nil {
				t.Fatal(err)
			}
			if len(ev.Records) != 1 {
				t.Fatalf("fixture holds %d records", len(ev.Records))
			}
			check(t, tc, ev.Records[0])
		})
	}
}
