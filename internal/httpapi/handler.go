package httpapi

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/audit"
	"github.com/iwf-server/iwf-server/internal/auth"
)

// DefaultMaxBodyBytes is the request body limit when Options.MaxBodyBytes is 0.
const DefaultMaxBodyBytes = 4 << 20

// HelloText is the plain-text answer of GET /, as in iWF.
const HelloText = "Hello World from iWF server!"

// encodedObjectLoadPath is in the spec but, as in iWF, not served without
// external storage.
const encodedObjectLoadPath = "/api/v1/workflow/encodedobject/load"

// Options configure NewHandler.
type Options struct {
	// Logger receives the access log, failed requests and panics. The zero
	// value logs nothing.
	Logger zerolog.Logger
	// MaxBodyBytes limits the size of request bodies; larger ones are
	// answered with 413. Zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// ExternalStorage serves POST /api/v1/workflow/encodedobject/load
	// (Service.LoadEncodedObject): the engine has an external payload
	// store. Without it the path answers 404, as in iWF.
	ExternalStorage bool
	// Spill, when set and its threshold is not 0, streams the big data
	// strings of the request bodies that store payloads to the external
	// store as they arrive, so that such a body, up to MaxBodyBytes, is
	// never held whole (see spill.go). The server sets it to the engine
	// when it has an external store.
	Spill Spiller
	// Metrics, when set, serves GET /metrics (Prometheus text format).
	Metrics func(w io.Writer) error
	// Guard, when set, wraps every route after the request id and access
	// log middleware, so that what it refuses (authentication) is logged.
	// It puts the request's auth.Principal in its context: the access
	// table (auth.Rules) is then enforced on every route, the console's
	// included. Without a Guard every request may do everything.
	Guard func(http.Handler) http.Handler
	// Audit, when set, receives one entry per call that changes workflows
	// (see package audit).
	Audit *audit.Log
	// Extra, when set, serves the paths under ExtraPrefix (the web
	// console) behind the same middleware.
	Extra       http.Handler
	ExtraPrefix string
	// Hosts, when set, is the set of host names served: a request whose
	// Host header it does not allow is answered 421 (see auth.HostPolicy).
	Hosts *auth.HostPolicy
	// RequestTimeout is the deadline of every request that is not a long
	// poll, console pages included; a request past it is answered 504.
	// Zero means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// LongPollTimeout is the deadline of getWithWait,
	// waitForStateCompletion and rpc, which wait up to the engine's
	// MaxWait on purpose. Zero means engine.DefaultMaxWait plus
	// RequestTimeout.
	LongPollTimeout time.Duration
}

// handler holds what the middleware and the error handlers share.
type handler struct {
	log    zerolog.Logger
	router routers.Router
}

// NewHandler returns the REST API of iwf-server served by svc: the
// generated routes of iwfapi behind request-id, access-log, recovery,
// body-limit and validation middleware.
func NewHandler(svc Service, opts Options) (http.Handler, error) {
	if svc == nil {
		return nil, errors.New("httpapi: a Service is required")
	}
	if opts.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("httpapi: MaxBodyBytes must not be negative, got %d", opts.MaxBodyBytes)
	}
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.RequestTimeout < 0 || opts.LongPollTimeout < 0 {
		return nil, errors.New("httpapi: RequestTimeout and LongPollTimeout must not be negative")
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.LongPollTimeout == 0 {
		opts.LongPollTimeout = engine.DefaultMaxWait + opts.RequestTimeout
	}
	spec, err := iwfapi.GetSwagger()
	if err != nil {
		return nil, fmt.Errorf("httpapi: load the embedded spec: %w", err)
	}
	// Route by path alone, whatever host the server is reached at.
	spec.Servers = nil
	router, err := legacy.NewRouter(spec)
	if err != nil {
		return nil, fmt.Errorf("httpapi: build the validation router: %w", err)
	}
	h := &handler{log: opts.Logger, router: router}

	server := NewServer(svc)
	server.log = func(err error) { h.log.Error().Err(err).Msg("health check failed") }

	r := chi.NewRouter()
	r.Use(requestID, accessLog(h.log), recoverer(h.log))
	uiPrefix := ""
	if opts.Extra != nil {
		uiPrefix = opts.ExtraPrefix
	}
	if uiPrefix != "" {
		r.Use(pageHeaders(uiPrefix))
	}
	if opts.Hosts != nil {
		r.Use(hostGuard(opts.Hosts))
	}
	r.Use(sameOriginGuard(uiPrefix))
	if opts.Guard != nil {
		r.Use(opts.Guard)
	}
	policy, err := auth.NewPolicy(uiPrefix)
	if err != nil {
		return nil, err
	}
	// A body that is streamed (spill) is read after the access check.
	spill := newSpillConfig(opts.Spill)
	r.Use(readBody(opts.MaxBodyBytes, spill), access(policy, opts.Guard != nil, opts.Audit, uiPrefix),
		h.spillBody(opts.MaxBodyBytes, spill), deadline(opts.RequestTimeout, opts.LongPollTimeout))
	if !opts.ExternalStorage {
		r.Use(unrouted)
	}
	r.Use(h.validate)
	if opts.Extra != nil && opts.ExtraPrefix != "" {
		r.Mount(strings.TrimSuffix(opts.ExtraPrefix, "/"), opts.Extra)
	}
	r.NotFound(notFound)
	r.MethodNotAllowed(methodNotAllowed)
	r.Get("/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte(HelloText))
	})
	if opts.Metrics != nil {
		r.Get("/metrics", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
			if err := opts.Metrics(w); err != nil {
				h.log.Error().Err(err).Msg("writing metrics")
			}
		})
	}
	strict := iwfapi.NewStrictHandlerWithOptions(server, []iwfapi.StrictMiddlewareFunc{releaseDecodedBody}, iwfapi.StrictHTTPServerOptions{
		RequestErrorHandlerFunc:  h.handleRequestError,
		ResponseErrorHandlerFunc: h.handleServiceError,
	})
	handler := iwfapi.HandlerWithOptions(strict, iwfapi.ChiServerOptions{
		BaseRouter:       r,
		ErrorHandlerFunc: h.handleRequestError,
	})
	if err := checkRoutes(r, uiPrefix); err != nil {
		return nil, err
	}
	return handler, nil
}

// handleRequestError answers requests that the generated code cannot
// decode. Validation normally catches them first.
func (h *handler) handleRequestError(w http.ResponseWriter, _ *http.Request, err error) {
	writeError(w, http.StatusBadRequest, "invalid request schema: "+err.Error())
}

// notFound answers unknown paths.
func notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, fmt.Sprintf("not found: %s %s", r.Method, r.URL.Path))
}

// methodNotAllowed answers known paths called with the wrong method.
func methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	if rctx := chi.RouteContext(r.Context()); rctx != nil && rctx.Routes != nil {
		var allowed []string
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			if rctx.Routes.Match(chi.NewRouteContext(), m, r.URL.Path) {
				allowed = append(allowed, m)
			}
		}
		if len(allowed) > 0 {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
		}
	}
	writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed for %s", r.Method, r.URL.Path))
}

// unrouted answers the paths that the spec lists but iWF does not serve.
func unrouted(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == encodedObjectLoadPath {
			writeError(w, http.StatusNotFound, encodedObjectLoadDetail)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// validationOptions make kin-openapi check requests without rewriting them
// (defaults are the engine's business) and keep values out of messages.
var validationOptions = &openapi3filter.Options{
	AuthenticationFunc:      openapi3filter.NoopAuthenticationFunc,
	SkipSettingDefaults:     true,
	SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.DisableSchemaErrorDetails()},
}

// validate checks requests for known operations against the embedded spec
// and answers 400 with a detail naming the problem. Requests for unknown
// paths or methods pass through to the router's 404 and 405.
func (h *handler) validate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route, params, err := h.router.FindRoute(r)
		if err != nil {
			next.ServeHTTP(w, r)
			return
		}
		if route.Operation != nil && route.Operation.RequestBody != nil && r.ContentLength > 0 && !isJSON(r.Header.Get("Content-Type")) {
			// iWF decodes every body as JSON whatever its Content-Type;
			// we do not: a text/plain or form POST is what a page of
			// another site can send without a CORS preflight. The SDKs
			// send application/json.
			writeError(w, http.StatusUnsupportedMediaType, unsupportedMediaDetail)
			return
		}
		input := &openapi3filter.RequestValidationInput{
			Request:    r,
			PathParams: params,
			Route:      route,
			Options:    validationOptions,
		}
		if err := openapi3filter.ValidateRequest(r.Context(), input); err != nil {
			writeError(w, http.StatusBadRequest, validationDetail(err))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// unsupportedMediaDetail explains the 415 of a body that is not declared
// JSON.
const unsupportedMediaDetail = "unsupported Content-Type: send the request body as JSON with Content-Type: application/json"

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// validationDetail says in one line what is wrong with a request. It keeps
// iWF's "invalid request schema" wording as a prefix.
func validationDetail(err error) string {
	const prefix = "invalid request schema: "
	var re *openapi3filter.RequestError
	if !errors.As(err, &re) {
		return prefix + err.Error()
	}
	var (
		pe *openapi3filter.ParseError
		se *openapi3.SchemaError
	)
	switch {
	case errors.Is(re.Err, openapi3filter.ErrInvalidRequired) && re.RequestBody != nil:
		return prefix + "the request body is required"
	case errors.As(re.Err, &pe):
		return prefix + "malformed JSON: " + pe.Error()
	case errors.As(re.Err, &se):
		if p := se.JSONPointer(); len(p) > 0 {
			return fmt.Sprintf("%s/%s: %s", prefix, strings.Join(p, "/"), schemaReason(se))
		}
		return prefix + schemaReason(se)
	}
	return prefix + re.Error()
}

// schemaReason is a SchemaError's message without its location prefix. A
// number outside its integer format names the format's own range (the
// validator reports int64's for values beyond it).
func schemaReason(se *openapi3.SchemaError) string {
	if se.Schema != nil && strings.Contains(se.Reason, "doesn't match the format") {
		switch se.Schema.Format {
		case "int32":
			return "must be an integer between -2147483648 and 2147483647 (int32)"
		case "int64":
			return "must be an integer between -9223372036854775808 and 9223372036854775807 (int64)"
		}
	}
	if se.Reason != "" && se.Origin == nil {
		return se.Reason
	}
	msg := se.Error()
	if i := strings.Index(msg, `": `); strings.HasPrefix(msg, `Error at "`) && i > 0 {
		msg = msg[i+3:]
	}
	return msg
}
