package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestConfigBrowserSettings: request-timeout, allowed-hosts and
// console-session-ttl are read from flags, the environment and the file,
// with their defaults.
func TestConfigBrowserSettings(t *testing.T) {
	m, err := parse(t, nil, env{})
	if err != nil {
		t.Fatal(err)
	}
	if c := m.Config; c.RequestTimeout != 30*time.Second || c.ConsoleSessionTTL != 12*time.Hour || c.AllowedHosts != nil {
		t.Errorf("defaults: request-timeout %s, console-session-ttl %s, allowed-hosts %v", c.RequestTimeout, c.ConsoleSessionTTL, c.AllowedHosts)
	}
	file := writeFile(t, "request-timeout: 5s\nconsole-session-ttl: 1h\nallowed-hosts:\n  - iwf.example.com\n  - \"*.corp.example\"\n")
	m, err = parse(t, []string{"--config", file}, env{})
	if err != nil {
		t.Fatal(err)
	}
	if c := m.Config; c.RequestTimeout != 5*time.Second || c.ConsoleSessionTTL != time.Hour ||
		!reflect.DeepEqual(c.AllowedHosts, []string{"iwf.example.com", "*.corp.example"}) {
		t.Errorf("file: %s %s %v", c.RequestTimeout, c.ConsoleSessionTTL, c.AllowedHosts)
	}
	m, err = parse(t, nil, env{"IWF_CONFIG": file, "IWF_ALLOWED_HOSTS": "a.example, b.example", "IWF_REQUEST_TIMEOUT": "7s", "IWF_CONSOLE_SESSION_TTL": "2h"})
	if err != nil {
		t.Fatal(err)
	}
	if c := m.Config; c.RequestTimeout != 7*time.Second || c.ConsoleSessionTTL != 2*time.Hour ||
		!reflect.DeepEqual(c.AllowedHosts, []string{"a.example", "b.example"}) {
		t.Errorf("env: %s %s %v", c.RequestTimeout, c.ConsoleSessionTTL, c.AllowedHosts)
	}
	m, err = parse(t, []string{"--allowed-hosts", "c.example,d.example", "--allowed-hosts", "10.0.0.5", "--request-timeout", "9s", "--console-session-ttl", "30m"},
		env{"IWF_ALLOWED_HOSTS": "a.example"})
	if err != nil {
		t.Fatal(err)
	}
	if c := m.Config; c.RequestTimeout != 9*time.Second || c.ConsoleSessionTTL != 30*time.Minute ||
		!reflect.DeepEqual(c.AllowedHosts, []string{"c.example", "d.example", "10.0.0.5"}) {
		t.Errorf("flags: %s %s %v", c.RequestTimeout, c.ConsoleSessionTTL, c.AllowedHosts)
	}
}

// probe sends a POST to the server at addr with the given Host, body
// Content-Type and browser headers, and returns the status and the
// ErrorResponse detail.
func probe(t *testing.T, addr, host, path, contentType, body string, h http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct{ Detail string }
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatalf("POST %s: %d, body is not JSON: %s", path, resp.StatusCode, raw)
	}
	return resp.StatusCode, e.Detail
}

// TestSecurityBrowserRequests: the default server (no tokens, loopback)
// refuses what a page of another site can send — a cross-site POST, a
// text/plain body, a rebound host name — and serves SDKs, curl, its own
// pages and the allowed hosts.
func TestSecurityBrowserRequests(t *testing.T) {
	m, _ := startMain(t, "--allowed-hosts", "iwf.test")
	addr := m.Addr()
	_, port, _ := strings.Cut(addr, ":")
	start := `{"workflowId":"evil","iwfWorkflowType":"T","workflowTimeoutSeconds":10,"iwfWorkerUrl":"http://127.0.0.1:1"}`
	get := `{"workflowId":"never-started"}`
	const ctJSON = "application/json"
	evil := http.Header{"Origin": {"http://evil.example"}, "Sec-Fetch-Site": {"cross-site"}}

	// The probe of the report: a text/plain POST from another site.
	for _, path := range []string{"/api/v1/workflow/start", "/api/v1/workflow/stop", "/api/v1/workflow/reset", "/api/v1/workflow/signal"} {
		if s, d := probe(t, addr, "", path, "text/plain", start, evil); s != 403 || !strings.Contains(d, "cross-site request refused") {
			t.Errorf("%s from another site: %d %q", path, s, d)
		}
	}
	for name, h := range map[string]http.Header{
		"Sec-Fetch-Site same-site": {"Sec-Fetch-Site": {"same-site"}},
		"Origin only":              {"Origin": {"http://evil.example"}},
		"Origin of a rebound name": {"Origin": {"http://rebind.attacker.example:" + port}},
	} {
		if s, d := probe(t, addr, "", "/api/v1/workflow/start", ctJSON, start, h); s != 403 {
			t.Errorf("%s: %d %q", name, s, d)
		}
	}
	// Without the browser headers, a text/plain body is still refused.
	if s, d := probe(t, addr, "", "/api/v1/workflow/start", "text/plain", start, nil); s != 415 || !strings.Contains(d, "application/json") {
		t.Errorf("text/plain: %d %q", s, d)
	}
	// DNS rebinding: the browser sends the attacker's name as Host.
	for _, host := range []string{"rebind.attacker.example", "rebind.attacker.example:" + port} {
		if s, d := probe(t, addr, host, "/api/v1/workflow/get", ctJSON, get, nil); s != 421 || !strings.Contains(d, "is not served here") {
			t.Errorf("Host %s: %d %q", host, s, d)
		}
	}
	// None of them started anything.
	if s, _ := probe(t, addr, "", "/api/v1/workflow/get", ctJSON, `{"workflowId":"evil"}`, nil); s != 400 {
		t.Fatalf("a refused start ran: get answers %d", s)
	}

	// Allowed: SDKs and curl (no browser headers), the server's own pages,
	// a typed URL, loopback names with any port, the allowed hosts.
	for name, c := range map[string]struct {
		host string
		h    http.Header
	}{
		"no browser headers":  {"", nil},
		"same origin":         {"", http.Header{"Origin": {"http://" + addr}, "Sec-Fetch-Site": {"same-origin"}}},
		"typed URL":           {"", http.Header{"Sec-Fetch-Site": {"none"}}},
		"localhost":           {"localhost:" + port, nil},
		"[::1]":               {"[::1]:" + port, nil},
		"allowed host":        {"iwf.test:" + port, nil},
		"allowed host origin": {"iwf.test:" + port, http.Header{"Origin": {"http://iwf.test:" + port}}},
	} {
		if s, d := probe(t, addr, c.host, "/api/v1/workflow/get", ctJSON, get, c.h); s != 400 || !strings.Contains(d, "not exist") {
			t.Errorf("%s: %d %q, want the engine's answer", name, s, d)
		}
	}
	// sdk-go's client is unaffected (TestSecurityAuthTokens and the
	// compatibility tests run it); the console's own page too.
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/ui/", nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Errorf("console opened from another site: %d", resp.StatusCode)
	}
}

// TestSecurityConsoleSessions: signing in gives a session cookie that is
// not the token; signing out (with the page's CSRF token) ends the session
// on the server; removing the token from the file (SIGHUP's reload) ends
// its sessions.
func TestSecurityConsoleSessions(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte(tokenOne+"\n"+tokenTwo+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m, _ := startMain(t, "--auth-token-file", file)
	base := "http://" + m.Addr()
	signIn := func(token string) (*http.Client, *http.Cookie) {
		t.Helper()
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.PostForm(base+"/ui/login", url.Values{"token": {token}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 303 {
			t.Fatalf("sign-in: %d", resp.StatusCode)
		}
		for _, h := range resp.Header.Values("Set-Cookie") {
			if strings.Contains(h, token) {
				t.Fatalf("the cookie holds the token: %s", h)
			}
		}
		for _, ck := range resp.Cookies() {
			if ck.Name == "iwf_console_session" && ck.Value != "" {
				return c, ck
			}
		}
		t.Fatalf("no session cookie: %v", resp.Header.Values("Set-Cookie"))
		return nil, nil
	}
	// page opens the console's start page with only cookie and returns its
	// status and body.
	page := func(cookie *http.Cookie) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+"/ui/", nil)
		req.AddCookie(cookie)
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	one, cookieOne := signIn(tokenOne)
	_, cookieTwo := signIn(tokenTwo)
	if s, body := page(cookieOne); s != 200 || !strings.Contains(body, `id="signout"`) {
		t.Fatalf("console with a session: %d, sign-out button: %v", s, strings.Contains(body, `id="signout"`))
	}
	// Sign out from the page, as its button does.
	resp, err := one.Get(base + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(string(body))
	if csrf == nil {
		t.Fatalf("no CSRF token on the page")
	}
	// The page's token is bound to its session: another session, even
	// with the same CSRF cookie, cannot use it.
	two, _ := signIn(tokenTwo)
	ui, _ := url.Parse(base + "/ui/")
	for _, ck := range one.Jar.Cookies(ui) {
		if ck.Name == "iwf_console_csrf" {
			two.Jar.SetCookies(ui, []*http.Cookie{{Name: ck.Name, Value: ck.Value, Path: "/ui/"}})
		}
	}
	resp, err = two.PostForm(base+"/ui/logout", url.Values{"csrf": {csrf[1]}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Fatalf("sign-out with another session's CSRF token: %d", resp.StatusCode)
	}
	resp, err = one.PostForm(base+"/ui/logout", url.Values{"csrf": {"forged"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Fatalf("sign-out with a forged CSRF token: %d", resp.StatusCode)
	}
	resp, err = one.PostForm(base+"/ui/logout", url.Values{"csrf": {csrf[1]}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/ui/login" {
		t.Fatalf("sign-out: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	// The copied cookie no longer opens anything.
	if s, _ := page(cookieOne); s != 303 {
		t.Fatalf("signed-out session: %d", s)
	}
	if s, _ := page(cookieTwo); s != 200 {
		t.Fatalf("another session ended with the sign-out: %d", s)
	}

	// Rotation: tokenTwo leaves the file; at the reload its session ends.
	if err := os.WriteFile(file, []byte(tokenOne+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := m.Reload(); err != nil {
		t.Fatal(err)
	}
	if s, _ := page(cookieTwo); s != 303 {
		t.Fatalf("session of a removed token after reload: %d", s)
	}
}

// TestMainRequestDeadline: a request past --request-timeout answers 504
// with a detail naming the setting, on the API and on the console's search;
// a long poll keeps max-wait on top of it.
func TestMainRequestDeadline(t *testing.T) {
	m, _ := startMain(t, "--request-timeout", "1ns")
	base := "http://" + m.Addr()
	if s, body := postJSON(t, base+"/api/v1/workflow/search", `{"query":"WorkflowType = 'T'"}`); s != 504 ||
		!strings.Contains(body["detail"].(string), "deadline of 1ns (request-timeout)") {
		t.Errorf("search: %d %v", s, body)
	}
	if s, body := postJSON(t, base+"/api/v1/workflow/getWithWait", `{"workflowId":"never-started"}`); s != 400 {
		t.Errorf("getWithWait: %d %v, want the engine's answer within max-wait", s, body)
	}
	resp, err := http.Get(base + "/ui/?q=" + url.QueryEscape("WorkflowType = 'T'"))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 504 || !strings.Contains(string(page), "request-timeout") {
		t.Errorf("console search: %d %s", resp.StatusCode, page)
	}
}
