package demokit

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/commitcollect/backend/handlers/bff/milestones"
	"github.com/commitcollect/backend/scripts/runkit"
)

// demoSeriesRuns is the monthly series' target: runs every month.
const demoSeriesRuns = 8

// series has the history athlete commit to demoSeriesRuns runs every
// month from the 1st of the month before last: one milestone, a period per
// month, the months their history already holds projected at once, each
// with its own awards. It waits until every run of those months counts in
// its month and the first month shows completed.
func (d *historyDemo) series(ctx context.Context, browser *http.Client) error {
	h := &d.demo.res.History
	now := time.Now().UTC()
	first := time.Date(now.Year(), now.Month()-2, 1, 0, 0, 0, 0, time.UTC)
	var s milestones.MilestoneJSON
	if err := runkit.SendJSON(ctx, browser, http.MethodPost, d.demo.o.APIURL+"/v1/milestones", map[string]any{
		"modelId": d.demo.res.Final.ModelID, "title": fmt.Sprintf("%d runs every month", demoSeriesRuns), "metric": "count",
		"target": demoSeriesRuns, "sportTypes": []string{"Run"}, "recurrence": "monthly", "periodStartDate": first.Format(time.DateOnly),
	}, &s, http.StatusCreated); err != nil {
		return fmt.Errorf("create monthly series: %w", err)
	}
	d.demo.say("\nA series: %q from %s, one milestone with a period per month.", s.Title, s.Period.StartDate)
	want := 0 // the runs of the series' months so far
	for _, r := range d.historyRuns {
		if !r.Before(first) {
			want++
		}
	}
	deadline := time.Now().Add(d.demo.o.Timeout)
	for {
		if err := runkit.SendJSON(ctx, browser, http.MethodGet, d.demo.o.APIURL+"/v1/milestones/"+s.MilestoneID, nil, &s, http.StatusOK); err != nil {
			return fmt.Errorf("read monthly series: %w", err)
		}
		counted := 0
		for _, p := range s.Periods {
			counted += p.Progress.WorkoutsCounted
		}
		if n := len(s.Periods); n > 1 && s.Periods[n-1].Status == "completed" && counted == want {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("monthly series: no past month completed after %s: %+v", d.demo.o.Timeout, s.Periods)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	for _, p := range s.Periods {
		d.demo.say("  %s to %s  %s %5.1f%%  %2d runs, %d parts, %s", p.StartDate, p.EndDate, bar(p.Progress.Percent),
			p.Progress.Percent, p.Progress.WorkoutsCounted, len(p.Awards), p.Status)
	}
	h.Series = s
	return nil
}
