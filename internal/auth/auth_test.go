package auth_test

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/internal/auth"
)

const (
	tokA = "token-aaaaaaaaaaaaaaaa"
	tokB = "token-bbbbbbbbbbbbbbbb"
	tokC = "token-cccccccccccccccc"
)

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadAndReload(t *testing.T) {
	file := writeFile(t, "# operators\n"+tokA+"\n\n  # ci\n"+tokB+"  \n")
	toks, err := auth.Load(file, []string{tokC})
	if err != nil {
		t.Fatal(err)
	}
	if toks.Count() != 3 || !toks.Valid(tokA) || !toks.Valid(tokB) || !toks.Valid(tokC) {
		t.Fatalf("loaded %d tokens", toks.Count())
	}
	for _, bad := range []string{"", "token-aaaaaaaaaaaaaaa", tokA + "a", "# operators"} {
		if toks.Valid(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
	// Rotation: B is removed, D added; the change applies on Reload only.
	const tokD = "token-dddddddddddddddd"
	if err := os.WriteFile(file, []byte(tokA+"\n"+tokD+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if !toks.Valid(tokB) || toks.Valid(tokD) {
		t.Fatal("the set changed before Reload")
	}
	if err := toks.Reload(); err != nil {
		t.Fatal(err)
	}
	if toks.Valid(tokB) || !toks.Valid(tokD) || !toks.Valid(tokC) {
		t.Fatal("Reload did not replace the file's tokens")
	}
	// A broken file keeps the previous set in force, and the error does
	// not repeat the token.
	if err := os.WriteFile(file, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = toks.Reload()
	if err == nil || strings.Contains(err.Error(), "short") || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("reload of a short token: %v", err)
	}
	if !toks.Valid(tokD) {
		t.Fatal("a failed reload dropped the tokens in force")
	}
}

func TestLoadRejects(t *testing.T) {
	for name, tc := range map[string]struct {
		file   string
		inline []string
		want   string
	}{
		"nothing":        {"", nil, "no tokens"},
		"only comments":  {"# none\n\n", nil, "no tokens"},
		"short inline":   {"", []string{"abc"}, "IWF_AUTH_TOKENS entry 1: a token must be at least 16 bytes"},
		"space in token": {"token with spaces inside\n", nil, "line 1: want TOKEN or TOKEN NAME ROLE (whitespace-separated), found 4 fields (a token must not contain spaces)"},
	} {
		t.Run(name, func(t *testing.T) {
			file := ""
			if tc.file != "" {
				file = writeFile(t, tc.file)
			}
			_, err := auth.Load(file, tc.inline)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := auth.Load(filepath.Join(t.TempDir(), "missing"), nil); err == nil || !strings.Contains(err.Error(), "auth-token-file") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestMiddleware(t *testing.T) {
	toks, err := auth.Load("", []string{tokA})
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	for _, protect := range []bool{false, true} {
		h := toks.Middleware(auth.Options{ProtectMetrics: protect, ConsolePrefix: "/ui/"})(ok)
		for _, tc := range []struct {
			method, path, header string
			want                 int
		}{
			{"GET", "/", "", 200},
			{"GET", "/info/healthcheck", "", 200},
			{"HEAD", "/info/healthcheck", "", 200},
			{"POST", "/info/healthcheck", "", 405},
			{"DELETE", "/info/version", "", 405},
			{"POST", "/", "", 405},
			{"POST", "/metrics", "", map[bool]int{false: 405, true: 401}[protect]},
			{"GET", "/metrics", "", map[bool]int{false: 200, true: 401}[protect]},
			{"GET", "/metrics", "Bearer " + tokA, 200},
			{"POST", "/api/v1/workflow/start", "", 401},
			{"POST", "/api/v1/workflow/start", "Bearer " + tokB, 401},
			{"POST", "/api/v1/workflow/start", "Basic " + tokA, 401},
			{"POST", "/api/v1/workflow/start", "Bearer " + tokA, 200},
			{"POST", "/api/v1/workflow/start", "bearer " + tokA, 200},
			{"POST", "/anything/else", "", 401},
			{"GET", "/ui/", "", 303},
			{"GET", "/ui/", "Bearer " + tokA, 200},
			{"POST", "/ui/workflows/x/signal", "", 303},
			{"POST", "/ui/workflows/x/signal", "Bearer " + tokB, 401},
			{"GET", "/ui/login", "", 200},
		} {
			req := httptest.NewRequest(tc.method, tc.path, nil)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Errorf("protectMetrics=%v %s %s %q: %d, want %d", protect, tc.method, tc.path, tc.header, rec.Code, tc.want)
				continue
			}
			if rec.Code == 405 {
				var body struct{ Detail string }
				if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || !strings.Contains(body.Detail, "not allowed") || rec.Header().Get("Allow") != "GET, HEAD" {
					t.Errorf("405 of %s %s: %s, Allow %q", tc.method, tc.path, rec.Body, rec.Header().Get("Allow"))
				}
			}
			if rec.Code == 401 {
				var body struct{ Detail string }
				if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Detail == "" {
					t.Errorf("401 body %q is not an ErrorResponse", rec.Body)
				}
				if rec.Header().Get("WWW-Authenticate") != `Bearer realm="iwf-server"` {
					t.Errorf("401 without WWW-Authenticate: %v", rec.Header())
				}
				if strings.Contains(rec.Body.String(), tokA) || strings.Contains(rec.Body.String(), tokB) {
					t.Errorf("401 body repeats the token: %s", rec.Body)
				}
			}
		}
	}
}

// The console's sign-in page sets a session cookie, not the token, that
// its pages accept; a wrong token, a cross-site post and an outside
// destination are refused.
func TestConsoleSignIn(t *testing.T) {
	toks, err := auth.Load("", []string{tokA})
	if err != nil {
		t.Fatal(err)
	}
	h := toks.Middleware(auth.Options{ConsolePrefix: "/ui/"})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("page " + r.URL.Path))
	}))
	post := func(form url.Values, header http.Header) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/ui/login", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range header {
			req.Header[k] = v
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	// Redirected to sign in, with the page to come back to.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/ui/workflows/w1?run=r", nil))
	if loc := rec.Header().Get("Location"); rec.Code != 303 || loc != "/ui/login?next=%2Fui%2Fworkflows%2Fw1%3Frun%3Dr" {
		t.Fatalf("redirect %d %q", rec.Code, loc)
	}
	if rec := post(url.Values{"token": {tokB}, "next": {"/ui/workflows/w1"}}, nil); rec.Code != 401 || len(rec.Result().Cookies()) != 0 {
		t.Fatalf("wrong token: %d %v", rec.Code, rec.Result().Cookies())
	}
	if rec := post(url.Values{"token": {tokA}}, http.Header{"Sec-Fetch-Site": {"cross-site"}}); rec.Code != 403 {
		t.Fatalf("cross-site sign-in: %d", rec.Code)
	}
	if rec := post(url.Values{"token": {tokA}}, http.Header{"Origin": {"http://evil.example"}}); rec.Code != 403 {
		t.Fatalf("sign-in from another origin: %d", rec.Code)
	}
	rec = post(url.Values{"token": {tokA}, "next": {"/ui/workflows/w1?run=r"}}, http.Header{"Origin": {"http://example.com"}})
	if rec.Code != 303 || rec.Header().Get("Location") != "/ui/workflows/w1?run=r" {
		t.Fatalf("sign-in: %d %q", rec.Code, rec.Header().Get("Location"))
	}
	c := sessionCookie(t, rec)
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/ui/" || c.MaxAge != 12*3600 {
		t.Fatalf("cookie %+v", c)
	}
	for _, h := range rec.Result().Header.Values("Set-Cookie") {
		if strings.Contains(h, tokA) || strings.Contains(h, strings.TrimPrefix(tokA, "token-")) {
			t.Fatalf("a cookie holds the token: %s", h)
		}
	}
	// The cookie opens console pages, and only console pages.
	for path, want := range map[string]int{"/ui/workflows/w1": 200, "/api/v1/workflow/get": 401} {
		req := httptest.NewRequest("GET", path, nil)
		req.AddCookie(c)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("%s with the console cookie: %d, want %d", path, rec.Code, want)
		}
	}
	// Destinations outside the console fall back to the console's root;
	// the path is cleaned before it is checked, as a browser resolves it.
	for _, next := range []string{"https://evil.example/", "//evil.example/x", "/api/v1/workflow/get", `/ui\..\x`,
		"/ui/../../x", "/ui/../api/v1/workflow/get", "/ui/%2e%2e/x", "/ui/%2E%2e/%2e%2E/metrics", "/ui/.%2e/x",
		"/ui/..%2f..%2fx", "/ui/workflows/../../x?y=1", "/ui/..", "/ui", "ui/x", "javascript:alert(1)"} {
		rec := post(url.Values{"token": {tokA}, "next": {next}}, nil)
		if rec.Code != 303 || rec.Header().Get("Location") != "/ui/" {
			t.Errorf("next=%q redirected to %q", next, rec.Header().Get("Location"))
		}
	}
	// Destinations that stay inside the console once cleaned are kept,
	// cleaned; an escaped "/" in a workflow id is no separator.
	for next, want := range map[string]string{
		"/ui/workflows/a/../b?run=r": "/ui/workflows/b?run=r",
		"/ui/./batches":              "/ui/batches",
		"/ui/workflows/..":           "/ui/",
		"/ui/workflows/a%2F..%2Fb":   "/ui/workflows/a%2F..%2Fb",
		"/ui/batches/":               "/ui/batches/",
	} {
		rec := post(url.Values{"token": {tokA}, "next": {next}}, nil)
		if rec.Code != 303 || rec.Header().Get("Location") != want {
			t.Errorf("next=%q redirected to %q, want %q", next, rec.Header().Get("Location"), want)
		}
	}
}

// TestLoginPageHeaders: the sign-in page sends the security headers of
// every console page — no framing, a CSP, no MIME sniffing — whether it
// shows the form or refuses a token, and HSTS when served over TLS.
func TestLoginPageHeaders(t *testing.T) {
	toks, err := auth.Load("", []string{tokA})
	if err != nil {
		t.Fatal(err)
	}
	h := toks.Middleware(auth.Options{ConsolePrefix: "/ui/"})(http.NotFoundHandler())
	for _, tc := range []struct {
		name   string
		method string
		tls    bool
	}{{"form", "GET", false}, {"form over TLS", "GET", true}, {"wrong token over TLS", "POST", true}, {"wrong token", "POST", false}} {
		req := httptest.NewRequest(tc.method, "/ui/login?next=%2Fui%2F", strings.NewReader(url.Values{"token": {tokB}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if tc.tls {
			req.TLS = &tls.ConnectionState{}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		hd := rec.Header()
		if hd.Get("X-Frame-Options") != "DENY" || !strings.Contains(hd.Get("Content-Security-Policy"), "frame-ancestors 'none'") ||
			hd.Get("X-Content-Type-Options") != "nosniff" || hd.Get("Referrer-Policy") != "same-origin" {
			t.Errorf("%s: %d, headers %v", tc.name, rec.Code, hd)
		}
		if got := hd.Get("Strict-Transport-Security"); (got != "") != tc.tls || (tc.tls && !strings.HasPrefix(got, "max-age=")) {
			t.Errorf("%s: Strict-Transport-Security %q", tc.name, got)
		}
	}
}
