package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/commitcollect/backend/handlers/bff/export"
	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/calendar"
	"github.com/commitcollect/backend/model/strava"
	"github.com/commitcollect/backend/test/fixture"
)

// longLife: a user of twenty years, through the running stack. The athlete
// has run once a week for 1,040 weeks, and every run is in the workout log
// (imported long ago: read from Strava's list and written as the worker
// maps it, since a backfill reaches ten years at most); they start a
// weekly series of the largest catalog model (12 parts) on the first of
// those weeks, and the projector completes all 1,040 periods, minting
// 12,480 awards: 13,520 items of one series. Their collection also holds 50,000
// awards of earlier years (written as the mint files them). Then what the
// user does costs what it costs a new user, and the figures are printed:
// the series' answer and its periods a page at a time, GET
// /v1/collection, the export's pages, and one new run's event (the
// worker's job and the projector's batches, from the child's log lines).
// The suite's verify re-projects the user from the log (every period) and
// finds no drift. `make chaos` only: the import and the mint take minutes
// of DynamoDB Local.
func longLife(ctx context.Context, e *Env, full bool) (Figures, error) {
	const weeks, parts, awards = 1040, 12, 50_000
	const athlete = 9700
	now := time.Now().UTC()
	monday, _ := calendar.PeriodAround(calendar.Weekly, now.AddDate(0, 0, -7*(weeks-1)))
	for w := range weeks {
		e.Sim.PutActivity(Activity(int64(athlete*10000+w), athlete, "Run", 5000, monday.AddDate(0, 0, 7*w).Add(7*time.Hour)))
	}
	u, err := e.LinkUser(ctx, athlete)
	if err != nil {
		return Figures{}, err
	}
	if err := e.importedLongAgo(ctx, u); err != nil {
		return Figures{}, err
	}
	began := time.Now()
	if err := e.AddMilestone(ctx, u, Milestone{ModelID: "endeavour", Title: "every week", Metric: "count", Target: 1,
		SportTypes: []string{"Run"}, PeriodStartDate: calendar.FormatDate(monday), Recurrence: "weekly"}); err != nil {
		return Figures{}, err
	}
	minted, err := e.waitAwards(ctx, u, weeks*parts, 20*time.Minute)
	if err != nil {
		return Figures{}, err
	}
	projectedIn := time.Since(began)
	items, err := fixture.Collection(u.UserID, awards)
	if err != nil {
		return Figures{}, err
	}
	if err := e.Store.DB.BatchPutItems(ctx, e.Store.DB.Tables().Main, items); err != nil {
		return Figures{}, err
	}
	series := u.Milestones[0]
	line := []string{fmt.Sprintf("longlife: periods=%d awards_minted=%d collection=%d projected_in=%s", weeks, minted, awards+minted,
		projectedIn.Round(time.Second))}
	for _, r := range []struct{ name, target string }{
		{"series", "/v1/milestones/" + series},
		{"periods", "/v1/milestones/" + series + "/periods?limit=200"},
		{"collection", "/v1/collection"},
		{"export", "/v1/me/export"},
	} {
		c, err := e.readAll(ctx, u, r.target)
		if err != nil {
			return Figures{}, fmt.Errorf("%s: %w", r.name, err)
		}
		line = append(line, fmt.Sprintf("%s: pages=%d req=%d rcu=%.0f largest_bytes=%d", r.name, c.pages, c.requests, c.rcu, c.largest))
		if r.name == "export" && c.largest > export.PageBytes {
			return Figures{}, fmt.Errorf("an export page of %d bytes, over %d", c.largest, export.PageBytes)
		}
	}
	ev, err := e.oneRun(ctx, u, athlete*10000+weeks, weeks+1)
	if err != nil {
		return Figures{}, err
	}
	line = append(line, ev)
	fmt.Println(strings.Join(line, " | "))
	return e.Settle(ctx, 30*time.Second, 5*time.Minute)
}

// importedLongAgo writes every activity Strava lists for u into the
// workout log, mapped as the worker maps a fetched one (ingest.MapActivity).
func (e *Env) importedLongAgo(ctx context.Context, u *User) error {
	tok := e.Sim.IssueTokens(u.AthleteID, time.Hour)
	client := strava.NewClient(e.Sim.URL, nil)
	for page := 1; ; page++ {
		started := time.Now().UTC()
		acts, _, err := client.ListActivities(ctx, tok.AccessToken, strava.ListOptions{Page: page, PerPage: strava.MaxPerPage})
		if err != nil {
			return fmt.Errorf("list page %d: %w", page, err)
		}
		var ws []model.Entity
		for _, a := range acts {
			w, err := ingest.MapActivity(a, u.UserID, u.AthleteID, "imported-long-ago", started)
			if err != nil {
				return err
			}
			w.FetchStartedAtNs = started.UnixNano()
			ws = append(ws, w)
		}
		if err := e.Store.DB.BatchPut(ctx, e.Store.DB.Tables().Main, ws); err != nil {
			return err
		}
		if len(acts) < strava.MaxPerPage {
			return nil
		}
	}
}

// waitAwards waits until u holds want awards, and says how many it holds.
func (e *Env) waitAwards(ctx context.Context, u *User, want int, limit time.Duration) (int, error) {
	deadline := time.Now().Add(limit)
	for {
		n, err := e.AwardsOf(ctx, u)
		if err != nil || n >= want || time.Now().After(deadline) {
			if err == nil && n < want {
				err = fmt.Errorf("%d awards of %d after %s", n, want, limit)
			}
			return n, err
		}
		sleepUntil(ctx, time.Now().Add(2*time.Second))
	}
}

// cost is what reading a route to its last page cost, by the API's
// "request served" log lines.
type cost struct {
	pages, requests, largest int
	rcu                      float64
}

// readAll GETs target and every next page (Link: rel="next"), as u, and
// adds up what each request cost DynamoDB.
func (e *Env) readAll(ctx context.Context, u *User, target string) (cost, error) {
	var c cost
	for next := e.APIURL() + target; next != ""; c.pages++ {
		mark := e.logMark()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, next, nil)
		if err != nil {
			return c, err
		}
		resp, err := u.http.Do(req)
		if err != nil {
			return c, err
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return c, fmt.Errorf("GET %s: %d %v %.200s", next, resp.StatusCode, err, body)
		}
		c.largest = max(c.largest, len(body))
		next = ""
		if l := resp.Header.Get("Link"); strings.Contains(l, `rel="next"`) {
			next = strings.TrimSuffix(strings.TrimPrefix(strings.Split(l, ";")[0], "<"), ">")
		}
		lines, err := e.logLinesSince(ctx, mark, func(l logLine) bool { return l.Msg == "request served" && l.Method == http.MethodGet })
		if err != nil {
			return c, err
		}
		for _, l := range lines {
			c.requests += l.Requests
			c.rcu += l.RCU
		}
	}
	return c, nil
}

// oneRun uploads one run this week, delivers its create and waits until
// it is written and counted, then sums what the event cost: the worker's
// jobs and the projector's batches since it was sent.
func (e *Env) oneRun(ctx context.Context, u *User, id int64, workouts int) (string, error) {
	mark := e.logMark()
	e.Sim.PutActivity(Activity(id, u.AthleteID, "Run", 5000, time.Now().UTC().Add(-time.Hour)))
	e.Send(ctx, "create", id, u.AthleteID)
	if d := e.waitWritten(ctx, u, workouts, time.Now(), 2*time.Minute); d < 0 {
		return "", fmt.Errorf("the new run was not written")
	}
	e.WaitIdle(5*time.Second, time.Minute)
	var worker, projector logLine
	lines, err := e.logLinesSince(ctx, mark, func(l logLine) bool { return l.Msg == "job finished" || l.Msg == "batch processed" })
	if err != nil {
		return "", err
	}
	for _, l := range lines {
		sum := &worker
		if l.Msg == "batch processed" {
			sum = &projector
		}
		sum.Requests, sum.RCU, sum.WCU = sum.Requests+l.Requests, sum.RCU+l.RCU, sum.WCU+l.WCU
	}
	return fmt.Sprintf("event: worker req=%d rcu=%.1f wcu=%.1f projector req=%d rcu=%.1f wcu=%.1f", worker.Requests, worker.RCU, worker.WCU,
		projector.Requests, projector.RCU, projector.WCU), nil
}

// logLine is what the figures read of a child's JSON log line.
type logLine struct {
	Msg      string  `json:"msg"`
	Method   string  `json:"method"`
	Requests int     `json:"requests"`
	RCU      float64 `json:"rcu"`
	WCU      float64 `json:"wcu"`
}

// logMark is how far the child's log is written now.
func (e *Env) logMark() int64 {
	fi, err := os.Stat(e.logPath)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logLinesSince reads the child's log lines written after mark that keep
// accepts, waiting up to two seconds for the first (a request's line
// follows its answer).
func (e *Env) logLinesSince(ctx context.Context, mark int64, keep func(logLine) bool) ([]logLine, error) {
	deadline := time.Now().Add(2 * time.Second)
	for {
		out, err := e.readLog(mark, keep)
		if err != nil || len(out) > 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return out, err
		}
		sleepUntil(ctx, time.Now().Add(50*time.Millisecond))
	}
}

// readLog is the child's log lines after mark that keep accepts.
func (e *Env) readLog(mark int64, keep func(logLine) bool) ([]logLine, error) {
	f, err := os.Open(e.logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(mark, io.SeekStart); err != nil {
		return nil, err
	}
	var out []logLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && keep(l) {
			out = append(out, l)
		}
	}
	return out, sc.Err()
}
