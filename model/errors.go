package model

import (
	"errors"
	"fmt"
	"strings"

	"github.com/commitcollect/backend/model/keys"
)

// The error vocabulary. Adapters translate their own failures into these so
// callers classify with errors.Is / errors.As and never inspect SDK types.
var (
	// ErrNotFound means the addressed item does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict means a condition failed: the item already exists, or its
	// version moved since it was read (optimistic concurrency).
	ErrConflict = errors.New("conflict")
	// ErrInvalid means input or a stored item is malformed.
	ErrInvalid = keys.ErrInvalid
	// ErrUnsupportedSchema means an item was written by newer code than this
	// one; reads fail closed rather than guess.
	ErrUnsupportedSchema = errors.New("unsupported schema version")
	// ErrUnauthorized means a caller's credentials (session, Strava token) are
	// missing, expired or revoked.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrRetryable marks a transient failure worth retrying later (throttling,
	// a rate-limit budget, a 5xx from a dependency).
	ErrRetryable = errors.New("retryable")
)

// SchemaVersionError reports an item whose schemaVersion is newer than this
// code supports. It matches ErrUnsupportedSchema with errors.Is.
type SchemaVersionError struct {
	EntityType EntityType
	Got        int
	Supported  int
}

// Error implements error.
func (e *SchemaVersionError) Error() string {
	return fmt.Sprintf("%s schemaVersion %d is newer than supported %d", e.EntityType, e.Got, e.Supported)
}

// Is lets errors.Is(err, ErrUnsupportedSchema) match.
func (e *SchemaVersionError) Is(target error) bool { return target == ErrUnsupportedSchema }

// FieldError names one bad field of an input.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// ValidationError lists every bad field of an input at once. It matches
// ErrInvalid with errors.Is.
type ValidationError struct {
	Fields []FieldError
}

// Error implements error.
func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Message
	}
	return "invalid: " + strings.Join(parts, "; ")
}

// Is lets errors.Is(err, ErrInvalid) match.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// Add records a bad field.
func (e *ValidationError) Add(field, format string, args ...any) {
	e.Fields = append(e.Fields, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// Err returns e when it holds at least one field, nil otherwise.
func (e *ValidationError) Err() error {
	if len(e.Fields) == 0 {
		return nil
	}
	return e
}

// ErrUserDeleted (matching ErrConflict): a write landed after the user's
// account was deleted, and what it wrote was removed again.
var ErrUserDeleted = fmt.Errorf("user deleted: %w", ErrConflict)

// ErrStravaRevoked (matching ErrConflict): a write of Strava data landed
// after the grant was revoked, and was removed again.
var ErrStravaRevoked = fmt.Errorf("strava grant revoked: %w", ErrConflict)

// ErrSkipWrite, returned by a read-modify-write decision (the sync state's
// update), leaves the stored item as it is; the update then returns the
// item read and no error.
var ErrSkipWrite = errors.New("skip write")

// ErrMilestoneLimit is returned (wrapped, matching ErrConflict) when a
// milestone is created past MaxMilestonesPerUser.
var ErrMilestoneLimit = fmt.Errorf("%d milestones per user at most: %w", MaxMilestonesPerUser, ErrConflict)
