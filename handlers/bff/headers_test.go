package bff_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/commitcollect/backend/handlers/bff"
)

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
