package demokit

import (
	"context"
	"fmt"
	"github.com/commitcollect/backend/scripts/stravasim/webhook"
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/commitcollect/backend/handlers/bff/milestones"
	"github.com/commitcollect/backend/handlers/bff/workouts"
	"github.com/commitcollect/backend/model/rules"
	"github.com/commitcollect/backend/scripts/runkit"
	"github.com/commitcollect/backend/scripts/stravasim"
)

// DemoRules is the act on what counts: an outdoor riding goal with rules,
// and four rides of today, of which one counts.
type DemoRules struct {
	Milestone milestones.MilestoneJSON
	// Workouts is GET /v1/milestones/{id}/workouts at the end.
	Workouts []workouts.Entry
}

// rulesAct is the act on what counts, played by a cyclist of its own (so
// that only their rides fall in the goal's period), signed in as a browser
// would.
type rulesAct struct {
	o       DemoOptions
	http    *http.Client
	zone    *time.Location
	modelID string
	say     func(format string, args ...any)
}

// outdoorRides are the act's rides: an outdoor ride that counts, a manual
// entry, an indoor trainer session and a ride too short for the rules.
func (d *rulesAct) outdoorRides(now time.Time) []stravasim.Activity {
	id := d.athlete() * 1000
	ride := func(n int64, name string, km float64, minutes int64, edit func(*stravasim.Activity)) stravasim.Activity {
		a := stravasim.Activity{ID: id + n, AthleteID: d.athlete(), Name: name, SportType: "Ride", Distance: km * 1000,
			MovingTime: minutes * 60, ElapsedTime: minutes*60 + 120, StartDate: now.Add(-time.Duration(5-n) * time.Hour).UTC(), Zone: d.zone.String()}
		if edit != nil {
			edit(&a)
		}
		return a
	}
	return []stravasim.Activity{
		ride(1, "Coast road loop", 42, 95, nil),
		ride(2, "Ride I forgot to record (typed in)", 100, 200, func(a *stravasim.Activity) { a.Manual = true }),
		ride(3, "Indoor intervals on the trainer", 30, 60, func(a *stravasim.Activity) { a.Trainer = true }),
		ride(4, "To the bakery", 1.5, 5, nil),
	}
}

// rules has the athlete commit to riding outdoors, where manual entries,
// trainer sessions and rides under 20 minutes do not count; four rides of
// today arrive as webhooks, and the act waits until the milestone counts
// the one outdoor ride and says why the others did not, then shows GET
// /v1/milestones/{id}/workouts.
func (d *rulesAct) play(ctx context.Context) (DemoRules, error) {
	var res DemoRules
	if err := d.signIn(ctx); err != nil {
		return res, err
	}
	now := time.Now().In(d.zone)
	today := now.AddDate(0, 0, -1).Format(time.DateOnly) // the rides are of the last hours
	m := &res.Milestone
	if err := d.send(ctx, http.MethodPost, d.o.APIURL+"/v1/milestones", map[string]any{
		"modelId": d.modelID, "title": "Ride 100 km outdoors", "metric": "distance", "target": 100_000,
		"sportTypes": []string{"group:rides"}, "periodStartDate": today, "periodEndDate": now.AddDate(0, 0, 30).Format(time.DateOnly),
		"rules": map[string]any{"minMovingTimeSeconds": 1200, "exclude": []string{"manual", "trainer"}},
	}, m, http.StatusCreated); err != nil {
		return res, fmt.Errorf("create milestone with rules: %w", err)
	}
	d.say("\nWhat counts: %q from %s; manual entries and trainer sessions never count, nor rides under %d minutes.",
		m.Title, today, m.Rules.MinMovingTimeSeconds/60)
	for _, a := range d.outdoorRides(now) {
		body := stravasim.ControlActivity{Activity: a, AthleteID: a.AthleteID}
		if err := d.send(ctx, http.MethodPut, fmt.Sprintf("%s%sactivities/%d", d.o.SimURL, stravasim.ControlPrefix, a.ID), body, nil, http.StatusOK); err != nil {
			return res, fmt.Errorf("put activity %d at the simulator: %w", a.ID, err)
		}
		if err := d.send(ctx, http.MethodPost, d.o.SimURL+stravasim.ControlPrefix+"events",
			webhook.ControlEvent{Aspect: "create", ActivityID: a.ID, OwnerID: d.athlete()}, nil, http.StatusOK); err != nil {
			return res, fmt.Errorf("send create webhook for activity %d: %w", a.ID, err)
		}
	}
	want := map[string]int{"manual": 1, "trainer": 1, "below_minimum": 1} // the cyclist's four rides
	deadline := time.Now().Add(d.o.Timeout)
	for m.Progress.WorkoutsCounted != 1 || !maps.Equal(m.Progress.Excluded, want) {
		if time.Now().After(deadline) {
			return res, fmt.Errorf("rules: milestone counts %d, excluded %v after %s; want 1 and %v", m.Progress.WorkoutsCounted,
				m.Progress.Excluded, d.o.Timeout, want)
		}
		time.Sleep(50 * time.Millisecond)
		if err := d.send(ctx, http.MethodGet, d.o.APIURL+"/v1/milestones/"+m.MilestoneID, nil, m, http.StatusOK); err != nil {
			return res, fmt.Errorf("read milestone with rules: %w", err)
		}
	}
	var left []string
	for _, r := range rules.Reasons {
		if n := m.Progress.Excluded[string(r)]; n > 0 {
			left = append(left, fmt.Sprintf("%d %s", n, r))
		}
	}
	d.say("  %s of %s: %d ride counted; not counted (progress.excluded): %s", km(m.Progress.Value), km(m.Progress.Target),
		m.Progress.WorkoutsCounted, strings.Join(left, ", "))
	if p := m.Pace; p != nil {
		d.say("  pace: %s expected by now, %s; at this rate, done on %s", km(p.ExpectedNow), map[bool]string{true: "on pace", false: "behind"}[p.OnPace],
			deref(p.ProjectedFinishDate))
	}
	var page workouts.Body
	if err := d.send(ctx, http.MethodGet, d.o.APIURL+"/v1/milestones/"+m.MilestoneID+"/workouts", nil, &page, http.StatusOK); err != nil {
		return res, fmt.Errorf("read why each ride counted: %w", err)
	}
	res.Workouts = page.Workouts
	d.say("  GET /v1/milestones/%s/workouts:", m.MilestoneID)
	for _, e := range page.Workouts {
		why := fmt.Sprintf("counted, +%s", km(e.Value))
		if !e.Counted {
			why = "not counted: " + e.Reason
		}
		d.say("    %s  %-5s activity %d  %s", e.StartDateLocal, e.SportType, e.ActivityID, why)
	}
	return res, nil
}

// athlete is the act's cyclist at the simulator.
func (d *rulesAct) athlete() int64 { return d.o.AthleteID + 2 }

// signIn adds the cyclist at the simulator and signs them in.
func (d *rulesAct) signIn(ctx context.Context) error {
	a := stravasim.Athlete{ID: d.athlete(), Firstname: "Outdoor", Lastname: fmt.Sprintf("Cyclist %d", d.athlete()%10000)}
	if err := d.send(ctx, http.MethodPost, d.o.SimURL+stravasim.ControlPrefix+"athletes", a, nil, http.StatusCreated); err != nil {
		return fmt.Errorf("add the cyclist at the simulator: %w", err)
	}
	if err := d.send(ctx, http.MethodPut, d.o.SimURL+stravasim.ControlPrefix+"authorization", map[string]any{"athleteId": a.ID}, nil, http.StatusOK); err != nil {
		return fmt.Errorf("choose who logs in: %w", err)
	}
	d.http = runkit.Browser(10 * time.Second)
	if err := runkit.Login(ctx, d.http, d.o.APIURL); err != nil {
		return fmt.Errorf("cyclist login: %w", err)
	}
	return nil
}

// send does one JSON request with the athlete's client.
func (d *rulesAct) send(ctx context.Context, method, url string, in, out any, want int) error {
	return runkit.SendJSON(ctx, d.http, method, url, in, out, want)
}
