package runkit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
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
	"github.com/commitcollect/backend/test/stravasim"
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
	// connected is when the history athlete connected.
	connected time.Time
	// zone is where the demo athlete runs (DemoZone).
	zone *time.Location
	// historyRuns are the starts of the history athlete's runs.
	historyRuns []time.Time
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
	return d.history(ctx)
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

// month sends a month of activities: the first few uploaded one by one,
// each counted with its own lag; the rest as one device sync (a burst of
// creates, which the pipeline serves with list pages); then a duplicate,
// two corrections and a delete.
func (d *demo) month(ctx context.Context) error {
	acts := d.monthAtStrava()
	singles := min(DemoSingles, len(acts))
	var created []int64
	for _, a := range acts[:singles] {
		if err := d.putActivity(ctx, a); err != nil {
			return err
		}
		what := fmt.Sprintf("upload: %s %s on %s", a.SportType, km(a.Distance), a.StartDate.In(d.zone).Format("2 Jan 15:04"))
		if a.StartDate.In(d.zone).Day() != a.StartDate.UTC().Day() {
			what += fmt.Sprintf(" (%s in UTC)", a.StartDate.UTC().Format("2 Jan"))
		}
		if err := d.event(ctx, "create", a.ID, what); err != nil {
			return err
		}
		created = append(created, a.ID)
	}
	if err := d.deviceSync(ctx, acts[singles:]); err != nil {
		return err
	}
	for _, a := range acts[singles:] {
		created = append(created, a.ID)
	}
	for _, n := range []int{4, 8, 12, 15} {
		if err := d.twist(ctx, created[:min(n, len(created))]); err != nil {
			return err
		}
	}
	return nil
}

// DemoSingles is how many of the month's activities the demo uploads one
// by one before the device sync sends the rest at once.
const DemoSingles = 3

// monthAtStrava plans a month of activities in the demo's zone, 6 am to
// 4 pm local: runs that count, rides and walks that do not, rest days.
func (d *demo) monthAtStrava() []stravasim.Activity {
	rng := rand.New(rand.NewPCG(d.o.Seed, uint64(d.o.AthleteID)))
	id := d.o.AthleteID * 1000
	var out []stravasim.Activity
	for day := 0; day < 30; day++ {
		var sport string
		var dist float64
		switch r := rng.IntN(10); {
		case day == 0: // 6 am on the first day, below: the day before in UTC
			sport, dist = "Run", 6000
		case r < 5:
			sport, dist = "Run", 5000+float64(rng.IntN(7000))
		case r < 6:
			sport, dist = "TrailRun", 8000+float64(rng.IntN(8000))
		case r < 8:
			sport, dist = "Ride", 20000+float64(rng.IntN(30000))
		case r < 9:
			sport, dist = "Walk", 2000+float64(rng.IntN(3000))
		default:
			continue // a rest day
		}
		id++
		local := d.start.AddDate(0, 0, day).Add(6*time.Hour + time.Duration(rng.IntN(600))*time.Minute)
		if day == 0 {
			local = d.start.Add(6 * time.Hour)
		}
		out = append(out, stravasim.Activity{ID: id, AthleteID: d.o.AthleteID, Name: fmt.Sprintf("Day %d %s", day+1, sport), SportType: sport,
			Distance: dist + float64(rng.IntN(10))/10, MovingTime: int64(dist / 3), ElapsedTime: int64(dist/3) + 60,
			TotalElevationGain: float64(rng.IntN(200)), StartDate: local.UTC(), Zone: d.zone.String()})
	}
	return out
}

// deviceSync sends acts as a watch's sync does: every create at once. It
// waits until the milestone counts them all and says how Strava was read.
func (d *demo) deviceSync(ctx context.Context, acts []stravasim.Activity) error {
	before, err := d.simStats(ctx)
	if err != nil {
		return err
	}
	var first time.Time
	for _, a := range acts {
		if err := d.putActivity(ctx, a); err != nil {
			return err
		}
		var del stravasim.ControlDelivery
		if err := d.send(ctx, http.MethodPost, d.o.SimURL+stravasim.ControlPrefix+"events",
			stravasim.ControlEvent{Aspect: "create", ActivityID: a.ID, OwnerID: d.o.AthleteID}, &del, http.StatusOK); err != nil {
			return fmt.Errorf("send create webhook for activity %d: %w", a.ID, err)
		}
		d.last = &del.Event
		if first.IsZero() {
			first = del.SentAtUtc
		}
	}
	d.say("%-44s (the pipeline gathers a burst and reads Strava's list pages)", fmt.Sprintf("device sync: %d activities at once", len(acts)))
	if err := d.await(ctx, first, 0, fmt.Sprintf("device sync: %d activities counted", len(acts))); err != nil {
		return err
	}
	after, err := d.simStats(ctx)
	if err != nil {
		return err
	}
	d.res.Sync = DemoSync{Activities: len(acts), Lag: d.res.Steps[len(d.res.Steps)-1].Lag,
		ListPages: after.ListRequests - before.ListRequests, Fetches: after.ActivityRequests - before.ActivityRequests}
	d.say("  Strava read with %d list page(s) and %d single fetches for %d activities, not one fetch each",
		d.res.Sync.ListPages, d.res.Sync.Fetches, len(acts))
	return nil
}

// simStats reads the simulator's counters.
func (d *demo) simStats(ctx context.Context) (stravasim.Stats, error) {
	var st stravasim.Stats
	if err := d.send(ctx, http.MethodGet, d.o.SimURL+stravasim.ControlPrefix+"stats", nil, &st, http.StatusOK); err != nil {
		return st, fmt.Errorf("read the simulator's stats: %w", err)
	}
	return st, nil
}

// twist is what happens once created holds n creates: a duplicate
// delivery (4), a corrected run (8), a deleted one (12), a ride
// recategorised as a run (15).
func (d *demo) twist(ctx context.Context, created []int64) error {
	switch len(created) {
	case 4: // Strava delivers one event twice: the second is a duplicate.
		if err := d.duplicate(ctx); err != nil {
			return err
		}
	case 8: // The athlete fixes a GPS glitch on an earlier run.
		fix := d.firstCounted(created)
		a := d.acts[fix].Activity
		a.Distance += 1200
		if err := d.putActivity(ctx, a); err != nil {
			return err
		}
		if err := d.event(ctx, "update", fix, fmt.Sprintf("corrected activity %d: +1.2 km", fix)); err != nil {
			return err
		}
	case 12: // A run recorded twice by two devices gets deleted.
		del := d.firstCounted(created[4:])
		d.acts[del].deleted = true
		if err := d.send(ctx, http.MethodDelete, fmt.Sprintf("%s%sactivities/%d", d.o.SimURL, stravasim.ControlPrefix, del), nil, nil, http.StatusNoContent); err != nil {
			return fmt.Errorf("delete activity %d at the simulator: %w", del, err)
		}
		if err := d.event(ctx, "delete", del, fmt.Sprintf("deleted activity %d (awards stay)", del)); err != nil {
			return err
		}
	case 15: // A ride recategorised as a run now counts.
		for _, c := range created {
			if a := d.acts[c]; a.SportType == "Ride" && !a.deleted {
				a.SportType, a.Distance = "Run", 9000
				if err := d.putActivity(ctx, a.Activity); err != nil {
					return err
				}
				if err := d.event(ctx, "update", c, fmt.Sprintf("activity %d was a run, not a ride (9 km)", c)); err != nil {
					return err
				}
				break
			}
		}
	}
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

// history is the second act: another athlete, with 120 days of activities
// already on Strava and never sent as webhooks, connects; the connect's
// backfill imports them and a milestone whose period started 60 days ago
// fills from the history alone.
func (d *demo) history(ctx context.Context) error {
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
func (d *demo) historyAtStrava(ctx context.Context) (time.Time, error) {
	h := &d.res.History
	h.AthleteID, h.Imported = d.o.AthleteID+1, -1
	a := stravasim.Athlete{ID: h.AthleteID, Firstname: "History", Lastname: fmt.Sprintf("Athlete %d", h.AthleteID%10000)}
	if err := d.send(ctx, http.MethodPost, d.o.SimURL+stravasim.ControlPrefix+"athletes", a, nil, http.StatusCreated); err != nil {
		return time.Time{}, fmt.Errorf("add history athlete at the simulator: %w", err)
	}
	now := time.Now().UTC()
	start := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC).AddDate(0, 0, -60)
	rng := rand.New(rand.NewPCG(d.o.Seed, uint64(h.AthleteID)))
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
		if err := d.send(ctx, http.MethodPut, fmt.Sprintf("%s%sactivities/%d", d.o.SimURL, stravasim.ControlPrefix, id), body, nil, http.StatusOK); err != nil {
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
func (d *demo) connect(ctx context.Context, start time.Time) (*http.Client, milestones.MilestoneJSON, error) {
	h := &d.res.History
	d.say("\nHistory: athlete %d has %d activities from the last 120 days on Strava, none sent as webhooks. They connect:", h.AthleteID, h.Activities)
	if err := d.send(ctx, http.MethodPut, d.o.SimURL+stravasim.ControlPrefix+"authorization", map[string]any{"athleteId": h.AthleteID}, nil, http.StatusOK); err != nil {
		return nil, milestones.MilestoneJSON{}, fmt.Errorf("choose who logs in: %w", err)
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: d.http.Timeout, CheckRedirect: d.http.CheckRedirect}
	d.connected = time.Now()
	resp, err := browser.Get(d.o.APIURL + "/auth/strava/login")
	if err != nil {
		return nil, milestones.MilestoneJSON{}, fmt.Errorf("history athlete login: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		return nil, milestones.MilestoneJSON{}, fmt.Errorf("history athlete login ended at %s with %d, want a redirect home", resp.Request.URL, resp.StatusCode)
	}
	var m milestones.MilestoneJSON
	if err := SendJSON(ctx, browser, http.MethodPost, d.o.APIURL+"/v1/milestones", map[string]any{
		"modelId": d.res.Final.ModelID, "title": "Run 300 km in 60 days", "metric": "distance", "target": 300_000,
		"sportTypes": []string{"Run"}, "periodStartAtUtc": start, "periodEndAtUtc": start.AddDate(0, 0, 61),
	}, &m, http.StatusCreated); err != nil {
		return nil, milestones.MilestoneJSON{}, fmt.Errorf("create history milestone: %w", err)
	}
	return browser, m, nil
}

// historyCounted waits until the milestone counts every run of its
// period, then until the backfill shows idle.
func (d *demo) historyCounted(ctx context.Context, browser *http.Client, m milestones.MilestoneJSON) error {
	h := &d.res.History
	h.MilestoneID = m.MilestoneID
	deadline := time.Now().Add(2 * d.o.Timeout)
	shown, lastShown := -1, time.Time{}
	for {
		if err := SendJSON(ctx, browser, http.MethodGet, d.o.APIURL+"/v1/milestones/"+m.MilestoneID, nil, &m, http.StatusOK); err != nil {
			return fmt.Errorf("read history milestone: %w", err)
		}
		// A line when the count moved, at most every 300 ms, and the last.
		if c := m.Progress.WorkoutsCounted; c != shown && (c == h.Runs || time.Since(lastShown) > 300*time.Millisecond) {
			shown, lastShown = c, time.Now()
			d.say("%-44s %s %5.1f%%  %d runs counted, %d parts", "  backfill filling \""+m.Title+"\"", bar(m.Progress.Percent),
				m.Progress.Percent, c, len(m.Awards))
		}
		if shown == h.Runs {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("history milestone counts %d of %d runs after %s", shown, h.Runs, 2*d.o.Timeout)
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
func (d *demo) historyImported(ctx context.Context, browser *http.Client, deadline time.Time) error {
	h := &d.res.History
	// The sync state records a page after its writes (which the milestone
	// may count first): wait for the backfill to show idle.
	imported := "history imported (GET /v1/me shows no sync state)"
	for {
		var me map[string]any
		if err := SendJSON(ctx, browser, http.MethodGet, d.o.APIURL+"/v1/me", nil, &me, http.StatusOK); err != nil {
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
	d.say("Backfill: %s; the milestone counts all %d runs of its period, %s after the connect.",
		imported, h.Counted, h.Lag.Round(time.Millisecond))
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
	var del stravasim.ControlDelivery
	if err := d.send(ctx, http.MethodPost, d.o.SimURL+stravasim.ControlPrefix+"events",
		stravasim.ControlEvent{Aspect: aspect, ActivityID: activityID, OwnerID: d.o.AthleteID}, &del, http.StatusOK); err != nil {
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
	return SendJSON(ctx, d.http, method, url, in, out, want)
}

// Browser is an HTTP client that keeps cookies like a browser and stops at
// the redirect home (GET /) that ends the OAuth login, so the login's
// answer can be checked. The chaos suite and the scale run log athletes in
// with it (Login).
func Browser(timeout time.Duration) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: timeout, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if req.URL.Path == "/" {
			return http.ErrUseLastResponse // the callback's redirect home ends the login
		}
		return nil
	}}
}

// Login runs the API's OAuth login at apiURL with a Browser client: through
// the (simulated) Strava authorization to the callback, which must end with
// a 302 home. The session cookie stays in c.
func Login(ctx context.Context, c *http.Client, apiURL string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, apiURL+"/auth/strava/login", nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		return fmt.Errorf("login ended at %s with %d", resp.Request.URL, resp.StatusCode)
	}
	return nil
}

// SendJSON does one JSON request with client and decodes a JSON answer into
// out (when not nil); an answer other than want is an error quoting the
// body. The demo and the chaos suite drive the API with it.
func SendJSON(ctx context.Context, client *http.Client, method, url string, in, out any, want int) error {
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: encode request: %w", method, url, err)
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, url, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, bytes.TrimSpace(raw))
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s %s: decode answer: %w", method, url, err)
		}
	}
	return nil
}
