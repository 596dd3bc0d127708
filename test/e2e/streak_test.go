package e2e_test

import (
	"context"
	"github.com/commitcollect/backend/handlers/app"
	"log/slog"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/commitcollect/backend/handlers/bff/milestones"
	"github.com/commitcollect/backend/handlers/bff/timeline"
	"github.com/commitcollect/backend/handlers/ingest/handoff"
	"github.com/commitcollect/backend/handlers/ingest/intake"
	"github.com/commitcollect/backend/scripts/stravasim"
)

// TestAStreakThroughTheStack is a Sydney athlete's yoga streak and running
// goal as a client sees them through the assembled api, the worker and the
// projector, every answer checked against openapi.yaml: a missed day is
// bridged by the month's freeze and the streak is at risk before today's
// session; the missed day's late upload heals it, gives the freeze back
// and completes it; a session deleted on Strava lowers the longest run,
// and the awards stay. The goal answers its pace and its timeline.
func TestAStreakThroughTheStack(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	ctx := context.Background()
	const athlete = 9077
	b := a.signIn(athlete)
	sydney, err := time.LoadLocation("Australia/Sydney")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().In(sydney)
	day := func(ago int) time.Time {
		return time.Date(now.Year(), now.Month(), now.Day(), 7, 0, 0, 0, sydney).AddDate(0, 0, -ago)
	}
	date := func(ago int) string { return day(ago).Format(time.DateOnly) }
	create := func(body map[string]any) milestones.MilestoneJSON {
		t.Helper()
		var m milestones.MilestoneJSON
		if st := a.call(b, http.MethodPost, "/v1/milestones", body, &m); st != http.StatusCreated {
			t.Fatalf("POST /v1/milestones %v = %d %+v", body, st, m)
		}
		return m
	}
	streak := create(map[string]any{"modelId": "flying-scotsman", "title": "Yoga every day", "metric": "streak", "streakUnit": "day",
		"freezesPerMonth": 1, "target": 6, "sportTypes": []string{"Yoga"}, "periodStartDate": date(6)})
	goal := create(map[string]any{"modelId": "flying-scotsman", "title": "Run 50 km", "metric": "distance", "target": 50000,
		"sportTypes": []string{"Run"}, "periodStartDate": date(6), "periodEndDate": now.AddDate(0, 0, 20).Format(time.DateOnly)})
	sweeper := handoff.NewSweeper(app.SweeperStores(a.st), a.queue, slog.New(slog.DiscardHandler))
	sweeper.Now = func() time.Time { return time.Now().UTC().Add(time.Minute) } // past the gather grid's tick
	send := func(aspect string, id int64, sport string, ago int) {
		t.Helper()
		if aspect != "delete" {
			a.sim.PutActivity(stravasim.Activity{ID: id, AthleteID: athlete, Name: sport, SportType: sport, Distance: 10000,
				MovingTime: 3000, ElapsedTime: 3100, StartDate: day(ago).UTC(), Zone: "Australia/Sydney"})
		} else {
			a.sim.DeleteActivity(id)
		}
		if d, err := a.sim.Deliver(ctx, a.srv.URL+intake.WebhookPath, a.sim.ActivityEvent(aspect, id, athlete, nil)); err != nil {
			t.Fatalf("deliver %s %d: %+v %v", aspect, id, d, err)
		}
		a.settle(ctx)
		// Past three creates in a rate window, an athlete's creates are
		// gathered for a burst served from list pages: sweep them as due.
		if _, err := sweeper.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		a.settle(ctx)
	}
	for _, ago := range []int{6, 5, 3, 2, 1} { // the 4th day before today is missed; today has nothing yet
		send("create", 9100+int64(ago), "Yoga", ago)
	}
	send("create", 9201, "Run", 5)
	send("create", 9202, "Run", 1)
	read := func(id string) milestones.MilestoneJSON {
		t.Helper()
		var m milestones.MilestoneJSON
		if st := a.call(b, http.MethodGet, "/v1/milestones/"+id, nil, &m); st != http.StatusOK || m.Streak == nil && id == streak.MilestoneID {
			t.Fatalf("GET %s = %d %+v", id, st, m)
		}
		return m
	}
	check := func(what string, s *milestones.StreakJSON, current, longest int, state string, freezes []string, awards, wantAwards int) {
		t.Helper()
		if s.Current != current || s.Longest != longest || s.State != state || !slices.Equal(s.FreezesUsed, freezes) || awards != wantAwards {
			t.Fatalf("%s: streak %+v with %d awards; want current %d, longest %d, %s, freezes %v, %d awards",
				what, s, awards, current, longest, state, freezes, wantAwards)
		}
	}
	m := read(streak.MilestoneID)
	check("a missed day bridged", m.Streak, 5, 5, "at_risk", []string{date(4)}, len(m.Awards), 5)

	send("create", 9104, "Yoga", 4) // the watch syncs late
	m = read(streak.MilestoneID)
	check("healed", m.Streak, 6, 6, "at_risk", []string{}, len(m.Awards), 6)
	if m.Status != "completed" || m.Pace != nil || *m.Streak.Since != date(6) {
		t.Fatalf("healed: status %s, pace %+v, since %v; want completed, no pace (no end), since %s", m.Status, m.Pace, *m.Streak.Since, date(6))
	}
	var tl timeline.Body
	if st := a.call(b, http.MethodGet, "/v1/milestones/"+streak.MilestoneID+"/timeline", nil, &tl); st != http.StatusOK || len(tl.Days) != 6 ||
		tl.Days[5] != (timeline.Day{Date: date(1), Value: 6, Kind: "active"}) {
		t.Fatalf("streak timeline = %d %+v", st, tl)
	}

	send("delete", 9105, "Yoga", 5) // deleted on Strava: the freeze bridges its day, the run loses one
	m = read(streak.MilestoneID)
	check("a session deleted", m.Streak, 5, 5, "at_risk", []string{date(5)}, len(m.Awards), 6)

	g := read(goal.MilestoneID)
	if g.Pace == nil || g.Pace.ProjectedFinishDate == nil || g.Progress.Value != 20000 {
		t.Fatalf("goal: %+v pace %+v, want 20 km and a pace with its finish", g.Progress, g.Pace)
	}
	var gt timeline.Body
	if st := a.call(b, http.MethodGet, "/v1/milestones/"+goal.MilestoneID+"/timeline", nil, &gt); st != http.StatusOK ||
		!slices.Equal(gt.Days, []timeline.Day{{Date: date(5), Value: 10000}, {Date: date(1), Value: 20000}}) {
		t.Fatalf("goal timeline = %d %+v", st, gt)
	}
}
