package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/internal/audit"
	"github.com/iwf-server/iwf-server/internal/auth"
	"github.com/iwf-server/iwf-server/internal/crashtest"
)

// The tokens of the roles tests, one per role.
const (
	readerToken   = "reader-token-0123456789"
	writerToken   = "writer-token-0123456789"
	operatorToken = "operator-token-abcdefgh"
	fullToken     = "full-access-token-012345"
)

// roleTokens is a token file with a token of each role and a bare one.
const roleTokens = "# role tokens\n" +
	readerToken + " dashboard reader\n" +
	writerToken + "   app\twriter\n" +
	operatorToken + " oncall operator\n" +
	fullToken + "\n"

// loopingWorker serves a workflow whose state S1 waits for a day-long
// timer "t" and then starts S1 again: a run that stays running, with a
// timer to skip.
func loopingWorker(t *testing.T) *httptest.Server {
	w := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1/workflowState/start":
			fmt.Fprint(w, `{"commandRequest":{"commandWaitingType":"ALL_COMPLETED","timerCommands":[{"commandId":"t","durationSeconds":86400}]}}`)
		case "/api/v1/workflowState/decide":
			fmt.Fprint(w, `{"stateDecision":{"nextStates":[{"stateId":"S1"}]}}`)
		default:
			w.WriteHeader(404)
		}
	}))
	t.Cleanup(w.Close)
	return w
}

// history returns the events of a run (the current one for runID "").
func history(t *testing.T, base, token, wfID, runID string) []map[string]any {
	t.Helper()
	status, _, body := call(t, http.DefaultClient, base+"/api/v1/workflow/history", token,
		fmt.Sprintf(`{"workflowId":%q,"workflowRunId":%q,"pageSize":1000}`, wfID, runID))
	if status != 200 {
		t.Fatalf("history: %d %v", status, body)
	}
	var out []map[string]any
	for _, e := range body["events"].([]any) {
		out = append(out, e.(map[string]any))
	}
	return out
}

// eventActor returns the actor of the first event of type typ whose data
// has key (any when ""), and whether there is such an event.
func eventActor(events []map[string]any, typ, key string) (string, bool) {
	for _, e := range events {
		data, _ := e["data"].(map[string]any)
		if e["eventType"] != typ || (key != "" && data[key] == nil) {
			continue
		}
		a, _ := data["actor"].(string)
		return a, true
	}
	return "", false
}

// readAudit returns the audit entries of a file, or of a process's output
// when the log goes to stderr.
func readAudit(t *testing.T, file string, srv *crashtest.Server) []audit.Entry {
	t.Helper()
	var text string
	if file == "-" {
		text = srv.Log()
	} else {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		text = string(b)
	}
	var out []audit.Entry
	for _, line := range strings.Split(text, "\n") {
		if !strings.Contains(line, `"operation":`) || strings.Contains(line, `"level":`) {
			continue
		}
		var e audit.Entry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

// findAudit waits for an audit entry that match accepts (the line is
// written once the answer is, so a client may see the answer first).
func findAudit(t *testing.T, file string, srv *crashtest.Server, what string, match func(e audit.Entry) bool) audit.Entry {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		entries := readAudit(t, file, srv)
		for _, e := range entries {
			if match(e) {
				return e
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no audit entry for %s in %d entries: %+v", what, len(entries), entries)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// consoleGet fetches a console page with a bearer token and returns its
// status, body and cookies.
func consoleGet(t *testing.T, url, token string) (int, string, []*http.Cookie) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Cookies()
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// consoleAction posts a confirmed console action as the page of runURL
// would, with the page's CSRF token, and returns the status.
func consoleAction(t *testing.T, base, runURL, token, action string, form url.Values) (int, string) {
	t.Helper()
	_, page, cookies := consoleGet(t, runURL, token)
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token on %s", runURL)
	}
	form.Set("csrf", m[1])
	form.Set("confirm", "yes")
	req, _ := http.NewRequest(http.MethodPost, base+"/ui/actions/"+action, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Origin", base)
	for _, c := range cookies {
		req.AddCookie(c)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestBinaryRolesAndAudit runs the server binary with a token of each role
// and an audit log, on both stores: every API route is refused (403, an
// ErrorResponse naming the role needed) exactly to the roles the access
// table leaves it out of; the console hides and refuses what the token
// cannot do; every mutating call, allowed or refused, from the API or the
// console, is one audit line with its actor, address, operation, ids and
// outcome; stop, reset and skip timer record the actor in the run's
// history, and the console's run page shows it.
func TestBinaryRolesAndAudit(t *testing.T) {
	forEachDB(t, func(t *testing.T, db string) {
		dir := t.TempDir()
		tokens := filepath.Join(dir, "tokens")
		if err := os.WriteFile(tokens, []byte(roleTokens), 0o600); err != nil {
			t.Fatal(err)
		}
		auditFile := filepath.Join(dir, "audit.jsonl")
		if strings.HasPrefix(db, "postgres") {
			auditFile = "-" // stderr, read from the process's output
		}
		srv := crashtest.StartServer(t, crashtest.Options{Bin: serverBinary(t), DB: db, LogLevel: "info",
			Args: []string{"--auth-token-file", tokens, "--audit-log", auditFile}})
		base := srv.URL()
		c := http.DefaultClient
		worker := loopingWorker(t)

		// Every API route against every role.
		byToken := map[string]auth.Role{readerToken: auth.RoleReader, writerToken: auth.RoleWriter,
			operatorToken: auth.RoleOperator, fullToken: auth.RoleAll}
		probe := `{"workflowId":"no-such-workflow","waitTimeSeconds":1,"timeoutSeconds":1}`
		for _, rule := range auth.Rules {
			if rule.Console || rule.Need == 0 || rule.Method != http.MethodPost {
				continue
			}
			for tok, role := range byToken {
				status, _, body := call(t, c, base+rule.Path, tok, probe)
				if role.Grants(rule.Need) {
					if status == 403 || status == 401 {
						t.Errorf("%s as %s: %d %v", rule.Path, role, status, body)
					}
					continue
				}
				want := fmt.Sprintf("needs the %s role (or all)", rule.Need)
				if status != 403 || !strings.Contains(fmt.Sprint(body["detail"]), want) || !strings.Contains(fmt.Sprint(body["detail"]), "has the "+string(role)+" role") {
					t.Errorf("%s as %s: %d %v, want 403 %q", rule.Path, role, status, body, want)
				}
			}
		}
		findAudit(t, auditFile, srv, "a refused reset", func(e audit.Entry) bool {
			return e.Operation == "reset" && e.Actor == "dashboard" && e.Outcome == "forbidden" && e.Status == 403 &&
				e.WorkflowID == "no-such-workflow" && e.Source == "api" && strings.HasPrefix(e.RemoteAddr, "127.0.0.1:")
		})
		findAudit(t, auditFile, srv, "a stop of a workflow that does not exist", func(e audit.Entry) bool {
			return e.Operation == "stop" && e.Actor == "oncall" && e.Role == "operator" && e.Outcome == "workflow_not_exists" && e.Status == 400
		})
		findAudit(t, auditFile, srv, "a bare token's call", func(e audit.Entry) bool {
			return e.Operation == "signal" && e.Actor == "token" && e.Role == "all"
		})

		// A run: the writer starts and signals it.
		status, _, body := call(t, c, base+"/api/v1/workflow/start", writerToken,
			`{"workflowId":"wf-roles","iwfWorkflowType":"Loop","workflowTimeoutSeconds":0,"iwfWorkerUrl":"`+worker.URL+`","startStateId":"S1"}`)
		if status != 200 {
			t.Fatalf("start: %d %v", status, body)
		}
		firstRun := body["workflowRunId"].(string)
		findAudit(t, auditFile, srv, "the start", func(e audit.Entry) bool {
			return e.Operation == "start" && e.Actor == "app" && e.WorkflowID == "wf-roles" && e.RunID == firstRun && e.Outcome == "ok" && e.Status == 200
		})
		deadline := time.Now().Add(time.Minute)
		for {
			if _, ok := eventActor(history(t, base, readerToken, "wf-roles", firstRun), "WaitUntilCompleted", ""); ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("waitUntil did not complete")
			}
			time.Sleep(20 * time.Millisecond)
		}
		if status, _, body = call(t, c, base+"/api/v1/workflow/signal", writerToken, `{"workflowId":"wf-roles","signalChannelName":"ch"}`); status != 200 {
			t.Fatalf("signal: %d %v", status, body)
		}
		// The reader and the writer may not stop it.
		for _, tok := range []string{readerToken, writerToken} {
			if status, _, body = call(t, c, base+"/api/v1/workflow/stop", tok, `{"workflowId":"wf-roles"}`); status != 403 {
				t.Fatalf("stop as %s: %d %v", byToken[tok], status, body)
			}
		}
		// The operator skips the timer and resets the run.
		if status, _, body = call(t, c, base+"/api/v1/workflow/timer/skip", operatorToken,
			`{"workflowId":"wf-roles","workflowStateExecutionId":"S1-1","timerCommandId":"t"}`); status != 200 {
			t.Fatalf("skip timer: %d %v", status, body)
		}
		status, _, body = call(t, c, base+"/api/v1/workflow/reset", operatorToken, `{"workflowId":"wf-roles","resetType":"BEGINNING"}`)
		if status != 200 {
			t.Fatalf("reset: %d %v", status, body)
		}
		secondRun := body["workflowRunId"].(string)
		findAudit(t, auditFile, srv, "the reset", func(e audit.Entry) bool {
			return e.Operation == "reset" && e.Actor == "oncall" && e.WorkflowID == "wf-roles" && e.RunID == "" && e.NewRunID == secondRun && e.Outcome == "ok"
		})
		findAudit(t, auditFile, srv, "the skipped timer", func(e audit.Entry) bool {
			return e.Operation == "skipTimer" && e.Actor == "oncall" && e.WorkflowID == "wf-roles" && e.Outcome == "ok"
		})
		findAudit(t, auditFile, srv, "the signal", func(e audit.Entry) bool {
			return e.Operation == "signal" && e.Actor == "app" && e.WorkflowID == "wf-roles" && e.Outcome == "ok"
		})
		events := history(t, base, readerToken, "wf-roles", firstRun)
		for _, tc := range []struct{ typ, key, want string }{
			{"ExternalInput", "signal", "app"},
			{"ExternalInput", "skipTimer", "oncall"},
			{"WorkflowClosed", "", "oncall"},
			{"Reset", "", "oncall"},
		} {
			if got, ok := eventActor(events, tc.typ, tc.key); !ok || got != tc.want {
				t.Errorf("history of the reset run: %s %s actor %q (found %v), want %q", tc.typ, tc.key, got, ok, tc.want)
			}
		}

		// The console: the reader sees no actions, the operator does.
		runPage := base + "/ui/workflows/wf-roles"
		status, page, _ := consoleGet(t, runPage, readerToken)
		if status != 200 || strings.Contains(page, `id="actions"`) || strings.Contains(page, `id="stop-form"`) || strings.Contains(page, "actions/skip-timer") {
			t.Fatalf("the reader's run page (%d) offers actions", status)
		}
		status, page, _ = consoleGet(t, runPage, writerToken)
		if status != 200 || !strings.Contains(page, `id="signal-form"`) || strings.Contains(page, `id="stop-form"`) || strings.Contains(page, `id="reset-form"`) {
			t.Fatalf("the writer's run page (%d): signal only expected", status)
		}
		status, page, _ = consoleGet(t, runPage, operatorToken)
		if status != 200 || !strings.Contains(page, `id="stop-form"`) || !strings.Contains(page, `id="reset-form"`) || strings.Contains(page, `id="signal-form"`) {
			t.Fatalf("the operator's run page (%d): stop and reset expected, no signal", status)
		}
		// The server refuses what the page hides.
		form := url.Values{"workflowId": {"wf-roles"}, "runId": {secondRun}, "stopType": {"TERMINATE"}}
		if status, page = consoleAction(t, base, runPage, readerToken, "stop", form); status != 403 || !strings.Contains(page, "needs the operator role") {
			t.Fatalf("console stop as reader: %d %s", status, page)
		}
		findAudit(t, auditFile, srv, "the refused console stop", func(e audit.Entry) bool {
			return e.Source == "console" && e.Operation == "stop" && e.Actor == "dashboard" && e.Outcome == "forbidden" && e.RunID == secondRun
		})
		if status, page = consoleAction(t, base, runPage, operatorToken, "stop", form); status != 303 {
			t.Fatalf("console stop as operator: %d %s", status, page)
		}
		findAudit(t, auditFile, srv, "the console stop", func(e audit.Entry) bool {
			return e.Source == "console" && e.Operation == "stop" && e.Actor == "oncall" && e.Outcome == "ok" && e.WorkflowID == "wf-roles" && e.RunID == secondRun
		})
		if got, ok := eventActor(history(t, base, readerToken, "wf-roles", secondRun), "WorkflowClosed", ""); !ok || got != "oncall" {
			t.Fatalf("the stopped run's close: actor %q (%v)", got, ok)
		}
		// Who did it, on the run pages.
		_, page, _ = consoleGet(t, runPage+"?run="+url.QueryEscape(secondRun), readerToken)
		if !strings.Contains(page, `<dd id="closed-by">oncall</dd>`) {
			t.Fatal("the stopped run's page does not say who closed it")
		}
		// A closed run offers only reset: nothing to a writer.
		if _, page, _ = consoleGet(t, runPage+"?run="+url.QueryEscape(secondRun), writerToken); strings.Contains(page, `id="actions"`) {
			t.Fatal("a closed run's page offers a writer an actions section")
		}
		if _, page, _ = consoleGet(t, runPage+"?run="+url.QueryEscape(secondRun), operatorToken); !strings.Contains(page, `id="reset-form"`) {
			t.Fatal("a closed run's page does not offer an operator the reset")
		}
		_, page, _ = consoleGet(t, runPage+"?run="+url.QueryEscape(firstRun), readerToken)
		for _, want := range []string{`<b>Reset</b> <span class="actor">by <b>oncall</b></span>`, `<span class="actor">by <b>app</b></span>`, `<dd id="closed-by">oncall</dd>`} {
			if !strings.Contains(page, want) {
				t.Errorf("the reset run's page lacks %s", want)
			}
		}

		// Reads are not audited; every line has the fields the format names.
		for _, e := range readAudit(t, auditFile, srv) {
			if e.Operation == "" || e.Operation == "get" || e.Actor == "" || e.Time.IsZero() || e.Outcome == "" || e.RemoteAddr == "" || e.Status == 0 {
				t.Errorf("audit entry %+v", e)
			}
		}
		if strings.Contains(srv.Log(), readerToken) || strings.Contains(srv.Log(), operatorToken) {
			t.Fatal("a token reached the server's output")
		}
	})
}
