package bff_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/bff/milestones"
	"github.com/commitcollect/backend/handlers/bff/workouts"
	"github.com/commitcollect/backend/model"
)

// TestASeriesHeadlineIsTheAthletesWeek: on Sunday morning in Honolulu it
// is already Monday in Kiribati; a weekly series shows the athlete's own
// week at the top and first in periods, and /workouts defaults to it (with
// Sunday's run), not next week, empty. Protections: the athlete's today in
// SeriesJSON (OccurrencesThrough) and in PeriodOf.
func TestASeriesHeadlineIsTheAthletesWeek(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.clock.mu.Lock()
	// 10:00 on Sunday 14 March in Honolulu (UTC−10), ahead of the real
	// clock so that DynamoDB Local's TTL never takes the session.
	e.clock.t = time.Date(2027, 3, 14, 20, 0, 0, 0, time.UTC)
	e.clock.mu.Unlock()
	sid := e.user("u1", 1)
	start := time.Date(2027, 3, 14, 17, 0, 0, 0, time.UTC) // 07:00 in Honolulu
	w := &model.Workout{UserID: "u1", AthleteID: 1, ActivityID: 5, SportType: "Run", DistanceMeters: 5000, MovingTimeSeconds: 1500,
		StartDateUtc: start, StartDateLocal: "2027-03-14T07:00:00", CreatedAtUtc: start, UpdatedAtUtc: start}
	if err := e.st.DB.Put(context.Background(), e.st.DB.Tables().Main, w); err != nil {
		t.Fatal(err)
	}
	var m milestones.MilestoneJSON
	r := e.do(http.MethodPost, "/v1/milestones", sid, map[string]any{"modelId": "saturn-v", "title": "3 runs a week", "metric": "count",
		"target": 3, "recurrence": "weekly", "periodStartDate": "2027-03-01"})
	if r.json(t, &m); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var got milestones.MilestoneJSON
	e.do(http.MethodGet, "/v1/milestones/"+m.MilestoneID, sid, nil).json(t, &got)
	if len(got.Periods) != 2 || got.Periods[0].StartDate != "2027-03-08" {
		t.Fatalf("periods %+v, want the two weeks begun in Honolulu, the newest from 8 March", got.Periods)
	}
	var page workouts.Body
	e.do(http.MethodGet, "/v1/milestones/"+m.MilestoneID+"/workouts", sid, nil).json(t, &page)
	if len(page.Workouts) != 1 || page.Workouts[0].ActivityID != 5 {
		t.Fatalf("workouts %+v, want Sunday's run of the athlete's week", page.Workouts)
	}
}
