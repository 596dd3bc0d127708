package fetch

// A burst's walk of the athlete's list pages (Bursts.walk): each page's
// read and its caps, the listed activities written through the ordered
// write, and what a refused token or a failed page means for the burst.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/budget"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/strava"
)

// burstPages is how many list pages a burst of n events may read.
func burstPages(n int) int { return max(maxBurstPages, (n+eventsPerPage-1)/eventsPerPage) }

// walk reads the athlete's list pages, newest first, writing the burst's
// creates it finds, until each is found, the history ends or burstPages
// were read (or, past maxBurstPages, the burst's time since began is
// over); each page goes through the budget check and the athlete caps.
// When the unverified allowance refuses a page, the walk probes (probe.go)
// and, on the evidence of an upload found, lists around it on the
// athlete's caps (legs).
func (w *Bursts) walk(ctx context.Context, log *slog.Logger, job ingest.Job, userID string, began time.Time) walk {
	wk := walk{found: map[int64]error{}}
	want := make(map[int64]ingest.Job, len(job.Burst))
	for _, sub := range job.Burst {
		want[sub.Event.ObjectID] = sub
	}
	first := job.Burst[0]
	token, _, err := w.events.accessToken(ctx, first.Event.OwnerID, userID, nil)
	if err != nil {
		wk.stop, wk.dropped = w.tokenRefused(ctx, log, job, userID, err)
		return wk
	}
	wk.remembered = w.writeRemembered(ctx, log, job.Burst, userID, wk.found)
	legs, probes := []leg{{}}, 0 // the walk's own leg: the whole history, newest first
	for pages := 0; len(legs) > 0 && pages < burstPages(len(want)) && len(wk.found) < len(want); {
		l := &legs[0]
		if pages >= maxBurstPages && w.burstOver(ctx, began) {
			return wk // the next burst walks on; what is left waits for it
		}
		if err := w.reads.CheckBudget(ctx); err != nil {
			wk.stop = fmt.Errorf("burst %s: %w", job.CorrelationID, err)
			return wk
		}
		tookAt := w.now()
		if err := w.takeWalkRead(ctx, job, *l); err != nil {
			if !allowanceSpent(err) || !l.unverified(job.Burst) || probes == maxProbes {
				wk.stop = err
				return wk
			}
			probes++
			if at, ok := w.probe(ctx, log, job, userID, token, &wk); ok {
				legs = append([]leg{{before: at.Add(time.Second), verified: true}, {after: at.Add(-time.Second), verified: true}}, legs...)
			} else if wk.stop != nil || wk.dropped {
				return wk
			}
			continue
		}
		onCaps := !l.unverified(job.Burst)
		pages++
		l.page++
		started := w.now()
		if wk.started.IsZero() {
			wk.started = started
		}
		budget.CountRead(ctx)
		acts, rl, err := w.Lister.ListActivities(ctx, token, strava.ListOptions{Before: l.before, After: l.after, Page: l.page, PerPage: strava.MaxPerPage})
		w.reads.ObserveRate(ctx, log, rl, err)
		if err != nil {
			wk.stop, wk.dropped = w.listFailed(ctx, log, job, userID, rl, err)
			return wk
		}
		wk.pages++
		wk.listed += len(acts)
		w.memory.Listed.Remember(first.Event.OwnerID, userID, acts, started)
		before := len(wk.found)
		for _, a := range acts {
			if _, done := wk.found[a.ID]; done {
				continue
			}
			if sub, ok := want[a.ID]; ok {
				wk.found[a.ID] = w.writeListed(ctx, log, sub, userID, a, started)
			}
		}
		productive := len(wk.found) > before
		if !productive && onCaps {
			w.reads.MoveReadToUnverified(ctx, log, job.Burst[0], tookAt)
		}
		short := len(acts) < strava.MaxPerPage
		if short && !l.verified {
			wk.complete = true // the walk's own leg reached the end of the history
			return wk
		}
		if short || (l.verified && !productive) {
			legs = legs[1:]
		}
	}
	return wk
}

// A leg is one run of a walk's list pages. The walk's own leg lists the
// whole history, newest first. A probe that found an upload started at S
// adds two verified legs, read on the athlete's caps while each page lists
// one of the burst's creates: before S (older, newest first) and after S
// (newer, oldest first), where an import's other activities lie.
type leg struct {
	before, after time.Time
	page          int // the last page read, 1-based
	verified      bool
}

// unverified says the leg's next page is read on the athlete's unverified
// allowance (takeWalkRead): a deeper page of the walk's own leg, or any
// page of a second look.
func (l leg) unverified(burst []ingest.Job) bool {
	return !l.verified && (l.page > 0 || secondLook(burst))
}

// allowanceSpent says err is a hold-back of a spent read allowance.
func allowanceSpent(err error) bool {
	var de *ingest.DeferError
	return errors.As(err, &de) && de.AthleteCap
}

// writeRemembered writes the burst's creates that a walk of this instance
// listed lately (warm.Listed.Settles) into found, as that walk would have,
// and says how many it wrote: they cost no page.
func (w *Bursts) writeRemembered(ctx context.Context, log *slog.Logger, burst []ingest.Job, userID string, found map[int64]error) int {
	settles := w.memory.Listed.Settles(burst, userID, w.now())
	for _, r := range settles {
		found[r.Activity.ID] = w.writeListed(ctx, log, r.Job, userID, r.Activity, r.Started)
	}
	return len(settles)
}

// takeWalkRead takes the read of the leg's next page: the first page of a
// burst with an event not yet looked for is the uploads' (the athlete's
// caps: it is where a new upload is listed), as is every page of a leg a
// probe verified; a deeper page of the walk's own leg, and every page of a
// second look (each event was missed by a walk before), only unverified
// events ask for, so they spend the athlete's unverified allowance
// (TakeUnverifiedRead). A page on the caps that listed none of the
// burst's events moves to that allowance once read (MoveReadToUnverified),
// so forged creates naming a real athlete cost that athlete's caps nothing.
func (w *Bursts) takeWalkRead(ctx context.Context, job ingest.Job, l leg) error {
	if l.unverified(job.Burst) {
		return w.reads.TakeUnverifiedRead(ctx, job.Burst[0])
	}
	return w.reads.TakeAthleteRead(ctx, job.Burst[0], true)
}

// secondLook says every event of the burst was missed by a complete walk
// before (ingest.Job.UnseenAtUtc).
func secondLook(burst []ingest.Job) bool {
	for _, sub := range burst {
		if sub.UnseenAtUtc == nil {
			return false
		}
	}
	return true
}

// writeListed writes a listed activity through the ordered write (a later
// fetch stored wins, as for a fetch) and audits it like a fetch (a delete
// event whose activity is listed: not confirmed, as a fetch's 200).
func (w *Bursts) writeListed(ctx context.Context, log *slog.Logger, job ingest.Job, userID string, a strava.Activity, started time.Time) error {
	ev := job.Event
	if a.Athlete.ID != 0 && a.Athlete.ID != ev.OwnerID {
		return fmt.Errorf("process %s: listed activity %d belongs to athlete %d: %w", job.CorrelationID, a.ID, a.Athlete.ID, model.ErrInvalid)
	}
	wo, err := ingest.MapActivity(a, userID, ev.OwnerID, job.CorrelationID, w.now())
	if err != nil {
		return fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	wo.FetchStartedAtNs = started.UnixNano()
	switch err := w.store.Workouts.UpsertWorkout(ctx, wo); {
	case errors.Is(err, model.ErrConflict):
		return nil // a later fetch is stored
	case err != nil:
		return fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	w.memory.SawFetch(ev.ObjectID, started)
	kind, details := ingest.AuditActivityCreate, map[string]string{
		"activityId": strconv.FormatInt(ev.ObjectID, 10), "sportType": wo.SportType, "source": "list"}
	switch ev.Kind() {
	case ingest.KindActivityUpdate:
		kind = ingest.AuditActivityUpdate
	case ingest.KindActivityDelete:
		kind, details["reason"] = ingest.AuditActivityUpdate, reasonDeleteNotConfirmed
	}
	w.audit(ctx, log, keys.UserPK(userID), userID, kind, job, details)
	return nil
}

// tokenRefused is the outcome of every create of a burst whose token could
// not be had: dropped (done) when the athlete must reconnect or has no
// connection, deferred when Strava refused the application, else retried.
func (w *Bursts) tokenRefused(ctx context.Context, log *slog.Logger, job ingest.Job, userID string, err error) (error, bool) {
	switch {
	case errors.Is(err, model.ErrUnauthorized):
		return w.events.needsReauth(ctx, log, job, userID, err), true
	case errors.Is(err, model.ErrNotFound):
		log.InfoContext(ctx, "athlete has no strava connection; burst dropped", "writeStatus", "skipped")
		return nil, true
	case errors.Is(err, strava.ErrAppCredentials):
		return fmt.Errorf("burst %s: %w", job.CorrelationID, ingest.DeferForAppCredentials(err, w.now())), false
	}
	return fmt.Errorf("burst %s: %w", job.CorrelationID, err), false
}

// listFailed is the outcome of every create a list page left: a 429 defers
// them to the window reset, a 401 flags the connection and drops them, any
// other failure is retried.
func (w *Bursts) listFailed(ctx context.Context, log *slog.Logger, job ingest.Job, userID string, rl strava.RateLimit, err error) (error, bool) {
	var apiErr *strava.APIError
	switch {
	case errors.As(err, &apiErr) && apiErr.Status == 429:
		now := w.now()
		until, why := w.reads.ResetAfter429(rl, now)
		return fmt.Errorf("burst %s: %w", job.CorrelationID, &ingest.DeferError{Until: until, Reason: "strava 429: " + why}), false
	case errors.Is(err, model.ErrUnauthorized):
		if merr := w.store.Connections.MarkNeedsReauth(ctx, userID, w.now()); merr != nil && !errors.Is(merr, model.ErrNotFound) {
			return fmt.Errorf("burst %s: %w", job.CorrelationID, merr), false
		}
		return w.events.needsReauth(ctx, log, job, userID, err), true
	}
	return fmt.Errorf("burst %s: %w", job.CorrelationID, err), false
}
