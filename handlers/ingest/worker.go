package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/strava"
)

// Audit event types written by the ingestion path.
const (
	AuditActivityCreate     = "STRAVA_ACTIVITY_CREATE"
	AuditActivityUpdate     = "STRAVA_ACTIVITY_UPDATE"
	AuditActivityDelete     = "STRAVA_ACTIVITY_DELETE"
	AuditAthleteDeauthorize = "STRAVA_ATHLETE_DEAUTHORIZED"
	AuditDeauthStale        = "STRAVA_DEAUTH_STALE"
	AuditDeauthUnconfirmed  = "STRAVA_DEAUTH_UNCONFIRMED"
	AuditAthleteNotLinked   = "STRAVA_ATHLETE_NOT_LINKED"
	AuditNeedsReauth        = "STRAVA_CONNECTION_NEEDS_REAUTH"
	AuditEventRejected      = "STRAVA_EVENT_REJECTED"
)

// WorkerStore is the persistence the worker needs (implemented by
// model/store.Store).
type WorkerStore interface {
	// ResolveAthlete returns the athlete's user; ErrNotFound when unlinked.
	ResolveAthlete(ctx context.Context, athleteID int64) (string, error)
	// UpsertWorkout writes the full workout keeping createdAtUtc, ordered
	// by its FetchStartedAtNs (a newer answer also revives a tombstone);
	// ErrConflict when an answer fetched later is stored.
	UpsertWorkout(ctx context.Context, w *model.Workout) error
	// MarkWorkoutHidden records a 404 answered to the fetch started at
	// fetchStartedAtNs (isDeleted with reason; a tombstone if needed),
	// ordered like UpsertWorkout; ErrConflict when an answer fetched later
	// is stored.
	MarkWorkoutHidden(ctx context.Context, userID string, athleteID, activityID int64, correlationID, reason string, fetchStartedAtNs int64, now time.Time) error
	// MarkNeedsReauth flags the connection; ErrNotFound when it is gone.
	MarkNeedsReauth(ctx context.Context, userID string, now time.Time) error
	// StravaConnectionGrant reads the user's connection with its tokens
	// left sealed; ErrNotFound when there is none.
	StravaConnectionGrant(ctx context.Context, userID string) (*model.StravaConnection, error)
	// RevokeStravaConnection deletes the connection if it is still grant c
	// and records the revocation in the user guard, in one transaction;
	// ErrConflict when the connection moved or is gone.
	RevokeStravaConnection(ctx context.Context, c *model.StravaConnection, revokedAt, dataExpiresAt, now time.Time) error
	// ExpireStravaWorkouts sets expiresAt on every Strava workout of the
	// user (idempotent, resumable).
	ExpireStravaWorkouts(ctx context.Context, userID string, expiresAt time.Time) (int, error)
	// UnexpireStravaWorkouts removes expiresAt from every Strava workout of
	// the user (idempotent, resumable).
	UnexpireStravaWorkouts(ctx context.Context, userID string) (int, error)
	// UserGuard reads the user's guard; ErrNotFound when there is none.
	UserGuard(ctx context.Context, userID string) (*model.UserGuard, error)
	// RateLimitState reads the shared counter; ErrNotFound before the first reading.
	RateLimitState(ctx context.Context) (*model.RateLimitState, error)
	// RecordRateLimit stores a reading unless a newer one is stored.
	RecordRateLimit(ctx context.Context, r *model.RateLimitState) error
	// Audit writes an audit entry and never fails.
	Audit(ctx context.Context, log *slog.Logger, e *model.AuditEntry)
	// Workout reads the stored workout; ErrNotFound when there is none.
	Workout(ctx context.Context, userID string, activityID int64) (*model.Workout, error)
	// TakeAthleteRead counts one Strava read for the athlete in the window
	// (of length windowLen) containing now; ErrConflict when limit reads
	// were already counted.
	TakeAthleteRead(ctx context.Context, athleteID int64, now time.Time, windowLen time.Duration, limit int) error
	// Park sets a record aside for redrive (PARKED#{source}#{shard}).
	Park(ctx context.Context, r *model.ParkedRecord) error
	// RemoveParked removes a done job's parked record from its shard
	// (missing: not an error).
	RemoveParked(ctx context.Context, source, recordID string) error
	// OutboxItem reads the job's outbox item; ErrNotFound when none.
	OutboxItem(ctx context.Context, key string) (*model.IdempotencyRecord, error)
	// SettleOutboxItem ends a received item as done or parked; ErrConflict
	// when it was settled already.
	SettleOutboxItem(ctx context.Context, key string, status model.OutboxStatus, reason string, now time.Time) error
	// DeferOutboxItem keeps a received item received until notBefore;
	// ErrConflict when it was settled already.
	DeferOutboxItem(ctx context.Context, key string, notBefore time.Time, reason string, failure bool, now time.Time) error
}

// TokenProvider hands out valid access tokens (strava.Refresher).
type TokenProvider interface {
	// AccessToken returns a valid token; ErrUnauthorized when the athlete
	// must reconnect, ErrNotFound without a connection.
	AccessToken(ctx context.Context, userID string) (string, error)
}

// ActivityFetcher reads from Strava (strava.Client): one activity, and the
// token's athlete (the check that a grant is alive).
type ActivityFetcher interface {
	// GetActivity fetches one activity; errors match ErrNotFound,
	// ErrUnauthorized or ErrRetryable.
	GetActivity(ctx context.Context, accessToken string, id int64) (strava.Activity, strava.RateLimit, error)
	// GetAthlete fetches the token's athlete; a *strava.APIError with
	// status 401 when the grant is revoked.
	GetAthlete(ctx context.Context, accessToken string) (strava.Athlete, strava.RateLimit, error)
}

var (
	_ TokenProvider   = (*strava.Refresher)(nil)
	_ ActivityFetcher = (*strava.Client)(nil)
)

// DefaultBudgetReserve is the share of each Strava budget the worker leaves
// unused: it defers instead of spending the last 5 %.
const DefaultBudgetReserve = 0.05

// Worker defaults.
const (
	// DefaultAthleteReadsPerWindow caps the Strava reads one athlete's
	// events may cause per 15-minute window (CC_ATHLETE_READS_PER_WINDOW):
	// a flood of (forged) events for one athlete waits instead of spending
	// the application's budget. 30 is far above what one athlete uploads.
	DefaultAthleteReadsPerWindow = 30
	// DefaultMaxFailures bounds the retryable failures of one job before
	// it is parked.
	DefaultMaxFailures = 6
	// DefaultRetryBase is the first backoff after a failed attempt (full
	// jitter, doubling: up to 30 s, 1 min, 2 min … retryMax).
	DefaultRetryBase = 15 * time.Second
	retryMax         = 15 * time.Minute
	// settleTimeout bounds recording a job's outcome after its context
	// ended.
	settleTimeout = 5 * time.Second
)

// Worker turns webhook jobs into workout items.
type Worker struct {
	store  WorkerStore
	tokens TokenProvider
	strava ActivityFetcher
	log    *slog.Logger
	// Now is the clock; tests may replace it.
	Now func() time.Time
	// BudgetReserve is the share of a rate-limit budget kept free.
	BudgetReserve float64
	// AthleteReadsPerWindow caps Strava reads per athlete per 15 minutes
	// (0: no cap).
	AthleteReadsPerWindow int
	// MaxFailures bounds the retryable failures of a job before it is
	// parked.
	MaxFailures int
	// RetryBase is the first backoff after a failure (CC_RETRY_BASE).
	RetryBase time.Duration
	// RateWindow is Strava's short rate-limit window (model.AthleteReadsWindow;
	// shorter only against a simulator, CC_STRAVA_WINDOW): budget windows,
	// their resets and the athlete read counters follow it.
	RateWindow time.Duration
	// Sync runs the jobs that carry a SyncJob (backfill, reconciliation);
	// nil refuses them as poison.
	Sync *Syncer
	// Metrics receives one CloudWatch EMF line per job that read Strava:
	// StravaReads by Class (readmetric.go; the worker Lambda's stdout).
	// Nil writes none.
	Metrics io.Writer

	athletes athleteCache // see cache.go
	rate     rateCache
}

// NewWorker builds the worker service.
func NewWorker(store WorkerStore, tokens TokenProvider, fetcher ActivityFetcher, log *slog.Logger) *Worker {
	return &Worker{store: store, tokens: tokens, strava: countedFetcher{fetcher}, log: log,
		Now: func() time.Time { return time.Now().UTC() }, BudgetReserve: DefaultBudgetReserve,
		AthleteReadsPerWindow: DefaultAthleteReadsPerWindow, MaxFailures: DefaultMaxFailures,
		RetryBase: DefaultRetryBase, RateWindow: model.AthleteReadsWindow}
}

func (w *Worker) rateWindow() time.Duration {
	if w.RateWindow <= 0 {
		return model.AthleteReadsWindow
	}
	return w.RateWindow
}

// DeferError says a job cannot run before Until and is not a failure:
// Strava's rate budget is spent until its window resets, or the athlete's
// read cap is reached for this window. Run keeps the job received with that
// not-before time; without an outbox item it matches model.ErrRetryable.
type DeferError struct {
	Until  time.Time
	Reason string
}

// Error implements error.
func (e *DeferError) Error() string {
	return fmt.Sprintf("deferred until %s: %s", e.Until.UTC().Format(time.RFC3339), e.Reason)
}

// Is lets errors.Is(err, model.ErrRetryable) match.
func (e *DeferError) Is(target error) bool { return target == model.ErrRetryable }

// Handle is the worker Lambda's entry point: it decodes the Job and runs it
// (Run). It returns an error only when Run does (the outcome could not be
// recorded: Lambda's async retries, then the failure destination; the
// outbox item stays received for the sweeper meanwhile). An undecodable
// payload is logged and dropped: it names no outbox item, and the item it
// came from, still received, is dispatched again by the sweeper from its
// stored job.
func (w *Worker) Handle(ctx context.Context, raw json.RawMessage) error {
	job, err := DecodeJob(raw)
	if err != nil {
		w.log.ErrorContext(ctx, "worker dropped a poison job", "error", err, "bytes", len(raw))
		return nil
	}
	return w.Run(ctx, job)
}

// Run processes a job and settles its outbox item: done when processed (or
// deliberately dropped), parked with the reason for poison and for a job
// whose retryable failures reached MaxFailures, received with a not-before
// time for a deferral (DeferError, not counted as a failure) or a retryable
// failure (backoff). A job whose item is already settled is not run again
// when the worker reads the item; a job carrying OutboxFailures (dispatched
// right after its claim or lease) is not checked first, and its settle then
// finds the item settled (a rare duplicate dispatch costs a run, never a
// second outcome: writes are ordered and settles conditional).
// Run returns nil once the outcome is recorded (so Lambda does not retry
// what the sweeper will); it returns an error only when the outcome could
// not be recorded, or when ctx ended while the job ran (its item then stays
// received and the sweeper runs it again). A job without an outbox item
// (an old payload, a redrive) keeps the old contract (Classify). It is the
// ProcessFunc of a local Queue.
func (w *Worker) Run(ctx context.Context, job Job) error {
	ctx, logCapacity := w.meterJob(ctx, job)
	defer logCapacity()
	log := w.jobLog(job)
	var rec *model.IdempotencyRecord
	switch {
	case job.IdempotencyKey != "" && job.OutboxFailures != nil && !job.Redrive:
		// Dispatched right after a claim or lease that found the item
		// received: no need to read it. If another run settled it since,
		// the conditional settle below says so.
		rec = &model.IdempotencyRecord{IdempotencyKey: job.IdempotencyKey, Status: model.OutboxReceived,
			Failures: *job.OutboxFailures, Dispatches: job.OutboxDispatches}
	case job.IdempotencyKey != "":
		r, err := w.store.OutboxItem(ctx, job.IdempotencyKey)
		switch {
		case err == nil && r.Status == model.OutboxDone && job.Redrive:
			// Parked once, done since (the sweeper ran it): a redrive must
			// not run done work again; the redrive then unparks the record.
			log.InfoContext(ctx, "redriven job is done already; not run again", "writeStatus", "skipped")
			return nil
		case err == nil && r.Status != model.OutboxReceived && !job.Redrive:
			log.InfoContext(ctx, "job already settled; not run again", "writeStatus", "skipped", "outboxStatus", r.Status)
			return nil
		case err == nil && r.Status == model.OutboxReceived:
			rec = r
		case err != nil && !errors.Is(err, model.ErrNotFound):
			return fmt.Errorf("run %s: %w", job.CorrelationID, err)
		}
	}
	perr := w.Process(ctx, job)
	if rec == nil {
		return w.Classify(ctx, job, perr)
	}
	if perr != nil && ctx.Err() != nil {
		log.WarnContext(ctx, "job interrupted; it stays received for the sweeper", "writeStatus", "interrupted", "error", perr)
		return fmt.Errorf("run %s: interrupted: %w", job.CorrelationID, ctx.Err())
	}
	// Record the outcome even if ctx ends now: the work is done.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	return w.settle(sctx, log, job, rec, perr)
}

// settle records the outcome of a processed job in its outbox item.
func (w *Worker) settle(ctx context.Context, log *slog.Logger, job Job, rec *model.IdempotencyRecord, perr error) error {
	now := w.Now()
	key := job.IdempotencyKey
	var (
		err     error
		outcome string
		de      *DeferError
	)
	switch {
	case perr == nil:
		outcome, err = "done", w.store.SettleOutboxItem(ctx, key, model.OutboxDone, "", now)
		if uerr := w.unparkDone(ctx, job, rec); uerr != nil {
			// The outcome is recorded; a redrive of the stale record finds
			// the job done and does not run it again.
			log.WarnContext(ctx, "parked record of a done job not removed", "error", uerr)
		}
	case errors.As(perr, &de):
		outcome = "deferred"
		log.InfoContext(ctx, "job deferred", "writeStatus", "deferred", "notBefore", de.Until.UTC().Format(time.RFC3339), "reason", de.Reason)
		err = w.store.DeferOutboxItem(ctx, key, de.Until, de.Reason, false, now)
	case errors.Is(perr, model.ErrInvalid):
		outcome = "parked"
		log.ErrorContext(ctx, "job parked as poison", "writeStatus", "rejected", "error", perr)
		w.audit(ctx, log, model.AthletePK(job.Event.OwnerID), "", AuditEventRejected, job,
			map[string]string{"reason": perr.Error()})
		err = w.park(ctx, job, perr.Error(), now)
	case rec.Failures+1 >= max(w.MaxFailures, 1):
		outcome = "parked"
		reason := fmt.Sprintf("gave up after %d failures: %v", rec.Failures+1, perr)
		log.ErrorContext(ctx, "job parked after bounded retries", "writeStatus", "parked", "error", perr)
		err = w.park(ctx, job, reason, now)
	default:
		outcome = "retry"
		until := now.Add(model.Backoff(rec.Failures+1, max(w.RetryBase, time.Millisecond), retryMax))
		log.WarnContext(ctx, "job failed; retried later", "writeStatus", "retry", "failures", rec.Failures+1,
			"notBefore", until.Format(time.RFC3339), "error", perr)
		err = w.store.DeferOutboxItem(ctx, key, until, perr.Error(), true, now)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, model.ErrConflict), errors.Is(err, model.ErrNotFound):
		log.InfoContext(ctx, "outbox item settled elsewhere meanwhile", "outcome", outcome, "error", err)
		return nil
	}
	return fmt.Errorf("run %s: record %s: %w", job.CorrelationID, outcome, err)
}

// unparkDone removes the PARKED#WORKER record of a job that is done: one
// parked at shutdown (or by a failed hand-off) and completed later by the
// sweeper would otherwise be run again by `make redrive`. Only a job done on
// a later dispatch than its first can have been parked (0: unknown, a
// redrive or an old payload), so the common first-dispatch job costs no
// extra write. Should the removal fail, a redrive of the record still finds
// the job done and does not run it (Run).
func (w *Worker) unparkDone(ctx context.Context, job Job, rec *model.IdempotencyRecord) error {
	if rec.Dispatches == 1 {
		return nil
	}
	if err := w.store.RemoveParked(ctx, model.ParkSourceWorker, job.IdempotencyKey); err != nil {
		return fmt.Errorf("remove the parked record of done job %s: %w", job.IdempotencyKey, err)
	}
	return nil
}

// park sets the job aside for an operator: a PARKED#WORKER record (what
// `make redrive` reads; its payload is the job marked Redrive) and the
// outbox item settled as parked with the reason.
func (w *Worker) park(ctx context.Context, job Job, reason string, now time.Time) error {
	job.Redrive = true
	payload, err := json.Marshal(job)
	if err != nil {
		return fmt.Errorf("park %s: encode: %w", job.CorrelationID, err)
	}
	r := &model.ParkedRecord{Source: model.ParkSourceWorker, RecordID: job.IdempotencyKey, Reason: reason,
		Payload: string(payload), CorrelationID: job.CorrelationID, ParkedAtUtc: now.UTC()}
	r.UserID, r.AthleteID = w.parkedOwner(ctx, job)
	if err := w.store.Park(ctx, r); err != nil {
		return fmt.Errorf("park %s: %w", job.CorrelationID, err)
	}
	return w.store.SettleOutboxItem(ctx, job.IdempotencyKey, model.OutboxParked, reason, now)
}

// parkedOwner names the user and athlete a parked job belongs to, so an
// account deletion finds its record: a sync job carries both; an event
// carries the athlete, whose user is resolved when it is linked (best
// effort: an unresolved record keeps only the athlete).
func (w *Worker) parkedOwner(ctx context.Context, job Job) (string, int64) {
	if job.Sync != nil {
		return job.Sync.UserID, job.Sync.AthleteID
	}
	userID, err := w.store.ResolveAthlete(ctx, job.Event.OwnerID)
	if err != nil {
		return "", job.Event.OwnerID
	}
	return userID, job.Event.OwnerID
}

// Classify decides what a Process error means for the caller: nil for
// success and for poison jobs (errors matching model.ErrInvalid, logged and
// audited here), the error itself for everything else, which is worth
// retrying.
func (w *Worker) Classify(ctx context.Context, job Job, err error) error {
	if err == nil {
		return nil
	}
	log := w.jobLog(job)
	if !errors.Is(err, model.ErrInvalid) {
		log.WarnContext(ctx, "job failed, retryable", "writeStatus", "retry", "error", err)
		return err
	}
	log.ErrorContext(ctx, "job dropped as poison", "writeStatus", "rejected", "error", err)
	w.audit(ctx, log, model.AthletePK(job.Event.OwnerID), "", AuditEventRejected, job,
		map[string]string{"reason": err.Error()})
	return nil
}

// Process handles one job: resolve the athlete, then apply a
// deauthorization or fetch the activity and write its workout (a delete
// event too: Strava's answer confirms it, see fetchNew). It returns
// nil when the job is done (including events that are deliberately dropped:
// unlinked athletes, revoked tokens), an error matching model.ErrRetryable
// for transient failures (429, 5xx, rate budget nearly spent, DynamoDB), and
// model.ErrInvalid for data that can never be processed.
func (w *Worker) Process(ctx context.Context, job Job) error {
	if job.Sync != nil {
		return w.processSync(ctx, job)
	}
	ev := job.Event
	log := w.jobLog(job)
	fetches := ev.ObjectType == ObjectActivity
	if e, ok := w.athletes.get(ev.OwnerID, w.Now()); ok && fetches {
		err := w.fetchAndWrite(ctx, log.With("userId", e.userID), job, e.userID, &e)
		if !errors.Is(err, errStaleCache) {
			return err
		}
		w.athletes.drop(ev.OwnerID)
		log.InfoContext(ctx, "cached athlete mapping or token refused; resolving again", "cachedUserId", e.userID)
	}
	userID, err := w.store.ResolveAthlete(ctx, ev.OwnerID)
	if errors.Is(err, model.ErrNotFound) {
		log.InfoContext(ctx, "athlete not linked; event dropped", "writeStatus", "skipped")
		w.audit(ctx, log, model.AthletePK(ev.OwnerID), "", AuditAthleteNotLinked, job, nil)
		return nil
	}
	if err != nil {
		return fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	log = log.With("userId", userID)
	switch {
	case ev.IsDeauthorization():
		w.athletes.drop(ev.OwnerID)
		return w.deauthorize(ctx, log, job, userID)
	case ev.ObjectType == ObjectAthlete:
		log.InfoContext(ctx, "athlete update ignored", "writeStatus", "skipped")
		return nil
	}
	return w.fetchAndWrite(ctx, log, job, userID, nil)
}

// fetchAndWrite fetches the activity and writes its workout for userID
// (create, update and delete events alike: a webhook is unsigned, so a
// delete is only a reason to ask Strava). cached is the athlete cache's
// entry userID came from (nil: from the table); with one, any sign that it
// is stale returns errStaleCache before anything is written.
func (w *Worker) fetchAndWrite(ctx context.Context, log *slog.Logger, job Job, userID string, cached *athleteEntry) error {
	ev := job.Event
	// Coalesce: a fetch that started after this event was received has
	// already seen the change it reports (a tombstone's fetch too: it is
	// the 404 that fetch got), so it needs no other Strava read. A stored
	// tombstone alone does not stop a fetch: the activity may have been
	// made public again. A create event skips the check (one GetItem less
	// on the common path: its activity is new, and the writes are ordered
	// anyway) unless the athlete's creates crowd this window
	// (createsBeforeCheck).
	if ev.AspectType == AspectCreate && !job.Redrive &&
		!w.athletes.crowded(ev.OwnerID, w.Now().UTC().Truncate(w.rateWindow())) {
		return w.fetchNew(ctx, log, job, userID, cached)
	}
	switch stored, err := w.store.Workout(ctx, userID, ev.ObjectID); {
	case err == nil && !job.ReceivedAtUtc.IsZero() && stored.FetchStarted().After(job.ReceivedAtUtc):
		log.InfoContext(ctx, "workout already fetched after this event; no fetch", "writeStatus", "coalesced",
			"fetchStartedAtUtc", stored.FetchStarted().Format(time.RFC3339Nano))
		return nil
	case err != nil && !errors.Is(err, model.ErrNotFound):
		return fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	return w.fetchNew(ctx, log, job, userID, cached)
}

// fetchNew is fetchAndWrite after the coalescing check.
func (w *Worker) fetchNew(ctx context.Context, log *slog.Logger, job Job, userID string, cached *athleteEntry) error {
	ev := job.Event
	if err := w.checkBudget(ctx); err != nil {
		log.WarnContext(ctx, "strava read budget nearly spent; deferring", "writeStatus", "deferred", "error", err)
		return fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	if err := w.takeAthleteRead(ctx, job); err != nil {
		return err
	}
	token, tokenUntil, err := w.accessToken(ctx, ev.OwnerID, userID, cached)
	switch {
	case cached != nil && (errors.Is(err, model.ErrUnauthorized) || errors.Is(err, model.ErrNotFound) || errors.Is(err, errStaleCache)):
		return errStaleCache
	case errors.Is(err, model.ErrUnauthorized):
		return w.needsReauth(ctx, log, job, userID, err)
	case errors.Is(err, model.ErrNotFound):
		log.InfoContext(ctx, "athlete has no strava connection; event dropped", "writeStatus", "skipped")
		w.audit(ctx, log, model.UserPK(userID), userID, AuditAthleteNotLinked, job, map[string]string{"reason": "no connection"})
		return nil
	case err != nil:
		return fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	fetchStarted := w.Now()
	act, rl, err := w.strava.GetActivity(ctx, token, ev.ObjectID)
	var apiErr *strava.APIError
	w.observeRate(ctx, log, rl, err)
	switch {
	case cached != nil && errors.Is(err, model.ErrUnauthorized):
		return errStaleCache
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusTooManyRequests:
		now := w.Now()
		until, why := nextReset(rateLimitState(rl, now, w.rateWindow()), now, 0, w.rateWindow())
		log.WarnContext(ctx, "strava refused with 429; deferring to the window reset", "writeStatus", "deferred", "error", err)
		return fmt.Errorf("process %s: %w", job.CorrelationID, &DeferError{Until: until, Reason: "strava 429: " + why})
	case errors.Is(err, model.ErrNotFound):
		return w.markHidden(ctx, log, job, userID, fetchStarted)
	case errors.Is(err, model.ErrUnauthorized):
		if merr := w.store.MarkNeedsReauth(ctx, userID, w.Now()); merr != nil && !errors.Is(merr, model.ErrNotFound) {
			return fmt.Errorf("process %s: %w", job.CorrelationID, merr)
		}
		return w.needsReauth(ctx, log, job, userID, err)
	case err != nil:
		return fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	if act.Athlete.ID != 0 && act.Athlete.ID != ev.OwnerID {
		return fmt.Errorf("process %s: activity %d belongs to athlete %d, not %d: %w",
			job.CorrelationID, act.ID, act.Athlete.ID, ev.OwnerID, model.ErrInvalid)
	}
	wo, err := MapActivity(act, userID, ev.OwnerID, job.CorrelationID, w.Now())
	if err != nil {
		return fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	wo.FetchStartedAtNs = fetchStarted.UnixNano()
	err = w.store.UpsertWorkout(ctx, wo)
	if errors.Is(err, model.ErrConflict) {
		// Not an error: the stored item holds an answer (or a 404) whose
		// fetch started later than ours (newest answer wins).
		log.InfoContext(ctx, "older answer dropped: workout fetched later", "writeStatus", "stale",
			"fetchStartedAtUtc", fetchStarted.Format(time.RFC3339Nano), "error", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	w.remember(ev.OwnerID, userID, token, tokenUntil, cached)
	kind := AuditActivityUpdate
	details := map[string]string{"activityId": strconv.FormatInt(ev.ObjectID, 10), "sportType": wo.SportType}
	switch ev.AspectType {
	case AspectCreate:
		kind = AuditActivityCreate
	case AspectDelete:
		// Strava still serves the activity: the event was forged, or
		// overtaken by an undelete; what Strava says is stored.
		details["reason"] = reasonDeleteNotConfirmed
		log.WarnContext(ctx, "delete event not confirmed: strava serves the activity", "writeStatus", "written")
	}
	log.InfoContext(ctx, "workout written", "writeStatus", "written", "sportType", wo.SportType)
	w.audit(ctx, log, model.UserPK(userID), userID, kind, job, details)
	return nil
}

// reasonDeleteNotConfirmed is the audit reason of a delete event whose
// confirming fetch found the activity alive.
const reasonDeleteNotConfirmed = "delete event not confirmed: strava serves the activity"

// accessToken returns the user's access token for athleteID and until when
// the athlete cache may keep it (zero: not at all): the cached one while it
// is fresh, else the provider's. With a cached mapping, a token of another
// athlete's connection returns errStaleCache.
func (w *Worker) accessToken(ctx context.Context, athleteID int64, userID string, cached *athleteEntry) (string, time.Time, error) {
	if cached != nil && cached.token != "" {
		return cached.token, cached.tokenUntil, nil
	}
	src, ok := w.tokens.(TokenSource)
	if !ok {
		token, err := w.tokens.AccessToken(ctx, userID)
		return token, time.Time{}, err
	}
	t, err := src.Token(ctx, userID)
	switch {
	case err != nil:
		return "", time.Time{}, err
	case t.AthleteID != 0 && t.AthleteID != athleteID && cached != nil:
		return "", time.Time{}, errStaleCache
	case t.AthleteID != 0 && t.AthleteID != athleteID:
		// The table's mapping and the connection disagree: not cached; the
		// fetched activity's owner check still guards the write.
		return t.AccessToken, time.Time{}, nil
	}
	return t.AccessToken, t.ExpiresAt.Add(-tokenSkew), nil
}

// remember caches what a successful write confirmed: the athlete's user
// and, while fresh, its token (tokenUntil zero: the mapping is not cached
// either, nothing confirmed it).
func (w *Worker) remember(athleteID int64, userID, token string, tokenUntil time.Time, cached *athleteEntry) {
	if tokenUntil.IsZero() {
		return
	}
	e := athleteEntry{userID: userID, resolvedAt: w.Now(), token: token, tokenUntil: tokenUntil}
	if cached != nil {
		e.resolvedAt = cached.resolvedAt
	}
	w.athletes.put(athleteID, e)
}

// markHidden records Strava's 404 to the fetch started at fetchStarted: the
// activity is deleted or was made private (Strava does not say which), so
// the workout becomes a tombstone (model.WorkoutHiddenOrDeleted) that a
// later fetch or list showing the activity revives. The write is ordered by
// the fetch: a stored answer fetched later wins, and the job is done.
func (w *Worker) markHidden(ctx context.Context, log *slog.Logger, job Job, userID string, fetchStarted time.Time) error {
	ev := job.Event
	err := w.store.MarkWorkoutHidden(ctx, userID, ev.OwnerID, ev.ObjectID, job.CorrelationID, model.WorkoutHiddenOrDeleted,
		fetchStarted.UnixNano(), w.Now())
	if errors.Is(err, model.ErrConflict) {
		// Not an error, as for UpsertWorkout: an answer fetched later is
		// stored (or the user's guard removed the write).
		log.InfoContext(ctx, "older 404 dropped: workout fetched later", "writeStatus", "stale",
			"fetchStartedAtUtc", fetchStarted.Format(time.RFC3339Nano), "error", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	log.InfoContext(ctx, "workout marked hidden-or-deleted (strava answered 404)", "writeStatus", "deleted")
	w.audit(ctx, log, model.UserPK(userID), userID, AuditActivityDelete, job, map[string]string{
		"activityId": strconv.FormatInt(ev.ObjectID, 10), "reason": model.WorkoutHiddenOrDeleted,
	})
	return nil
}

// needsReauth drops the event: only the athlete can repair the connection,
// and retrying would only repeat the refusal.
func (w *Worker) needsReauth(ctx context.Context, log *slog.Logger, job Job, userID string, cause error) error {
	log.WarnContext(ctx, "strava refused the athlete's token; connection needs re-authorization",
		"writeStatus", "skipped", "error", cause)
	w.audit(ctx, log, model.UserPK(userID), userID, AuditNeedsReauth, job, map[string]string{"reason": cause.Error()})
	return nil
}

// takeAthleteRead counts one Strava read against the athlete's cap
// (AthleteReadsPerWindow); a DeferError to the next window when the cap is
// reached.
func (w *Worker) takeAthleteRead(ctx context.Context, job Job) error {
	if w.AthleteReadsPerWindow <= 0 {
		return nil
	}
	ev := job.Event
	now := w.Now()
	win := w.rateWindow()
	err := w.store.TakeAthleteRead(ctx, ev.OwnerID, now, win, w.AthleteReadsPerWindow)
	if errors.Is(err, model.ErrConflict) {
		return fmt.Errorf("process %s: %w", job.CorrelationID, &DeferError{
			Until:  now.UTC().Truncate(win).Add(win),
			Reason: fmt.Sprintf("athlete %d reached %d strava reads in this window", ev.OwnerID, w.AthleteReadsPerWindow),
		})
	}
	if err != nil {
		return fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	return nil
}

// observeRate records the rate-limit reading of a Strava answer (err is the
// call's error: a 429 always records).
func (w *Worker) observeRate(ctx context.Context, log *slog.Logger, rl strava.RateLimit, err error) {
	if !rl.Valid() {
		return
	}
	var apiErr *strava.APIError
	st := rateLimitState(rl, w.Now(), w.rateWindow())
	refused := errors.As(err, &apiErr) && apiErr.Status == http.StatusTooManyRequests
	if w.rate.observed(st, refused, w.BudgetReserve) {
		if rerr := w.store.RecordRateLimit(ctx, st); rerr != nil {
			log.WarnContext(ctx, "rate limit not recorded", "error", rerr)
		}
	}
}

// deauthorize handles a deauthorization event of userID's athlete (see the
// package doc, "Deauthorization"): an event older than the connection's
// grant is stale; otherwise Strava must confirm that the grant is revoked
// (confirmRevoked) before anything is removed; a confirmed revocation
// deletes the connection and records the revocation in the user guard (one
// transaction; the owner mapping stays), then schedules every Strava workout
// for deletion (expireWorkouts). Until that loop has finished the job fails
// (retryable) and its outbox item stays pending; a retry finds the
// connection gone and the guard holding this event's revocation, and
// resumes the loop.
func (w *Worker) deauthorize(ctx context.Context, log *slog.Logger, job Job, userID string) error {
	revokedAt := time.Unix(job.Event.EventTime, 0).UTC()
	conn, err := w.store.StravaConnectionGrant(ctx, userID)
	switch {
	case errors.Is(err, model.ErrNotFound):
		return w.resumeDeauthorization(ctx, log, job, userID, revokedAt)
	case err != nil:
		return fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	// event_time has second resolution: an event of the grant's own second
	// may be newer and goes on to Strava's confirmation.
	if granted := conn.GrantTime().UTC(); revokedAt.Before(granted.Truncate(time.Second)) {
		log.InfoContext(ctx, "deauthorization older than the connection's grant; dropped", "writeStatus", "stale",
			"eventTimeUtc", revokedAt.Format(time.RFC3339), "grantedAtUtc", granted.Format(time.RFC3339Nano))
		w.audit(ctx, log, model.UserPK(userID), userID, AuditDeauthStale, job, map[string]string{
			"eventTimeUtc": revokedAt.Format(time.RFC3339), "grantedAtUtc": granted.Format(time.RFC3339Nano)})
		return nil
	}
	how, err := w.confirmRevoked(ctx, log, job, userID)
	if err != nil {
		return err
	}
	if how == "" {
		log.WarnContext(ctx, "deauthorization not confirmed: strava still honours the grant; nothing removed", "writeStatus", "unconfirmed")
		w.audit(ctx, log, model.UserPK(userID), userID, AuditDeauthUnconfirmed, job, map[string]string{
			"eventTimeUtc": revokedAt.Format(time.RFC3339), "reason": "strava answered the grant's authenticated call"})
		return nil
	}
	now := w.Now()
	expires := now.Add(model.StravaDataRetentionDays * 24 * time.Hour)
	if err := w.store.RevokeStravaConnection(ctx, conn, revokedAt, expires, now); err != nil {
		if errors.Is(err, model.ErrConflict) {
			// A login (new grant) or another run moved the connection since
			// it was read: the retry judges the event again.
			return fmt.Errorf("process %s: connection changed during the deauthorization: %w: %w", job.CorrelationID, model.ErrRetryable, err)
		}
		return fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	log.InfoContext(ctx, "athlete deauthorization confirmed; tokens removed", "writeStatus", "deauthorized", "confirmedBy", how)
	w.audit(ctx, log, model.UserPK(userID), userID, AuditAthleteDeauthorize, job, map[string]string{
		"confirmedBy": how, "eventTimeUtc": revokedAt.Format(time.RFC3339), "expiresAtUtc": expires.Format(time.RFC3339),
	})
	return w.expireWorkouts(ctx, log, job, userID, revokedAt, expires)
}

// resumeDeauthorization handles a deauthorization whose user has no
// connection: when the guard holds this event's revocation, a previous run
// confirmed it and its expiry loop may be unfinished, so the loop runs
// again; otherwise there is nothing to deauthorize.
func (w *Worker) resumeDeauthorization(ctx context.Context, log *slog.Logger, job Job, userID string, revokedAt time.Time) error {
	g, err := w.store.UserGuard(ctx, userID)
	switch {
	case err == nil && g.Revoked() && g.StravaRevokedAtUtc.Equal(revokedAt):
		log.InfoContext(ctx, "deauthorization confirmed earlier; resuming its cleanup")
		return w.expireWorkouts(ctx, log, job, userID, revokedAt, time.Unix(g.StravaDataExpiresAt, 0).UTC())
	case err != nil && !errors.Is(err, model.ErrNotFound):
		return fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	log.InfoContext(ctx, "athlete has no strava connection; deauthorization dropped", "writeStatus", "skipped")
	w.audit(ctx, log, model.UserPK(userID), userID, AuditAthleteNotLinked, job, map[string]string{"reason": "no connection"})
	return nil
}

// confirmRevoked asks Strava whether the user's grant is revoked, through
// the shared budget and the athlete's read cap like a fetch: it returns how
// ("token refresh refused", "strava 401") when it is, "" when Strava still
// honours the grant, a DeferError for a spent budget, cap or 429, and a
// retryable error when Strava cannot say (5xx, transport, any other
// status): an unconfirmable deauthorization waits, it never destroys.
func (w *Worker) confirmRevoked(ctx context.Context, log *slog.Logger, job Job, userID string) (string, error) {
	if err := w.checkBudget(ctx); err != nil {
		log.WarnContext(ctx, "strava read budget nearly spent; deferring", "writeStatus", "deferred", "error", err)
		return "", fmt.Errorf("process %s: %w", job.CorrelationID, err)
	}
	if err := w.takeAthleteRead(ctx, job); err != nil {
		return "", err
	}
	token, err := w.tokens.AccessToken(ctx, userID)
	switch {
	case errors.Is(err, model.ErrUnauthorized):
		// Strava refused the refresh token now, or refused the grant
		// before (needsReauth is set only on Strava's refusal).
		return "token refresh refused", nil
	case errors.Is(err, model.ErrNotFound):
		return "", fmt.Errorf("process %s: connection removed during the deauthorization: %w: %w", job.CorrelationID, model.ErrRetryable, err)
	case err != nil:
		return "", fmt.Errorf("process %s: confirm deauthorization: %w", job.CorrelationID, err)
	}
	_, rl, err := w.strava.GetAthlete(ctx, token)
	w.observeRate(ctx, log, rl, err)
	var apiErr *strava.APIError
	switch {
	case err == nil:
		return "", nil
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusUnauthorized:
		return "strava 401", nil
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusTooManyRequests:
		now := w.Now()
		until, why := nextReset(rateLimitState(rl, now, w.rateWindow()), now, 0, w.rateWindow())
		log.WarnContext(ctx, "strava refused with 429; deferring to the window reset", "writeStatus", "deferred", "error", err)
		return "", fmt.Errorf("process %s: %w", job.CorrelationID, &DeferError{Until: until, Reason: "strava 429: " + why})
	}
	// Anything else cannot confirm: retried, then parked.
	return "", fmt.Errorf("process %s: confirm deauthorization: %w: %w", job.CorrelationID, model.ErrRetryable, err)
}

// expireWorkouts schedules every Strava workout of the user for deletion at
// expires (idempotent); an error keeps the job pending so a retry finishes
// it. Afterwards, when a reconnect cleared this revocation meanwhile, it
// removes the expiry again: the reconnect's own loop may have run before
// ours set it.
func (w *Worker) expireWorkouts(ctx context.Context, log *slog.Logger, job Job, userID string, revokedAt, expires time.Time) error {
	n, err := w.store.ExpireStravaWorkouts(ctx, userID, expires)
	if err != nil {
		return fmt.Errorf("process %s: schedule workouts for deletion (%d so far; resumed on retry): %w", job.CorrelationID, n, err)
	}
	g, err := w.store.UserGuard(ctx, userID)
	switch {
	case err == nil && g.Revoked():
		// Still revoked (by this event, or a newer one with its own loop).
		log.InfoContext(ctx, "workouts scheduled for deletion", "writeStatus", "deauthorized", "workoutsExpiring", n,
			"expiresAtUtc", expires.Format(time.RFC3339))
		return nil
	case err != nil && !errors.Is(err, model.ErrNotFound):
		return fmt.Errorf("process %s: re-read guard: %w", job.CorrelationID, err)
	}
	m, err := w.store.UnexpireStravaWorkouts(ctx, userID)
	if err != nil {
		return fmt.Errorf("process %s: cancel expiry after a reconnect: %w", job.CorrelationID, err)
	}
	log.InfoContext(ctx, "athlete reconnected during the cleanup; expiry cancelled", "writeStatus", "reconnected", "workoutsRestored", m,
		"revokedAtUtc", revokedAt.Format(time.RFC3339))
	return nil
}

// checkBudget returns an error matching model.ErrRetryable when the shared
// rate-limit state says the budget is nearly spent. It reads the shared
// item at most every rateStateTTL (cache.go).
func (w *Worker) checkBudget(ctx context.Context) error {
	now := w.Now()
	st, err := w.rate.current(ctx, w.store.RateLimitState, now)
	if err != nil {
		return fmt.Errorf("check strava budget: %w", err)
	}
	if st == nil {
		return nil
	}
	if why := budgetExhausted(st, now, w.BudgetReserve, w.rateWindow()); why != "" {
		until, _ := nextReset(st, now, w.BudgetReserve, w.rateWindow())
		return fmt.Errorf("strava budget: %w", &DeferError{Until: until, Reason: why})
	}
	return nil
}

func (w *Worker) jobLog(job Job) *slog.Logger {
	l := w.log.With("correlationId", job.CorrelationID, "eventType", job.Event.ObjectType+"."+job.Event.AspectType,
		"athleteId", job.Event.OwnerID)
	if job.Event.ObjectType == ObjectActivity {
		l = l.With("activityId", job.Event.ObjectID)
	}
	return l
}

func (w *Worker) audit(ctx context.Context, log *slog.Logger, subjectPK, userID, eventType string, job Job, details map[string]string) {
	if details == nil {
		details = map[string]string{}
	}
	details["athleteId"] = strconv.FormatInt(job.Event.OwnerID, 10)
	details["objectType"] = job.Event.ObjectType
	details["aspectType"] = job.Event.AspectType
	newEntry := model.NewAuditEntry
	if eventType == AuditActivityCreate || eventType == AuditActivityUpdate || eventType == AuditActivityDelete {
		newEntry = model.NewRoutineAuditEntry // one per event: no index keys
	}
	w.store.Audit(ctx, log, newEntry(subjectPK, userID, eventType, job.CorrelationID, model.NewID(), w.Now(), details))
}

// MapActivity projects a Strava activity onto the normalized workout: only
// the fields milestones need plus a minimal name, never the raw payload.
// sportType falls back to the legacy `type` when sport_type is empty.
// createdAtUtc is set to now; the store keeps an existing item's value. It
// returns a *model.ValidationError (model.ErrInvalid) for unusable data,
// including numbers beyond the physical bounds of a workout
// (model.MaxWorkoutDistanceMeters, …).
func MapActivity(a strava.Activity, userID string, athleteID int64, correlationID string, now time.Time) (*model.Workout, error) {
	var v model.ValidationError
	sport := a.SportType
	if sport == "" {
		sport = a.Type
	}
	if a.ID <= 0 {
		v.Add("id", "must be positive")
	}
	if sport == "" {
		v.Add("sport_type", "is empty")
	}
	if a.StartDate.IsZero() {
		v.Add("start_date", "is missing")
	}
	if a.Distance < 0 || math.IsNaN(a.Distance) || math.IsInf(a.Distance, 0) {
		v.Add("distance", "must be a finite non-negative number")
	} else if a.Distance > model.MaxWorkoutDistanceMeters {
		v.Add("distance", "%g m is beyond the physical bound of %g m", a.Distance, model.MaxWorkoutDistanceMeters)
	}
	if a.TotalElevationGain < 0 || math.IsNaN(a.TotalElevationGain) || math.IsInf(a.TotalElevationGain, 0) {
		v.Add("total_elevation_gain", "must be a finite non-negative number")
	} else if a.TotalElevationGain > model.MaxWorkoutElevationMeters {
		v.Add("total_elevation_gain", "%g m is beyond the physical bound of %g m", a.TotalElevationGain, model.MaxWorkoutElevationMeters)
	}
	maxSeconds := int64(model.MaxWorkoutDuration / time.Second)
	if a.MovingTime < 0 {
		v.Add("moving_time", "must not be negative")
	} else if a.MovingTime > maxSeconds {
		v.Add("moving_time", "%d s is beyond the physical bound of %d s", a.MovingTime, maxSeconds)
	}
	if a.ElapsedTime < 0 || a.ElapsedTime > maxSeconds {
		v.Add("elapsed_time", "%d s is outside 0..%d s", a.ElapsedTime, maxSeconds)
	}
	if userID == "" {
		v.Add("userId", "is required")
	}
	if err := v.Err(); err != nil {
		return nil, fmt.Errorf("map activity %d: %w", a.ID, err)
	}
	now = now.UTC()
	return &model.Workout{
		UserID: userID, AthleteID: athleteID, ActivityID: a.ID, Name: a.Name, SportType: sport,
		DistanceMeters: a.Distance, TotalElevationGain: a.TotalElevationGain, MovingTimeSeconds: a.MovingTime,
		StartDateUtc: a.StartDate.UTC(), CreatedAtUtc: now, UpdatedAtUtc: now, CorrelationID: correlationID,
	}, nil
}

// RateLimitStateFrom turns a header reading at now into the shared counter
// item (15-minute window and UTC day it belongs to).
func RateLimitStateFrom(rl strava.RateLimit, now time.Time) *model.RateLimitState {
	return rateLimitState(rl, now, model.AthleteReadsWindow)
}

func rateLimitState(rl strava.RateLimit, now time.Time, window time.Duration) *model.RateLimitState {
	now = now.UTC()
	return &model.RateLimitState{
		ShortLimit: rl.ShortLimit, ShortUsage: rl.ShortUsage, DailyLimit: rl.DailyLimit, DailyUsage: rl.DailyUsage,
		ReadShortLimit: rl.ReadShortLimit, ReadShortUsage: rl.ReadShortUsage,
		ReadDailyLimit: rl.ReadDailyLimit, ReadDailyUsage: rl.ReadDailyUsage,
		WindowStartedUtc: now.Truncate(window), DayUtc: now.Format(time.DateOnly), UpdatedAtUtc: now,
	}
}

// NextBudgetReset is when the budget Strava's reading st (taken at now) says
// is spent becomes available again, and which one it is: the next UTC
// midnight when a daily budget is used up, else the next 15-minute
// boundary (:00, :15, :30, :45 UTC), which is also the answer for a 429
// whose headers show nothing spent (Strava refused; our reading lags).
func NextBudgetReset(st *model.RateLimitState, now time.Time) (time.Time, string) {
	return nextReset(st, now, 0, model.AthleteReadsWindow)
}

func nextReset(st *model.RateLimitState, now time.Time, reserve float64, window time.Duration) (time.Time, string) {
	now = now.UTC()
	daily := *st
	daily.ShortUsage, daily.ReadShortUsage = 0, 0
	if why := budgetExhausted(&daily, now, reserve, window); why != "" {
		y, m, d := now.Date()
		return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC), why
	}
	why := budgetExhausted(st, now, reserve, window)
	if why == "" {
		why = "no budget reported spent"
	}
	return now.Truncate(window).Add(window), why
}

// BudgetExhausted says why no Strava read should be made now ("" when one
// may): a budget counts only within the 15-minute window or UTC day the
// state was recorded in, and is nearly spent when its usage reaches its
// limit minus reserve (a share, at least one request).
func BudgetExhausted(st *model.RateLimitState, now time.Time, reserve float64) string {
	return budgetExhausted(st, now, reserve, model.AthleteReadsWindow)
}

// reserveOf is how many reads of a budget of limit a reserve (a share of
// it) keeps free: at least one. The "spent" check, the sync share's cap
// and the rate cache's "near the limit" all count it this one way.
func reserveOf(limit int, reserve float64) int {
	return max(1, int(math.Ceil(float64(limit)*reserve)))
}

func budgetExhausted(st *model.RateLimitState, now time.Time, reserve float64, window time.Duration) string {
	now = now.UTC()
	sameWindow := st.WindowStartedUtc.Equal(now.Truncate(window))
	sameDay := st.DayUtc == now.Format(time.DateOnly)
	spent := func(usage, limit int) bool {
		if limit <= 0 {
			return false
		}
		return usage >= limit-reserveOf(limit, reserve)
	}
	switch {
	case sameWindow && spent(st.ReadShortUsage, st.ReadShortLimit):
		return fmt.Sprintf("read 15-minute usage %d of %d", st.ReadShortUsage, st.ReadShortLimit)
	case sameWindow && spent(st.ShortUsage, st.ShortLimit):
		return fmt.Sprintf("15-minute usage %d of %d", st.ShortUsage, st.ShortLimit)
	case sameDay && spent(st.ReadDailyUsage, st.ReadDailyLimit):
		return fmt.Sprintf("read daily usage %d of %d", st.ReadDailyUsage, st.ReadDailyLimit)
	case sameDay && spent(st.DailyUsage, st.DailyLimit):
		return fmt.Sprintf("daily usage %d of %d", st.DailyUsage, st.DailyLimit)
	}
	return ""
}
