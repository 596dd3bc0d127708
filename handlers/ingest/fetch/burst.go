package fetch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/budget"
	"github.com/commitcollect/backend/handlers/ingest/fetch/warm"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/strava"
)

// ActivityLister lists the token's athlete's activities (strava.Client).
type ActivityLister interface {
	// ListActivities reads one page; errors match ErrUnauthorized or
	// ErrRetryable (a 429 is a *strava.APIError).
	ListActivities(ctx context.Context, accessToken string, o strava.ListOptions) ([]strava.Activity, strava.RateLimit, error)
}

const (
	// maxBurstPages is how many list pages (1,000 activities) any burst
	// may read. A burst of more than maxBurstPages×eventsPerPage events may
	// read a page more for every eventsPerPage events (burstPages): an
	// import of old-dated activities lies deep in the history, and a page
	// of 200 serves it far cheaper than a fetch each. A walk's first page
	// is an upload's read (the whole caps, not editsShare), its deeper
	// pages unverified (takeWalkRead). Past them the creates left are
	// fetched alone, on the unverified allowance too.
	maxBurstPages = 5
	// eventsPerPage is how many events of a burst pay for one page beyond
	// maxBurstPages: at most 0.2 reads per event, forged or not.
	eventsPerPage = 5
	// notFoundMargin is how long before a complete walk a create must have
	// been received for its absence from the list to settle it.
	notFoundMargin = 30 * time.Second
	// minBurstForList is the smallest burst served by a list page: one
	// create costs a fetch either way.
	minBurstForList = 2
	// ReasonGathered is the deferral reason of a create gathered for a
	// burst.
	ReasonGathered = "gathered with the athlete's other creates, to be served from list pages"
)

// gather defers a crowded create to the next tick of the gather grid, where
// the sweeper dispatches it with the athlete's other due creates.
func (w *Fetcher) gather(ctx context.Context, log *slog.Logger, job ingest.Job) error {
	return w.gatherFor(ctx, log, job, ReasonGathered)
}

// gatherFor defers job to the next tick of the gather grid with reason.
func (w *Fetcher) gatherFor(ctx context.Context, log *slog.Logger, job ingest.Job, reason string) error {
	g := w.BurstGather
	if g <= 0 {
		g = ingest.GatherGrid(w.Reads.Window())
	}
	until := ingest.NextGather(w.Now(), g)
	log.InfoContext(ctx, "activity event gathered for a burst", "writeStatus", "deferred", "notBefore", until.Format(time.RFC3339),
		"reason", reason)
	return fmt.Errorf("process %s: %w", job.CorrelationID, &ingest.DeferError{Until: until, Reason: reason, Gathered: true})
}

// unseenGap is how far apart two complete walks must start for both
// missing an activity to settle its event unseen: an eighth of the rate
// window, about two minutes at Strava's 15, longer than the list's lag
// after an upload and than a transient short page.
func (w *Bursts) unseenGap() time.Duration { return w.reads.Window() / 8 }

// Bursts serve burst jobs (Serve, the runner's handler of ingest.JobBurst): one athlete's gathered activity
// events, from list pages. They share the worker instance's adapters,
// reads (the budget and the caps) and warm memory with the event path
// (Fetcher), which serves what a walk leaves as the events' own jobs
// would be served (eventPath).
type Bursts struct {
	store  Stores
	strava ActivityFetcher // the event path's client: a probe's read by id
	reads  *budget.Reads
	memory *warm.Athletes
	events eventPath
	log    *slog.Logger
	now    func() time.Time // the event path's clock
	// Lister lists an athlete's activities: a burst is served from its
	// pages. Nil: every event of a burst is fetched alone.
	Lister ActivityLister
	// Rechecks books the later walk that brings back an activity a burst
	// settled unseen, should Strava's list have been wrong (settleUnseen;
	// nil: none).
	Rechecks UnseenRechecks
	// BurstBudget bounds a burst's fetches alone where the context has no
	// deadline (0: DefaultBurstBudget; burstOver).
	BurstBudget time.Duration
}

// NewBursts builds the bursts of the event path events (its adapters,
// reads, memory and clock) over lister.
func NewBursts(events *Fetcher, lister ActivityLister) *Bursts {
	return &Bursts{store: events.store, strava: events.strava, reads: events.Reads, memory: &events.athletes, events: events, log: events.log,
		now: func() time.Time { return events.Now() }, Lister: lister}
}

// eventPath is what a burst asks of the event path (*Fetcher): to serve
// one of its events as the event's own job would be served.
type eventPath interface {
	// gatherFor defers the event to the next tick of the gather grid.
	gatherFor(ctx context.Context, log *slog.Logger, job ingest.Job, reason string) error
	// fetchAlone fetches the event's activity alone and writes it.
	fetchAlone(ctx context.Context, log *slog.Logger, job ingest.Job, userID string) error
	accessToken(ctx context.Context, athleteID int64, userID string, cached *warm.Entry) (string, time.Time, error)
	needsReauth(ctx context.Context, log *slog.Logger, job ingest.Job, userID string, cause error) error
	markHidden(ctx context.Context, log *slog.Logger, job ingest.Job, userID string, fetchStarted time.Time) error
}

// audit writes one audit entry of the burst now (one per burst, and one
// per activity a list page wrote).
func (w *Bursts) audit(ctx context.Context, log *slog.Logger, subjectPK, userID, eventType string, job ingest.Job, details map[string]string) {
	w.store.Audits.Audit(ctx, log, ingest.AuditEntry(subjectPK, userID, eventType, job, details, w.now()))
}

// walk is what the list pages of a burst showed.
type walk struct {
	started time.Time // the first page's fetch start
	pages   int
	listed  int
	// remembered is how many of the burst's creates an earlier walk of
	// this instance listed (writeRemembered): written without a page.
	remembered int
	complete   bool            // a short page ended the athlete's history
	found      map[int64]error // listed (or probed) creates and their outcome
	// probes is how many creates were read by id (probe.go);
	// probedMissing, those Strava did not have (settled, in found).
	probes        int
	probedMissing []int64
	// stop, when set, is the outcome of every create the walk left: a
	// deferral (budget, caps, 429), a dropped connection (nil error with
	// dropped), or a failure to retry.
	stop    error
	dropped bool
}

// Serve serves job.Burst, one athlete's gathered activity events
// (an update or delete joins them when its activity was never stored, or
// when the sweeper found it due with them), from list
// pages (see the notes above) and returns each event's outcome in order,
// as Process would for it alone: nil when done (written, not found, or
// dropped with the connection), a DeferError to wait, another error to
// retry or park.
//
// Bursts: one athlete's many creates and updates served by list pages.
//
// A bulk upload of a year of files, a new device syncing hundreds of
// activities, or a forged flood of creates or updates for ids that never
// existed all look alike: many events of one athlete in little time. One fetch
// each would spend the application's shared read budget on one athlete, so:
//
//  1. Gather. A create of an athlete whose creates crowd this instance's
//     window (more than ingest.CreatesBeforeGather), and an update or delete of an
//     activity never stored, are not fetched: they are deferred to the next tick of
//     the gather grid (BurstGather; by default a quarter of the rate
//     window, at most ingest.MaxBurstGather), where the sweeper finds them due
//     with the athlete's other creates and updates (handoff's fair plan)
//     and dispatches them as one burst job (ingest.Job.Burst) under the
//     athlete's burst lease (handoff's BurstLeases).
//  2. List. Serve reads the athlete's activities newest first, 200 a
//     page (GET /athlete/activities), through the same budget check as a
//     fetch and the athlete's caps for the first page (deeper pages,
//     second looks, and a first page that listed none of the burst: the
//     unverified allowance, takeWalkRead; once it is spent, a probe by id
//     and the pages around what it found, probe.go), until every event of the burst
//     was listed, a short page ends the history, or burstPages were read (five, or a
//     page for every five events of a larger burst: an import of
//     old-dated activities lies deep in the history). A listed
//     activity is written through the ordered conditional write
//     (UpsertWorkout, ordered by the page's fetch start), so a page settles
//     many outbox items for one read. A create that a walk of this instance
//     listed lately, received before that page was read, is written from
//     it first, for no read (warm.Listed.Settles): a bulk upload spread
//     over ticks walks its pages once.
//  3. Settle. An event whose activity two walks did not list although
//     each reached the end of the history, the second at least unseenGap
//     after the first (the first is remembered in the outbox item's
//     deferral reason, ingest.UnseenReason), and which was received
//     notFoundMargin before the walk started, is not at Strava (or is
//     private to a grant that cannot read it, which a fetch answers 404
//     too): one walk is not evidence enough, as the list lags an upload, a
//     page can shift when the athlete deletes or re-dates an activity
//     between page reads, and a page can come back short. The burst's
//     audit entry names every id so settled (notFoundIds), and the burst
//     first books the athlete's recheck (Rechecks: a walk of the whole
//     history hours later), which brings back a real activity the list
//     left out twice; unbooked, nothing is settled. It is settled as
//     a 404 at the second walk's start would be (unlisted:
//     a create or an update of an activity never stored is done with
//     nothing stored; a delete, or an update of a stored workout, marks it
//     hidden-or-deleted). A younger one is gathered again (Strava's list
//     may not show an upload at once), so the next burst settles it. What
//     the walk could not settle (a history longer than burstPages) is
//     fetched alone, within the caps and the burst's time (burstOver: what
//     time leaves is gathered again for the next burst). A wait for the
//     budget or the caps defers every event not yet settled; the runner
//     settles each outbox item with its own outcome.
//
// So a forged create, update or delete of an activity never stored costs a
// share of one list page (route.go's route), and an honest bulk
// upload of 250 costs two pages plus the few creates fetched before the
// athlete's creates crowded the window.
func (w *Bursts) Serve(ctx context.Context, job ingest.Job) []error {
	out := make([]error, len(job.Burst))
	owner := job.Burst[0].Event.OwnerID
	log := ingest.JobLog(w.log, job).With("burst", len(job.Burst))
	userID, err := w.store.Athletes.ResolveAthlete(ctx, owner)
	switch {
	case errors.Is(err, model.ErrNotFound):
		log.InfoContext(ctx, "athlete not linked; burst dropped", "writeStatus", "skipped")
		w.audit(ctx, log, keys.AthletePK(owner), "", ingest.AuditAthleteNotLinked, job, map[string]string{"burst": strconv.Itoa(len(job.Burst))})
		return out
	case err != nil:
		return fill(out, fmt.Errorf("burst %s: %w", job.CorrelationID, err))
	}
	log = log.With("userId", userID)
	wk := walk{found: map[int64]error{}}
	began := w.now()
	if len(job.Burst) >= minBurstForList && w.Lister != nil {
		wk = w.walk(ctx, log, job, userID, began)
	}
	var notFound []int // indices in job.Burst
	alone, later, unseen := 0, 0, 0
	for i, sub := range job.Burst {
		id := sub.Event.ObjectID
		werr, listed := wk.found[id]
		switch {
		case listed:
			out[i] = werr
		case wk.complete && !sub.ReceivedAtUtc.IsZero() && sub.ReceivedAtUtc.Before(wk.started.Add(-notFoundMargin)):
			if sub.UnseenAtUtc == nil || wk.started.Before(sub.UnseenAtUtc.Add(w.unseenGap())) {
				// One walk is not evidence enough: another, later, must miss it too.
				unseen++
				out[i] = w.events.gatherFor(ctx, log, sub, ingest.UnseenReason(cmp.Or(ptrTime(sub.UnseenAtUtc), wk.started)))
				continue
			}
			// Two complete walks missed it: not at Strava (or private), as a
			// fetch's 404 at this walk's start (settleUnseen, below).
			notFound = append(notFound, i)
		case wk.complete:
			out[i] = w.events.gatherFor(ctx, log, sub, ReasonGathered) // too young to settle unseen
		case wk.stop != nil || wk.dropped:
			out[i] = wk.stop
		case w.burstOver(ctx, began):
			later++ // out of time: the next burst serves it
			out[i] = w.events.gatherFor(ctx, log, sub, ReasonGathered)
		default:
			alone++
			sub.Gathered, sub.Unlisted = true, true
			subLog := ingest.JobLog(w.log, sub).With("userId", userID)
			out[i] = w.events.fetchAlone(ctx, subLog, sub, userID)
		}
	}
	ids := w.settleUnseen(ctx, log, job, userID, wk.started, notFound, out)
	written := len(wk.found) - len(wk.probedMissing)
	log.InfoContext(ctx, "burst served", "pages", wk.pages, "listed", wk.listed, "remembered", wk.remembered, "written", written,
		"probes", wk.probes, "probedNotFound", len(wk.probedMissing),
		"notFound", len(notFound), "unseenOnce", unseen, "fetchedAlone", alone, "gatheredAgain", later, "complete", wk.complete)
	details := map[string]string{"creates": strconv.Itoa(len(job.Burst)), "pages": strconv.Itoa(wk.pages),
		"written": strconv.Itoa(written), "notFound": strconv.Itoa(len(notFound)), "fetchedAlone": strconv.Itoa(alone)}
	if len(notFound) > 0 {
		details["notFoundIds"] = strings.Join(ids, ",")
	}
	if wk.probes > 0 {
		details["probes"] = strconv.Itoa(wk.probes)
	}
	if len(wk.probedMissing) > 0 {
		details["probedNotFoundIds"] = joinIDs(wk.probedMissing)
	}
	w.audit(ctx, log, keys.UserPK(userID), userID, ingest.AuditBurstServed, job, details)
	return out
}

// settleUnseen settles the burst's events at notFound (indices: two
// complete walks did not list their activities) as a 404 at the walk's
// start would (unlisted), into out, and returns their activity ids for the
// audit entry, every one. First it books the athlete's recheck
// (Rechecks): should Strava's list have been wrong twice, a later walk of
// the whole history writes what it lists, so a real activity comes back by
// itself. If the recheck cannot be booked, nothing is settled: the events
// fail (retryable) and come back.
func (w *Bursts) settleUnseen(ctx context.Context, log *slog.Logger, job ingest.Job, userID string, started time.Time,
	notFound []int, out []error) []string {
	if len(notFound) == 0 {
		return nil
	}
	var booked error
	if w.Rechecks != nil {
		if _, err := w.Rechecks.RecheckUnseen(ctx, userID, job.Burst[0].Event.OwnerID, w.now()); err != nil {
			log.WarnContext(ctx, "recheck of activities not listed could not be booked; they are not settled", "error", err)
			booked = fmt.Errorf("burst %s: book the recheck of unlisted activities: %w: %w", job.CorrelationID, model.ErrRetryable, err)
		}
	}
	ids := make([]string, 0, len(notFound))
	for _, i := range notFound {
		if booked != nil {
			out[i] = booked
			continue
		}
		ids = append(ids, strconv.FormatInt(job.Burst[i].Event.ObjectID, 10))
		out[i] = w.unlisted(ctx, log, job.Burst[i], userID, started)
	}
	return ids
}

// joinIDs is ids, comma-separated.
func joinIDs(ids []int64) string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(out, ",")
}

// ptrTime is *t, or the zero time for nil.
func ptrTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// burstSpare is what a burst leaves of its invocation's deadline (the
// worker's timeout) for settling its outbox items.
const burstSpare = 15 * time.Second

// DefaultBurstBudget bounds the time a burst spends fetching alone what its
// walk did not settle, where no deadline says it (the local stack).
const DefaultBurstBudget = 45 * time.Second

// burstOver says a burst begun at began has no time left for another fetch
// alone: its deadline is within burstSpare, or BurstBudget has passed. What
// is left is gathered again, so a burst never outruns the worker's timeout
// and runs again whole.
func (w *Bursts) burstOver(ctx context.Context, began time.Time) bool {
	if d, ok := ctx.Deadline(); ok && time.Until(d) < burstSpare {
		return true
	}
	return w.now().Sub(began) >= cmp.Or(w.BurstBudget, DefaultBurstBudget)
}

func fill(out []error, err error) []error {
	for i := range out {
		out[i] = err
	}
	return out
}

// unlisted settles an event whose activity a whole walk, started at
// started, did not list, as a fetch's 404 then would: a create is done with
// nothing stored; a delete, and an update of a workout we store, mark it
// hidden-or-deleted ordered by the walk's start (a delete's tombstone, even
// of a workout never written, so that a create's fetch in flight loses to
// it); an update of an activity never stored is done.
func (w *Bursts) unlisted(ctx context.Context, log *slog.Logger, job ingest.Job, userID string, started time.Time) error {
	switch job.Event.Kind() {
	case ingest.KindActivityCreate:
		return nil
	case ingest.KindActivityUpdate:
		_, err := w.store.Workouts.Workout(ctx, userID, job.Event.ObjectID)
		if errors.Is(err, model.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("process %s: %w", job.CorrelationID, err)
		}
	}
	return w.events.markHidden(ctx, ingest.JobLog(w.log, job).With("userId", userID, "source", "list"), job, userID, started)
}
