package openapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

var loaded struct {
	once   sync.Once
	doc    *openapi3.T
	router routers.Router
	err    error
}

// Load parses the embedded document with github.com/getkin/kin-openapi and
// validates it against the OpenAPI 3 specification (once per process).
func Load() (*openapi3.T, routers.Router, error) {
	loaded.once.Do(func() {
		doc, err := openapi3.NewLoader().LoadFromData(Doc())
		if err != nil {
			loaded.err = fmt.Errorf("load openapi.yaml: %w", err)
			return
		}
		if err := doc.Validate(context.Background()); err != nil {
			loaded.err = fmt.Errorf("openapi.yaml is not valid OpenAPI 3: %w", err)
			return
		}
		doc.Servers = nil // match any host: the api is reached by many names
		loaded.doc = doc
		loaded.router, loaded.err = gorillamux.NewRouter(doc)
	})
	return loaded.doc, loaded.router, loaded.err
}

// CheckResponse validates an answer of the api to req against the document:
// the route and status are documented, and the body (status, content type,
// schema) is what the document says. Headers beyond the content type are not
// checked.
func CheckResponse(req *http.Request, status int, header http.Header, body []byte) error {
	_, router, err := Load()
	if err != nil {
		return err
	}
	route, params, err := router.FindRoute(req)
	if err != nil {
		return fmt.Errorf("%s %s is not in openapi.yaml: %w", req.Method, req.URL.Path, err)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}},
		Status: status, Header: header, Body: io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(req.Context(), in); err != nil {
		return fmt.Errorf("%s %s answered %d against openapi.yaml: %w", req.Method, req.URL.Path, status, err)
	}
	return nil
}
