package console_test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/internal/auth"
	"github.com/iwf-server/iwf-server/internal/console"
)

// formClient is a browser-like client: it keeps cookies and reads the
// CSRF token of a page's forms.
type formClient struct {
	t     *testing.T
	c     *http.Client
	base  string
	token string
}

func newFormClient(t *testing.T, base string) *formClient {
	jar, _ := cookiejar.New(nil)
	return &formClient{t: t, base: base, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

var tokenRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// open loads a page and keeps its CSRF token.
func (f *formClient) open(path string) string {
	f.t.Helper()
	resp, err := f.c.Get(f.base + path)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if m := tokenRe.FindSubmatch(b); m != nil {
		f.token = string(m[1])
	}
	return string(b)
}

// post submits an action form with extra headers.
func (f *formClient) post(action string, form url.Values, headers map[string]string) (int, string, string) {
	f.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.base+"/ui/actions/"+action, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := f.c.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("Location")
}

func TestActionsRefuseCrossSiteRequests(t *testing.T) {
	e := newEnv(t, "sqlite")
	e.start(t, "csrf-1")
	waitStatus(t, e, "csrf-1", iwfapi.WorkflowStatusRunning)
	f := newFormClient(t, e.url)
	f.open("/ui/workflows/csrf-1")
	if f.token == "" {
		t.Fatal("the run page has no CSRF token")
	}
	stop := func(token string) url.Values {
		return url.Values{"workflowId": {"csrf-1"}, "stopType": {"TERMINATE"}, "confirm": {"yes"}, "csrf": {token}}
	}
	host := strings.TrimPrefix(e.url, "http://")
	for _, tc := range []struct {
		name    string
		form    url.Values
		headers map[string]string
	}{
		{"cross-site fetch metadata", stop(f.token), map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{"same-site fetch metadata", stop(f.token), map[string]string{"Sec-Fetch-Site": "same-site"}},
		{"foreign origin", stop(f.token), map[string]string{"Origin": "http://evil.example"}},
		{"null origin", stop(f.token), map[string]string{"Origin": "null"}},
		{"foreign referer", stop(f.token), map[string]string{"Referer": "http://evil.example/x"}},
		{"no token", stop(""), map[string]string{"Origin": "http://" + host}},
		{"forged token", stop("AAAA" + f.token[4:]), map[string]string{"Origin": "http://" + host}},
	} {
		status, body, _ := f.post("stop", tc.form, tc.headers)
		if status != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403\n%s", tc.name, status, body)
		}
	}
	// A token without its cookie (another browser) is refused too.
	other := newFormClient(t, e.url)
	if status, _, _ := other.post("stop", stop(f.token), map[string]string{"Sec-Fetch-Site": "same-origin"}); status != http.StatusForbidden {
		t.Errorf("token without cookie: status %d, want 403", status)
	}
	// GET never acts.
	if resp, err := f.c.Get(e.url + "/ui/actions/stop?workflowId=csrf-1&stopType=TERMINATE&confirm=yes&csrf=" + url.QueryEscape(f.token)); err != nil || resp.StatusCode < 400 {
		t.Errorf("GET action: %v %v", resp.StatusCode, err)
	}
	if d, _ := e.eng.DescribeWorkflow(context.Background(), iwfapi.WorkflowDescribeRequest{WorkflowId: "csrf-1"}); d.Status != iwfapi.WorkflowStatusRunning {
		t.Fatalf("a refused request changed the run: %s", d.Status)
	}

	// Same-origin: without confirm=yes a confirmation page, with it the action.
	status, body, _ := f.post("stop", url.Values{"workflowId": {"csrf-1"}, "stopType": {"TERMINATE"}, "reason": {"test"}, "csrf": {f.token}},
		map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://" + host})
	if status != http.StatusOK || !strings.Contains(body, `id="confirm"`) || !strings.Contains(body, "with TERMINATE") {
		t.Fatalf("confirmation page: %d\n%s", status, body)
	}
	status, _, loc := f.post("stop", stop(f.token), map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://" + host})
	if status != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/workflows/csrf-1") {
		t.Fatalf("stop: %d %q", status, loc)
	}
	if body := f.open(loc); !strings.Contains(body, "Workflow stopped (TERMINATE)") || !strings.Contains(body, `data-status="TERMINATED"`) {
		t.Fatalf("after stop:\n%s", body)
	}
	// A failing action is a plain error page.
	status, body, _ = f.post("signal", url.Values{"workflowId": {"csrf-1"}, "channel": {"approval"}, "value": {"{not json"}, "confirm": {"yes"}, "csrf": {f.token}}, nil)
	if status != http.StatusBadRequest || !strings.Contains(body, "not valid JSON") {
		t.Fatalf("bad signal: %d\n%s", status, body)
	}
	status, body, _ = f.post("signal", url.Values{"workflowId": {"csrf-1"}, "channel": {"approval"}, "value": {"1"}, "confirm": {"yes"}, "csrf": {f.token}}, nil)
	if status < 400 || !strings.Contains(body, "signal failed") {
		t.Fatalf("signal to a closed run: %d\n%s", status, body)
	}
}

// TestTimelineFromHistory derives the timeline and diagram from the real
// history of a run that completed, and of one that was reset and failed.
func TestTimelineFromHistory(t *testing.T) {
	e := newEnv(t, "sqlite")
	ctx := context.Background()
	run := e.start(t, "tl-1")
	waitStatus(t, e, "tl-1", iwfapi.WorkflowStatusRunning)
	if err := e.eng.SignalWorkflow(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: "tl-1", SignalChannelName: "approval", SignalValue: text(`"ok"`)}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, e, "tl-1", iwfapi.WorkflowStatusCompleted)
	h, err := e.eng.WorkflowHistory(ctx, iwfapi.WorkflowHistoryRequest{WorkflowId: "tl-1", WorkflowRunId: &run})
	if err != nil {
		t.Fatal(err)
	}
	got := console.Derive(h.Events, time.Now())
	want := console.Summary{
		Executions: []string{
			"prepare-1 prepare parent= COMPLETED ->approve",
			"approve-1 approve parent=prepare-1 COMPLETED ->_SYS_GRACEFUL_COMPLETING_WORKFLOW",
		},
		Edges: []string{
			"start->state:prepare x1",
			"state:prepare->state:approve x1",
			"state:approve->end:_SYS_GRACEFUL_COMPLETING_WORKFLOW x1",
		},
		Closed: true,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("derived\n%+v\nwant\n%+v", got, want)
	}

	// A running run stopped with FAIL: the waiting execution is abandoned
	// and the diagram ends in "failed".
	run2 := e.start(t, "tl-2")
	waitStatus(t, e, "tl-2", iwfapi.WorkflowStatusRunning)
	if err := e.eng.StopWorkflow(ctx, iwfapi.WorkflowStopRequest{WorkflowId: "tl-2", StopType: ptr(iwfapi.WorkflowStopTypeFail), Reason: ptr("no")}); err != nil {
		t.Fatal(err)
	}
	h, err = e.eng.WorkflowHistory(ctx, iwfapi.WorkflowHistoryRequest{WorkflowId: "tl-2", WorkflowRunId: &run2})
	if err != nil {
		t.Fatal(err)
	}
	got = console.Derive(h.Events, time.Now())
	want = console.Summary{
		Executions: []string{
			"prepare-1 prepare parent= COMPLETED ->approve",
			"approve-1 approve parent=prepare-1 ABANDONED",
		},
		Edges: []string{
			"start->state:prepare x1",
			"state:prepare->state:approve x1",
			"state:approve->end:status:FAILED x1",
		},
		Closed: true,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("derived\n%+v\nwant\n%+v", got, want)
	}
}

func TestLoopsAndRetriesInTimeline(t *testing.T) {
	// A hand-written history in the engine's event shapes: a state that
	// loops to itself twice, with a failed execute attempt, still running.
	ev := func(id int64, typ, x string, data map[string]any) iwfapi.WorkflowHistoryEvent {
		e := iwfapi.WorkflowHistoryEvent{EventId: id, EventType: typ, TimestampMs: 1000 + id*10, Data: &data}
		if x != "" {
			e.StateExecutionId = &x
		}
		return e
	}
	next := func(ids ...string) map[string]any {
		var ns []any
		for _, id := range ids {
			ns = append(ns, map[string]any{"stateId": id})
		}
		return map[string]any{"attempt": 1.0, "decision": map[string]any{"nextStates": ns}}
	}
	events := []iwfapi.WorkflowHistoryEvent{
		ev(1, "WorkflowStarted", "", map[string]any{"workflowType": "T"}),
		ev(2, "StateExecutionStarted", "poll-1", map[string]any{"stateId": "poll", "skipWaitUntil": true}),
		ev(3, "EXECUTEAttemptFailed", "poll-1", map[string]any{"attempt": 1.0, "status": 500.0, "error": "boom"}),
		ev(4, "ExecuteCompleted", "poll-1", next("poll")),
		ev(5, "StateExecutionStarted", "poll-2", map[string]any{"stateId": "poll", "skipWaitUntil": true}),
		ev(6, "ExecuteCompleted", "poll-2", next("poll", "report")),
		ev(7, "StateExecutionStarted", "poll-3", map[string]any{"stateId": "poll", "skipWaitUntil": true}),
		ev(8, "StateExecutionStarted", "report-1", map[string]any{"stateId": "report"}),
	}
	got := console.Derive(events, time.UnixMilli(2000))
	want := console.Summary{
		Executions: []string{
			"poll-1 poll parent= COMPLETED ->poll failures=1",
			"poll-2 poll parent=poll-1 COMPLETED ->poll ->report",
			"poll-3 poll parent=poll-2 EXECUTE",
			"report-1 report parent=poll-2 WAIT_UNTIL",
		},
		Edges: []string{"start->state:poll x1", "state:poll->state:poll x2", "state:poll->state:report x1"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("derived\n%+v\nwant\n%+v", got, want)
	}
}

// TestTimelinePages derives pages of a hand-written history: each page
// holds its executions in full (parents from outside the page included)
// and the diagram counts every execution whatever the page.
func TestTimelinePages(t *testing.T) {
	var events []iwfapi.WorkflowHistoryEvent
	id := int64(0)
	ev := func(typ, x string, data map[string]any) {
		id++
		e := iwfapi.WorkflowHistoryEvent{EventId: id, EventType: typ, TimestampMs: 1000 + id, Data: &data}
		if x != "" {
			e.StateExecutionId = &x
		}
		events = append(events, e)
	}
	ev("WorkflowStarted", "", map[string]any{"workflowType": "T"})
	for i := 1; i <= 5; i++ {
		x := "step-" + strconv.Itoa(i)
		ev("StateExecutionStarted", x, map[string]any{"stateId": "step", "skipWaitUntil": true})
		next := "step"
		if i == 5 {
			next = "_SYS_GRACEFUL_COMPLETING_WORKFLOW"
		}
		ev("ExecuteCompleted", x, map[string]any{"attempt": 1.0, "decision": map[string]any{"nextStates": []any{map[string]any{"stateId": next}}}})
	}
	ev("WorkflowClosed", "", map[string]any{"status": "COMPLETED"})
	edges := []string{"start->state:step x1", "state:step->state:step x4", "state:step->end:_SYS_GRACEFUL_COMPLETING_WORKFLOW x1"}
	for _, tc := range []struct {
		size, before int
		want         []string
	}{
		{2, 0, []string{"step-4 step parent=step-3 COMPLETED ->step", "step-5 step parent=step-4 COMPLETED ->_SYS_GRACEFUL_COMPLETING_WORKFLOW"}},
		{2, 4, []string{"step-2 step parent=step-1 COMPLETED ->step", "step-3 step parent=step-2 COMPLETED ->step"}},
		{2, 2, []string{"step-1 step parent= COMPLETED ->step"}},
		{10, 0, []string{"step-1 step parent= COMPLETED ->step", "step-2 step parent=step-1 COMPLETED ->step", "step-3 step parent=step-2 COMPLETED ->step",
			"step-4 step parent=step-3 COMPLETED ->step", "step-5 step parent=step-4 COMPLETED ->_SYS_GRACEFUL_COMPLETING_WORKFLOW"}},
	} {
		got := console.DerivePage(events, time.Now(), tc.size, tc.before)
		want := console.Summary{Executions: tc.want, Edges: edges, Closed: true}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("page of %d before %d:\n%+v\nwant\n%+v", tc.size, tc.before, got, want)
		}
	}
}

// TestCSRFTokenBoundToSession: a form's CSRF token is bound to the console
// session it was rendered in: with the same CSRF cookie, a token from one
// session's page is refused in another, and works in its own.
func TestCSRFTokenBoundToSession(t *testing.T) {
	e := newEnv(t, "sqlite")
	e.start(t, "csrf-2")
	waitStatus(t, e, "csrf-2", iwfapi.WorkflowStatusRunning)
	f := newFormClient(t, e.url)
	ui, _ := url.Parse(e.url + "/ui/")
	session := func(id string) {
		f.c.Jar.SetCookies(ui, []*http.Cookie{{Name: auth.SessionCookie, Value: id, Path: "/ui/"}})
	}
	session("session-one")
	f.open("/ui/workflows/csrf-2")
	one := f.token
	session("session-two")
	stop := func(token string) url.Values {
		return url.Values{"workflowId": {"csrf-2"}, "stopType": {"TERMINATE"}, "confirm": {"yes"}, "csrf": {token}}
	}
	same := map[string]string{"Sec-Fetch-Site": "same-origin"}
	if status, body, _ := f.post("stop", stop(one), same); status != http.StatusForbidden || !strings.Contains(body, "invalid CSRF token") {
		t.Fatalf("a token of another session: %d\n%s", status, body)
	}
	if d, _ := e.eng.DescribeWorkflow(context.Background(), iwfapi.WorkflowDescribeRequest{WorkflowId: "csrf-2"}); d.Status != iwfapi.WorkflowStatusRunning {
		t.Fatalf("a refused request changed the run: %s", d.Status)
	}
	f.open("/ui/workflows/csrf-2")
	if f.token == one {
		t.Fatal("two sessions got the same CSRF token")
	}
	if status, body, _ := f.post("stop", stop(f.token), same); status != http.StatusSeeOther {
		t.Fatalf("the session's own token: %d\n%s", status, body)
	}
}

// TestPageSecurityHeaders: every console answer — a page, a 404, an
// action's refusal — sends the security headers, and HSTS over TLS only.
func TestPageSecurityHeaders(t *testing.T) {
	e := newEnv(t, "sqlite")
	h, err := console.New(e.eng, console.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/ui/", "/ui/no-such-page", "/ui/static/console.css"} {
		for _, overTLS := range []bool{false, true} {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			if overTLS {
				req.TLS = &tls.ConnectionState{}
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			hd := rec.Header()
			if hd.Get("X-Frame-Options") != "DENY" || hd.Get("Content-Security-Policy") != auth.PageCSP || hd.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("%s (TLS %v): %d, headers %v", path, overTLS, rec.Code, hd)
			}
			if got := hd.Get("Strict-Transport-Security"); (got == auth.HSTS) != overTLS {
				t.Errorf("%s (TLS %v): Strict-Transport-Security %q", path, overTLS, got)
			}
		}
	}
}
