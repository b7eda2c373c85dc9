package httpapi_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/auth"
	"github.com/iwf-server/iwf-server/internal/httpapi"
)

// doHost sends a request with the given Host header.
func (s *testServer) doHost(t *testing.T, method, path, host string, body string, header http.Header) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if host != "" {
		req.Host = host
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// uiStub stands for the console: it answers 200 with its path.
var uiStub = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.WriteString(w, "console "+r.URL.Path)
})

// What a browser sends from another site is refused with 403, on the API
// and on the console; what SDKs, curl and the server's own pages send is
// served.
func TestCrossSiteRequestsRefused(t *testing.T) {
	s := newTestServer(t, httpapi.Options{Extra: uiStub, ExtraPrefix: "/ui/"})
	host := strings.TrimPrefix(s.URL, "http://")
	refused := map[string]http.Header{
		"Sec-Fetch-Site cross-site": {"Sec-Fetch-Site": {"cross-site"}},
		"Sec-Fetch-Site same-site":  {"Sec-Fetch-Site": {"same-site"}},
		"Origin of another site":    {"Origin": {"http://evil.example"}},
		"Origin of another port":    {"Origin": {"http://127.0.0.1:1"}},
		"Origin null":               {"Origin": {"null"}},
		"Referer of another site":   {"Referer": {"http://evil.example/page"}},
		"same-origin but Origin elsewhere": {
			"Sec-Fetch-Site": {"same-origin"}, "Origin": {"http://evil.example"},
		},
	}
	for name, h := range refused {
		resp := s.doHost(t, http.MethodPost, signalPath, "", signalBody, h)
		d, _ := resp.errorResponse(t)["detail"].(string)
		if resp.status != 403 || !strings.Contains(d, "cross-site request refused") || !strings.Contains(d, "docs/security.md") {
			t.Errorf("API, %s: got %d %s", name, resp.status, resp.body)
		}
		resp = s.doHost(t, http.MethodPost, "/ui/actions/stop", "", "", h)
		if resp.status != 403 || !strings.Contains(string(resp.body), "Opened from another site") {
			t.Errorf("console action, %s: got %d %s", name, resp.status, resp.body)
		}
	}
	if c := s.svc.lastCall(); c != nil {
		t.Fatalf("a cross-site request reached the service: %#v", c)
	}
	// A console page opened from a link on another site offers a
	// same-origin link to itself.
	resp := s.doHost(t, http.MethodGet, "/ui/workflows/w1?run=r1", "", "", http.Header{"Sec-Fetch-Site": {"cross-site"}})
	if resp.status != 403 || !strings.Contains(string(resp.body), `<a href="/ui/workflows/w1?run=r1">`) {
		t.Errorf("cross-site console navigation: got %d %s", resp.status, resp.body)
	}

	allowed := map[string]http.Header{
		"no browser headers (SDK, curl)": {},
		"Sec-Fetch-Site same-origin":     {"Sec-Fetch-Site": {"same-origin"}},
		"Sec-Fetch-Site none":            {"Sec-Fetch-Site": {"none"}},
		"same Origin":                    {"Origin": {"http://" + host}, "Sec-Fetch-Site": {"same-origin"}},
		"same Origin, old browser":       {"Origin": {"http://" + host}},
		"same Referer":                   {"Referer": {"http://" + host + "/ui/"}},
	}
	for name, h := range allowed {
		if resp := s.doHost(t, http.MethodPost, signalPath, "", signalBody, h); resp.status != 200 {
			t.Errorf("API, %s: got %d %s", name, resp.status, resp.body)
		}
		if resp := s.doHost(t, http.MethodGet, "/ui/", "", "", h); resp.status != 200 || string(resp.body) != "console /ui/" {
			t.Errorf("console, %s: got %d %s", name, resp.status, resp.body)
		}
	}
	// The hello text, metrics and the health check are not guarded.
	if resp := s.doHost(t, http.MethodGet, "/info/healthcheck", "", "", http.Header{"Sec-Fetch-Site": {"cross-site"}}); resp.status != 200 {
		t.Errorf("healthcheck from another site: got %d %s", resp.status, resp.body)
	}
}

// A server that restricts hosts answers 421 to a Host it does not serve
// (DNS rebinding) and serves loopback names with any port and the allowed
// hosts.
func TestHostGuard(t *testing.T) {
	hosts, err := auth.NewHostPolicy([]string{"iwf.example.com", "*.corp.example", "10.0.0.5"})
	if err != nil {
		t.Fatal(err)
	}
	s := newTestServer(t, httpapi.Options{Hosts: hosts, Extra: uiStub, ExtraPrefix: "/ui/", Metrics: func(w io.Writer) error { return nil }})
	for _, host := range []string{"rebind.attacker.example", "rebind.attacker.example:8801", "corp.example", "evilcorp.example", "10.0.0.6:8801", "iwf.example.com.evil"} {
		for _, path := range []string{signalPath, "/ui/", "/metrics"} {
			body := ""
			method := http.MethodGet
			if path == signalPath {
				body, method = signalBody, http.MethodPost
			}
			resp := s.doHost(t, method, path, host, body, nil)
			d, _ := resp.errorResponse(t)["detail"].(string)
			if resp.status != http.StatusMisdirectedRequest || !strings.Contains(d, "is not served here") {
				t.Errorf("Host %s %s: got %d %s", host, path, resp.status, resp.body)
			}
		}
	}
	if c := s.svc.lastCall(); c != nil {
		t.Fatalf("a request for another host reached the service: %#v", c)
	}
	// Probes send an address: the health check answers any host.
	if resp := s.doHost(t, http.MethodGet, "/info/healthcheck", "10.1.2.3:8801", "", nil); resp.status != 200 {
		t.Errorf("healthcheck for another host: got %d %s", resp.status, resp.body)
	}
	for _, host := range []string{"localhost", "localhost:8801", "LOCALHOST:1", "127.0.0.1:8801", "127.0.0.2", "[::1]:8801", "[::1]",
		"iwf.example.com", "iwf.example.com:443", "IWF.example.com.", "a.corp.example", "b.a.corp.example:8801", "10.0.0.5:8801"} {
		if resp := s.doHost(t, http.MethodPost, signalPath, host, signalBody, nil); resp.status != 200 {
			t.Errorf("Host %s: got %d %s", host, resp.status, resp.body)
		}
	}
	// Without a policy any host is served.
	open := newTestServer(t, httpapi.Options{})
	if resp := open.doHost(t, http.MethodPost, signalPath, "rebind.attacker.example", signalBody, nil); resp.status != 200 {
		t.Errorf("no policy: got %d %s", resp.status, resp.body)
	}
}

// deadlineService records the deadline of the contexts it is called with;
// its search waits until its context ends, as a store's query does when
// its statement outlives the request.
type deadlineService struct {
	fakeService
	started   chan struct{}
	deadlines chan time.Time
	ended     chan error
}

func (d *deadlineService) record(ctx context.Context) {
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Time{}
	}
	d.deadlines <- dl
}

func (d *deadlineService) GetWorkflow(ctx context.Context, _ iwfapi.WorkflowGetRequest) (iwfapi.WorkflowGetResponse, error) {
	d.record(ctx)
	return iwfapi.WorkflowGetResponse{WorkflowRunId: "r", WorkflowStatus: iwfapi.WorkflowStatusRunning}, nil
}

func (d *deadlineService) GetWorkflowWithWait(ctx context.Context, _ iwfapi.WorkflowGetRequest) (iwfapi.WorkflowGetResponse, error) {
	d.record(ctx)
	return iwfapi.WorkflowGetResponse{WorkflowRunId: "r", WorkflowStatus: iwfapi.WorkflowStatusRunning}, nil
}

func (d *deadlineService) SearchWorkflows(ctx context.Context, _ iwfapi.WorkflowSearchRequest) (iwfapi.WorkflowSearchResponse, error) {
	d.started <- struct{}{}
	<-ctx.Done()
	d.ended <- ctx.Err()
	// A store reports a cancelled statement as unavailable, or as the
	// context's error; either way the request's deadline decides.
	return iwfapi.WorkflowSearchResponse{}, &engine.UnavailableError{Store: "PostgreSQL", Err: ctx.Err()}
}

func newDeadlineServer(t *testing.T, opts httpapi.Options) (*testServer, *deadlineService) {
	t.Helper()
	svc := &deadlineService{started: make(chan struct{}, 1), deadlines: make(chan time.Time, 1), ended: make(chan error, 1)}
	logs := &syncBuffer{}
	opts.Logger = zerolog.New(logs)
	h, err := httpapi.NewHandler(svc, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &testServer{Server: srv, svc: &svc.fakeService, log: logs}, svc
}

// Every request's context carries a deadline: RequestTimeout for ordinary
// operations and console pages, LongPollTimeout for the long polls. A
// request past its deadline answers 504, not 503.
func TestRequestDeadline(t *testing.T) {
	const regular, longPoll = 200 * time.Millisecond, time.Hour
	var uiDeadline time.Time
	var uiHad bool
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uiDeadline, uiHad = r.Context().Deadline()
	})
	s, svc := newDeadlineServer(t, httpapi.Options{RequestTimeout: regular, LongPollTimeout: longPoll, Extra: ui, ExtraPrefix: "/ui/"})

	before := time.Now()
	if resp := s.post(t, "/api/v1/workflow/get", `{"workflowId":"w"}`); resp.status != 200 {
		t.Fatalf("get: %d %s", resp.status, resp.body)
	}
	if dl := <-svc.deadlines; dl.IsZero() || dl.After(time.Now().Add(regular)) || dl.Before(before) {
		t.Errorf("get: deadline %v, want within %s of the request", dl, regular)
	}
	if resp := s.post(t, "/api/v1/workflow/getWithWait", `{"workflowId":"w"}`); resp.status != 200 {
		t.Fatalf("getWithWait: %d %s", resp.status, resp.body)
	}
	if dl := <-svc.deadlines; dl.Before(time.Now().Add(longPoll / 2)) {
		t.Errorf("getWithWait: deadline %v, want the long-poll budget %s", dl, longPoll)
	}
	if resp := s.doHost(t, http.MethodGet, "/ui/?q=x", "", "", nil); resp.status != 200 {
		t.Fatalf("console: %d %s", resp.status, resp.body)
	}
	if !uiHad || uiDeadline.After(time.Now().Add(regular)) {
		t.Errorf("console page: deadline %v (set: %v), want within %s", uiDeadline, uiHad, regular)
	}

	// A search that outlives its deadline ends with it, and answers 504.
	resp := s.post(t, "/api/v1/workflow/search", `{"query":"x"}`)
	<-svc.started
	if err := <-svc.ended; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("search context ended with %v, want its deadline", err)
	}
	d, _ := resp.errorResponse(t)["detail"].(string)
	if resp.status != http.StatusGatewayTimeout || !strings.Contains(d, "deadline of 200ms") || resp.header.Get("Retry-After") != "" {
		t.Errorf("search past its deadline: got %d %q %s", resp.status, resp.header.Get("Retry-After"), resp.body)
	}
}

// A client that goes away cancels its request's context.
func TestClientGoneCancelsRequest(t *testing.T) {
	s, svc := newDeadlineServer(t, httpapi.Options{RequestTimeout: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/api/v1/workflow/search", strings.NewReader(`{"query":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	done := make(chan error, 1)
	go func() {
		resp, err := s.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-svc.started
	cancel()
	if err := <-svc.ended; !errors.Is(err, context.Canceled) {
		t.Errorf("search context ended with %v, want cancelled", err)
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("client: %v", err)
	}
}
