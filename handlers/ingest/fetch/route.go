package fetch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/fetch/warm"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
)

// serve resolves the user the event's athlete is linked to (the athlete
// cache when fromCache and the event fetches, else the table) and serves
// the event: an unlinked athlete's is dropped, a deauthorization is
// applied (the athlete's cache entry dropped with it), an athlete update
// is ignored, an activity event is fetched and written (fetchAndWrite).
// It returns the effects for apply.
func (w *Fetcher) serve(ctx context.Context, log *slog.Logger, job ingest.Job, fromCache bool) (effects, error) {
	ev := job.Event
	e, cachedOK := w.athletes.Get(ev.OwnerID, w.Now())
	var cached *warm.Entry
	userID := e.UserID
	if cachedOK && fromCache && ev.Kind().Activity() {
		cached = &e
	} else {
		var err error
		userID, err = w.store.Athletes.ResolveAthlete(ctx, ev.OwnerID)
		if errors.Is(err, model.ErrNotFound) {
			log.InfoContext(ctx, "athlete not linked; event dropped", "writeStatus", "skipped")
			return effects{audit: &auditNote{subjectPK: keys.AthletePK(ev.OwnerID), eventType: ingest.AuditAthleteNotLinked}}, nil
		}
		if err != nil {
			return effects{}, fmt.Errorf("process %s: %w", job.CorrelationID, err)
		}
	}
	log = log.With("userId", userID)
	switch ev.Kind() {
	case ingest.KindDeauthorization:
		if w.Deauth == nil {
			return effects{stale: true}, fmt.Errorf("process %s: this worker has no deauthorizer: %w", job.CorrelationID, model.ErrInvalid)
		}
		return effects{stale: true}, w.Deauth.Handle(ctx, log, job, userID)
	case ingest.KindAthleteUpdate:
		log.InfoContext(ctx, "athlete update ignored", "writeStatus", "skipped")
		return effects{}, nil
	}
	return w.fetchAndWrite(ctx, log, job, userID, cached)
}

// fetchAndWrite fetches the activity and writes its workout for userID
// (create, update and delete events alike: a webhook is unsigned, so a
// delete is only a reason to ask Strava), unless route finds it needs no
// fetch of its own: done already, or gathered for a burst. cached is the
// athlete cache's entry userID came from (nil: from the table); with one,
// any sign that it is stale returns errStaleCache before anything is
// written. It returns the effects for apply.
func (w *Fetcher) fetchAndWrite(ctx context.Context, log *slog.Logger, job ingest.Job, userID string, cached *warm.Entry) (effects, error) {
	switch r, err := w.route(ctx, log, job, userID); {
	case err != nil:
		return effects{}, err
	case r == routeDone:
		return effects{}, nil
	case r == routeGather:
		return effects{}, w.gather(ctx, log, job)
	}
	return w.fetchNew(ctx, log, job, userID, cached)
}

// fetchAlone serves an event of a burst that its walk left as the event's
// own job would be (fetchAndWrite, then apply).
func (w *Fetcher) fetchAlone(ctx context.Context, log *slog.Logger, job ingest.Job, userID string) error {
	e, err := w.fetchAndWrite(ctx, log, job, userID, nil)
	w.apply(ctx, log, job, e)
	return err
}

// A route is what an activity event needs before any Strava read.
type route int

const (
	routeFetch  route = iota // fetched alone (fetchNew)
	routeDone                // coalesced: a fetch after its receipt saw its change
	routeGather              // gathered for a burst served by list pages (burst.go)
)

// route decides whether the event needs a fetch of its own.
//
// Coalesce: a fetch that started after this event was received has
// already seen the change it reports (a tombstone's fetch too: it is the
// 404 that fetch got), so it needs no other Strava read. A stored
// tombstone alone does not stop a fetch: the activity may have been made
// public again. A create event skips the stored workout's read (its
// activity is new, and the writes are ordered anyway); when the athlete's
// creates crowd this window (ingest.CreatesBeforeGather) the instance's
// memory of its own fetches coalesces it instead, and the rest are
// gathered.
//
// An update or delete of an activity we never stored (athlete and activity
// ids are public, so such events are cheap to forge) is not fetched alone
// but gathered with the athlete's other activity events and served from
// list pages (burst.go): a create we missed is listed and written, a
// forged id settles with the burst for a share of a page, a delete's
// absence writes its tombstone ordered by the walk (so a create's fetch in
// flight still loses to it). Gathered already, or from a redrive, it is
// fetched.
func (w *Fetcher) route(ctx context.Context, log *slog.Logger, job ingest.Job, userID string) (route, error) {
	ev := job.Event
	gatherable := w.Gather && job.IdempotencyKey != ""
	if ev.Kind() == ingest.KindActivityCreate && !job.Redrive {
		crowded := !job.Gathered && w.athletes.Creates.Crowded(ev.OwnerID, w.Now().UTC().Truncate(w.Reads.Window()))
		switch {
		case crowded && !job.ReceivedAtUtc.IsZero() && w.athletes.FetchedAfter(ev.ObjectID, job.ReceivedAtUtc, w.Now()):
			log.InfoContext(ctx, "activity fetched here after this event; no fetch", "writeStatus", "coalesced")
			return routeDone, nil
		case crowded && gatherable:
			return routeGather, nil
		}
		return routeFetch, nil
	}
	switch stored, err := w.store.Workouts.Workout(ctx, userID, ev.ObjectID); {
	case err == nil && !job.ReceivedAtUtc.IsZero() && stored.FetchStarted().After(job.ReceivedAtUtc):
		log.InfoContext(ctx, "workout already fetched after this event; no fetch", "writeStatus", "coalesced",
			"fetchStartedAtUtc", stored.FetchStarted().Format(time.RFC3339Nano))
		return routeDone, nil
	case errors.Is(err, model.ErrNotFound) && !job.Gathered && !job.Redrive && gatherable:
		return routeGather, nil
	case err != nil && !errors.Is(err, model.ErrNotFound):
		return routeFetch, fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	return routeFetch, nil
}
