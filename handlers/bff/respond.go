package bff

import (
	"context"
	"encoding/json"
	"errors"
	"html/template"
	"log/slog"
	"net/http"

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

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, ErrorBody{Error: ErrorDetail{Code: code, Message: msg}})
}

func writeValidation(w http.ResponseWriter, ve *model.ValidationError) {
	writeJSON(w, http.StatusBadRequest, ErrorBody{Error: ErrorDetail{Code: CodeInvalid, Message: ve.Error(), Fields: ve.Fields}})
}

// fail answers an unexpected error: 503 for a transient one, 500 otherwise,
// never leaking the error text, and logs it.
func (h *Handler) fail(ctx context.Context, w http.ResponseWriter, log *slog.Logger, op string, err error) {
	if errors.Is(err, model.ErrRetryable) {
		log.WarnContext(ctx, op+" failed, retryable", "error", err)
		writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "temporarily unavailable, try again")
		return
	}
	log.ErrorContext(ctx, op+" failed", "error", err)
	writeError(w, http.StatusInternalServerError, CodeInternal, "internal error")
}

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}} · CommitCollect</title></head>
<body><main><h1>{{.Title}}</h1><p>{{.Message}}</p>{{if .Retry}}<p><a href="/auth/strava/login">Connect with Strava again</a></p>{{end}}</main></body></html>
`))

// page answers a browser route (login, callback) with a small HTML page.
func page(w http.ResponseWriter, status int, title, msg string, retry bool) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", PageCSP)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = pageTemplate.Execute(w, struct {
		Title, Message string
		Retry          bool
	}{title, msg, retry})
}
