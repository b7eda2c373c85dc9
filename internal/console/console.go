// Package console is iwf-server's web console: server-rendered HTML pages
// (html/template, embedded with the CSS they use) that list workflow runs,
// show one run — its summary, pending work, a timeline and a diagram of
// its state executions built from its history, its attributes and raw
// history — and send it signals, stop, reset it or skip its timers; apply
// one of those to every run a search matches (a batch operation) and
// follow the batch's progress.
//
// It owns no state and no storage: every page reads the engine through
// Backend, which *engine.Engine satisfies, and every action is one engine
// call. It imports the engine and the generated API types, never the
// stores or the HTTP API package (archived runs come through Options.Archive,
// which package archive's Bucket satisfies), and shares the same-origin rule of
// package auth. Authentication is the caller's: mount the handler behind
// it, and give Options.SignOut to show a sign-out button. Actions are POST
// only and refuse cross-site requests (Sec-Fetch-Site, Origin and Referer
// checks plus a CSRF token). Every route is in the access table of package
// auth (New refuses one that is not); pages show only the actions the
// request's auth.Principal may take, and an action refuses the others.
package console

import (
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/auth"
)

// Backend is what the console needs from the engine; *engine.Engine
// satisfies it.
type Backend interface {
	SearchWorkflows(ctx context.Context, req iwfapi.WorkflowSearchRequest) (iwfapi.WorkflowSearchResponse, error)
	DescribeWorkflow(ctx context.Context, req iwfapi.WorkflowDescribeRequest) (iwfapi.WorkflowDescribeResponse, error)
	GetWorkflow(ctx context.Context, req iwfapi.WorkflowGetRequest) (iwfapi.WorkflowGetResponse, error)
	GetDataAttributes(ctx context.Context, req iwfapi.WorkflowGetDataObjectsRequest) (iwfapi.WorkflowGetDataObjectsResponse, error)
	// ScanHistory and InspectRun read what a run's page shows; their cost
	// grows with the length of the history only in the scan, which keeps
	// nothing but what the page shows.
	ScanHistory(ctx context.Context, workflowID, runID string, maxEvents int, fn func(*engine.HistoryEvent) error) (string, bool, error)
	InspectRun(ctx context.Context, workflowID, runID string, executionIDs []string, messages int) (*engine.RunInspection, error)
	// ScanHistoryOutline and HistoryEvents let the run page read the data
	// of the events it shows only.
	ScanHistoryOutline(ctx context.Context, workflowID, runID string, maxEvents int, od engine.OutlineData, fn func(*engine.HistoryEvent) error) (string, bool, error)
	HistoryEvents(ctx context.Context, runID string, ids []int64) ([]*engine.HistoryEvent, error)
	SignalWorkflow(ctx context.Context, req iwfapi.WorkflowSignalRequest) error
	StopWorkflow(ctx context.Context, req iwfapi.WorkflowStopRequest) error
	ResetWorkflow(ctx context.Context, req iwfapi.WorkflowResetRequest) (iwfapi.WorkflowResetResponse, error)
	SkipTimer(ctx context.Context, req iwfapi.WorkflowSkipTimerRequest) error
	// The incident controls: pause and resume a run, resume the workflow
	// type or worker host that holds it.
	PauseWorkflow(ctx context.Context, req engine.PauseRequest) error
	ResumeWorkflow(ctx context.Context, req engine.ResumeRequest) error
	DeletePause(ctx context.Context, req engine.ScopeResumeRequest) (engine.ScopeResumed, error)
	// The batch operations: the batch pages and the "apply to all
	// matching" action make the same calls as the API.
	StartBatch(ctx context.Context, req engine.BatchRequest) (engine.BatchStarted, error)
	DescribeBatch(ctx context.Context, req engine.BatchDescribeRequest) (engine.BatchDescription, error)
	ListBatches(ctx context.Context, req engine.BatchListRequest) (engine.BatchPage, error)
	CancelBatch(ctx context.Context, batchID string) (engine.BatchInfo, error)
	// The limits on worker calls and the states in use: the limits and
	// states pages make the same calls as the API.
	ListLimits(ctx context.Context) ([]engine.Limit, error)
	SetLimit(ctx context.Context, c engine.LimitChange) (engine.Limit, error)
	DeleteLimit(ctx context.Context, kind engine.LimitKind, target string) (engine.Limit, error)
	StateStats(ctx context.Context, req engine.StateStatsRequest) (engine.StateStatsAnswer, error)
}

var _ Backend = (*engine.Engine)(nil)

// DescribeFunc describes a run and its pending work, as
// Backend.DescribeWorkflow does.
type DescribeFunc func(ctx context.Context, req iwfapi.WorkflowDescribeRequest) (iwfapi.WorkflowDescribeResponse, error)

// Options configure New. The zero value of each field selects its default.
type Options struct {
	// Logger receives errors the console could not show a user (internal
	// errors are logged here and shown as a plain "internal error").
	Logger zerolog.Logger
	// Prefix is the path the console is mounted at, with both slashes
	// (default "/ui/"). The handler serves the full paths under it, so
	// mount it without stripping the prefix.
	Prefix string
	// Describe, when set, replaces Backend.DescribeWorkflow (for example to
	// describe runs of another server).
	Describe DescribeFunc
	// PageSize is the number of runs on a page of the list (default 25).
	PageSize int
	// RefreshInterval is how often pages reload while auto-refresh is on
	// (default 5 s).
	RefreshInterval time.Duration
	// CSRFKey signs the CSRF tokens of the action forms. Default: a random
	// key, so tokens do not survive a restart and servers behind one load
	// balancer need the same key.
	CSRFKey []byte
	// RunPageSize is the number of entries of each list of a run's page —
	// state executions, run events, history events, buffered messages —
	// newest first, with links to older ones (default 100).
	RunPageSize int
	// MaxHistoryEvents caps the history events the run page reads to
	// count executions and transitions (default 200,000); the page of a
	// longer history says that it shows the first ones only.
	MaxHistoryEvents int
	// Archive, when set, is where runs that retention deleted are read
	// back: a run page whose run the store does not have shows it from
	// the archive, read-only, and a list query WorkflowId = 'x' that finds
	// nothing links to x's archived runs.
	Archive Archive
	// Now is the clock for relative times (default time.Now).
	Now func() time.Time
	// SignOut, when set, ends the request's session (auth.Tokens.SignOut):
	// pages show a sign-out button that posts to <prefix>logout, which
	// calls it and goes to the sign-in page.
	SignOut func(w http.ResponseWriter, r *http.Request)
}

//go:embed templates/*.html static/*
var assets embed.FS

// console is the handler New returns.
type console struct {
	be       Backend
	opts     Options
	describe DescribeFunc
	pages    map[string]*template.Template
	mux      *http.ServeMux
	static   http.Handler
}

// New returns the console's handler, to be mounted at /ui/ (it serves paths
// under Prefix).
func New(eng Backend, opts Options) (http.Handler, error) {
	if eng == nil {
		return nil, errors.New("console: a backend is required")
	}
	if opts.Prefix == "" {
		opts.Prefix = "/ui/"
	}
	if !strings.HasPrefix(opts.Prefix, "/") || !strings.HasSuffix(opts.Prefix, "/") {
		return nil, fmt.Errorf("console: prefix %q must start and end with /", opts.Prefix)
	}
	if opts.PageSize <= 0 {
		opts.PageSize = 25
	}
	if opts.RefreshInterval <= 0 {
		opts.RefreshInterval = 5 * time.Second
	}
	if opts.RunPageSize <= 0 {
		opts.RunPageSize = 100
	}
	if opts.MaxHistoryEvents <= 0 {
		opts.MaxHistoryEvents = 200000
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if len(opts.CSRFKey) == 0 {
		opts.CSRFKey = make([]byte, 32)
		if _, err := rand.Read(opts.CSRFKey); err != nil {
			return nil, fmt.Errorf("console: csrf key: %w", err)
		}
	}
	c := &console{be: eng, opts: opts, describe: opts.Describe}
	if c.describe == nil {
		c.describe = eng.DescribeWorkflow
	}
	if err := c.parseTemplates(); err != nil {
		return nil, err
	}
	static, err := fs.Sub(assets, "static")
	if err != nil {
		return nil, err
	}
	c.static = http.StripPrefix(opts.Prefix+"static/", http.FileServerFS(static))
	mux := http.NewServeMux()
	// Every route is in the access table, which says the role it needs.
	handle := func(method, path string, h http.HandlerFunc) error {
		if _, ok := auth.FindRule(true, method, path); !ok {
			return fmt.Errorf("console: route %s %s has no role in the access table (internal/auth/access.go)", method, path)
		}
		pattern := opts.Prefix + path
		if method != "" {
			pattern = method + " " + pattern
		}
		mux.HandleFunc(pattern, h)
		return nil
	}
	routes := []struct {
		method, path string
		h            http.HandlerFunc
	}{
		{"GET", "{$}", c.list},
		{"GET", "workflows/{id...}", c.run},
		{"GET", "batches", c.batchList},
		{"GET", "batches/{id}", c.batchPage},
		{"POST", "actions/batch-start", c.batchStart},
		{"POST", "actions/batch-cancel", c.batchCancel},
		{"GET", "limits", c.limitsPage},
		{"POST", "actions/limit-set", c.limitSet},
		{"POST", "actions/limit-delete", c.limitDelete},
		{"GET", "stats", c.statsPage},
		{"GET", "static/", c.serveStatic},
		{"", "", func(w http.ResponseWriter, r *http.Request) { c.fail(w, r, http.StatusNotFound, "page not found") }},
	}
	for _, a := range actionNames {
		routes = append(routes, struct {
			method, path string
			h            http.HandlerFunc
		}{"POST", "actions/" + a, c.action})
	}
	if opts.SignOut != nil {
		routes = append(routes, struct {
			method, path string
			h            http.HandlerFunc
		}{"POST", "logout", c.signOut})
	}
	for _, rt := range routes {
		if err := handle(rt.method, rt.path, rt.h); err != nil {
			return nil, err
		}
	}
	c.mux = mux
	return c, nil
}

// actionNames are the console's actions, each served at
// <prefix>actions/<name>.
var actionNames = []string{"signal", "stop", "reset", "skip-timer", "pause", "resume", "resume-scope"}

// allowedActions says which actions the request's principal may take
// (all of them without authentication): the pages show only those.
func allowedActions(r *http.Request) map[string]bool {
	p, known := auth.PrincipalOf(r.Context())
	can := make(map[string]bool, len(actionNames)+1)
	for _, a := range actionNames {
		ok := !known || p.Can(auth.ConsoleNeed(http.MethodPost, "actions/"+a))
		can[a] = ok
		can["any"] = can["any"] || ok
	}
	// "batch": the batch pages and their actions, all of one role.
	can["batch"] = !known || p.Can(auth.ConsoleNeed(http.MethodPost, "actions/batch-start"))
	// "limits": the limits page and its actions, all of one role.
	can["limits"] = !known || p.Can(auth.ConsoleNeed(http.MethodPost, "actions/limit-set"))
	return can
}

// ServeHTTP implements http.Handler.
func (c *console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	auth.SetPageHeaders(w, r)
	c.mux.ServeHTTP(w, r)
}

func (c *console) serveStatic(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "public, max-age=300")
	c.static.ServeHTTP(w, r)
}

// parseTemplates parses each page with the shared layout.
func (c *console) parseTemplates() error {
	c.pages = map[string]*template.Template{}
	for _, page := range []string{"list", "run", "confirm", "error", "batch", "batches", "limits", "stats"} {
		t, err := template.New(page).Funcs(c.funcs()).ParseFS(assets, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return fmt.Errorf("console: template %s: %w", page, err)
		}
		c.pages[page] = t
	}
	return nil
}

// page is what every page's layout needs.
type page struct {
	Title   string
	Prefix  string
	CSRF    string
	Flash   string
	FlashOK bool
	Refresh int // seconds; 0 means no auto-refresh control
	SignOut bool
	Now     time.Time
	// Can says which actions (signal, stop, reset, skip-timer, pause,
	// resume, resume-scope; "any") the
	// signed-in principal may take, and "batch" whether it may see and
	// start batch operations; the pages hide the others.
	Can  map[string]bool
	Data any
}

// render writes a page with the layout.
func (c *console) render(w http.ResponseWriter, r *http.Request, status int, name, title string, refresh bool, data any) {
	p := page{Title: title, Prefix: c.opts.Prefix, CSRF: c.csrfToken(w, r), Now: c.opts.Now(), Data: data,
		SignOut: c.opts.SignOut != nil, Can: allowedActions(r)}
	p.Flash, p.FlashOK = c.takeFlash(w, r)
	if refresh {
		p.Refresh = max(1, int(c.opts.RefreshInterval.Round(time.Second)/time.Second))
	}
	var buf strings.Builder
	if err := c.pages[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		c.opts.Logger.Error().Err(err).Str("page", name).Msg("console: render")
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(buf.String()))
}

// errorPage is the data of the error page.
type errorPage struct {
	Status  int
	Message string
}

// fail renders a plain error page.
func (c *console) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c.render(w, r, status, "error", http.StatusText(status), false, errorPage{Status: status, Message: msg})
}

// failErr renders an engine error: the engine's message for errors a caller
// can act on, "internal error" (and a log entry) otherwise.
func (c *console) failErr(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := explain(err)
	if status == http.StatusInternalServerError {
		c.opts.Logger.Error().Err(err).Str("path", r.URL.Path).Msg("console: backend call failed")
	}
	c.fail(w, r, status, msg)
}

// explain maps an engine error to a status and a message for a person.
func explain(err error) (int, string) {
	var ee *engine.Error
	if errors.Is(err, context.DeadlineExceeded) {
		// As the API answers a request past its deadline (httpapi).
		return http.StatusGatewayTimeout, "the request did not finish within its deadline (request-timeout); narrow the query or try again"
	}
	if errors.Is(err, context.Canceled) {
		return http.StatusServiceUnavailable, "the request was cancelled"
	}
	if !errors.As(err, &ee) {
		return http.StatusInternalServerError, "internal error (see the server log)"
	}
	switch ee.Code {
	case engine.CodeDeadlineExceeded:
		return http.StatusGatewayTimeout, ee.Message
	case engine.CodeInvalidArgument, engine.CodeLocked, engine.CodeAlreadyStarted:
		return http.StatusBadRequest, ee.Message
	case engine.CodeWorkflowNotExists:
		return http.StatusNotFound, ee.Message
	case engine.CodeWorkerAPIError:
		return http.StatusBadGateway, ee.Message
	case engine.CodeUnimplemented:
		return http.StatusNotImplemented, ee.Message
	case engine.CodeLongPollTimeout:
		return http.StatusServiceUnavailable, ee.Message
	}
	return http.StatusInternalServerError, "internal error (see the server log)"
}

// signOut serves POST <prefix>logout: once the request is shown to come
// from a console page (checkSameOrigin), it ends the session and sends the
// browser to the sign-in page.
func (c *console) signOut(w http.ResponseWriter, r *http.Request) {
	if !c.readForm(w, r) {
		return
	}
	c.opts.SignOut(w, r)
	http.Redirect(w, r, c.opts.Prefix+auth.LoginPath, http.StatusSeeOther)
}
