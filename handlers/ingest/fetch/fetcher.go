// Package fetch runs an event's job (create, update, delete of an activity;
// an athlete's deauthorization goes on to package deauth). A webhook is
// unsigned: an event is a reason to ask, never proof. A job reads forward,
// a file per step: Process (fetcher.go; the steps and their errors are
// described on Fetcher) serves the event as the athlete's user (route.go:
// serve, then route: done already, gathered for list pages, or fetched);
// fetchNew (fetchone.go) spends the Strava budget and the athlete's read
// cap (budget.Reads), gets a token (token.go), asks Strava (budget.Reads
// keeps the rate reading), then settles a refusal (failed.go) or writes the answer,
// ordered by the fetch's start (write.go); apply (effects.go) records what
// the job learned in the warm instance's memory (package warm) and in the
// audit log. Gathered events are served by list pages in burst.go.
package fetch

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/budget"
	"github.com/commitcollect/backend/handlers/ingest/deauth"
	"github.com/commitcollect/backend/handlers/ingest/fetch/warm"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/strava"
)

// Stores are the adapters a Fetcher is handed, each behind the port of
// what fetching an activity does with it.
type Stores struct {
	// Athletes resolve an event's athlete to its user.
	Athletes ingest.AthleteResolver
	// Workouts hold the athletes' workouts.
	Workouts WorkoutWriter
	// Connections are flagged when Strava refuses a token.
	Connections ReauthMarker
	// Audits write the fetcher's audit entries.
	Audits ingest.Auditor
}

// WorkoutWriter reads a stored workout and writes Strava's answers to it,
// ordered by the fetch's start.
type WorkoutWriter interface {
	// Workout reads the stored workout; ErrNotFound when there is none.
	Workout(ctx context.Context, userID string, activityID int64) (*model.Workout, error)
	// UpsertWorkout writes the full workout keeping createdAtUtc, ordered
	// by its FetchStartedAtNs (a newer answer also revives a tombstone);
	// ErrConflict when an answer fetched later is stored.
	UpsertWorkout(ctx context.Context, w *model.Workout) error
	// MarkWorkoutHidden records a 404 answered to the fetch started at
	// fetchStartedAtNs (isDeleted with reason; a tombstone if needed),
	// ordered like UpsertWorkout; ErrConflict when an answer fetched later
	// is stored.
	MarkWorkoutHidden(ctx context.Context, userID string, athleteID, activityID int64, correlationID, reason string, fetchStartedAtNs int64, now time.Time) error
}

// ReauthMarker flags a connection whose token Strava refused.
type ReauthMarker interface {
	// MarkNeedsReauth flags the connection; ErrNotFound when it is gone.
	MarkNeedsReauth(ctx context.Context, userID string, now time.Time) error
}

// TokenProvider hands out valid access tokens (strava.Refresher).
type TokenProvider interface {
	// AccessToken returns a valid token; ErrUnauthorized when the athlete
	// must reconnect, ErrNotFound without a connection,
	// strava.ErrAppCredentials when Strava refused the application.
	AccessToken(ctx context.Context, userID string) (string, error)
}

// UnseenRechecks books, once per athlete and six-hour slot, a later walk
// of the athlete's whole listed history (syncjobs/scheduler.Scheduler).
type UnseenRechecks interface {
	// RecheckUnseen books the user's recheck at now; false when now's
	// slot has one already.
	RecheckUnseen(ctx context.Context, userID string, athleteID int64, now time.Time) (bool, error)
}

// ActivityFetcher reads one activity from Strava (strava.Client).
type ActivityFetcher interface {
	// GetActivity fetches one activity; errors match ErrNotFound,
	// ErrUnauthorized or ErrRetryable.
	GetActivity(ctx context.Context, accessToken string, id int64) (strava.Activity, strava.RateLimit, error)
}

// Fetcher turns an event's job into the athlete's workout (see the package
// comment). The steps of an event's job (handlers/worker, input = the Job JSON):
//
//  1. Resolve athlete → user: STRAVA#ATHLETE#{id}/OWNER, falling back to the
//     connection via GSI1. Not linked → audit STRAVA_ATHLETE_NOT_LINKED (on
//     the athlete's partition) and drop.
//  2. Deauthorization (object_type athlete, updates.authorized "false"):
//     handed to Deauth (package deauth), which confirms it at Strava
//     before anything is removed, on this fetcher's budget but never the
//     athlete's read caps.
//  3. delete events are confirmed by a fetch, never applied as they come
//     (a webhook is unsigned, and athlete and activity ids are public): they
//     take step 4 like create and update events (budget, athlete cap,
//     token, GET, ordering), and Strava's answer decides. 200 → the
//     activity is alive; what Strava says is written (audit
//     STRAVA_ACTIVITY_UPDATE with reason "delete event not confirmed:
//     strava serves the activity"). 404 → the workout is marked (step 5).
//     Any other answer cannot confirm it, so it destroys nothing: 401 →
//     needsReauth, 429 / spent budget / athlete cap → deferred, 5xx /
//     transport → retried and eventually parked; an unconfirmable delete
//     waits (or is parked for `make redrive`) and the workout stays as it
//     is. A forged delete thus costs one read of the athlete's cap.
//  4. Fetch: check the shared rate-limit item, get a valid token, GET
//     /api/v3/activities/{id}, map (sport_type → sportType, distance,
//     total_elevation_gain, moving_time, start_date, name only — never the raw
//     payload) and upsert the full item with createdAtUtc kept via
//     if_not_exists. The item carries fetchStartedAtNs and the upsert is
//     conditioned on it being newer than the stored one (and on nothing
//     else): an older answer is dropped (logged writeStatus=stale), a newer
//     one also revives a tombstone (isDeleted false, deletedAtUtc and
//     deletedReason removed), including a legacy tombstone that has no
//     fetchStartedAtNs. Before fetching, a job whose workout was fetched
//     after the job's receipt is done without a fetch (a stored tombstone
//     alone never stops a fetch: the activity may be public again), and the
//     athlete's read counters (STRAVA#ATHLETE#{id}/READS#{window} and
//     READSDAY#{day}) must have room (CC_ATHLETE_READS_PER_WINDOW,
//     CC_ATHLETE_READS_PER_DAY; updates and deletes only two thirds of
//     each, the rest kept for uploads; budget.Reads). A create of an athlete whose
//     creates crowd the window is gathered into a burst and served from
//     list pages instead (burst.go). A workout beyond physical bounds
//     (model/bounds.go) is rejected at normalization. Audit
//     STRAVA_ACTIVITY_CREATE / _UPDATE.
//  5. Errors: 404 (to any event) → the workout is marked isDeleted with
//     deletedReason "hidden-or-deleted" (Strava answers 404 for a deleted
//     activity and for one made private alike) and the fetch's
//     fetchStartedAtNs, a tombstone when it was never written; the write
//     is ordered like the upsert (refused when an answer fetched later is
//     stored), so the newest fetch wins both ways and a 404 that overtook
//     its create's write still wins over that older fetch; audit
//     STRAVA_ACTIVITY_DELETE with that reason. 401 → connection
//     needsReauth = true, audit STRAVA_CONNECTION_NEEDS_REAUTH, dropped
//     (no retry storm; a flagged
//     connection makes no more Strava calls until the athlete reconnects);
//     429, spent budget, athlete cap → deferred to the window reset (not a
//     failure); 5xx / transport / DynamoDB failures → retried through the
//     outbox with backoff (CC_RETRY_BASE first), parked after DefaultMaxFailures (6);
//     invalid data (model.ErrInvalid) → audit STRAVA_EVENT_REJECTED, parked.
//     Parked jobs are PARKED#WORKER records (`make redrive`). Audit writes
//     never fail ingestion.
type Fetcher struct {
	store  Stores
	tokens TokenProvider
	strava ActivityFetcher
	log    *slog.Logger
	// Now is the clock; tests may replace it.
	Now func() time.Time
	// Gather says crowded creates, and updates and deletes of activities
	// never stored, are gathered for bursts served from list pages
	// (Bursts with a Lister); false: every event is fetched alone.
	Gather bool
	// Reads spends Strava reads: the shared budget and the athletes' read
	// caps (package budget), shared with the fetcher's deauthorizations;
	// the wiring sets its caps and window.
	Reads *budget.Reads
	// BurstGather is the grid on which an athlete's crowded creates are
	// gathered into one burst (0: the rate window's quarter, at most 10 s).
	BurstGather time.Duration
	// Deauth runs deauthorization events, on this fetcher's budget
	// (handlers/app wires it).
	Deauth *deauth.Deauthorizer

	athletes warm.Athletes // the warm instance's memory
}

// NewFetcher builds the fetcher over the adapters st, reads (the budget
// and the caps, which from then on tell time by the fetcher's Now), tokens
// (the refresher) and Strava's REST client.
func NewFetcher(st Stores, reads *budget.Reads, tokens TokenProvider, fetcher ActivityFetcher, log *slog.Logger) *Fetcher {
	w := &Fetcher{store: st, Reads: reads, tokens: tokens, strava: countedFetcher{fetcher}, log: log,
		Now: func() time.Time { return time.Now().UTC() }}
	reads.Now = func() time.Time { return w.Now() }
	return w
}

// Process handles one job: resolve the athlete, then apply a
// deauthorization or fetch the activity and write its workout (a delete
// event too: Strava's answer confirms it, see fetchNew), then apply what
// it learned (effects.go). It returns nil when the job is done (including
// events that are deliberately dropped: unlinked athletes, revoked
// tokens), an error matching model.ErrRetryable for transient failures
// (429, 5xx, rate budget nearly spent, DynamoDB), and model.ErrInvalid for
// data that can never be processed. An event served from the athlete cache
// whose entry proves stale is served again from the table (package warm).
func (w *Fetcher) Process(ctx context.Context, job ingest.Job) error {
	log := w.jobLog(job)
	var e effects
	err := errStaleCache
	for fromCache := true; errors.Is(err, errStaleCache); fromCache = false {
		stale := e.stale
		e, err = w.serve(ctx, log, job, fromCache)
		e.stale = e.stale || stale
		if errors.Is(err, errStaleCache) {
			log.InfoContext(ctx, "cached athlete mapping or token refused; resolving again")
		}
		if !fromCache {
			break // only a cached entry is ever stale
		}
	}
	w.apply(ctx, log, job, e)
	return err
}

func (w *Fetcher) jobLog(job ingest.Job) *slog.Logger { return ingest.JobLog(w.log, job) }
