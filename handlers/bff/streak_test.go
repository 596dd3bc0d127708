package bff_test

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/bff/milestones"
	"github.com/commitcollect/backend/handlers/bff/timeline"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/ports"
	"github.com/commitcollect/backend/projections"
)

// TestCreateStreakMilestones: a streak is echoed as created, and a bad
// streak (a recurrence, an unknown unit, freezes out of bounds, no unit,
// a unit on another metric, UTC instants) is a 400 naming its field with
// nothing created. Protections: the request's streak fields, streak.Check
// in Validate.
func TestCreateStreakMilestones(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	sid := e.user("u1", 1)
	body := func(edit func(map[string]any)) map[string]any {
		b := map[string]any{"modelId": "saturn-v", "title": "Run every day", "metric": "streak", "streakUnit": "day",
			"freezesPerMonth": 2, "target": 30, "sportTypes": []string{"Run"}, "periodStartDate": "2026-03-01"}
		if edit != nil {
			edit(b)
		}
		return b
	}
	r := e.do(http.MethodPost, "/v1/milestones", sid, body(nil))
	var created milestones.MilestoneJSON
	r.json(t, &created)
	if r.status != http.StatusCreated || created.StreakUnit != "day" || created.FreezesPerMonth == nil || *created.FreezesPerMonth != 2 ||
		created.Streak == nil || created.Streak.State != "broken" || created.Pace != nil {
		t.Fatalf("create a streak: %d %s", r.status, r.body)
	}
	edits := []struct {
		name string
		edit func(map[string]any)
		want []string
	}{
		{"a streak repeats nothing", func(b map[string]any) { b["recurrence"] = "monthly" }, []string{"recurrence"}},
		{"an unknown unit", func(b map[string]any) { b["streakUnit"] = "month" }, []string{"streakUnit"}},
		{"five freezes", func(b map[string]any) { b["freezesPerMonth"] = 5 }, []string{"freezesPerMonth"}},
		{"negative freezes", func(b map[string]any) { b["freezesPerMonth"] = -1 }, []string{"freezesPerMonth"}},
		{"no unit", func(b map[string]any) { delete(b, "streakUnit") }, []string{"streakUnit"}},
		{"a unit on distance", func(b map[string]any) { b["metric"] = "distance" }, []string{"streakUnit"}},
		{"UTC instants", func(b map[string]any) {
			delete(b, "periodStartDate")
			b["periodStartAtUtc"] = "2026-03-01T00:00:00Z"
		}, []string{"periodStartDate"}},
		{"a week streak of half a week", func(b map[string]any) { b["streakUnit"], b["target"] = "week", 2.5 }, []string{"target"}},
	}
	var rs []refusal
	for _, ed := range edits {
		rs = append(rs, refusal{ed.name, body(ed.edit), ed.want})
	}
	e.checkRefusals(t, sid, rs, 1)
}

// TestStreakPaceAndTimeline: the answers of a projected streak and of a
// month's goal, read on the athlete's today in the zone of their newest
// activity. Protections: the zone (read in UTC, today is the 6th and the
// streak at risk; in Honolulu it is still the 5th, and alive), the
// freeze shown, the pace's days over, the timeline's cumulative days and
// a streak's marks.
func TestStreakPaceAndTimeline(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.clock.mu.Lock()
	// 19:00 on the 5th in Honolulu; a date ahead of the real clock, so
	// that DynamoDB Local's TTL never takes the session.
	e.clock.t = time.Date(2027, 3, 6, 5, 0, 0, 0, time.UTC)
	e.clock.mu.Unlock()
	sid := e.user("u1", 1)
	ctx := context.Background()
	create := func(b map[string]any) milestones.MilestoneJSON {
		r := e.do(http.MethodPost, "/v1/milestones", sid, b)
		var m milestones.MilestoneJSON
		r.json(t, &m)
		if r.status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		return m
	}
	st := create(map[string]any{"modelId": "saturn-v", "title": "Every day", "metric": "streak", "streakUnit": "day", "freezesPerMonth": 1,
		"target": 30, "sportTypes": []string{"Run"}, "periodStartDate": "2027-03-01"})
	goal := create(map[string]any{"modelId": "saturn-v", "title": "March", "metric": "distance", "target": 100000,
		"sportTypes": []string{"Run"}, "periodStartDate": "2027-03-01", "periodEndDate": "2027-03-31"})
	var log []model.Workout
	for i, d := range []int{1, 2, 4, 5} { // the 3rd is missed
		start := time.Date(2027, 3, d, 17, 0, 0, 0, time.UTC) // 07:00 in Honolulu
		w := model.Workout{UserID: "u1", AthleteID: 1, ActivityID: int64(i + 1), SportType: "Run", DistanceMeters: 10000,
			MovingTimeSeconds: 3000, StartDateUtc: start, StartDateLocal: start.Add(-10 * time.Hour).Format("2006-01-02T15:04:05"),
			CreatedAtUtc: start, UpdatedAtUtc: start}
		if err := e.st.DB.Put(ctx, e.st.DB.Tables().Main, &w); err != nil {
			t.Fatal(err)
		}
		log = append(log, w)
	}
	ms, _, err := e.st.Milestones.MilestonesWithAwards(ctx, "u1", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, mw := range ms {
		res, err := projections.ProjectWith(mw.Milestone.MilestoneDefinition, mw.Milestone.Projection, projections.Held{},
			projections.Log{Workouts: log}, e.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := e.st.Milestones.WriteProjection(ctx, ports.ProjectionWrite{UserID: "u1", MilestoneID: mw.Milestone.MilestoneID,
			ExpectedVersion: mw.Milestone.Version, Projection: res.Projection}); err != nil {
			t.Fatal(err)
		}
	}

	var got milestones.MilestoneJSON
	e.do(http.MethodGet, "/v1/milestones/"+st.MilestoneID, sid, nil).json(t, &got)
	since, last := "2027-03-01", "2027-03-05"
	want := &milestones.StreakJSON{Current: 4, Longest: 4, Since: &since, LastActiveDate: &last, State: "alive", FreezesUsed: []string{"2027-03-03"}}
	if !reflect.DeepEqual(got.Streak, want) || got.Progress.Value != 4 {
		t.Fatalf("streak %+v (value %v), want %+v", got.Streak, got.Progress.Value, want)
	}
	e.do(http.MethodGet, "/v1/milestones/"+goal.MilestoneID, sid, nil).json(t, &got)
	finish := "2027-03-13" // 40 km in 5 days begun: 100 km on the 13th
	wantPace := &milestones.PaceJSON{ExpectedNow: 100000 * 4 / 31.0, OnPace: true, ProjectedFinishDate: &finish}
	wantPace.ExpectedNow = float64(int64(wantPace.ExpectedNow*1000)) / 1000
	wantPace.Delta = 40000 - wantPace.ExpectedNow
	if !reflect.DeepEqual(got.Pace, wantPace) {
		t.Fatalf("pace %+v, want %+v", got.Pace, wantPace)
	}

	var tl timeline.Body
	r := e.do(http.MethodGet, "/v1/milestones/"+goal.MilestoneID+"/timeline", sid, nil)
	r.json(t, &tl)
	wantDays := []timeline.Day{{Date: "2027-03-01", Value: 10000}, {Date: "2027-03-02", Value: 20000}, {Date: "2027-03-04", Value: 30000},
		{Date: "2027-03-05", Value: 40000}}
	if r.status != http.StatusOK || !reflect.DeepEqual(tl.Days, wantDays) || tl.Target != 100000 || tl.EndDate == nil {
		t.Fatalf("timeline: %d %s", r.status, r.body)
	}
	r = e.do(http.MethodGet, "/v1/milestones/"+st.MilestoneID+"/timeline", sid, nil)
	r.json(t, &tl)
	wantDays = []timeline.Day{{Date: "2027-03-01", Value: 1, Kind: "active"}, {Date: "2027-03-02", Value: 2, Kind: "active"},
		{Date: "2027-03-03", Value: 2, Kind: "bridged"}, {Date: "2027-03-04", Value: 3, Kind: "active"}, {Date: "2027-03-05", Value: 4, Kind: "active"}}
	if r.status != http.StatusOK || !reflect.DeepEqual(tl.Days, wantDays) || tl.EndDate != nil {
		t.Fatalf("streak timeline: %d %s", r.status, r.body)
	}
	if r := e.do(http.MethodGet, "/v1/milestones/"+st.MilestoneID+"/timeline?period=2027-03-01", sid, nil); r.status != http.StatusBadRequest ||
		!strings.Contains(string(r.body), `"field":"period"`) {
		t.Fatalf("?period= on a milestone that does not repeat: %d %s", r.status, r.body)
	}
	if r := e.do(http.MethodGet, "/v1/milestones/"+st.MilestoneID+"/timeline", e.user("u2", 2), nil); r.status != http.StatusNotFound {
		t.Fatalf("another user's timeline: %d, want 404", r.status)
	}
}
