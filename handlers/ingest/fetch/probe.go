package fetch

// A probe: evidence from Strava, bought with one read by id, that a burst
// holds the athlete's own new uploads once their unverified allowance is
// spent. A forger naming a real athlete in creates of ids that never
// existed spends that allowance (each burst's pages list none of them); an
// import of old-dated activities lies deep in the history and needs deeper
// pages too, so without evidence it would wait for the allowance's next UTC
// day, every day. So when the allowance refuses a page, the walk reads one
// create by id on the athlete's caps, at random among those not yet found
// and never stored (a forger cannot choose which is read, nor pass off a
// stored activity). Found: it is written as a listed one, and the walk
// lists around its start on the caps (legs, walk.go). Not found (or another
// athlete's): it is settled as a fetch's 404 settles a create, and the read
// moves to the allowance past its cap. At most maxProbes a walk.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/budget"
	"github.com/commitcollect/backend/model"
)

// maxProbes is how many creates a walk may read by id once the athlete's
// unverified allowance is spent.
const maxProbes = 2

// probe reads one of the burst's creates by id (see above) and says when
// it found one of the athlete's new uploads, with its start. A create not
// found is settled into wk.found (its outcome) and wk.probedMissing; a
// failed read or a refused read sets wk.stop (and wk.dropped).
func (w *Bursts) probe(ctx context.Context, log *slog.Logger, job ingest.Job, userID, token string, wk *walk) (time.Time, bool) {
	sub, ok, err := w.probeCandidate(ctx, job.Burst, userID, wk)
	if err != nil || !ok {
		wk.stop = err // nil when no create is left to probe: the refusal stands
		return time.Time{}, false
	}
	if err := w.reads.CheckBudget(ctx); err != nil {
		wk.stop = fmt.Errorf("burst %s: %w", job.CorrelationID, err)
		return time.Time{}, false
	}
	tookAt := w.now()
	if err := w.reads.TakeAthleteRead(ctx, sub, true); err != nil {
		wk.stop = err
		return time.Time{}, false
	}
	started := w.now()
	budget.CountRead(ctx)
	id := sub.Event.ObjectID
	act, rl, err := w.strava.GetActivity(ctx, token, id)
	w.reads.ObserveRate(ctx, log, rl, err)
	wk.probes++
	other := act.Athlete.ID != 0 && act.Athlete.ID != sub.Event.OwnerID
	switch {
	case errors.Is(err, model.ErrNotFound):
		w.reads.MoveReadToUnverified(ctx, log, sub, tookAt)
		wk.probedMissing = append(wk.probedMissing, id)
		wk.found[id] = w.unlisted(ctx, log, sub, userID, started)
		return time.Time{}, false
	case err != nil:
		wk.stop, wk.dropped = w.listFailed(ctx, log, job, userID, rl, err)
		return time.Time{}, false
	case other:
		w.reads.MoveReadToUnverified(ctx, log, sub, tookAt)
	}
	wk.found[id] = w.writeListed(ctx, log, sub, userID, act, started) // another athlete's: refused as invalid
	if other || wk.found[id] != nil {
		return time.Time{}, false
	}
	log.InfoContext(ctx, "probe found an upload the walk had not reached; listing around it on the athlete's caps",
		"activityId", id, "startDate", act.StartDate.Format(time.RFC3339))
	return act.StartDate, true
}

// probeCandidate picks the create a probe reads: at random among the
// burst's creates not yet found whose activity is not stored.
func (w *Bursts) probeCandidate(ctx context.Context, burst []ingest.Job, userID string, wk *walk) (ingest.Job, bool, error) {
	for _, i := range rand.Perm(len(burst)) {
		sub := burst[i]
		if _, done := wk.found[sub.Event.ObjectID]; done || sub.Event.Kind() != ingest.KindActivityCreate {
			continue
		}
		switch _, err := w.store.Workouts.Workout(ctx, userID, sub.Event.ObjectID); {
		case errors.Is(err, model.ErrNotFound):
			return sub, true, nil
		case err != nil:
			return ingest.Job{}, false, fmt.Errorf("process %s: %w", sub.CorrelationID, err)
		}
	}
	return ingest.Job{}, false, nil
}
