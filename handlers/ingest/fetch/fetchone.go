package fetch

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/fetch/warm"
	"github.com/commitcollect/backend/model/strava"
)

// fetchNew reads the activity from Strava and writes its workout, once
// route has found the event needs a fetch of its own. In order: the shared
// budget and the athlete's own allowance (budget.Reads), the athlete's token
// (token.go), the read and its rate reading (budget.Reads), then what a refusal
// means (failed.go) or the write of the answer (write.go). It returns the
// effects for apply.
func (w *Fetcher) fetchNew(ctx context.Context, log *slog.Logger, job ingest.Job, userID string, cached *warm.Entry) (effects, error) {
	ev := job.Event
	if err := w.Reads.CheckBudget(ctx); err != nil {
		log.WarnContext(ctx, "strava read budget nearly spent; deferring", "writeStatus", "deferred", "error", err)
		return effects{}, fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	take := func() error { return w.Reads.TakeAthleteRead(ctx, job, ev.Kind() == ingest.KindActivityCreate) }
	if job.Unlisted {
		take = func() error { return w.Reads.TakeUnverifiedRead(ctx, job) }
	}
	if err := take(); err != nil {
		return effects{}, err
	}
	token, tokenUntil, err := w.accessToken(ctx, ev.OwnerID, userID, cached)
	fetchStarted := w.Now()
	var act strava.Activity
	if err == nil {
		var rl strava.RateLimit
		act, rl, err = w.strava.GetActivity(ctx, token, ev.ObjectID)
		w.Reads.ObserveRate(ctx, log, rl, err)
		if err != nil {
			return w.readFailed(ctx, log, job, userID, cached, fetchStarted, rl, err)
		}
	}
	if err != nil {
		return tokenFailed(ctx, log, job, userID, cached, err, w.Now())
	}
	e, err := w.written(ctx, log, job, userID, act, fetchStarted)
	if !e.fetched.IsZero() {
		e.confirmed = confirmedEntry(userID, token, tokenUntil, cached, w.Now())
	}
	return e, err
}
