// Package openapi holds the OpenAPI 3 document of every route the api
// serves, and the check that the registered routes and the document agree.
package openapi

import (
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

//go:embed openapi.yaml
var openAPI []byte

// Doc returns the OpenAPI 3 document of every route the api serves.
func Doc() []byte { return slices.Clone(openAPI) }

// SpecRoute is one operation of the OpenAPI document as a mux pattern
// ("GET /v1/milestones/{milestoneId}"; a last path parameter named path is
// the "{path...}" wildcard) and the package that registers it (x-owner).
type SpecRoute struct {
	Pattern string
	Owner   string
}

var methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// SpecRoutes parses the embedded document. It returns an error when the
// document does not parse or an operation has no x-owner.
func SpecRoutes() ([]SpecRoute, error) {
	var doc struct {
		OpenAPI string                               `yaml:"openapi"`
		Paths   map[string]map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(openAPI, &doc); err != nil {
		return nil, fmt.Errorf("parse openapi.yaml: %w", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		return nil, fmt.Errorf("openapi.yaml: openapi %q is not 3.x", doc.OpenAPI)
	}
	var out []SpecRoute
	var errs []error
	for path, ops := range doc.Paths {
		muxPath := path
		if strings.HasSuffix(path, "/{path}") {
			muxPath = strings.TrimSuffix(path, "{path}") + "{path...}"
		}
		if path == "/" {
			muxPath = "/{$}"
		}
		for m, op := range ops {
			if !slices.Contains(methods, m) {
				continue
			}
			owner, _ := op["x-owner"].(string)
			if owner == "" {
				errs = append(errs, fmt.Errorf("openapi.yaml: %s %s has no x-owner", m, path))
			}
			out = append(out, SpecRoute{Pattern: strings.ToUpper(m) + " " + muxPath, Owner: owner})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pattern < out[j].Pattern })
	return out, errors.Join(errs...)
}

var wildcard = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)(\.\.\.)?\}|\{\$\}`)

// CheckRoutes compares the OpenAPI document with a mux: registered must list
// every pattern registered on mux (Routes() plus the other owners'), the
// document must list exactly those, and every one must resolve on mux to
// itself. With owners, only operations of those owners are compared. It
// returns every drift at once.
func CheckRoutes(mux *http.ServeMux, registered []string, owners ...string) error {
	spec, err := SpecRoutes()
	if err != nil {
		return err
	}
	documented := map[string]bool{}
	for _, r := range spec {
		if len(owners) == 0 || slices.Contains(owners, r.Owner) {
			documented[r.Pattern] = true
		}
	}
	var errs []error
	for _, p := range registered {
		if !documented[p] {
			errs = append(errs, fmt.Errorf("route %q is served but not in openapi.yaml", p))
		}
		method, path, _ := strings.Cut(p, " ")
		sample := wildcard.ReplaceAllStringFunc(path, func(w string) string {
			if w == "{$}" {
				return ""
			}
			return "x1"
		})
		req, err := http.NewRequest(method, "http://api.local"+sample, nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("route %q: %w", p, err))
			continue
		}
		if _, got := mux.Handler(req); got != p {
			errs = append(errs, fmt.Errorf("route %q: %s %s resolves to %q on the mux", p, method, sample, got))
		}
	}
	for p := range documented {
		if !slices.Contains(registered, p) {
			errs = append(errs, fmt.Errorf("openapi.yaml documents %q but it is not registered", p))
		}
	}
	return errors.Join(errs...)
}
