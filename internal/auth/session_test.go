package auth_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/internal/auth"
)

// sessionCookie returns the session cookie a response sets.
func sessionCookie(t *testing.T, rec *httptest.ResponseRecorder) *http.Cookie {
	t.Helper()
	for _, c := range rec.Result().Cookies() {
		if c.Name == auth.SessionCookie && c.MaxAge >= 0 && c.Value != "" {
			return c
		}
	}
	t.Fatalf("no session cookie in %v", rec.Result().Header.Values("Set-Cookie"))
	return nil
}

// fakeClock is a clock the test advances.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// console is a token set's middleware in front of a stand-in console page.
type console struct {
	toks *auth.Tokens
	opts auth.Options
	h    http.Handler
}

func newConsole(t *testing.T, toks *auth.Tokens, opts auth.Options) *console {
	t.Helper()
	opts.ConsolePrefix = "/ui/"
	h := toks.Middleware(opts)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("page " + r.URL.Path))
	}))
	return &console{toks: toks, opts: opts, h: h}
}

// signIn posts token to the sign-in page and returns the session cookie.
func (c *console) signIn(t *testing.T, token string) *http.Cookie {
	t.Helper()
	req := httptest.NewRequest("POST", "/ui/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("sign-in: %d %s", rec.Code, rec.Body)
	}
	return sessionCookie(t, rec)
}

// page reports whether a console page opens with cookie (else the browser
// is sent to the sign-in page).
func (c *console) page(t *testing.T, cookie *http.Cookie) bool {
	t.Helper()
	req := httptest.NewRequest("GET", "/ui/", nil)
	req.AddCookie(cookie)
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, req)
	switch {
	case rec.Code == 200:
		return true
	case rec.Code == http.StatusSeeOther && strings.HasPrefix(rec.Header().Get("Location"), "/ui/login"):
		return false
	}
	t.Fatalf("console page: %d %s", rec.Code, rec.Body)
	return false
}

// The cookie is a random id, not the token: the token in a cookie opens
// nothing, two sign-ins get two sessions, and a session cannot be used as
// a bearer token on the API.
func TestSessionCookieIsNotTheToken(t *testing.T) {
	toks, err := auth.Load("", []string{tokA})
	if err != nil {
		t.Fatal(err)
	}
	c := newConsole(t, toks, auth.Options{})
	s1, s2 := c.signIn(t, tokA), c.signIn(t, tokA)
	if strings.Contains(s1.Value, tokA) || s1.Value == s2.Value || len(s1.Value) < 43 {
		t.Fatalf("session ids %q, %q", s1.Value, s2.Value)
	}
	if !c.page(t, s1) || !c.page(t, s2) {
		t.Fatal("a fresh session is refused")
	}
	for _, forged := range []*http.Cookie{
		{Name: "iwf_console_token", Value: tokA},
		{Name: auth.SessionCookie, Value: tokA},
		{Name: auth.SessionCookie, Value: s1.Value + "x"},
	} {
		if c.page(t, forged) {
			t.Errorf("cookie %s=%s opens the console", forged.Name, forged.Value)
		}
	}
	req := httptest.NewRequest("POST", "/api/v1/workflow/get", nil)
	req.Header.Set("Authorization", "Bearer "+s1.Value)
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, req)
	if rec.Code != 401 {
		t.Errorf("session id as a bearer token: %d", rec.Code)
	}
}

// The server ends a session at its expiry, on its own clock, whatever the
// browser keeps.
func TestSessionExpires(t *testing.T) {
	toks, err := auth.Load("", []string{tokA})
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := newConsole(t, toks, auth.Options{SessionTTL: time.Hour, Now: clock.Now})
	s := c.signIn(t, tokA)
	if s.MaxAge != 3600 {
		t.Errorf("cookie Max-Age %d, want the TTL", s.MaxAge)
	}
	clock.Add(time.Hour - time.Second)
	if !c.page(t, s) {
		t.Fatal("session refused before its expiry")
	}
	clock.Add(time.Second)
	if c.page(t, s) {
		t.Fatal("session accepted at its expiry")
	}
	if toks.Sessions() != 0 {
		t.Errorf("%d sessions kept after expiry", toks.Sessions())
	}
	// The default lifetime is 12 hours.
	d := newConsole(t, toks, auth.Options{Now: clock.Now})
	s = d.signIn(t, tokA)
	clock.Add(12*time.Hour - time.Second)
	if !d.page(t, s) {
		t.Fatal("default session refused before 12 h")
	}
	clock.Add(time.Second)
	if d.page(t, s) {
		t.Fatal("default session accepted after 12 h")
	}
}

// Signing out ends the session on the server, not only in the browser:
// the same cookie, replayed, opens nothing.
func TestSignOut(t *testing.T) {
	toks, err := auth.Load("", []string{tokA})
	if err != nil {
		t.Fatal(err)
	}
	c := newConsole(t, toks, auth.Options{})
	s, other := c.signIn(t, tokA), c.signIn(t, tokA)
	req := httptest.NewRequest("POST", "/ui/logout", nil)
	req.AddCookie(s)
	rec := httptest.NewRecorder()
	toks.SignOut(c.opts)(rec, req)
	deleted := false
	for _, ck := range rec.Result().Cookies() {
		if ck.Name == auth.SessionCookie && ck.MaxAge < 0 && ck.Path == "/ui/" {
			deleted = true
		}
	}
	if !deleted {
		t.Errorf("sign-out does not delete the cookie: %v", rec.Result().Header.Values("Set-Cookie"))
	}
	if c.page(t, s) {
		t.Fatal("signed-out session still opens the console")
	}
	if !c.page(t, other) {
		t.Fatal("signing out one session ended another")
	}
}

// Removing a token from the token file ends its sessions at the next
// Reload; the sessions of the tokens that stay go on.
func TestReloadEndsSessionsOfRemovedTokens(t *testing.T) {
	file := writeFile(t, tokA+"\n"+tokB+"\n")
	toks, err := auth.Load(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := newConsole(t, toks, auth.Options{})
	sa, sb := c.signIn(t, tokA), c.signIn(t, tokB)
	if err := os.WriteFile(file, []byte(tokA+"\n"+tokC+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if !c.page(t, sb) {
		t.Fatal("session ended before Reload")
	}
	if err := toks.Reload(); err != nil {
		t.Fatal(err)
	}
	if c.page(t, sb) {
		t.Fatal("session of a removed token survives Reload")
	}
	if !c.page(t, sa) {
		t.Fatal("session of a kept token ended")
	}
	if toks.Sessions() != 1 {
		t.Errorf("%d sessions kept, want 1", toks.Sessions())
	}
}

// A console action posted after the session ended goes to the sign-in
// page, then back to the console's start.
func TestEndedSessionActionRedirects(t *testing.T) {
	toks, err := auth.Load("", []string{tokA})
	if err != nil {
		t.Fatal(err)
	}
	c := newConsole(t, toks, auth.Options{})
	req := httptest.NewRequest("POST", "/ui/actions/stop", nil)
	req.AddCookie(&http.Cookie{Name: auth.SessionCookie, Value: "gone"})
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/ui/login?next=%2Fui%2F" {
		t.Fatalf("got %d %q", rec.Code, rec.Header().Get("Location"))
	}
}
