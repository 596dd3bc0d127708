package ingest

import (
	"fmt"
	"time"

	"github.com/commitcollect/backend/model"
)

// DeferError says a job cannot run before Until and is not a failure:
// Strava's rate budget is spent until its window resets, or the athlete's
// read cap is reached for this window. Run keeps the job received with that
// not-before time; without an outbox item it matches model.ErrRetryable.
type DeferError struct {
	Until  time.Time
	Reason string
	// Cause, when set, is what made the job wait (errors.Is and As see it).
	Cause error
	// AthleteCap says the athlete's own read cap (per window or per day)
	// held the job back, not the application's budget (the
	// AthleteReadsHeldBack metric).
	AthleteCap bool
	// Gathered says a create waits to be gathered with the athlete's other
	// creates and served from list pages (a burst), not for a budget.
	Gathered bool
}

// Unwrap returns the cause of the wait, if any.
func (e *DeferError) Unwrap() error { return e.Cause }

// AppCredentialsWait is how long a job waits when Strava refused the
// application's own credentials (strava.ErrAppCredentials) before it asks
// again: the operator fixes the secret, the work resumes by itself.
const AppCredentialsWait = time.Minute

// DeferForAppCredentials is the deferral of a job whose token request
// Strava refused because of the application's credentials (err matches
// strava.ErrAppCredentials): no athlete is at fault and nothing is flagged,
// the job is not failed nor parked, it waits AppCredentialsWait and tries
// again. The runner counts it in the StravaAppCredentialsRejected metric.
func DeferForAppCredentials(err error, now time.Time) *DeferError {
	return &DeferError{Until: now.Add(AppCredentialsWait),
		Reason: "strava refused the application's client credentials (operator: check the client secret)", Cause: err}
}

// Error implements error.
func (e *DeferError) Error() string {
	return fmt.Sprintf("deferred until %s: %s", e.Until.UTC().Format(time.RFC3339), e.Reason)
}

// Is lets errors.Is(err, model.ErrRetryable) match.
func (e *DeferError) Is(target error) bool { return target == model.ErrRetryable }
