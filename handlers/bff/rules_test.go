package bff_test

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/bff/milestones"
	"github.com/commitcollect/backend/handlers/bff/workouts"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/rules"
)

// TestCreateMilestoneRules: rules are echoed as created, a bad rule is a 400
// naming its field (and nothing is created), and {} is no rules.
// Protections: the request's rules field, rules.Check in Validate, the
// strict reading of the rules object, the echo.
func TestCreateMilestoneRules(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	sid := e.user("u1", 1)
	body := func(r any) map[string]any {
		return map[string]any{"modelId": "saturn-v", "title": "Outdoor runs", "metric": "distance", "target": 100000,
			"sportTypes": []string{"Run"}, "periodStartDate": "2026-03-01", "periodEndDate": "2026-03-31", "rules": r}
	}
	r := e.do(http.MethodPost, "/v1/milestones", sid, body(map[string]any{"minMovingTimeSeconds": 1200, "minDistanceMeters": 1000,
		"exclude": []string{"manual", "trainer", "commute"}}))
	var created milestones.MilestoneJSON
	r.json(t, &created)
	want := milestones.RulesJSON{MinMovingTimeSeconds: 1200, MinDistanceMeters: 1000, Exclude: []string{"manual", "trainer", "commute"}}
	if r.status != http.StatusCreated || !reflect.DeepEqual(created.Rules, want) || created.Progress.Excluded == nil {
		t.Fatalf("create with rules: %d %s, want 201 echoing %+v and excluded {}", r.status, r.body, want)
	}
	r = e.do(http.MethodGet, "/v1/milestones/"+created.MilestoneID, sid, nil)
	if !strings.Contains(string(r.body), `"rules":{"minMovingTimeSeconds":1200,"minDistanceMeters":1000,"exclude":["manual","trainer","commute"]}`) ||
		!strings.Contains(string(r.body), `"excluded":{}`) {
		t.Fatalf("read back: %s", r.body)
	}
	r = e.do(http.MethodPost, "/v1/milestones", sid, body(map[string]any{}))
	var none milestones.MilestoneJSON
	r.json(t, &none)
	if r.status != http.StatusCreated || !reflect.DeepEqual(none.Rules, milestones.RulesJSON{Exclude: []string{}}) {
		t.Fatalf("empty rules: %d %s", r.status, r.body)
	}
	var rs []refusal
	for _, c := range []struct {
		name  string
		rules any
		want  []string
	}{
		{"negative time", map[string]any{"minMovingTimeSeconds": -1}, []string{"rules.minMovingTimeSeconds"}},
		{"negative distance", map[string]any{"minDistanceMeters": -5}, []string{"rules.minDistanceMeters"}},
		{"unknown exclusion", map[string]any{"exclude": []string{"manual", "virtual"}}, []string{"rules.exclude[1]"}},
		{"duplicate exclusion", map[string]any{"exclude": []string{"commute", "commute"}}, []string{"rules.exclude[1]"}},
		{"unknown key", map[string]any{"minElevation": 10}, []string{"rules.minElevation"}},
		{"a key in another case", map[string]any{"MinDistanceMeters": 10}, []string{"rules.MinDistanceMeters"}},
		{"time as text", map[string]any{"minMovingTimeSeconds": "20m"}, []string{"rules.minMovingTimeSeconds"}},
		{"rules not an object", []string{"manual"}, []string{"rules"}},
	} {
		rs = append(rs, refusal{c.name, body(c.rules), c.want})
	}
	e.checkRefusals(t, sid, rs, 2)
}

// TestPeriodWorkoutsSayWhy: GET /v1/milestones/{id}/workouts lists the
// period's workouts newest first with each verdict, pages with Link, and
// refuses a bad cursor, a bad limit, a period of a non-series and another
// user's milestone. Protections: the route, Entries' verdicts, the page
// cursor check, the local-day filter (a workout of 1 April in UTC that is
// 31 March locally is listed; one of 1 April locally is not).
func TestPeriodWorkoutsSayWhy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	sid := e.user("u1", 1)
	other := e.user("u2", 2)
	r := e.do(http.MethodPost, "/v1/milestones", sid, map[string]any{"modelId": "saturn-v", "title": "Outdoor runs", "metric": "distance",
		"target": 100000, "sportTypes": []string{"Run"}, "periodStartDate": "2026-03-01", "periodEndDate": "2026-03-31",
		"rules": map[string]any{"minMovingTimeSeconds": 1200, "exclude": []string{"manual", "trainer"}}})
	var m milestones.MilestoneJSON
	r.json(t, &m)
	day := func(d int, h int) time.Time { return time.Date(2026, 3, d, h, 0, 0, 0, time.UTC) }
	put := func(id int64, sport string, start time.Time, local string, moving int64, flags *rules.Flags) {
		w := &model.Workout{UserID: "u1", AthleteID: 1, ActivityID: id, SportType: sport, DistanceMeters: 5000, MovingTimeSeconds: moving,
			StartDateUtc: start, StartDateLocal: local, Flags: flags, CreatedAtUtc: start, UpdatedAtUtc: start}
		if err := e.st.DB.Put(context.Background(), e.st.DB.Tables().Main, w); err != nil {
			t.Fatal(err)
		}
	}
	put(1, "Run", day(2, 7), "2026-03-02T07:00:00", 1500, &rules.Flags{})
	put(2, "Ride", day(3, 7), "2026-03-03T07:00:00", 3600, &rules.Flags{})
	put(3, "Run", day(4, 7), "2026-03-04T07:00:00", 1500, &rules.Flags{Manual: true})
	put(4, "Run", day(5, 7), "2026-03-05T07:00:00", 1500, &rules.Flags{Trainer: true})
	put(5, "Run", day(6, 7), "2026-03-06T07:00:00", 600, &rules.Flags{})
	put(6, "Run", day(7, 7), "2026-03-07T07:00:00", 1500, nil)                                                // stored before flags were kept
	put(7, "Run", time.Date(2026, 4, 1, 5, 0, 0, 0, time.UTC), "2026-03-31T19:00:00", 1200, &rules.Flags{})   // Honolulu, 31 March
	put(8, "Run", time.Date(2026, 3, 31, 20, 0, 0, 0, time.UTC), "2026-04-01T07:00:00", 1500, &rules.Flags{}) // Sydney, 1 April
	put(9, "Run", time.Date(2026, 2, 20, 7, 0, 0, 0, time.UTC), "2026-02-20T07:00:00", 1500, &rules.Flags{})  // February

	var all []workouts.Entry
	path := "/v1/milestones/" + m.MilestoneID + "/workouts?limit=3"
	for pages := 0; path != ""; pages++ {
		if pages > 5 {
			t.Fatal("the pages do not end")
		}
		r := e.do(http.MethodGet, path, sid, nil)
		var b workouts.Body
		r.json(t, &b)
		if r.status != http.StatusOK || (b.Next != "") != (r.header.Get("Link") != "") {
			t.Fatalf("GET %s: %d %s (Link %q)", path, r.status, r.body, r.header.Get("Link"))
		}
		all = append(all, b.Workouts...)
		path = strings.TrimPrefix(b.Next, e.srv.URL)
	}
	want := []workouts.Entry{
		{ActivityID: 7, StartDateLocal: "2026-03-31T19:00:00", SportType: "Run", Counted: true, Value: 5000},
		{ActivityID: 6, StartDateLocal: "2026-03-07T07:00:00", SportType: "Run", Reason: "manual", FlagsUnknown: true},
		{ActivityID: 5, StartDateLocal: "2026-03-06T07:00:00", SportType: "Run", Reason: "below_minimum"},
		{ActivityID: 4, StartDateLocal: "2026-03-05T07:00:00", SportType: "Run", Reason: "trainer"},
		{ActivityID: 3, StartDateLocal: "2026-03-04T07:00:00", SportType: "Run", Reason: "manual"},
		{ActivityID: 2, StartDateLocal: "2026-03-03T07:00:00", SportType: "Ride", Reason: "sport"},
		{ActivityID: 1, StartDateLocal: "2026-03-02T07:00:00", SportType: "Run", Counted: true, Value: 5000},
	}
	if !reflect.DeepEqual(all, want) {
		t.Fatalf("workouts:\n got %+v\nwant %+v", all, want)
	}
	for _, bad := range []struct{ query, field string }{
		{"?limit=0", "limit"}, {"?limit=201", "limit"}, {"?cursor=!!!", "cursor"}, {"?cursor=bm90LWEta2V5", "cursor"},
		{"?period=2026-03-01", "period"},
	} {
		r := e.do(http.MethodGet, "/v1/milestones/"+m.MilestoneID+"/workouts"+bad.query, sid, nil)
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `"field":"`+bad.field+`"`) {
			t.Errorf("%s: %d %s, want 400 naming %s", bad.query, r.status, r.body, bad.field)
		}
	}
	if r := e.do(http.MethodGet, "/v1/milestones/"+m.MilestoneID+"/workouts", other, nil); r.status != http.StatusNotFound {
		t.Fatalf("another user's milestone: %d, want 404", r.status)
	}
}
