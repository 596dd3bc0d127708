// Package demokit plays `make demo` against a running stack (make run), as
// a newcomer would: sign in through the simulator's OAuth, create
// milestones, send a month of activities as webhooks (and a device sync),
// then connect an athlete with history and a monthly series, printing
// progress, awards and lags as they come. scripts/demo is its command, and
// the end-to-end tests play it too.
package demokit

import (
	"context"
	"errors"
	"fmt"
	"github.com/commitcollect/backend/scripts/stravasim/webhook"
	"io"
	"math"
	"net/http"
	"net/http/cookiejar"
	"slices"
	"strings"
	"time"

	"github.com/commitcollect/backend/handlers/bff"
	"github.com/commitcollect/backend/handlers/bff/collection"
	"github.com/commitcollect/backend/handlers/bff/milestones"
	"github.com/commitcollect/backend/handlers/config"
	"github.com/commitcollect/backend/handlers/ingest/intake"
	"github.com/commitcollect/backend/scripts/runkit"
	"github.com/commitcollect/backend/scripts/stravasim"
)

// DemoOptions point the demo at a running stack.
type DemoOptions struct {
	// APIURL is the API (default http://config.DefaultHTTPAddr).
	APIURL string
	// SimURL is the Strava simulator with its control API (default
	// http://config.DefaultSimAddr).
	SimURL string
	// AthleteID is the simulated athlete (default: derived from the clock,
	// so every run is a new athlete).
	AthleteID int64
	// Seed makes the month of activities reproducible (default 1).
	Seed uint64
	// Timeout bounds the wait for each projection (default 30 s).
	Timeout time.Duration
	// Out receives the narration (io.Discard when nil).
	Out io.Writer
}

// DemoStep is one webhook the demo sent and what the athlete then saw.
type DemoStep struct {
	What       string
	ActivityID int64
	// Lag is from the webhook leaving the simulator to the milestone showing
	// its effect (zero for steps that change nothing).
	Lag time.Duration
	// Value is the milestone's progress afterwards (metres).
	Value float64
	// NewAwards are the parts minted by this step.
	NewAwards []int
}

// DemoResult is what the demo did and saw.
type DemoResult struct {
	UserID, MilestoneID string
	Target              float64
	PartCount           int
	Steps               []DemoStep
	// Final is the milestone as the BFF returned it at the end.
	Final milestones.MilestoneJSON
	// Duplicate is the webhook's answer to the event sent twice.
	Duplicate string
	// History is the second act: an athlete with history connects.
	History DemoHistory
	// Sync is the device sync: the month's creates after the first
	// DemoSingles, sent at once.
	Sync DemoSync
	// Collection is GET /v1/collection at the end.
	Collection []collection.ModelJSON
	// Rules is the act on what counts.
	Rules DemoRules
	// Streak is the act on streaks.
	Streak DemoStreak
}

// DemoSync is what a device sync cost at Strava.
type DemoSync struct {
	Activities int
	// Lag is from the first of its webhooks to the milestone counting all.
	Lag time.Duration
	// ListPages and Fetches are the simulator's list and single-activity
	// requests the sync caused.
	ListPages, Fetches int64
}

// DemoHistory is what the backfill act did and saw: an athlete whose
// Strava history was never sent as webhooks connects, and the backfill
// fills a milestone whose period started before the connect.
type DemoHistory struct {
	AthleteID           int64
	UserID, MilestoneID string
	// Activities is how many the athlete holds on Strava; Runs how many of
	// them count for the milestone.
	Activities, Runs int
	// Imported is the sync state's importedCount (GET /v1/me's "sync",
	// -1 when the API does not show it).
	Imported int
	// Counted is the milestone's workoutsCounted at the end.
	Counted int
	// Lag is from the connect to the milestone counting every run.
	Lag time.Duration
	// Final is the milestone at the end.
	Final milestones.MilestoneJSON
	// Series is the monthly series the history athlete then makes, from
	// the 1st of the month before last, as the API shows it at the end.
	Series milestones.MilestoneJSON
}

type demoActivity struct {
	stravasim.Activity
	deleted bool
}

// demo runs one session; see Demo.
type demo struct {
	o       DemoOptions
	http    *http.Client
	acts    map[int64]*demoActivity
	sports  []string
	start   time.Time
	end     time.Time
	res     DemoResult
	awarded map[int]bool
	last    *stravasim.Event // the last webhook event sent
	// zone is where the demo athlete runs (DemoZone).
	zone *time.Location
}

// DemoZone is where the demo athlete runs: their month is counted on
// Sydney's clock, so a 6 am run on the first day counts although it is the
// day before in UTC.
const DemoZone = "Australia/Sydney"

// Demo plays what a newcomer would do against a running stack (make run):
// a simulated athlete logs in through the real OAuth redirects, commits to
// running 100 km in a month on a model from the catalog, then a month of
// realistic activities reaches the API as Strava webhooks — runs that count,
// rides and walks that do not, two activities corrected afterwards, one
// deleted, one event delivered twice. After each webhook it polls the BFF
// until the milestone shows the expected progress and prints a progress bar
// with the end-to-end lag and every award as it is minted. Then another
// athlete, whose 120 days of history were never sent as webhooks, connects,
// and the backfill fills a milestone that started before the connect
// (DemoResult.History). It returns an error when the stack does not reach
// the expected state in time.
func Demo(ctx context.Context, o DemoOptions) (DemoResult, error) {
	if o.APIURL == "" {
		o.APIURL = "http://" + config.DefaultHTTPAddr
	}
	if o.SimURL == "" {
		o.SimURL = "http://" + config.DefaultSimAddr
	}
	o.APIURL, o.SimURL = strings.TrimRight(o.APIURL, "/"), strings.TrimRight(o.SimURL, "/")
	if o.AthleteID == 0 {
		o.AthleteID = 1_000_000 + time.Now().UnixMilli()%1_000_000_000
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	zone, err := time.LoadLocation(DemoZone)
	if err != nil {
		return DemoResult{}, fmt.Errorf("demo zone: %w", err)
	}
	jar, _ := cookiejar.New(nil)
	d := &demo{o: o, zone: zone, acts: map[int64]*demoActivity{}, sports: []string{"Run", "TrailRun"}, awarded: map[int]bool{},
		http: &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
			if req.URL.Path == "/" {
				return http.ErrUseLastResponse // the callback's redirect home ends the login
			}
			return nil
		}}}
	if err := d.run(ctx); err != nil {
		return d.res, err
	}
	return d.res, nil
}

func (d *demo) say(format string, args ...any) { fmt.Fprintf(d.o.Out, format+"\n", args...) }

func (d *demo) run(ctx context.Context) error {
	if err := d.login(ctx); err != nil {
		return err
	}
	if err := d.milestone(ctx); err != nil {
		return err
	}
	if err := d.month(ctx); err != nil {
		return err
	}
	if err := d.summary(ctx); err != nil {
		return err
	}
	var err error
	streak := &streakAct{o: d.o, http: d.http, zone: d.zone, modelID: d.res.Final.ModelID, say: d.say}
	if d.res.Streak, err = streak.play(ctx); err != nil {
		return err
	}
	act := &rulesAct{o: d.o, http: d.http, zone: d.zone, modelID: d.res.Final.ModelID, say: d.say} // http until the cyclist signs in
	if d.res.Rules, err = act.play(ctx); err != nil {
		return err
	}
	return (&historyDemo{demo: d}).history(ctx)
}

// login adds the demo athlete at the simulator and logs in as them.
func (d *demo) login(ctx context.Context) error {
	// 1. An athlete on the simulator, who is the one Strava logs in.
	a := stravasim.Athlete{ID: d.o.AthleteID, Firstname: "Demo", Lastname: fmt.Sprintf("Athlete %d", d.o.AthleteID%10000)}
	if err := d.send(ctx, http.MethodPost, d.o.SimURL+stravasim.ControlPrefix+"athletes", a, nil, http.StatusCreated); err != nil {
		return fmt.Errorf("add athlete at the simulator (is `make run` running with the simulator?): %w", err)
	}
	if err := d.send(ctx, http.MethodPut, d.o.SimURL+stravasim.ControlPrefix+"authorization", map[string]any{"athleteId": a.ID}, nil, http.StatusOK); err != nil {
		return fmt.Errorf("choose who logs in: %w", err)
	}

	// 2. Login through /auth/strava/login → Strava's authorize → callback.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.o.APIURL+"/auth/strava/login", nil)
	if err != nil {
		return err
	}
	resp, err := d.http.Do(req)
	if err != nil {
		return fmt.Errorf("login: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/" {
		return fmt.Errorf("login ended at %s with %d, want a redirect home", resp.Request.URL, resp.StatusCode)
	}
	var me bff.MeJSON
	if err := d.send(ctx, http.MethodGet, d.o.APIURL+"/v1/me", nil, &me, http.StatusOK); err != nil {
		return fmt.Errorf("who am I: %w", err)
	}
	d.res.UserID = me.UserID
	d.say("Logged in as %s (athlete %d, user %s) through the simulator's OAuth.", me.DisplayName, me.AthleteID, me.UserID)

	return nil
}

// milestone commits the athlete to 100 km of runs in a month.
func (d *demo) milestone(ctx context.Context) error {
	// 3. A milestone on the first model of the catalog.
	var cat struct {
		Models []struct {
			ModelID   string `json:"modelId"`
			Name      string `json:"name"`
			PartCount int    `json:"partCount"`
		} `json:"models"`
	}
	if err := d.send(ctx, http.MethodGet, d.o.APIURL+"/v1/models", nil, &cat, http.StatusOK); err != nil || len(cat.Models) == 0 {
		return fmt.Errorf("read the model catalog (%d models): %w", len(cat.Models), err)
	}
	model := cat.Models[0]
	for _, m := range cat.Models {
		if m.PartCount == 10 {
			model = m
		}
	}
	now := time.Now().In(d.zone)
	d.start = time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, d.zone).AddDate(0, 0, -30)
	d.end = d.start.AddDate(0, 0, 31)
	d.res.Target, d.res.PartCount = 100_000, model.PartCount
	var m milestones.MilestoneJSON
	if err := d.send(ctx, http.MethodPost, d.o.APIURL+"/v1/milestones", map[string]any{
		"modelId": model.ModelID, "title": "Run 100 km this month", "metric": "distance", "target": d.res.Target,
		"sportTypes": d.sports, "periodStartDate": d.start.Format(time.DateOnly), "periodEndDate": d.end.AddDate(0, 0, -1).Format(time.DateOnly),
	}, &m, http.StatusCreated); err != nil {
		return fmt.Errorf("create milestone: %w", err)
	}
	d.res.MilestoneID = m.MilestoneID
	d.say("Milestone %q: %s of runs between %s and %s on the athlete's own clock (%s calendar; they run in %s)",
		m.Title, km(d.res.Target), m.Period.StartDate, m.Period.EndDate, m.Period.Calendar, d.zone)
	d.say("builds the %s (%d parts).\n", model.Name, model.PartCount)

	return nil
}

// summary reads the milestone and prints the result and the lags.
func (d *demo) summary(ctx context.Context) error {
	var final milestones.MilestoneJSON
	if err := d.send(ctx, http.MethodGet, d.o.APIURL+"/v1/milestones/"+d.res.MilestoneID, nil, &final, http.StatusOK); err != nil {
		return fmt.Errorf("read milestone: %w", err)
	}
	d.res.Final = final
	var lags []time.Duration
	for _, s := range d.res.Steps {
		if s.Lag > 0 {
			lags = append(lags, s.Lag)
		}
	}
	slices.Sort(lags)
	d.say("\nDone: %s of %s, %d workouts counted, %d/%d parts, status %s.", km(final.Progress.Value), km(final.Progress.Target),
		final.Progress.WorkoutsCounted, len(final.Awards), d.res.PartCount, final.Status)
	if len(lags) > 0 {
		d.say("End-to-end lag (webhook sent → milestone updated) over %d changes: p50 %s, max %s.",
			len(lags), lags[len(lags)/2].Round(time.Millisecond), lags[len(lags)-1].Round(time.Millisecond))
	}
	var col struct {
		Models []collection.ModelJSON `json:"models"`
	}
	if err := d.send(ctx, http.MethodGet, d.o.APIURL+"/v1/collection", nil, &col, http.StatusOK); err != nil {
		return fmt.Errorf("read collection: %w", err)
	}
	d.res.Collection = col.Models
	for _, m := range col.Models {
		d.say("Collection: %s, %d of %d parts (%.0f%%), %d duplicates.", m.Name, len(m.Owned), m.PartCount, m.Percent, m.Duplicates)
	}
	d.say("See it yourself: GET %s/v1/milestones/%s, /v1/awards and /v1/collection with the demo athlete's session (log in as athlete %d).",
		d.o.APIURL, d.res.MilestoneID, d.o.AthleteID)
	return nil
}

func (d *demo) firstCounted(ids []int64) int64 {
	for _, id := range ids {
		if a := d.acts[id]; d.counts(a) {
			return id
		}
	}
	return ids[0]
}

func (d *demo) counts(a *demoActivity) bool {
	day := a.StartDate.In(d.zone)
	return !a.deleted && slices.Contains(d.sports, a.SportType) && !day.Before(d.start) && day.Before(d.end)
}

// expected is what the projection must show: metres of counted activities
// and how many.
func (d *demo) expected() (float64, int) {
	var v float64
	n := 0
	for _, a := range d.acts {
		if d.counts(a) {
			v += a.Distance
			n++
		}
	}
	return v, n
}

func (d *demo) putActivity(ctx context.Context, a stravasim.Activity) error {
	body := stravasim.ControlActivity{Activity: a, AthleteID: a.AthleteID}
	if err := d.send(ctx, http.MethodPut, fmt.Sprintf("%s%sactivities/%d", d.o.SimURL, stravasim.ControlPrefix, a.ID), body, nil, http.StatusOK); err != nil {
		return fmt.Errorf("put activity %d at the simulator: %w", a.ID, err)
	}
	prev := d.acts[a.ID]
	d.acts[a.ID] = &demoActivity{Activity: a, deleted: prev != nil && prev.deleted}
	return nil
}

// event makes the simulator send a webhook and waits until the milestone
// shows its effect.
func (d *demo) event(ctx context.Context, aspect string, activityID int64, what string) error {
	var del webhook.ControlDelivery
	if err := d.send(ctx, http.MethodPost, d.o.SimURL+stravasim.ControlPrefix+"events",
		webhook.ControlEvent{Aspect: aspect, ActivityID: activityID, OwnerID: d.o.AthleteID}, &del, http.StatusOK); err != nil {
		return fmt.Errorf("send %s webhook for activity %d: %w", aspect, activityID, err)
	}
	d.last = &del.Event
	return d.await(ctx, del.SentAtUtc, activityID, what)
}

// duplicate posts the event Strava already delivered once more, straight to
// the webhook, as Strava's retries do.
func (d *demo) duplicate(ctx context.Context) error {
	if d.last == nil {
		return errors.New("deliver duplicate webhook: no event sent yet")
	}
	var out map[string]string
	if err := d.send(ctx, http.MethodPost, d.o.APIURL+intake.WebhookPath, d.last, &out, http.StatusOK); err != nil {
		return fmt.Errorf("deliver duplicate webhook: %w", err)
	}
	d.res.Duplicate = out["status"]
	d.say("  ↺ the same webhook again → %q: not handed to the worker twice", out["status"])
	return nil
}

func (d *demo) await(ctx context.Context, sent time.Time, activityID int64, what string) error {
	wantV, wantN := d.expected()
	deadline := time.Now().Add(d.o.Timeout)
	var m milestones.MilestoneJSON
	for {
		if err := d.send(ctx, http.MethodGet, d.o.APIURL+"/v1/milestones/"+d.res.MilestoneID, nil, &m, http.StatusOK); err != nil {
			return fmt.Errorf("read milestone: %w", err)
		}
		// Awards are monotonic: progress may fall below an earned part.
		if math.Abs(m.Progress.Value-wantV) < 1 && m.Progress.WorkoutsCounted == wantN {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %q: milestone shows %.1f m over %d workouts, want %.1f m over %d (waited %s)",
				what, m.Progress.Value, m.Progress.WorkoutsCounted, wantV, wantN, d.o.Timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(25 * time.Millisecond):
		}
	}
	step := DemoStep{What: what, ActivityID: activityID, Value: m.Progress.Value}
	prev := 0.0
	if n := len(d.res.Steps); n > 0 {
		prev = d.res.Steps[n-1].Value
	}
	changed := math.Abs(m.Progress.Value-prev) >= 1
	if changed {
		step.Lag = time.Since(sent)
	}
	for _, a := range m.Awards {
		if !d.awarded[a.PartIndex] {
			d.awarded[a.PartIndex] = true
			step.NewAwards = append(step.NewAwards, a.PartIndex)
		}
	}
	d.res.Steps = append(d.res.Steps, step)
	lag := "not counted"
	if changed {
		lag = "lag " + step.Lag.Round(time.Millisecond).String()
	}
	d.say("%-44s %s %5.1f%%  %s", what, bar(m.Progress.Percent), m.Progress.Percent, lag)
	for _, a := range m.Awards {
		if slices.Contains(step.NewAwards, a.PartIndex) {
			d.say("  ★ part %d/%d minted: %s (tipped by activity %d)", a.PartIndex+1, d.res.PartCount, a.Name, a.ActivityID)
		}
	}
	if m.Status == "completed" && len(step.NewAwards) > 0 && len(m.Awards) == d.res.PartCount {
		d.say("  ✔ milestone completed")
	}
	return nil
}

func bar(percent float64) string {
	const width = 30
	n := int(math.Min(percent, 100) / 100 * width)
	return "[" + strings.Repeat("█", n) + strings.Repeat("·", width-n) + "]"
}

func km(m float64) string { return fmt.Sprintf("%.1f km", m/1000) }

// send does one JSON request with the demo's client (SendJSON).
func (d *demo) send(ctx context.Context, method, url string, in, out any, want int) error {
	return runkit.SendJSON(ctx, d.http, method, url, in, out, want)
}
