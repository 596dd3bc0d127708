package app_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/commitcollect/backend/handlers/app"
	"github.com/commitcollect/backend/handlers/bff"
)

// TestSecureHeadersOnEveryAnswer: whatever wrote the answer (JSON, an HTML
// page with its own policy, plain text, the mux's 404), it carries nosniff
// and a policy that forbids framing; HSTS only when the api is reached
// over https. Protections: each header of SecureHeaders, and PageCSP's
// frame-ancestors.
func TestSecureHeadersOnEveryAnswer(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	})
	mux.HandleFunc("GET /page", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", bff.PageCSP)
		_, _ = w.Write([]byte(`<p>hi</p>`))
	})
	mux.HandleFunc("GET /text", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", http.StatusTeapot) })
	for _, public := range []string{"https://api.commitcollect.test", "http://127.0.0.1:8080"} {
		h := app.SecureHeaders(mux, public)
		for _, path := range []string{"/json", "/page", "/text", "/missing"} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			got := rec.Header()
			if got.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("%s %s: X-Content-Type-Options %q, want nosniff", public, path, got.Get("X-Content-Type-Options"))
			}
			if !strings.Contains(got.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
				t.Errorf("%s %s: CSP %q forbids no framing", public, path, got.Get("Content-Security-Policy"))
			}
			https := strings.HasPrefix(public, "https:")
			if hsts := got.Get("Strict-Transport-Security"); (hsts != "") != https || (https && !strings.Contains(hsts, "max-age=")) {
				t.Errorf("%s %s: HSTS %q, want it exactly over https", public, path, hsts)
			}
		}
	}
}
