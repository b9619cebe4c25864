// Package apitest checks the daemon's exchanges against its OpenAPI
// document (docs/api/openapi.yaml) with github.com/getkin/kin-openapi:
// Load parses and validates the document, and Validating wraps a client
// transport so that every request and every answer (each NDJSON line of a
// streamed exec included) is checked against it. For tests only.
package apitest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	apidoc "github.com/corral-sandbox/corral/docs/api"
	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

var registerOnce sync.Once

// Load parses the document and validates it as OpenAPI.
func Load(t testing.TB) (*openapi3.T, routers.Router) {
	t.Helper()
	registerOnce.Do(func() {
		openapi3filter.RegisterBodyDecoder(api.MediaPatch, func(r io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
			b, err := io.ReadAll(r)
			return string(b), err
		})
	})
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(apidoc.YAML)
	if err != nil {
		t.Fatalf("loading openapi.yaml: %v", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("openapi.yaml is not a valid OpenAPI document: %v", err)
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatalf("routing openapi.yaml: %v", err)
	}
	return doc, router
}

// Operations returns the document's operations as "METHOD /path".
func Operations(doc *openapi3.T) []string {
	var out []string
	for p, item := range doc.Paths.Map() {
		for m := range item.Operations() {
			out = append(out, m+" "+p)
		}
	}
	return out
}

// Validating wraps next so that every exchange is checked against the
// document; a mismatch fails t. Checked counts the answers checked.
type Validating struct {
	t      testing.TB
	doc    *openapi3.T
	router routers.Router
	next   http.RoundTripper

	mu sync.Mutex
	// Seen counts answers per "METHOD /route status".
	Seen map[string]int
}

// Wrap returns a function for client.NewWith.
func Wrap(t testing.TB, v **Validating) func(http.RoundTripper) http.RoundTripper {
	doc, router := Load(t)
	return func(next http.RoundTripper) http.RoundTripper {
		*v = &Validating{t: t, doc: doc, router: router, next: next, Seen: map[string]int{}}
		return *v
	}
}

func (v *Validating) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body.Close()
		body = b
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	// The document's server is http://localhost.
	vreq := req.Clone(context.Background())
	vreq.URL.Host, vreq.Host = "localhost", "localhost"
	vreq.Body = io.NopCloser(bytes.NewReader(body))
	route, params, err := v.router.FindRoute(vreq)
	if err != nil {
		v.t.Errorf("openapi: %s %s: no documented route: %v", req.Method, req.URL.Path, err)
		return v.next.RoundTrip(req)
	}
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
	// Requests the daemon must refuse are sent on purpose by some tests;
	// only valid ones are checked to match the document.
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil && req.Header.Get("X-Test-Invalid") == "" {
		v.t.Errorf("openapi: request %s %s does not match the document: %v", req.Method, req.URL.Path, err)
	}
	resp, err := v.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	rbody, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(rbody))
	v.mu.Lock()
	v.Seen[fmt.Sprintf("%s %s %d", req.Method, route.Path, resp.StatusCode)]++
	v.mu.Unlock()
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Options: &openapi3filter.Options{MultiError: true, IncludeResponseStatus: true}}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), api.MediaNDJSON) {
		v.checkLines(route, resp.StatusCode, rbody)
		out.Options.ExcludeResponseBody = true
		out.Body = io.NopCloser(bytes.NewReader(nil))
	} else {
		out.Body = io.NopCloser(bytes.NewReader(rbody))
	}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		v.t.Errorf("openapi: answer %d to %s %s does not match the document: %v\n%s", resp.StatusCode, req.Method, req.URL.Path, err, clip(rbody))
	}
	return resp, nil
}

// checkLines validates each NDJSON line against the schema the document
// gives the stream.
func (v *Validating) checkLines(route *routers.Route, status int, body []byte) {
	r := route.Operation.Responses.Status(status)
	if r == nil || r.Value.Content.Get(api.MediaNDJSON) == nil {
		v.t.Errorf("openapi: %s %s: %d answered NDJSON, which the document does not give", route.Method, route.Path, status)
		return
	}
	schema := r.Value.Content.Get(api.MediaNDJSON).Schema.Value
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for n := 1; sc.Scan(); n++ {
		var x any
		if err := json.Unmarshal(sc.Bytes(), &x); err != nil {
			v.t.Errorf("openapi: NDJSON line %d is not JSON: %v", n, err)
			continue
		}
		if err := schema.VisitJSON(x); err != nil {
			v.t.Errorf("openapi: NDJSON line %d does not match ExecEvent: %v\n%s", n, err, clip(sc.Bytes()))
		}
	}
}

func clip(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "…"
	}
	return string(b)
}
