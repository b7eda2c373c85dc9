package httpapi

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/auth"
)

// apiPrefix is where the REST API is served.
const apiPrefix = "/api/v1/"

// DefaultRequestTimeout is the deadline of a request that is not a long
// poll when Options.RequestTimeout is 0.
const DefaultRequestTimeout = 30 * time.Second

// longPollPaths are the operations that wait on purpose (for a workflow, a
// state, a worker's RPC answer), up to the engine's MaxWait; their
// deadline is Options.LongPollTimeout.
var longPollPaths = map[string]bool{
	apiPrefix + "workflow/getWithWait":            true,
	apiPrefix + "workflow/waitForStateCompletion": true,
	apiPrefix + "workflow/rpc":                    true,
}

// healthPath is answered whatever the Host: probes send an address.
const healthPath = "/info/healthcheck"

// hostGuard answers 421 Misdirected Request to a request whose Host header
// the policy does not allow: a page of another domain that DNS resolves to
// this server (DNS rebinding). The health check is answered to any host,
// for load balancers and probes that send the server's address.
func hostGuard(hosts *auth.HostPolicy) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != healthPath && !hosts.Allows(r.Host) {
				writeError(w, http.StatusMisdirectedRequest, fmt.Sprintf(
					"host %.100s is not served here: this server answers only to localhost, loopback addresses "+
						"and its allowed-hosts setting (see docs/security.md)", r.Host))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// pageHeaders sets the console's security headers (auth.SetPageHeaders)
// on every answer under its prefix, whichever layer writes it: the host
// guard's 421, the cross-site notice (which narrows the CSP further), the
// sign-in page and the redirects to it, a 403 page, the console's pages.
func pageHeaders(uiPrefix string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if p := r.URL.Path; strings.HasPrefix(p, uiPrefix) || p+"/" == uiPrefix {
				auth.SetPageHeaders(w, r)
			}
			next.ServeHTTP(w, r)
		})
	}
}

// crossSiteNotice is the page a browser gets when it opens a console page
// from a link on another site: the console answers only its own pages, so
// the person confirms by following the link, a same-origin navigation.
var crossSiteNotice = template.Must(template.New("cross-site").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Opened from another site · iwf-server</title></head>
<body style="font-family:system-ui,sans-serif;margin:2rem">
<h1>Opened from another site</h1>
<p>This page of the iwf-server console was requested by another site. The console answers only requests made from its own pages.</p>
{{if .}}<p><a href="{{.}}">Continue to {{.}}</a></p>{{end}}
</body></html>
`))

// sameOriginGuard refuses, with 403, requests to the API and to the
// console (uiPrefix, may be empty) that a browser sent from another site
// (auth.SameOrigin). SDKs, curl and other programs send neither
// Sec-Fetch-Site nor Origin, and are not affected. A console page opened
// from a link on another site gets a page with a same-origin link to it.
func sameOriginGuard(uiPrefix string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := r.URL.Path
			ui := uiPrefix != "" && (strings.HasPrefix(p, uiPrefix) || p+"/" == uiPrefix)
			if !ui && !strings.HasPrefix(p, apiPrefix) {
				next.ServeHTTP(w, r)
				return
			}
			err := auth.SameOrigin(r)
			if err == nil {
				next.ServeHTTP(w, r)
				return
			}
			if ui {
				link := ""
				if r.Method == http.MethodGet || r.Method == http.MethodHead {
					link = r.URL.RequestURI()
				}
				w.Header().Set("Content-Type", "text/html; charset=utf-8")
				w.Header().Set("Cache-Control", "no-store")
				w.Header().Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
				w.WriteHeader(http.StatusForbidden)
				_ = crossSiteNotice.Execute(w, link)
				return
			}
			writeError(w, http.StatusForbidden, err.Error()+
				"; a browser may call this API only from pages of this server (see docs/security.md)")
		})
	}
}

// deadline gives each request's context a deadline: longPoll for the
// operations that wait on purpose, regular for every other one. The stores
// bound their statements by it, so a request past it frees its database
// connection; net/http cancels the same context when the client goes away.
func deadline(regular, longPoll time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			d := regular
			if longPollPaths[r.URL.Path] {
				d = longPoll
			}
			infoFrom(r.Context()).timeout = d
			ctx, cancel := context.WithTimeout(r.Context(), d)
			defer cancel()
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

// statusClientClosed is the status logged for a request whose client went
// away before its answer (nginx's convention); the client never sees it.
const statusClientClosed = 499

// deadlineResponse says how to answer a request whose own context ended
// before the Service did (its deadline passed, or its client went away),
// when err is not an answer the client can act on; ok is false otherwise.
// It is the one place that maps a request's deadline to a status: 504
// Gateway Timeout, since the server (not the client, 408) was too slow, and
// the store may be fine (not 503).
func deadlineResponse(ctx context.Context, err error) (status int, detail string, ok bool) {
	switch code := engine.CodeOf(err); {
	case code != engine.CodeInternal && code != engine.CodeUnavailable && code != engine.CodeDeadlineExceeded:
		return 0, "", false
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		d := infoFrom(ctx).timeout
		return http.StatusGatewayTimeout, fmt.Sprintf(
			"the request did not finish within its deadline of %s (request-timeout); narrow the query or retry later", d), true
	case errors.Is(ctx.Err(), context.Canceled):
		return statusClientClosed, "the client closed the request", true
	}
	return 0, "", false
}
