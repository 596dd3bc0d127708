package app

import (
	"net/http"
	"net/url"
	"strings"
)

// DefaultCSP is the policy of every other answer (JSON, text): nothing
// loads, nothing frames it.
const DefaultCSP = "default-src 'none'; frame-ancestors 'none'"

// HSTS is the Strict-Transport-Security of answers served over https: two
// years, subdomains included.
const HSTS = "max-age=63072000; includeSubDomains"

// SecureHeaders gives every answer of next what a browser needs to trust
// it, whatever route (webhook, BFF, page) or refusal wrote it:
// X-Content-Type-Options: nosniff, a Content-Security-Policy forbidding
// framing (DefaultCSP, which an HTML page replaces with bff.PageCSP), and HSTS
// when the api is reached over https (publicURL is https, as behind API
// Gateway, or the request came over TLS).
func SecureHeaders(next http.Handler, publicURL string) http.Handler {
	u, err := url.Parse(publicURL)
	https := err == nil && strings.EqualFold(u.Scheme, "https")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", DefaultCSP)
		if https || r.TLS != nil {
			h.Set("Strict-Transport-Security", HSTS)
		}
		next.ServeHTTP(w, r)
	})
}
