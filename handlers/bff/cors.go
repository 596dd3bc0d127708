package bff

// CORS is off unless CC_CORS_ORIGINS lists the origin (credentials allowed;
// preflight on OPTIONS /v1/*).

import (
	"net/http"
	"strings"

	"github.com/commitcollect/backend/handlers/bff/respond"
)

// withCORS adds CORS response headers for an allowed origin. CORS is off
// (no headers at all) unless Config.CORSOrigins lists the request's origin.
func (h *Handler) withCORS(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(h.origins) > 0 {
			w.Header().Add("Vary", "Origin")
			if o := r.Header.Get("Origin"); h.origins[o] {
				w.Header().Set("Access-Control-Allow-Origin", o)
				w.Header().Set("Access-Control-Allow-Credentials", "true")
				// The export names its next page in Link: a script of an
				// allowed origin must be able to read it.
				w.Header().Set("Access-Control-Expose-Headers", "Link")
			}
		}
		next.ServeHTTP(w, r)
	})
}

// preflight answers CORS preflight requests for /v1/*: 204 with the allowed
// methods for a configured origin, 403 JSON otherwise (CORS off).
func (h *Handler) preflight(w http.ResponseWriter, r *http.Request) {
	if !h.origins[r.Header.Get("Origin")] || r.Header.Get("Access-Control-Request-Method") == "" {
		respond.Error(w, http.StatusForbidden, respond.CodeForbidden, "cross-origin requests from this origin are not allowed")
		return
	}
	w.Header().Set("Access-Control-Allow-Methods", strings.Join([]string{http.MethodGet, http.MethodPost, http.MethodDelete}, ", "))
	w.Header().Set("Access-Control-Allow-Headers", "Content-Type")
	w.Header().Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
}
