package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/sdk-go/iwf"
)

const (
	tokenOne = "operator-token-0123456789"
	tokenTwo = "ci-token-abcdefghijklmnop"
)

// forEachDB runs fn with the --db argument of each store.
func forEachDB(t *testing.T, fn func(t *testing.T, db string)) {
	t.Run("sqlite", func(t *testing.T) {
		fn(t, "sqlite://"+filepath.Join(t.TempDir(), "iwf.db"))
	})
	t.Run("postgres", func(t *testing.T) {
		fn(t, postgresDB(t))
	})
}

// call sends a JSON POST with an optional bearer token and returns the
// status, the WWW-Authenticate header and the decoded body.
func call(t *testing.T, client *http.Client, url, token, body string) (int, string, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	var m map[string]any
	raw, _ := io.ReadAll(resp.Body)
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("POST %s: %d, body is not JSON: %s", url, resp.StatusCode, raw)
		}
	}
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), m
}

func getStatus(t *testing.T, client *http.Client, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestSecurityAuthTokens: with tokens set, the API needs one (401 with an
// ErrorResponse and WWW-Authenticate otherwise), the healthcheck stays
// open, /metrics too unless --auth-metrics, a rotated file applies on
// reload, and no token reaches the logs.
func TestSecurityAuthTokens(t *testing.T) {
	forEachDB(t, func(t *testing.T, db string) {
		file := filepath.Join(t.TempDir(), "tokens")
		if err := os.WriteFile(file, []byte("# operators\n"+tokenOne+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		m, out := startMainEnv(t, env{"IWF_AUTH_TOKENS": tokenTwo}, "--db", db, "--auth-token-file", file, "--log-level", "debug")
		base := "http://" + m.Addr()
		c := http.DefaultClient
		get := `{"workflowId":"never-started"}`

		status, www, body := call(t, c, base+"/api/v1/workflow/get", "", get)
		if status != 401 || www != `Bearer realm="iwf-server"` || !strings.Contains(fmt.Sprint(body["detail"]), "missing bearer token") {
			t.Fatalf("no token: %d %q %v", status, www, body)
		}
		if status, _, body = call(t, c, base+"/api/v1/workflow/get", "wrong-token-0123456789", get); status != 401 || body["detail"] != "invalid token" {
			t.Fatalf("wrong token: %d %v", status, body)
		}
		for _, tok := range []string{tokenOne, tokenTwo} {
			if status, _, body = call(t, c, base+"/api/v1/workflow/get", tok, get); status != 400 || body["subStatus"] != "WORKFLOW_NOT_EXISTS_SUB_STATUS" {
				t.Fatalf("valid token: %d %v", status, body)
			}
		}
		// sdk-go's client sends its Token option.
		for tok, want := range map[string]int{"": 401, tokenTwo: 400} {
			client, err := iwf.NewClient(base, &iwf.ClientOptions{Token: tok})
			if err != nil {
				t.Fatal(err)
			}
			_, err = client.DescribeWorkflow(context.Background(), "never-started", "")
			var apiErr *iwf.APIError
			if !errors.As(err, &apiErr) || apiErr.StatusCode != want {
				t.Fatalf("sdk-go client with token %q: %v, want status %d", tok, err, want)
			}
		}
		if s := getStatus(t, c, base+"/info/healthcheck", ""); s != 200 {
			t.Fatalf("healthcheck without a token: %d", s)
		}
		if s := getStatus(t, c, base+"/metrics", ""); s != 200 {
			t.Fatalf("metrics without a token and without --auth-metrics: %d", s)
		}

		// Rotation: the file now holds a new token; the old one stops
		// working at reload (SIGHUP calls Reload).
		const rotated = "rotated-token-0123456789"
		if err := os.WriteFile(file, []byte(rotated+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := m.Reload(); err != nil {
			t.Fatal(err)
		}
		if status, _, _ = call(t, c, base+"/api/v1/workflow/get", tokenOne, get); status != 401 {
			t.Fatalf("old token after rotation: %d", status)
		}
		if status, _, _ = call(t, c, base+"/api/v1/workflow/get", rotated, get); status != 400 {
			t.Fatalf("new token after rotation: %d", status)
		}
		// A broken file keeps the tokens in force.
		if err := os.WriteFile(file, []byte("short\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := m.Reload(); err == nil {
			t.Fatal("reload of a broken token file succeeded")
		}
		if status, _, _ = call(t, c, base+"/api/v1/workflow/get", rotated, get); status != 400 {
			t.Fatalf("token after a failed reload: %d", status)
		}
		for _, tok := range []string{tokenOne, tokenTwo, rotated, "wrong-token"} {
			if strings.Contains(out.String(), tok) {
				t.Fatalf("the logs contain a token: %s", out)
			}
		}
		if !strings.Contains(out.String(), `"status":401`) {
			t.Fatalf("refused requests are not in the access log: %s", out)
		}
	})

	m, _ := startMainEnv(t, env{"IWF_AUTH_TOKENS": tokenTwo}, "--auth-metrics")
	if s := getStatus(t, http.DefaultClient, "http://"+m.Addr()+"/metrics", ""); s != 401 {
		t.Fatalf("metrics without a token under --auth-metrics: %d", s)
	}
	if s := getStatus(t, http.DefaultClient, "http://"+m.Addr()+"/metrics", tokenTwo); s != 200 {
		t.Fatalf("metrics with a token under --auth-metrics: %d", s)
	}
	if _, err := parse(t, []string{"--auth-metrics"}, env{}); err == nil || !strings.Contains(err.Error(), "auth-metrics needs tokens") {
		t.Fatalf("--auth-metrics without tokens: %v", err)
	}
	if _, err := parse(t, []string{"--auth-tokens", "x"}, env{}); err == nil {
		t.Fatal("tokens were accepted on the command line")
	}
}

// recorder is an HTTP listener that records every request it receives.
type recorder struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*http.Request
	handle   func(w http.ResponseWriter, r *http.Request)
}

func newRecorder(t *testing.T, handle func(w http.ResponseWriter, r *http.Request)) *recorder {
	rec := &recorder{handle: handle}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.requests = append(rec.requests, r.Clone(context.Background()))
		rec.mu.Unlock()
		if rec.handle != nil {
			rec.handle(w, r)
		}
	}))
	t.Cleanup(rec.Close)
	return rec
}

func (r *recorder) received() []*http.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*http.Request(nil), r.requests...)
}

// describeFailure waits until the first pending state of a workflow has
// a failed attempt, and returns its error.
func describeFailure(t *testing.T, base, wfID string) (float64, string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		status, _, d := call(t, http.DefaultClient, base+"/api/v1/workflow/describe", "", `{"workflowId":"`+wfID+`"}`)
		if status != 200 {
			t.Fatalf("describe: %d %v", status, d)
		}
		if ps, _ := d["pendingStates"].([]any); len(ps) > 0 {
			if f, ok := ps[0].(map[string]any)["lastFailure"].(map[string]any); ok {
				code, _ := f["httpStatus"].(float64)
				return code, fmt.Sprint(f["error"])
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no failed attempt of %s within a minute: %v", wfID, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSecurityWorkerCalls re-tries the open-proxy attacks against a server
// with an allow-list and a worker header: refused URLs get 400 and store
// nothing, a redirect is not followed, and the header never reaches a
// listener the allow-list does not name.
func TestSecurityWorkerCalls(t *testing.T) {
	forEachDB(t, func(t *testing.T, db string) {
		capture := newRecorder(t, nil) // the attacker's listener
		// The allowed worker redirects every call to the capture listener.
		worker := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, capture.URL+"/metrics", http.StatusFound)
		})
		m, _ := startMain(t, "--db", db, "--worker-url-allow", worker.URL, "--worker-header", "Authorization: Bearer s3cr3t")
		base := "http://" + m.Addr()
		start := func(id, workerURL string) (int, map[string]any) {
			body, _ := json.Marshal(map[string]any{"workflowId": id, "iwfWorkflowType": "T", "workflowTimeoutSeconds": 60,
				"iwfWorkerUrl": workerURL, "startStateId": "S1"})
			status, _, resp := call(t, http.DefaultClient, base+"/api/v1/workflow/start", "", string(body))
			return status, resp
		}
		for i, tc := range []struct{ url, detail string }{
			{"http://169.254.169.254/latest/meta-data", "never called"},
			{"http://[fe80::1%25eth0]/", "never called"},
			{worker.URL + "/../capture", "path segments"},
			{capture.URL, "not allowed by --worker-url-allow"},
			{capture.URL + "/capture?", "without user info, query or fragment"},
			{"http://127.0.0.1:5432", "not allowed by --worker-url-allow"},
			{base, "not allowed by --worker-url-allow"},
			{"not a url", "absolute http:// or https://"},
			{"file:///etc/passwd", "absolute http:// or https://"},
		} {
			id := fmt.Sprintf("refused-%d", i)
			status, resp := start(id, tc.url)
			if status != 400 || !strings.Contains(fmt.Sprint(resp["detail"]), tc.detail) {
				t.Fatalf("start with %s: %d %v, want 400 %q", tc.url, status, resp, tc.detail)
			}
			if status, _, resp = call(t, http.DefaultClient, base+"/api/v1/workflow/get", "", `{"workflowId":"`+id+`"}`); resp["subStatus"] != "WORKFLOW_NOT_EXISTS_SUB_STATUS" {
				t.Fatalf("a refused start stored a workflow: %d %v", status, resp)
			}
		}

		// The allowed worker answers with a redirect: a failed attempt,
		// with a clear message and no body kept; the target is never called.
		if status, resp := start("redirected", worker.URL); status != 200 {
			t.Fatalf("start: %d %v", status, resp)
		}
		code, msg := describeFailure(t, base, "redirected")
		if code != 302 || !strings.Contains(msg, "do not follow redirects") {
			t.Fatalf("redirect attempt: %v %q", code, msg)
		}
		reqs := worker.received()
		if len(reqs) == 0 || reqs[0].Header.Get("Authorization") != "Bearer s3cr3t" {
			t.Fatalf("the allowed worker did not receive the header: %v", reqs)
		}
		if got := capture.received(); len(got) != 0 {
			t.Fatalf("the redirect target received %d requests", len(got))
		}
	})
}

// TestSecurityAllowListOnStoredRuns: a run stored before an allow-list was
// set, whose worker the list does not name, is no longer called — no
// request, so no worker header — and its RPCs and resets are refused.
func TestSecurityAllowListOnStoredRuns(t *testing.T) {
	dbFile := "sqlite://" + filepath.Join(t.TempDir(), "iwf.db")
	// The old worker answers waitUntil with a day-long timer.
	old := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"commandRequest":{"commandWaitingType":"ALL_COMPLETED","timerCommands":[{"commandId":"t","durationSeconds":86400}]}}`)
	})
	first, _ := startMain(t, "--db", dbFile)
	base := "http://" + first.Addr()
	if status, _, resp := call(t, http.DefaultClient, base+"/api/v1/workflow/start", "",
		`{"workflowId":"stored","iwfWorkflowType":"T","workflowTimeoutSeconds":0,"iwfWorkerUrl":"`+old.URL+`","startStateId":"S1"}`); status != 200 {
		t.Fatalf("start: %d %v", status, resp)
	}
	deadline := time.Now().Add(time.Minute)
	for len(old.received()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("waitUntil was not called")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	before := len(old.received())

	other := newRecorder(t, nil)
	m, _ := startMain(t, "--db", dbFile, "--worker-url-allow", other.URL, "--worker-header", "Authorization: Bearer s3cr3t")
	base = "http://" + m.Addr()
	for path, body := range map[string]string{
		"/api/v1/workflow/rpc":   `{"workflowId":"stored","rpcName":"r","timeoutSeconds":5}`,
		"/api/v1/workflow/reset": `{"workflowId":"stored","resetType":"BEGINNING"}`,
	} {
		status, _, resp := call(t, http.DefaultClient, base+path, "", body)
		if status != 400 || !strings.Contains(fmt.Sprint(resp["detail"]), "not allowed by --worker-url-allow") {
			t.Fatalf("%s: %d %v", path, status, resp)
		}
	}
	// The timer, skipped, would lead to an execute call: it fails without
	// a request.
	if status, _, resp := call(t, http.DefaultClient, base+"/api/v1/workflow/timer/skip", "",
		`{"workflowId":"stored","workflowStateExecutionId":"S1-1","timerCommandId":"t"}`); status != 200 {
		t.Fatalf("skip timer: %d %v", status, resp)
	}
	if _, msg := describeFailure(t, base, "stored"); !strings.Contains(msg, "not allowed by --worker-url-allow") {
		t.Fatalf("execute attempt: %q", msg)
	}
	if n := len(old.received()); n != before {
		t.Fatalf("the worker the allow-list does not name received %d more requests", n-before)
	}
}

// testPKI is a CA with a server certificate for 127.0.0.1 and a client
// certificate, written as PEM files.
type testPKI struct {
	dir                       string
	caPool                    *x509.CertPool
	caFile, certFile, keyFile string
	clientCert                tls.Certificate
	caKey                     *ecdsa.PrivateKey
	ca                        *x509.Certificate
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir()}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "iwf test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	p.ca, _ = x509.ParseCertificate(der)
	p.caKey = key
	p.caPool = x509.NewCertPool()
	p.caPool.AddCert(p.ca)
	p.caFile = p.write(t, "ca.pem", "CERTIFICATE", der)
	p.certFile, p.keyFile = p.issue(t, "server", 2, x509.ExtKeyUsageServerAuth)
	cf, kf := p.issue(t, "client", 3, x509.ExtKeyUsageClientAuth)
	if p.clientCert, err = tls.LoadX509KeyPair(cf, kf); err != nil {
		t.Fatal(err)
	}
	return p
}

// issue signs a certificate for 127.0.0.1 named cn and writes it with its
// key; it returns the two files.
func (p *testPKI) issue(t *testing.T, cn string, serial int64, usage x509.ExtKeyUsage) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return p.write(t, cn+".pem", "CERTIFICATE", der), p.write(t, cn+"-key.pem", "EC PRIVATE KEY", kder)
}

func (p *testPKI) write(t *testing.T, name, typ string, der []byte) string {
	t.Helper()
	f := filepath.Join(p.dir, name)
	if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func (p *testPKI) client(withCert bool) *http.Client {
	cfg := &tls.Config{RootCAs: p.caPool, MinVersion: tls.VersionTLS12}
	if withCert {
		cfg.Certificates = []tls.Certificate{p.clientCert}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
}

// TestSecurityConsoleHeaders: every console answer — the sign-in page, the
// redirect to it, a signed-in page, the cross-site notice — forbids framing
// and sends the console's CSP; over TLS also HSTS, which plain HTTP never
// sends.
func TestSecurityConsoleHeaders(t *testing.T) {
	p := newTestPKI(t)
	e := env{"IWF_AUTH_TOKENS": tokenOne}
	tlsMain, _ := startMainEnv(t, e, "--tls-cert-file", p.certFile, "--tls-key-file", p.keyFile)
	plainMain, _ := startMainEnv(t, e)
	for _, srv := range []struct {
		base   string
		client *http.Client
		hsts   bool
	}{
		{"https://" + tlsMain.Addr(), p.client(false), true},
		{"http://" + plainMain.Addr(), &http.Client{}, false},
	} {
		client := *srv.client
		client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		for _, tc := range []struct {
			name, method, path string
			header             http.Header
			status             int
		}{
			{"sign-in page", "GET", "/ui/login", nil, 200},
			{"refused sign-in", "POST", "/ui/login", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, 401},
			{"redirect to sign-in", "GET", "/ui/workflows/x", nil, 303},
			{"signed-in page", "GET", "/ui/", http.Header{"Authorization": {"Bearer " + tokenOne}}, 200},
			{"cross-site notice", "GET", "/ui/", http.Header{"Sec-Fetch-Site": {"cross-site"}}, 403},
		} {
			req, _ := http.NewRequest(tc.method, srv.base+tc.path, strings.NewReader("token=not-a-token-of-this-server"))
			for k, v := range tc.header {
				req.Header[k] = v
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			h := resp.Header
			if resp.StatusCode != tc.status || h.Get("X-Frame-Options") != "DENY" ||
				!strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") || h.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("%s %s: %d, headers %v", srv.base, tc.name, resp.StatusCode, h)
			}
			if got := h.Get("Strict-Transport-Security"); (got != "") != srv.hsts {
				t.Errorf("%s %s: Strict-Transport-Security %q", srv.base, tc.name, got)
			}
		}
	}
}

// TestSecurityTLS: the API over HTTPS, its certificate replaced on
// reload, and mutual TLS refusing a client without a certificate.
func TestSecurityTLS(t *testing.T) {
	p := newTestPKI(t)
	m, out := startMain(t, "--tls-cert-file", p.certFile, "--tls-key-file", p.keyFile)
	base := "https://" + m.Addr()
	if !strings.Contains(out.String(), "listening on "+base) {
		t.Fatalf("banner: %s", out)
	}
	resp, err := p.client(false).Get(base + "/info/healthcheck")
	if err != nil {
		t.Fatal(err)
	}
	serial := resp.TLS.PeerCertificates[0].SerialNumber.Int64()
	resp.Body.Close()
	if resp.StatusCode != 200 || serial != 2 {
		t.Fatalf("healthcheck over TLS: %d, serial %d", resp.StatusCode, serial)
	}
	// Plain HTTP to the TLS port is refused.
	if resp, err := http.Get("http://" + m.Addr() + "/info/healthcheck"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Fatalf("plain HTTP on the TLS port: %d", resp.StatusCode)
		}
	}
	// A renewed certificate is served after reload, without a restart.
	cf, kf := p.issue(t, "server-renewed", 9, x509.ExtKeyUsageServerAuth)
	for src, dst := range map[string]string{cf: p.certFile, kf: p.keyFile} {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Reload(); err != nil {
		t.Fatal(err)
	}
	resp, err = p.client(false).Get(base + "/info/healthcheck")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.TLS.PeerCertificates[0].SerialNumber.Int64(); got != 9 {
		t.Fatalf("serial after reload %d, want 9", got)
	}

	// Mutual TLS.
	mt, _ := startMain(t, "--tls-cert-file", p.certFile, "--tls-key-file", p.keyFile, "--tls-client-ca-file", p.caFile)
	if resp, err := p.client(false).Get("https://" + mt.Addr() + "/info/healthcheck"); err == nil {
		resp.Body.Close()
		t.Fatalf("a client without a certificate got %d", resp.StatusCode)
	}
	resp, err = p.client(true).Get("https://" + mt.Addr() + "/info/healthcheck")
	if err != nil {
		t.Fatalf("a client with a certificate: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("mTLS healthcheck: %d", resp.StatusCode)
	}

	for _, args := range [][]string{
		{"--tls-cert-file", p.certFile},
		{"--tls-client-ca-file", p.caFile},
	} {
		if _, err := parse(t, args, env{}); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// TestMainServesTheConsole: the web console is on by default at /ui/,
// behind the sign-in page when tokens are set, and off with --ui=false.
func TestMainServesTheConsole(t *testing.T) {
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	m, out := startMain(t)
	if !strings.Contains(out.String(), "web console: http://"+m.Addr()+"/ui/") {
		t.Fatalf("banner without the console URL: %s", out)
	}
	resp, err := noRedirect.Get("http://" + m.Addr() + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(page), "<form") {
		t.Fatalf("console: %d %s", resp.StatusCode, page)
	}

	locked, _ := startMainEnv(t, env{"IWF_AUTH_TOKENS": tokenOne})
	resp, err = noRedirect.Get("http://" + locked.Addr() + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 303 || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/login") {
		t.Fatalf("console with tokens: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if s := getStatus(t, noRedirect, "http://"+locked.Addr()+"/ui/", tokenOne); s != 200 {
		t.Fatalf("console with a bearer token: %d", s)
	}

	off, out := startMain(t, "--ui=false")
	if s := getStatus(t, noRedirect, "http://"+off.Addr()+"/ui/", ""); s != 404 {
		t.Fatalf("console with --ui=false: %d", s)
	}
	if strings.Contains(out.String(), "web console") {
		t.Fatalf("banner names a console that is off: %s", out)
	}
}
