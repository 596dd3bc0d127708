// Package respond is how every BFF route answers: JSON bodies, the one
// error shape {"error":{"code","message","fields"}}, the strict reading of
// our own JSON bodies, and the 5xx that never leaks an error's text. The
// BFF's use cases (milestones, the collection, the account) share it.
package respond

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"

	"github.com/commitcollect/backend/handlers/jsontext"
	"github.com/commitcollect/backend/model"
)

// Error codes of the JSON error body.
const (
	CodeUnauthorized         = "unauthorized"
	CodeNotFound             = "not_found"
	CodeInvalid              = "invalid"
	CodeUnsupportedMediaType = "unsupported_media_type"
	CodePayloadTooLarge      = "payload_too_large"
	CodeForbidden            = "forbidden"
	CodeUnavailable          = "unavailable"
	CodeInternal             = "internal"
	// CodeMilestoneLimit: the user has model.MaxMilestonesPerUser
	// milestones already (409).
	CodeMilestoneLimit = "milestone_limit"
)

// ErrorBody is the JSON shape of every error answer.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong; Fields names each bad input field.
type ErrorDetail struct {
	Code    string             `json:"code"`
	Message string             `json:"message"`
	Fields  []model.FieldError `json:"fields,omitempty"`
}

// JSON answers v as JSON with status, never cached.
func JSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Error answers the error body with status, code and msg.
func Error(w http.ResponseWriter, status int, code, msg string) {
	JSON(w, status, ErrorBody{Error: ErrorDetail{Code: code, Message: msg}})
}

// Validation answers 400 naming every bad field of ve.
func Validation(w http.ResponseWriter, ve *model.ValidationError) {
	JSON(w, http.StatusBadRequest, ErrorBody{Error: ErrorDetail{Code: CodeInvalid, Message: ve.Error(), Fields: ve.Fields}})
}

// Fail answers an unexpected error: 503 for a transient one, 500
// otherwise, never leaking the error text, and logs it with op.
func Fail(ctx context.Context, w http.ResponseWriter, log *slog.Logger, op string, err error) {
	if errors.Is(err, model.ErrRetryable) {
		log.WarnContext(ctx, op+" failed, retryable", "error", err)
		Error(w, http.StatusServiceUnavailable, CodeUnavailable, "temporarily unavailable, try again")
		return
	}
	log.ErrorContext(ctx, op+" failed", "error", err)
	Error(w, http.StatusInternalServerError, CodeInternal, "internal error")
}

// MaxBody bounds a request body.
const MaxBody = 64 << 10

// ErrBodyTooLarge is Decode's answer to a body over MaxBody (413).
var ErrBodyTooLarge = fmt.Errorf("body is larger than %d bytes", MaxBody)

// Decode reads one JSON object into v, strictly (jsontext.Strict: JSON v2
// semantics, a key given twice, a key in another case, an unknown key, data
// after the value and invalid UTF-8 refused). It returns ErrBodyTooLarge
// for a body over MaxBody, and otherwise a *model.ValidationError naming
// the problem. Callers act only on a nil error, so a refusal creates
// nothing.
func Decode(r *http.Request, w http.ResponseWriter, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return ErrBodyTooLarge
	}
	if err != nil {
		return &model.ValidationError{Fields: []model.FieldError{{Field: "body", Message: "could not be read"}}}
	}
	if ve := jsontext.Strict(body, v); ve != nil {
		return ve
	}
	return nil
}

// OpaqueID is the shape of ids model.NewID makes (128 random bits, hex): a
// path or cookie value of another shape is refused before any read.
var OpaqueID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// NotACursor is what a page route says of a cursor it did not give.
const NotACursor = "is not a cursor this API gave"

// ParsePage reads a paged route's ?limit= (1..max, def when absent) and
// ?cursor= (base64url of the store's cursor), naming the bad one.
func ParsePage(limitQ, cursorQ string, def, max int) (int, string, *model.ValidationError) {
	limit := def
	if limitQ != "" {
		n, err := strconv.Atoi(limitQ)
		if err != nil || n < 1 || n > max {
			return 0, "", FieldError("limit", fmt.Sprintf("must be a whole number from 1 to %d", max))
		}
		limit = n
	}
	if cursorQ == "" {
		return limit, "", nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(cursorQ)
	if err != nil || len(raw) == 0 || len(raw) > MaxCursorBytes {
		return 0, "", FieldError("cursor", NotACursor)
	}
	return limit, string(raw), nil
}

// MaxCursorBytes bounds a decoded cursor: every cursor is a sort key,
// which DynamoDB holds to 1,024 bytes (a longer one failed the read, 500).
const MaxCursorBytes = 1024

// FieldError is a validation error naming one field.
func FieldError(field, msg string) *model.ValidationError {
	return &model.ValidationError{Fields: []model.FieldError{{Field: field, Message: msg}}}
}
