package demokit

import (
	"context"
	"fmt"
	"github.com/commitcollect/backend/scripts/stravasim/webhook"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/commitcollect/backend/handlers/bff/milestones"
	"github.com/commitcollect/backend/handlers/bff/timeline"
	"github.com/commitcollect/backend/scripts/runkit"
	"github.com/commitcollect/backend/scripts/stravasim"
)

// DemoStreak is the act on streaks: a yoga streak with a freeze, then the
// late upload that heals it.
type DemoStreak struct {
	// Bridged is the milestone once the freeze bridged the missed day;
	// Healed once the late upload filled it.
	Bridged, Healed milestones.MilestoneJSON
	// Timeline is GET /v1/milestones/{id}/timeline at the end.
	Timeline timeline.Body
}

// streakAct is played by the demo athlete, signed in (http), in their zone.
type streakAct struct {
	o       DemoOptions
	http    *http.Client
	zone    *time.Location
	modelID string
	say     func(format string, args ...any)
}

// streakDays are the days (before today, 0 is today) of the act's yoga:
// the third day before today is missed, and uploaded late.
var streakDays = []int{5, 4, 2, 1, 0}

const streakMissed = 3

// yoga is the act's session on the day `ago` days before today (now, on
// the athlete's clock): 07:00, or today half-way to now.
func (d *streakAct) yoga(now time.Time, ago int) stravasim.Activity {
	midnight := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, d.zone).AddDate(0, 0, -ago)
	start := midnight.Add(7 * time.Hour)
	if ago == 0 {
		start = midnight.Add(now.Sub(midnight) / 2)
	}
	return stravasim.Activity{ID: d.o.AthleteID*1000 + 600 + int64(ago), AthleteID: d.o.AthleteID, Name: fmt.Sprintf("Yoga, %d days ago", ago),
		SportType: "Yoga", MovingTime: 1800, ElapsedTime: 1900, StartDate: start.UTC(), Zone: d.zone.String()}
}

// play has the athlete commit to yoga every day for five days from five
// days ago, with one freeze a month. Five sessions arrive as webhooks, the
// third day before today missed: the freeze bridges it. Then that day's
// session is uploaded late: the streak heals, the freeze is given back,
// and the award is minted.
func (d *streakAct) play(ctx context.Context) (DemoStreak, error) {
	var res DemoStreak
	now := time.Now().In(d.zone)
	var m milestones.MilestoneJSON
	if err := d.send(ctx, http.MethodPost, d.o.APIURL+"/v1/milestones", map[string]any{
		"modelId": d.modelID, "title": "Yoga every day", "metric": "streak", "streakUnit": "day", "freezesPerMonth": 1, "target": 6,
		"sportTypes": []string{"Yoga"}, "periodStartDate": now.AddDate(0, 0, -5).Format(time.DateOnly),
	}, &m, http.StatusCreated); err != nil {
		return res, fmt.Errorf("create streak: %w", err)
	}
	d.say("\nStreaks: %q, 6 days in a row from %s, one freeze a month; the sessions of 5, 4, 2, 1 days ago and today arrive.",
		m.Title, m.Period.StartDate)
	for _, ago := range streakDays {
		if err := d.create(ctx, d.yoga(now, ago)); err != nil {
			return res, err
		}
	}
	missed := now.AddDate(0, 0, -streakMissed).Format(time.DateOnly)
	var err error
	res.Bridged, err = d.await(ctx, m.MilestoneID, func(s *milestones.StreakJSON) bool {
		return s.Current == 5 && slices.Equal(s.FreezesUsed, []string{missed})
	})
	if err != nil {
		return res, err
	}
	d.show("  with a freeze", res.Bridged)
	if err := d.create(ctx, d.yoga(now, streakMissed)); err != nil {
		return res, err
	}
	d.say("  The watch syncs late: the session of %s arrives.", missed)
	res.Healed, err = d.await(ctx, m.MilestoneID, func(s *milestones.StreakJSON) bool { return s.Current == 6 && len(s.FreezesUsed) == 0 })
	if err != nil {
		return res, err
	}
	d.show("  healed", res.Healed)
	if err := d.send(ctx, http.MethodGet, d.o.APIURL+"/v1/milestones/"+m.MilestoneID+"/timeline", nil, &res.Timeline, http.StatusOK); err != nil {
		return res, fmt.Errorf("read streak timeline: %w", err)
	}
	var days []string
	for _, day := range res.Timeline.Days {
		days = append(days, fmt.Sprintf("%s %s (%v)", day.Date[5:], day.Kind, day.Value))
	}
	d.say("  GET /v1/milestones/%s/timeline: %s", m.MilestoneID, strings.Join(days, ", "))
	return res, nil
}

// show says where the streak stands.
func (d *streakAct) show(what string, m milestones.MilestoneJSON) {
	s := m.Streak
	d.say("  %s: current %d, longest %d, since %s, state %s, freezes used %v, %d parts awarded", what, s.Current, s.Longest,
		deref(s.Since), s.State, s.FreezesUsed, len(m.Awards))
}

// create puts a at the simulator and sends its create webhook.
func (d *streakAct) create(ctx context.Context, a stravasim.Activity) error {
	body := stravasim.ControlActivity{Activity: a, AthleteID: a.AthleteID}
	if err := d.send(ctx, http.MethodPut, fmt.Sprintf("%s%sactivities/%d", d.o.SimURL, stravasim.ControlPrefix, a.ID), body, nil, http.StatusOK); err != nil {
		return fmt.Errorf("put activity %d at the simulator: %w", a.ID, err)
	}
	if err := d.send(ctx, http.MethodPost, d.o.SimURL+stravasim.ControlPrefix+"events",
		webhook.ControlEvent{Aspect: "create", ActivityID: a.ID, OwnerID: a.AthleteID}, nil, http.StatusOK); err != nil {
		return fmt.Errorf("send create webhook for activity %d: %w", a.ID, err)
	}
	return nil
}

// await polls the streak until done holds.
func (d *streakAct) await(ctx context.Context, id string, done func(*milestones.StreakJSON) bool) (milestones.MilestoneJSON, error) {
	var m milestones.MilestoneJSON
	deadline := time.Now().Add(d.o.Timeout)
	for {
		if err := d.send(ctx, http.MethodGet, d.o.APIURL+"/v1/milestones/"+id, nil, &m, http.StatusOK); err != nil {
			return m, fmt.Errorf("read streak: %w", err)
		}
		if m.Streak != nil && done(m.Streak) {
			return m, nil
		}
		if time.Now().After(deadline) {
			return m, fmt.Errorf("streak: %+v after %s", m.Streak, d.o.Timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// send does one JSON request with the athlete's client.
func (d *streakAct) send(ctx context.Context, method, url string, in, out any, want int) error {
	return runkit.SendJSON(ctx, d.http, method, url, in, out, want)
}

func deref(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}
