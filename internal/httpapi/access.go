package httpapi

import (
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/audit"
	"github.com/iwf-server/iwf-server/internal/auth"
)

// checkRoutes refuses a router with a route the access table does not
// list (auth.Rules): every route must say which role it needs. The
// console, mounted at uiPrefix, checks its own routes (console.New).
func checkRoutes(r chi.Routes, uiPrefix string) error {
	var missing []string
	err := chi.Walk(r, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if uiPrefix != "" && (strings.HasPrefix(route, uiPrefix) || route+"/" == uiPrefix) {
			return nil
		}
		if _, ok := auth.FindRule(false, method, route); !ok {
			missing = append(missing, method+" "+route)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("httpapi: routes without a role in the access table (internal/auth/access.go): %s", strings.Join(missing, ", "))
	}
	return nil
}

// forbiddenPage is the console's answer to an action or page outside the
// signed-in token's role.
var forbiddenPage = template.Must(template.New("forbidden").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Forbidden · iwf-server</title></head>
<body style="font-family:system-ui,sans-serif;margin:2rem">
<h1>Forbidden</h1>
<p id="forbidden">{{.}}</p>
<p><a href="javascript:history.back()">Back</a></p>
</body></html>
`))

// access applies the access table to each request: a request whose
// principal (found by the guard) lacks the permission its route needs is
// answered 403 — an ErrorResponse naming the role needed on the API, a
// page on the console. With enforce false (no guard: authentication is not
// set up) every request passes. Calls that change workflows (a rule with
// an Operation) are written to the audit log, when there is one, with
// their outcome; the actor goes to the engine's context, which records it
// in the run's history.
func access(policy *auth.Policy, enforce bool, log *audit.Log, uiPrefix string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rule := policy.Match(r)
			p, known := auth.PrincipalOf(r.Context())
			if !known {
				p = auth.Principal{Actor: auth.AnonymousActor, Role: auth.RoleAll}
			}
			console := rule.Console || (uiPrefix != "" && strings.HasPrefix(r.URL.Path, uiPrefix))
			allowed := rule.Need == 0 || !enforce || (known && p.Can(rule.Need))
			var entry *audit.Entry
			if log != nil && rule.Operation != "" && mutates(r, console) {
				entry = &audit.Entry{Actor: p.Actor, Role: string(p.Role), RemoteAddr: r.RemoteAddr,
					Source: "api", Operation: rule.Operation, RequestID: requestIDFrom(r.Context()),
					ClientRequestID: infoFrom(r.Context()).clientID}
				if console {
					entry.Source = "console"
				}
			}
			if !allowed {
				msg := auth.Forbidden(p, rule, r)
				if console {
					w.Header().Set("Content-Type", "text/html; charset=utf-8")
					w.Header().Set("Cache-Control", "no-store")
					w.WriteHeader(http.StatusForbidden)
					_ = forbiddenPage.Execute(w, msg)
				} else {
					writeError(w, http.StatusForbidden, msg)
				}
				if entry != nil {
					finish(log, entry, r, http.StatusForbidden, "forbidden", console)
				}
				return
			}
			if known {
				r = r.WithContext(engine.WithActor(r.Context(), p.Actor))
			}
			if entry == nil {
				next.ServeHTTP(w, r)
				return
			}
			ww, ok := w.(middleware.WrapResponseWriter)
			if !ok {
				ww = middleware.NewWrapResponseWriter(w, r.ProtoMajor)
			}
			defer func() {
				status := ww.Status()
				if status == 0 {
					status = http.StatusOK
				}
				if console {
					// A console batch start names the batch it started here,
					// a console limit action the limit it set or removed.
					entry.BatchID = ww.Header().Get(audit.BatchHeader)
					entry.Limit = ww.Header().Get(audit.LimitHeader)
				}
				finish(log, entry, r, status, infoFrom(r.Context()).errCode, console)
			}()
			next.ServeHTTP(ww, r)
		})
	}
}

// mutates reports whether a call of an audited route changes something: a
// console action shows a confirmation page until its form says
// confirm=yes, and only then acts.
func mutates(r *http.Request, console bool) bool {
	if !console {
		return true
	}
	f, err := url.ParseQuery(string(infoFrom(r.Context()).rawBody()))
	return err == nil && f.Get("confirm") == "yes"
}

// finish completes an audit entry from the request and its answer, and
// writes it.
func finish(log *audit.Log, e *audit.Entry, r *http.Request, status int, code string, console bool) {
	ri := infoFrom(r.Context())
	if console {
		f, _ := url.ParseQuery(string(ri.rawBody()))
		e.WorkflowID, e.RunID = strings.TrimSpace(f.Get("workflowId")), strings.TrimSpace(f.Get("runId"))
		if id := strings.TrimSpace(f.Get("batchId")); id != "" {
			e.BatchID = id
		}
		e.Scope = f.Get("scope")
	} else {
		v := ri.bodyNames()
		e.WorkflowID, e.RunID, e.BatchID = v.WorkflowID, v.RunID, v.BatchID
	}
	if ri.resultBatchID != "" {
		e.BatchID = ri.resultBatchID
	}
	if ri.resultLimit != "" {
		e.Limit = ri.resultLimit
	}
	if ri.scope != "" {
		e.Scope = ri.scope
	}
	if ri.resultRunID != "" {
		if e.Operation == "reset" {
			e.NewRunID = ri.resultRunID
		} else {
			e.RunID = ri.resultRunID
		}
	}
	e.Status = status
	switch {
	case code == "forbidden":
		e.Outcome = code
	case status < 400:
		e.Outcome = "ok"
	case code != "":
		e.Outcome = code
	default:
		e.Outcome = outcomeOfStatus(status)
	}
	e.Time = time.Now().UTC()
	log.Write(*e)
}

// outcomeOfStatus names the failure of a call that did not reach the
// engine (validation, size limit) or that the console answered.
func outcomeOfStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return string(engine.CodeInvalidArgument)
	case http.StatusNotFound:
		return string(engine.CodeWorkflowNotExists)
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusGatewayTimeout:
		return string(engine.CodeDeadlineExceeded)
	case http.StatusServiceUnavailable:
		return string(engine.CodeUnavailable)
	case http.StatusInternalServerError:
		return string(engine.CodeInternal)
	}
	return fmt.Sprintf("http_%d", status)
}
