package demokit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/cookiejar"
	"time"

	"github.com/commitcollect/backend/handlers/bff/milestones"
	"github.com/commitcollect/backend/scripts/runkit"
	"github.com/commitcollect/backend/scripts/stravasim"
)

// historyDemo is the demo's second athlete: one with months of history at
// Strava who connects, whose backfill fills a milestone, and whose weekly
// series shows its periods.
type historyDemo struct {
	demo *demo
	// connected is when the history athlete connected.
	connected time.Time
	// historyRuns are the starts of the history athlete's runs.
	historyRuns []time.Time
}

// history is the second act: another athlete, with 120 days of activities
// already on Strava and never sent as webhooks, connects; the connect's
// backfill imports them and a milestone whose period started 60 days ago
// fills from the history alone.
func (d *historyDemo) history(ctx context.Context) error {
	start, err := d.historyAtStrava(ctx)
	if err != nil {
		return err
	}
	browser, m, err := d.connect(ctx, start)
	if err != nil {
		return err
	}
	if err := d.historyCounted(ctx, browser, m); err != nil {
		return err
	}
	return d.series(ctx, browser)
}

// historyAtStrava puts the history athlete's 120 days of activities at the
// simulator; it returns the start of the history milestone's period.
func (d *historyDemo) historyAtStrava(ctx context.Context) (time.Time, error) {
	h := &d.demo.res.History
	h.AthleteID, h.Imported = d.demo.o.AthleteID+1, -1
	a := stravasim.Athlete{ID: h.AthleteID, Firstname: "History", Lastname: fmt.Sprintf("Athlete %d", h.AthleteID%10000)}
	if err := d.demo.send(ctx, http.MethodPost, d.demo.o.SimURL+stravasim.ControlPrefix+"athletes", a, nil, http.StatusCreated); err != nil {
		return time.Time{}, fmt.Errorf("add history athlete at the simulator: %w", err)
	}
	now := time.Now().UTC()
	start := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC).AddDate(0, 0, -60)
	rng := rand.New(rand.NewPCG(d.demo.o.Seed, uint64(h.AthleteID)))
	id := h.AthleteID * 1000
	for day := range 120 {
		sport, dist := "Run", 4000+float64(rng.IntN(6000))
		if day%3 == 2 {
			sport, dist = "Ride", 20000+float64(rng.IntN(30000))
		}
		id++
		act := stravasim.Activity{ID: id, AthleteID: h.AthleteID, Name: fmt.Sprintf("History %s %d", sport, day), SportType: sport,
			Distance: dist, MovingTime: int64(dist / 3), ElapsedTime: int64(dist/3) + 60,
			StartDate: now.AddDate(0, 0, -day-1).Add(time.Duration(rng.IntN(600)) * time.Minute).Truncate(time.Second)}
		body := stravasim.ControlActivity{Activity: act, AthleteID: h.AthleteID}
		if err := d.demo.send(ctx, http.MethodPut, fmt.Sprintf("%s%sactivities/%d", d.demo.o.SimURL, stravasim.ControlPrefix, id), body, nil, http.StatusOK); err != nil {
			return time.Time{}, fmt.Errorf("put history activity %d at the simulator: %w", id, err)
		}
		h.Activities++
		if sport == "Run" && !act.StartDate.Before(start) {
			h.Runs++
		}
		if sport == "Run" {
			d.historyRuns = append(d.historyRuns, act.StartDate)
		}
	}
	return start, nil
}

// connect logs the history athlete in, which starts the backfill, and
// creates a milestone whose period started before the history's last
// activities; it returns the athlete's browser and the milestone.
func (d *historyDemo) connect(ctx context.Context, start time.Time) (*http.Client, milestones.MilestoneJSON, error) {
	h := &d.demo.res.History
	d.demo.say("\nHistory: athlete %d has %d activities from the last 120 days on Strava, none sent as webhooks. They connect:", h.AthleteID, h.Activities)
	if err := d.demo.send(ctx, http.MethodPut, d.demo.o.SimURL+stravasim.ControlPrefix+"authorization", map[string]any{"athleteId": h.AthleteID}, nil, http.StatusOK); err != nil {
		return nil, milestones.MilestoneJSON{}, fmt.Errorf("choose who logs in: %w", err)
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: d.demo.http.Timeout, CheckRedirect: d.demo.http.CheckRedirect}
	d.connected = time.Now()
	resp, err := browser.Get(d.demo.o.APIURL + "/auth/strava/login")
	if err != nil {
		return nil, milestones.MilestoneJSON{}, fmt.Errorf("history athlete login: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		return nil, milestones.MilestoneJSON{}, fmt.Errorf("history athlete login ended at %s with %d, want a redirect home", resp.Request.URL, resp.StatusCode)
	}
	var m milestones.MilestoneJSON
	if err := runkit.SendJSON(ctx, browser, http.MethodPost, d.demo.o.APIURL+"/v1/milestones", map[string]any{
		"modelId": d.demo.res.Final.ModelID, "title": "Run 300 km in 60 days", "metric": "distance", "target": 300_000,
		"sportTypes": []string{"Run"}, "periodStartAtUtc": start, "periodEndAtUtc": start.AddDate(0, 0, 61),
	}, &m, http.StatusCreated); err != nil {
		return nil, milestones.MilestoneJSON{}, fmt.Errorf("create history milestone: %w", err)
	}
	return browser, m, nil
}

// historyCounted waits until the milestone counts every run of its
// period, then until the backfill shows idle.
func (d *historyDemo) historyCounted(ctx context.Context, browser *http.Client, m milestones.MilestoneJSON) error {
	h := &d.demo.res.History
	h.MilestoneID = m.MilestoneID
	deadline := time.Now().Add(2 * d.demo.o.Timeout)
	shown, lastShown := -1, time.Time{}
	for {
		if err := runkit.SendJSON(ctx, browser, http.MethodGet, d.demo.o.APIURL+"/v1/milestones/"+m.MilestoneID, nil, &m, http.StatusOK); err != nil {
			return fmt.Errorf("read history milestone: %w", err)
		}
		// A line when the count moved, at most every 300 ms, and the last.
		if c := m.Progress.WorkoutsCounted; c != shown && (c == h.Runs || time.Since(lastShown) > 300*time.Millisecond) {
			shown, lastShown = c, time.Now()
			d.demo.say("%-44s %s %5.1f%%  %d runs counted, %d parts", "  backfill filling \""+m.Title+"\"", bar(m.Progress.Percent),
				m.Progress.Percent, c, len(m.Awards))
		}
		if shown == h.Runs {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("history milestone counts %d of %d runs after %s", shown, h.Runs, 2*d.demo.o.Timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	h.Lag, h.Counted, h.Final = time.Since(d.connected), m.Progress.WorkoutsCounted, m
	return d.historyImported(ctx, browser, deadline)
}

// historyImported waits for the backfill to show idle (the sync state
// records a page after its writes, which the milestone may count first).
func (d *historyDemo) historyImported(ctx context.Context, browser *http.Client, deadline time.Time) error {
	h := &d.demo.res.History
	// The sync state records a page after its writes (which the milestone
	// may count first): wait for the backfill to show idle.
	imported := "history imported (GET /v1/me shows no sync state)"
	for {
		var me map[string]any
		if err := runkit.SendJSON(ctx, browser, http.MethodGet, d.demo.o.APIURL+"/v1/me", nil, &me, http.StatusOK); err != nil {
			return fmt.Errorf("history athlete: who am I: %w", err)
		}
		h.UserID, _ = me["userId"].(string)
		sy, ok := me["sync"].(map[string]any)
		if !ok {
			break
		}
		n, _ := sy["importedCount"].(float64)
		h.Imported = int(n)
		imported = fmt.Sprintf("%d of %d activities imported (sync %v)", h.Imported, h.Activities, sy["state"])
		if sy["state"] == "idle" || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	d.demo.say("Backfill: %s; the milestone counts all %d runs of its period, %s after the connect.",
		imported, h.Counted, h.Lag.Round(time.Millisecond))
	return nil
}
