package auth

import (
	"crypto/sha256"
	"html/template"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"
)

// loginPage is the console's sign-in form.
var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in · iwf-server</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font-family:system-ui,sans-serif;background:#f5f6f8;margin:0;display:flex;min-height:100vh;align-items:center;justify-content:center}
form{background:#fff;padding:2rem;border-radius:8px;box-shadow:0 1px 4px #0002;min-width:22rem}
h1{font-size:1.2rem;margin-top:0}label{display:block;margin:.8rem 0 .3rem}
input[type=password]{width:100%;box-sizing:border-box;padding:.5rem;font-family:monospace}
button{margin-top:1rem;padding:.5rem 1.2rem}.err{color:#b00020}
</style></head>
<body><form method="post" action="{{.Action}}">
<h1>iwf-server console</h1>
<p>This server requires an API token.</p>
{{if .Error}}<p class="err" role="alert">{{.Error}}</p>{{end}}
<label for="token">Token</label>
<input type="password" id="token" name="token" autocomplete="current-password" autofocus required>
<input type="hidden" name="next" value="{{.Next}}">
<button type="submit">Sign in</button>
</form></body></html>
`))

type loginData struct {
	Action, Next, Error string
}

// PageCSP is the Content-Security-Policy of the console's pages, the
// sign-in page included: their own scripts, styles and images only, no
// framing by any page, forms posted to this server only.
const PageCSP = "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data:; frame-ancestors 'none'; form-action 'self'"

// HSTS is the Strict-Transport-Security of the console's pages served
// over TLS: a browser that saw one uses HTTPS for the host for a year.
const HSTS = "max-age=31536000"

// SetPageHeaders sets the security headers that every console page sends,
// the sign-in page and its redirects included: no MIME sniffing, no
// framing (X-Frame-Options and the CSP's frame-ancestors), no Referer to
// other sites, PageCSP, and HSTS when the request came over TLS. The
// console, the sign-in page and the HTTP layer (for every answer under the
// console's prefix) call it, so that no console answer goes without them.
func SetPageHeaders(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Content-Security-Policy", PageCSP)
	if r.TLS != nil {
		h.Set("Strict-Transport-Security", HSTS)
	}
}

// serveLogin shows the sign-in form (GET) and checks a submitted token
// (POST): a valid one starts a session, whose id (never the token) the
// browser keeps in an HttpOnly, SameSite=Strict cookie scoped to the
// console, and the browser goes on to the page it asked for.
func (t *Tokens) serveLogin(w http.ResponseWriter, r *http.Request, opts Options) {
	action := opts.ConsolePrefix + LoginPath
	next := safeNext(r.FormValue("next"), opts.ConsolePrefix)
	SetPageHeaders(w, r)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		_ = loginPage.Execute(w, loginData{Action: action, Next: next})
	case http.MethodPost:
		if SameOrigin(r) != nil {
			w.WriteHeader(http.StatusForbidden)
			_ = loginPage.Execute(w, loginData{Action: action, Next: next, Error: "cross-site sign-in refused"})
			return
		}
		tok := strings.TrimSpace(r.PostFormValue("token"))
		if !t.Valid(tok) {
			w.WriteHeader(http.StatusUnauthorized)
			_ = loginPage.Execute(w, loginData{Action: action, Next: next, Error: "That token is not valid."})
			return
		}
		now := opts.now()
		expires := now.Add(opts.sessionTTL())
		id, err := t.sessions.start(sha256.Sum256([]byte(tok)), expires, now)
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			_ = loginPage.Execute(w, loginData{Action: action, Next: next, Error: "Cannot start a session; try again."})
			return
		}
		clearCookies(w, opts, legacyTokenCookie)
		http.SetCookie(w, &http.Cookie{
			Name: SessionCookie, Value: id, Path: opts.ConsolePrefix,
			HttpOnly: true, Secure: opts.SecureCookie, SameSite: http.SameSiteStrictMode,
			MaxAge: int(opts.sessionTTL() / time.Second),
		})
		http.Redirect(w, r, next, http.StatusSeeOther)
	default:
		w.Header().Set("Allow", "GET, POST")
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

// safeNext keeps a post-sign-in destination only when it is a path inside
// the console, so the sign-in page cannot redirect elsewhere. The path is
// cleaned first — its dot segments resolved as a browser resolves them,
// "%2e" for "." included — and then must stay under prefix: "/ui/../x"
// is "/x", and refused. The path with its %2F escapes decoded must stay
// under prefix too (servers that decode before they clean see it so).
func safeNext(next, prefix string) string {
	if next == "" || strings.HasPrefix(next, "//") || strings.Contains(next, `\`) {
		return prefix
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Opaque != "" || u.User != nil {
		return prefix
	}
	clean := cleanPath(u.EscapedPath())
	if !strings.HasPrefix(clean, prefix) || !strings.HasPrefix(cleanPath(u.Path), prefix) {
		return prefix
	}
	if u.RawQuery != "" {
		clean += "?" + u.RawQuery
	}
	return clean
}

// cleanPath resolves the dot segments of an absolute (escaped) URL path as
// a browser does, "%2e" counting as ".", and keeps a trailing slash. A
// path that is not absolute yields "".
func cleanPath(p string) string {
	if !strings.HasPrefix(p, "/") {
		return ""
	}
	segs := strings.Split(p, "/")
	for i, seg := range segs {
		switch strings.ReplaceAll(strings.ToLower(seg), "%2e", ".") {
		case ".":
			segs[i] = "."
		case "..":
			segs[i] = ".."
		}
	}
	last := segs[len(segs)-1]
	clean := path.Clean(strings.Join(segs, "/"))
	if (last == "" || last == "." || last == "..") && clean != "/" {
		clean += "/"
	}
	return clean
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }
