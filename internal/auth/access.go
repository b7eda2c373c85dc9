package auth

// The access table: the one place that says which permission each route
// of the API and each page and action of the console needs, and which
// calls change something (and so are written to the audit log). The HTTP
// API refuses to build a router with a route the table does not list
// (httpapi.NewHandler), and so does the console (console.New): a route
// cannot be added without a role.

import (
	"context"
	"fmt"
	"net/http"
	"strings"
)

// Rule is one row of the access table.
type Rule struct {
	// Method is the HTTP method ("" for any).
	Method string
	// Path is the route's path: a full path for the API, a path relative
	// to the console's prefix for the console, in net/http ServeMux
	// syntax ("workflows/{id...}", "static/", "{$}").
	Path string
	// Console marks the console's routes.
	Console bool
	// Need is the permission the route needs; 0 for routes open to anyone.
	Need Permission
	// Operation, for a call that changes workflows, is its name in the
	// audit log; "" for a call that changes nothing.
	Operation string
}

// api is where the REST API lives, batchAPI its batch operations,
// limitAPI the limits on worker calls, pauseAPI the pauses of workflow
// types and worker hosts.
const (
	api      = "/api/v1/workflow/"
	batchAPI = "/api/v1/batch/"
	limitAPI = "/api/v1/limit/"
	pauseAPI = "/api/v1/pause/"
)

// Rules is the access table.
var Rules = []Rule{
	// Open: the hello text, the health check (load balancers), the
	// release and schema version (rolling upgrades), metrics (protected by
	// the guard under Options.ProtectMetrics).
	{Method: http.MethodGet, Path: "/"},
	{Method: http.MethodGet, Path: healthPath},
	{Method: http.MethodGet, Path: versionPath},
	{Method: http.MethodGet, Path: metricsPath},

	// reader
	{Method: http.MethodPost, Path: api + "get", Need: PermRead},
	{Method: http.MethodPost, Path: api + "search", Need: PermRead},
	{Method: http.MethodPost, Path: api + "describe", Need: PermRead},
	{Method: http.MethodPost, Path: api + "history", Need: PermRead},
	{Method: http.MethodPost, Path: api + "internal/dump", Need: PermRead},
	{Method: http.MethodPost, Path: api + "dataobjects/get", Need: PermRead},
	{Method: http.MethodPost, Path: api + "searchattributes/get", Need: PermRead},
	{Method: http.MethodPost, Path: api + "encodedobject/load", Need: PermRead},
	{Method: http.MethodPost, Path: api + "stats", Need: PermRead},

	// writer: what applications do.
	{Method: http.MethodPost, Path: api + "start", Need: PermWrite, Operation: "start"},
	{Method: http.MethodPost, Path: api + "signal", Need: PermWrite, Operation: "signal"},
	{Method: http.MethodPost, Path: api + "publishToInternalChannel", Need: PermWrite, Operation: "publishToInternalChannel"},
	{Method: http.MethodPost, Path: api + "rpc", Need: PermWrite, Operation: "rpc"},
	{Method: http.MethodPost, Path: api + "dataobjects/set", Need: PermWrite, Operation: "setDataObjects"},
	{Method: http.MethodPost, Path: api + "searchattributes/set", Need: PermWrite, Operation: "setSearchAttributes"},
	{Method: http.MethodPost, Path: api + "getWithWait", Need: PermWrite},
	{Method: http.MethodPost, Path: api + "waitForStateCompletion", Need: PermWrite},

	// operator: what people on call do.
	{Method: http.MethodPost, Path: api + "stop", Need: PermOperate, Operation: "stop"},
	{Method: http.MethodPost, Path: api + "reset", Need: PermOperate, Operation: "reset"},
	{Method: http.MethodPost, Path: api + "timer/skip", Need: PermOperate, Operation: "skipTimer"},
	{Method: http.MethodPost, Path: api + "config/update", Need: PermOperate, Operation: "updateConfig"},
	{Method: http.MethodPost, Path: api + "triggerContinueAsNew", Need: PermOperate, Operation: "triggerContinueAsNew"},
	// Incident controls: pause and resume a run, a workflow type or a
	// worker host. The list of paused scopes is for anyone who reads.
	{Method: http.MethodPost, Path: api + "pause", Need: PermOperate, Operation: "pause"},
	{Method: http.MethodPost, Path: api + "resume", Need: PermOperate, Operation: "resume"},
	{Method: http.MethodPost, Path: pauseAPI + "set", Need: PermOperate, Operation: "pause/set"},
	{Method: http.MethodPost, Path: pauseAPI + "delete", Need: PermOperate, Operation: "pause/delete"},
	{Method: http.MethodPost, Path: pauseAPI + "list", Need: PermRead},
	// Batch operations act on many runs: operator, also to read them. A
	// batch start needs, besides, what its operation needs on one run
	// (BatchNeed, checked once the body is decoded).
	{Method: http.MethodPost, Path: batchAPI + "start", Need: PermOperate, Operation: "batch/start"},
	{Method: http.MethodPost, Path: batchAPI + "cancel", Need: PermOperate, Operation: "batch/cancel"},
	{Method: http.MethodPost, Path: batchAPI + "describe", Need: PermOperate},
	{Method: http.MethodPost, Path: batchAPI + "list", Need: PermOperate},
	// The limits on worker calls protect the workers of every workflow:
	// operator, also to read them.
	{Method: http.MethodPost, Path: limitAPI + "list", Need: PermOperate},
	{Method: http.MethodPost, Path: limitAPI + "set", Need: PermOperate, Operation: "limit/set"},
	{Method: http.MethodPost, Path: limitAPI + "delete", Need: PermOperate, Operation: "limit/delete"},

	// The console: its sign-in page is open, its pages need reader, its
	// actions the role of the API call they make.
	{Console: true, Path: LoginPath},
	{Console: true, Method: http.MethodGet, Path: "{$}", Need: PermRead},
	{Console: true, Method: http.MethodGet, Path: "workflows/{id...}", Need: PermRead},
	{Console: true, Method: http.MethodGet, Path: "static/", Need: PermRead},
	{Console: true, Method: http.MethodPost, Path: "logout", Need: PermRead},
	{Console: true, Path: "", Need: PermRead}, // the console's "page not found"
	{Console: true, Method: http.MethodPost, Path: "actions/signal", Need: PermWrite, Operation: "signal"},
	{Console: true, Method: http.MethodPost, Path: "actions/stop", Need: PermOperate, Operation: "stop"},
	{Console: true, Method: http.MethodPost, Path: "actions/reset", Need: PermOperate, Operation: "reset"},
	{Console: true, Method: http.MethodPost, Path: "actions/skip-timer", Need: PermOperate, Operation: "skipTimer"},
	{Console: true, Method: http.MethodPost, Path: "actions/pause", Need: PermOperate, Operation: "pause"},
	{Console: true, Method: http.MethodPost, Path: "actions/resume", Need: PermOperate, Operation: "resume"},
	{Console: true, Method: http.MethodPost, Path: "actions/resume-scope", Need: PermOperate, Operation: "pause/delete"},
	// Batch operations, as on the API: operator, also to read them, and a
	// batch start what its operation needs (BatchNeed).
	{Console: true, Method: http.MethodGet, Path: "batches", Need: PermOperate},
	{Console: true, Method: http.MethodGet, Path: "batches/{id}", Need: PermOperate},
	{Console: true, Method: http.MethodPost, Path: "actions/batch-start", Need: PermOperate, Operation: "batch/start"},
	{Console: true, Method: http.MethodPost, Path: "actions/batch-cancel", Need: PermOperate, Operation: "batch/cancel"},
	// Limits, as on the API: operator, also to read them. The states page
	// reads, as workflow/stats.
	{Console: true, Method: http.MethodGet, Path: "limits", Need: PermOperate},
	{Console: true, Method: http.MethodPost, Path: "actions/limit-set", Need: PermOperate, Operation: "limit/set"},
	{Console: true, Method: http.MethodPost, Path: "actions/limit-delete", Need: PermOperate, Operation: "limit/delete"},
	{Console: true, Method: http.MethodGet, Path: "stats", Need: PermRead},
}

// batchOperationCalls names, for each batch operation, the API call that
// makes it on one run; "" for an operation that has none (a re-route is
// made by batch only: batch/start's permission is all it needs).
var batchOperationCalls = map[string]string{
	"TERMINATE": api + "stop", "CANCEL": api + "stop", "FAIL": api + "stop",
	"SIGNAL": api + "signal", "RESET": api + "reset", "SKIP_TIMER": api + "timer/skip",
	"PAUSE": api + "pause", "RESUME": api + "resume", "SET_WORKER_URL": "",
}

// BatchNeed returns the permission a batch start of operation needs: the
// one batch/start needs (operator) and the one of the call that makes the
// operation on one run, so that a batch never does what its caller could
// not do run by run — a SIGNAL batch needs the writer's permission to
// signal as well, which only the all role has with the operator's. An
// operation this table does not know needs every permission.
func BatchNeed(operation string) Permission {
	call, ok := batchOperationCalls[operation]
	if !ok {
		return PermRead | PermWrite | PermOperate
	}
	start, _ := FindRule(false, http.MethodPost, batchAPI+"start")
	if call == "" {
		return start.Need
	}
	direct, _ := FindRule(false, http.MethodPost, call)
	return start.Need | direct.Need
}

// ForbiddenError is a request the access table lets through whose body
// asks for more than the principal's role allows: a batch start whose
// operation needs more than batch/start (BatchNeed). It is answered 403.
type ForbiddenError struct{ Message string }

func (e *ForbiddenError) Error() string { return e.Message }

// AllowBatch returns a *ForbiddenError when the principal of ctx may not
// start a batch of operation (BatchNeed), nil when it may or when ctx has
// no principal (no guard: authentication is off). The API's batch/start
// and the console's batch action both ask it once the request is decoded.
func AllowBatch(ctx context.Context, operation string) error {
	p, ok := PrincipalOf(ctx)
	need := BatchNeed(operation)
	if !ok || p.Can(need) {
		return nil
	}
	msg := fmt.Sprintf("forbidden: a %s batch needs the %s role", operation, need)
	if call, ok := batchOperationCalls[operation]; ok && call != "" {
		direct, _ := FindRule(false, http.MethodPost, call)
		msg += fmt.Sprintf(" (batch/start needs the operator role, and POST %s, which makes it on one run, the %s role)", call, direct.Need)
	}
	return &ForbiddenError{Message: fmt.Sprintf("%s; %s has the %s role", msg, describeActor(p), p.Role)}
}

// FindRule returns the rule of a route as the router declares it: an API
// route's method and path, or a console route's method and path relative
// to the console's prefix.
func FindRule(console bool, method, path string) (Rule, bool) {
	for _, r := range Rules {
		if r.Console == console && r.Method == method && r.Path == path {
			return r, true
		}
	}
	return Rule{}, false
}

// ConsoleNeed returns the permission a console route needs; a route the
// table does not list needs every permission.
func ConsoleNeed(method, path string) Permission {
	if r, ok := FindRule(true, method, path); ok {
		return r.Need
	}
	return PermRead | PermWrite | PermOperate
}

// Policy matches requests to the rules of the access table.
type Policy struct {
	mux   *http.ServeMux
	rules map[string]Rule // by ServeMux pattern
}

// NewPolicy compiles the access table for a server whose console is at
// consolePrefix ("" for none).
func NewPolicy(consolePrefix string) (*Policy, error) {
	p := &Policy{mux: http.NewServeMux(), rules: map[string]Rule{}}
	nop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for _, r := range Rules {
		path := r.Path
		if r.Console {
			if consolePrefix == "" {
				continue
			}
			path = consolePrefix + path
		} else if path == "/" {
			path = "/{$}"
		}
		pattern := path
		if r.Method != "" {
			pattern = r.Method + " " + path
		}
		if _, dup := p.rules[pattern]; dup {
			return nil, fmt.Errorf("auth: the access table lists %s twice", pattern)
		}
		if err := register(p.mux, pattern, nop); err != nil {
			return nil, err
		}
		p.rules[pattern] = r
	}
	return p, nil
}

// register adds a pattern to a mux, turning its panic on a bad or
// conflicting pattern into an error.
func register(mux *http.ServeMux, pattern string, h http.Handler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("auth: access table pattern %q: %v", pattern, p)
		}
	}()
	mux.Handle(pattern, h)
	return nil
}

// Match returns the rule of a request. A request no rule matches is one
// that no route serves (every route is in the table): it needs PermRead,
// and gets its 404 or 405 from the router.
func (p *Policy) Match(r *http.Request) Rule {
	_, pattern := p.mux.Handler(r)
	if rule, ok := p.rules[pattern]; ok && pattern != "" {
		return rule
	}
	return Rule{Method: r.Method, Path: r.URL.Path, Need: PermRead}
}

// Forbidden is the message of a request its principal may not make: it
// names the role the route needs and the role the principal has.
func Forbidden(p Principal, rule Rule, r *http.Request) string {
	return fmt.Sprintf("forbidden: %s %s needs the %s role (or all); %s has the %s role",
		r.Method, r.URL.Path, rule.Need, describeActor(p), p.Role)
}

func describeActor(p Principal) string {
	switch {
	case p.Actor == BareTokenActor:
		return "this token"
	case strings.Contains(p.Actor, "="):
		return "client certificate " + p.Actor
	}
	return "token " + p.Actor
}
