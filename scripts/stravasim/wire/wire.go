// Package wire is how the Strava simulator speaks HTTP as Strava does: JSON
// answers, Strava's error bodies ({"message", "errors": [{resource, field,
// code}]}) for the statuses it answers, bearer tokens, comma-separated
// scopes and random token text.
package wire

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
)

// Fault is one entry of a Strava error body.
type Fault struct{ Resource, Field, Code string }

// JSON answers v as JSON with status.
func JSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Error answers Strava's error body with status, message and one fault.
func Error(w http.ResponseWriter, status int, message string, f Fault) {
	JSON(w, status, map[string]any{
		"message": message,
		"errors":  []map[string]string{{"resource": f.Resource, "field": f.Field, "code": f.Code}},
	})
}

// Status answers status with the body Strava uses for it.
func Status(w http.ResponseWriter, status int) {
	switch status {
	case http.StatusUnauthorized:
		Error(w, status, "Authorization Error", Fault{Resource: "Athlete", Field: "access_token", Code: "invalid"})
	case http.StatusNotFound:
		Error(w, status, "Record Not Found", Fault{Resource: "Activity", Field: "id", Code: "invalid"})
	case http.StatusTooManyRequests:
		Error(w, status, "Rate Limit Exceeded", Fault{Resource: "Application", Field: "rate limit", Code: "exceeded"})
	case http.StatusBadRequest:
		Error(w, status, "Bad Request", Fault{Resource: "Application", Field: "request", Code: "invalid"})
	default:
		JSON(w, status, map[string]any{"message": "error", "errors": []any{}})
	}
}

// Bearer is the request's bearer token ("" when it has none).
func Bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if t, ok := strings.CutPrefix(h, "Bearer "); ok {
		return strings.TrimSpace(t)
	}
	return ""
}

// Token is 24 random hex digits: a token, a code, a secret.
func Token() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
