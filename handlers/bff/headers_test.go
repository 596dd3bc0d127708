package bff_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
		h := bff.SecureHeaders(mux, public)
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

// TestRefusalPagesForbidFraming: the login's refusal page (a callback
// without its login state) is HTML whose own policy forbids framing, also where no
// middleware adds one. Protection: page() setting PageCSP.
func TestRefusalPagesForbidFraming(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	r := e.do(http.MethodGet, "/auth/strava/callback?error=access_denied&state=x", "", nil)
	if !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") || !strings.Contains(r.header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Fatalf("refusal page: %d %q CSP %q; want HTML that forbids framing", r.status, r.header.Get("Content-Type"), r.header.Get("Content-Security-Policy"))
	}
}

// TestNewRefusesMissingStores: every store the routes use is required at
// construction, the export's included, so no route panics on its first
// call. Protection: Stores.missing naming each.
func TestNewRefusesMissingStores(t *testing.T) {
	t.Parallel()
	_, err := bff.New(bff.Config{PublicURL: "http://127.0.0.1:1"}, bff.Deps{Stores: bff.Stores{}})
	if err == nil || !strings.Contains(err.Error(), "Exports") {
		t.Fatalf("New without an export store: %v; want a refusal naming Exports", err)
	}
}
