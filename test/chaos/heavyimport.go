package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/commitcollect/backend/scripts/stravasim"
)

// heavyImport: an athlete with a thousand recent activities (five list
// pages) imports old-dated ones (2,000 in `make chaos`, a webhook each),
// deep in the history behind the recent ones, while ten others upload one
// activity each, at Strava's 100 reads a window. Every imported activity
// must be written within four windows of the last webhook (an hour at
// Strava's 15 minutes), for at most a read per 10 imported activities,
// and each other upload within two windows; the reduced run, beside the
// other scenarios, keeps a margin (eight windows, a read per 5). Protection: burstPages (with five
// pages a burst, the imported activities past them are fetched alone, 30 a
// window and 100 a day: weeks).
func heavyImport(ctx context.Context, e *Env, full bool) (Figures, error) {
	const recent = 1000
	n := pick(full, 500, 2000)
	users, err := linkUsers(ctx, e, 11, 9200, countMilestone("saturn-v", 10000))
	if err != nil {
		return Figures{}, err
	}
	importer, others := users[0], users[1:]
	now := time.Now().UTC()
	for j := range recent { // the recent history, stored before (no webhooks now)
		e.Sim.PutActivity(Activity(importer.AthleteID*100000+int64(j), importer.AthleteID, "Run", 5000, now.Add(-time.Duration(j+1)*time.Hour)))
	}
	var evs []stravasim.Event
	old := time.Date(2014, 3, 1, 7, 0, 0, 0, time.UTC)
	for i := range n {
		id := importer.AthleteID*100000 + 1000 + int64(i)
		e.Sim.PutActivity(Activity(id, importer.AthleteID, "Ride", 20000, old.Add(time.Duration(i)*24*time.Hour)))
		evs = append(evs, e.Sim.ActivityEvent("create", id, importer.AthleteID, nil))
	}
	done := make(chan time.Duration, 1)
	go func() { // the others upload while the import is delivered and served
		var worst time.Duration
		for i, u := range others {
			sleepUntil(ctx, time.Now().Add(time.Second))
			id := u.AthleteID*100000 + int64(i)
			e.Sim.PutActivity(Activity(id, u.AthleteID, "Run", 8000, time.Now().UTC().Add(-time.Hour)))
			sent := time.Now()
			e.Deliver(ctx, e.Sim.ActivityEvent("create", id, u.AthleteID, nil))
			worst = max(worst, e.waitWritten(ctx, u, 1, sent, 4*Window))
		}
		done <- worst
	}()
	e.DeliverAll(ctx, evs, 8)
	delivered := time.Now()
	took := e.waitWritten(ctx, importer, n, delivered, 8*Window)
	worst := <-done
	reads := e.Sim.ReadsOf(importer.AthleteID)
	fmt.Printf("import: imported=%d recent=%d written_in=%s windows=%.1f reads=%d imported_per_read=%.0f others=%d others_max=%s\n",
		n, recent, took.Round(100*time.Millisecond), took.Seconds()/Window.Seconds(), reads, float64(n)/float64(max(reads, 1)),
		len(others), worst.Round(100*time.Millisecond))
	fig, err := e.Settle(ctx, OutboxLease+3*time.Second, deadline)
	miss := func(ok bool, format string, args ...any) {
		if !ok {
			fig.Missed++
			fig.Notes = append(fig.Notes, "missed: "+fmt.Sprintf(format, args...))
		}
	}
	// The reduced run shares the machine with the other scenarios (its
	// bursts come smaller, so it walks more often): its targets keep a
	// margin of twice the full run's.
	windows, perRead := pick(full, 8, 4), pick(full, 5, 10)
	miss(took >= 0 && took <= time.Duration(windows)*Window, "the import of %d written in %s, target %d windows", n, took, windows)
	miss(reads*int64(perRead) <= int64(n), "the import took %d reads, target one per %d activities", reads, perRead)
	miss(worst >= 0 && worst <= 2*Window, "another athlete's upload written in %s, target two windows (%s)", worst, 2*Window)
	return fig, err
}

// waitWritten waits until u has want workouts, at most limit after from,
// and returns how long after from that was (-1: never).
func (e *Env) waitWritten(ctx context.Context, u *User, want int, from time.Time, limit time.Duration) time.Duration {
	for time.Since(from) <= limit && ctx.Err() == nil {
		if ws, _, err := e.workouts(ctx, u.UserID); err == nil && len(ws) >= want {
			return time.Since(from)
		}
		time.Sleep(250 * time.Millisecond)
	}
	return -1
}
