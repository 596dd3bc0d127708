package app

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/commitcollect/backend/handlers/ingest"
	"github.com/commitcollect/backend/handlers/ingest/intake"
	"github.com/commitcollect/backend/model/store/metering"
)

// Metered wraps the api's handler so that each request gets its own
// consumed-capacity meter (metering.StartMeter: a meter the server's base
// context carries receives the figures too) and one log line, "request
// served", with method, path (never the query: it can carry OAuth codes;
// never the webhook's secret segment, see LoggedPath),
// status, durationMs, the correlationId the webhook answered with, and the
// DynamoDB requests, rcu and wcu the request cost (by operation under ops).
// The api Lambda and the local stack serve NewAPI's mux through it.
func Metered(next http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ctx, m := metering.StartMeter(r.Context())
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r.WithContext(ctx))
		log.InfoContext(ctx, "request served", "method", r.Method, "path", LoggedPath(r.URL.Path), "status", sw.status,
			"durationMs", time.Since(start).Milliseconds(), "correlationId", w.Header().Get(ingest.HeaderCorrelationID),
			m.Snapshot().Attr())
	})
}

// LoggedPath is path as logs show it: a path under the webhook's
// (intake.WebhookPath) shows its last segment as {secret}, so neither the
// callback's secret segment nor a guess of it reaches a log.
func LoggedPath(path string) string {
	if rest, ok := strings.CutPrefix(path, intake.WebhookPath+"/"); ok && rest != "" {
		return intake.WebhookPath + "/{secret}"
	}
	return path
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

// WriteHeader implements http.ResponseWriter.
func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
