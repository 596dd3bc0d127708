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
}

// Error implements error.
func (e *DeferError) Error() string {
	return fmt.Sprintf("deferred until %s: %s", e.Until.UTC().Format(time.RFC3339), e.Reason)
}

// Is lets errors.Is(err, model.ErrRetryable) match.
func (e *DeferError) Is(target error) bool { return target == model.ErrRetryable }
