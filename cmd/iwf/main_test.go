package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/iwftest"
	"github.com/iwf-server/iwf-server/sdk-go/iwf"
)

// Greet waits for a name on the "name" signal channel and completes with a
// greeting. Its RPC "peek" answers without moving it.
type Greet struct{}

func (Greet) ID() string { return "Greet" }

func (Greet) WaitUntil(ctx iwf.Context, input iwf.Object, p iwf.Persistence, c iwf.Communication) (*iwf.CommandRequest, error) {
	return iwf.AllCommandsCompleted(iwf.SignalCommand("name", "name")), nil
}

func (Greet) Execute(ctx iwf.Context, input iwf.Object, r iwf.CommandResults, p iwf.Persistence, c iwf.Communication) (*iwf.StateDecision, error) {
	sig, _ := r.SignalByChannel("name")
	name, err := iwf.As[string](sig.Value)
	if err != nil {
		return nil, err
	}
	greeting, _ := iwf.As[string](input)
	return iwf.GracefulCompleteWorkflow(greeting + ", " + name), nil
}

var greetWorkflow = &iwf.Workflow{
	Type: "Greet", StartState: Greet{}, SignalChannels: []string{"name"},
	RPCs: map[string]iwf.RPC{
		"peek": func(ctx iwf.Context, input iwf.Object, p iwf.Persistence, c iwf.Communication) (any, error) {
			s, err := iwf.As[string](input)
			return map[string]string{"peeked": s}, err
		},
	},
}

// Nap waits on an hour-long timer "nap", then completes.
type Nap struct{}

func (Nap) ID() string { return "Nap" }

func (Nap) WaitUntil(ctx iwf.Context, input iwf.Object, p iwf.Persistence, c iwf.Communication) (*iwf.CommandRequest, error) {
	return iwf.AllCommandsCompleted(iwf.TimerCommand("nap", time.Hour)), nil
}

func (Nap) Execute(ctx iwf.Context, input iwf.Object, r iwf.CommandResults, p iwf.Persistence, c iwf.Communication) (*iwf.StateDecision, error) {
	return iwf.GracefulCompleteWorkflow("rested"), nil
}

var napWorkflow = &iwf.Workflow{Type: "Nap", StartState: Nap{}}

// newEnv runs the real server (engine, SQLite store, REST API) and a real
// HTTP worker in the test.
func newEnv(t *testing.T) *iwftest.Env {
	t.Helper()
	registry, err := iwf.NewRegistry(greetWorkflow, napWorkflow)
	if err != nil {
		t.Fatal(err)
	}
	return iwftest.New(t, registry)
}

// result is one run of the command line.
type result struct {
	stdout, stderr string
	code           int
}

// cliRun runs the command line in-process with the given environment.
// The deadline only fails a stuck test.
func cliRun(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, args, &out, &errb, func(k string) string { return env[k] })
	return result{out.String(), errb.String(), code}
}

// iwfOK runs the command line against server and fails the test unless
// it exits 0.
func iwfOK(t *testing.T, server string, args ...string) string {
	t.Helper()
	r := cliRun(t, nil, append([]string{"--server", server}, args...)...)
	if r.code != 0 {
		t.Fatalf("iwf %s: exit %d, stderr %q, stdout %q", strings.Join(args, " "), r.code, r.stderr, r.stdout)
	}
	if r.stderr != "" {
		t.Fatalf("iwf %s: unexpected stderr %q", strings.Join(args, " "), r.stderr)
	}
	return r.stdout
}

// iwfFails runs the command line and checks its exit code and that it
// wrote one line to stderr, which it returns.
func iwfFails(t *testing.T, code int, env map[string]string, args ...string) string {
	t.Helper()
	r := cliRun(t, env, args...)
	if r.code != code {
		t.Fatalf("iwf %s: exit %d, want %d; stderr %q, stdout %q", strings.Join(args, " "), r.code, code, r.stderr, r.stdout)
	}
	if !strings.HasPrefix(r.stderr, "iwf: ") || strings.Count(r.stderr, "\n") != 1 || !strings.HasSuffix(r.stderr, "\n") {
		t.Fatalf("iwf %s: stderr is not one error line: %q", strings.Join(args, " "), r.stderr)
	}
	return r.stderr
}

// field returns the value of a key in a key-value block.
func field(t *testing.T, out, key string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == key {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no %q in\n%s", key, out)
	return ""
}

func decode[T any](t *testing.T, out string) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("--json output does not decode as %T: %v\n%s", v, err, out)
	}
	return v
}

func TestStartSignalGetListHistory(t *testing.T) {
	env := newEnv(t)
	srv := env.ServerURL()

	out := iwfOK(t, srv, "workflow", "start", "--id", "greet-1", "--type", "Greet", "--worker-url", env.WorkerURL(),
		"--start-state", "Greet", "--input", `"Hello"`, "--timeout-seconds", "600")
	runID := field(t, out, "Run ID")
	if field(t, out, "Workflow ID") != "greet-1" || runID == "" {
		t.Fatalf("start printed\n%s", out)
	}

	out = iwfOK(t, srv, "workflow", "get", "--id", "greet-1")
	if got := field(t, out, "Status"); got != "RUNNING" {
		t.Fatalf("status before the signal: %s\n%s", got, out)
	}
	if got := field(t, out, "Run ID"); got != runID {
		t.Fatalf("get: run %s, started %s", got, runID)
	}

	// An RPC answers while the workflow waits for the signal.
	out = iwfOK(t, srv, "workflow", "rpc", "--id", "greet-1", "--name", "peek", "--input", `"x"`)
	if want := "{\n  \"peeked\": \"x\"\n}\n"; out != want {
		t.Fatalf("rpc printed %q, want %q", out, want)
	}
	rpcJSON := decode[iwfapi.WorkflowRpcResponse](t, iwfOK(t, srv, "--json", "workflow", "rpc", "--id", "greet-1", "--name", "peek", "--input", `"y"`))
	if rpcJSON.Output == nil || deref(rpcJSON.Output.Data) != `{"peeked":"y"}` {
		t.Fatalf("rpc --json output %+v", rpcJSON.Output)
	}

	iwfOK(t, srv, "workflow", "signal", "--id", "greet-1", "--channel", "name", "--value", `"Ann"`)

	// --wait long-polls until the run closes: no sleeping here.
	out = iwfOK(t, srv, "workflow", "get", "--id", "greet-1", "--wait")
	if got := field(t, out, "Status"); got != "COMPLETED" {
		t.Fatalf("status after the signal: %s\n%s", got, out)
	}
	if got := field(t, out, "Result of Greet-1"); got != `"Hello, Ann"` {
		t.Fatalf("result %q\n%s", got, out)
	}
	got := decode[iwfapi.WorkflowGetResponse](t, iwfOK(t, srv, "workflow", "get", "--id", "greet-1", "--json"))
	if got.WorkflowStatus != iwfapi.WorkflowStatusCompleted || got.WorkflowRunId != runID || got.Results == nil ||
		len(*got.Results) != 1 || deref((*got.Results)[0].CompletedStateOutput.Data) != `"Hello, Ann"` {
		t.Fatalf("get --json: %+v", got)
	}

	// A second start of a running-or-closed id is the server's error: exit 1.
	iwfOK(t, srv, "workflow", "start", "--id", "greet-2", "--type", "Greet", "--worker-url", env.WorkerURL(), "--start-state", "Greet")
	stderr := iwfFails(t, exitServerError, nil, "--server", srv, "workflow", "start", "--id", "greet-2", "--type", "Greet",
		"--worker-url", env.WorkerURL(), "--start-state", "Greet")
	if !strings.Contains(stderr, "400") || !strings.Contains(stderr, "WORKFLOW_ALREADY_STARTED_SUB_STATUS") {
		t.Fatalf("second start: %q", stderr)
	}

	t.Run("list", func(t *testing.T) {
		out := iwfOK(t, srv, "workflow", "list", "--query", "WorkflowId='greet-1'")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "WORKFLOW ID") {
			t.Fatalf("list printed\n%s", out)
		}
		cols := strings.Fields(lines[1])
		if len(cols) != 6 || cols[0] != "greet-1" || cols[1] != runID || cols[2] != "Greet" || cols[3] != "COMPLETED" {
			t.Fatalf("list row %q", lines[1])
		}
		for _, col := range cols[4:] { // start and close, from describe
			if _, err := time.Parse(time.RFC3339, col); err != nil {
				t.Fatalf("time column %q: %v", col, err)
			}
		}

		all := decode[iwfapi.WorkflowSearchResponse](t, iwfOK(t, srv, "workflow", "list", "--json", "--query", "IwfWorkflowType='Greet'", "--page-size", "1"))
		if all.WorkflowExecutions == nil || len(*all.WorkflowExecutions) != 1 || deref(all.NextPageToken) == "" {
			t.Fatalf("first page of one: %+v", all)
		}
		out = iwfOK(t, srv, "workflow", "list", "--query", "IwfWorkflowType='Greet'", "--page-size", "1")
		if !strings.Contains(out, "--next-page-token "+deref(all.NextPageToken)) {
			t.Fatalf("list does not print the next page's token:\n%s", out)
		}
		out = iwfOK(t, srv, "workflow", "list", "--brief", "--query", "IwfWorkflowType='Greet'",
			"--page-size", "1", "--next-page-token", deref(all.NextPageToken))
		if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || strings.Contains(out, "next-page-token") {
			t.Fatalf("second (last) page:\n%s", out)
		}

		stderr := iwfFails(t, exitServerError, nil, "--server", srv, "workflow", "list", "--query", "WorkflowId=")
		if !strings.Contains(stderr, "invalid search query") {
			t.Fatalf("bad query: %q", stderr)
		}
	})

	t.Run("history", func(t *testing.T) {
		out := iwfOK(t, srv, "workflow", "history", "--id", "greet-1")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if field(t, out, "Run ID") != runID || !strings.HasPrefix(lines[1], "EVENT") {
			t.Fatalf("history printed\n%s", out)
		}
		if !strings.Contains(lines[2], "WorkflowStarted") || !strings.Contains(lines[len(lines)-1], "WorkflowClosed") {
			t.Fatalf("history from WorkflowStarted to WorkflowClosed:\n%s", out)
		}
		if !strings.Contains(out, "Greet-1") {
			t.Fatalf("history names no state execution:\n%s", out)
		}

		h := decode[iwfapi.WorkflowHistoryResponse](t, iwfOK(t, srv, "--json", "workflow", "history", "--id", "greet-1", "--run-id", runID))
		if h.WorkflowRunId != runID || len(h.Events) != len(lines)-2 || h.Events[0].EventType != "WorkflowStarted" {
			t.Fatalf("history --json: %d events, table %d rows: %+v", len(h.Events), len(lines)-2, h)
		}
		first := h.Events[0].EventId
		after := decode[iwfapi.WorkflowHistoryResponse](t, iwfOK(t, srv, "--json", "workflow", "history", "--id", "greet-1",
			"--after", strconv.FormatInt(first, 10), "--limit", "2"))
		if len(after.Events) != 2 || after.Events[0].EventId != h.Events[1].EventId || !deref(after.HasMore) {
			t.Fatalf("--after %d --limit 2: %+v", first, after)
		}

		// One page, and the command that prints the next: following it
		// page by page prints every event once, oldest first.
		hint := regexp.MustCompile(`\nMore events: iwf workflow history --id greet-1 --run-id (\S+) --after (\d+) \(or --all\)\n$`)
		var seen []string
		args := []string{"workflow", "history", "--id", "greet-1", "--limit", "3"}
		for page := 0; ; page++ {
			out := iwfOK(t, srv, args...)
			rows := strings.Split(strings.TrimSpace(out), "\n")[2:]
			m := hint.FindStringSubmatch(out)
			if m != nil {
				rows = rows[:len(rows)-2]
			}
			for _, r := range rows {
				seen = append(seen, strings.Fields(r)[0])
			}
			if m == nil {
				break
			}
			if m[1] != runID || len(rows) != 3 || page > len(h.Events) {
				t.Fatalf("page %d:\n%s", page, out)
			}
			args = []string{"workflow", "history", "--id", "greet-1", "--run-id", m[1], "--after", m[2], "--limit", "3"}
		}
		if len(seen) != len(h.Events) {
			t.Fatalf("pages printed events %v, want %d", seen, len(h.Events))
		}
		for i, e := range h.Events {
			if seen[i] != strconv.FormatInt(e.EventId, 10) {
				t.Fatalf("pages printed events %v, want %+v", seen, h.Events)
			}
		}

		// --all reads and prints a page at a time (here of 2 events): the
		// same events as one page of all of them.
		defer func(n int) { historyPage = n }(historyPage)
		historyPage = 2
		streamed := decode[iwfapi.WorkflowHistoryResponse](t, iwfOK(t, srv, "--json", "workflow", "history", "--id", "greet-1", "--run-id", runID, "--all"))
		if streamed.WorkflowRunId != runID || deref(streamed.HasMore) || !reflect.DeepEqual(streamed.Events, h.Events) {
			t.Fatalf("--all --json: %+v\nwant %+v", streamed, h.Events)
		}
		out = iwfOK(t, srv, "workflow", "history", "--id", "greet-1", "--run-id", runID, "--all")
		rows := strings.Split(strings.TrimSpace(out), "\n")
		if len(rows) != len(h.Events)+2 || strings.Contains(out, "More events") || !strings.HasPrefix(rows[1], "EVENT") {
			t.Fatalf("--all printed\n%s", out)
		}
		for i, e := range h.Events {
			if f := strings.Fields(rows[i+2]); f[0] != strconv.FormatInt(e.EventId, 10) || f[2] != e.EventType {
				t.Fatalf("--all row %d: %q, want event %+v", i, rows[i+2], e)
			}
		}
		iwfFails(t, exitUsage, nil, "--server", srv, "workflow", "history", "--id", "greet-1", "--all", "--limit", "5")
		last := strconv.FormatInt(h.Events[len(h.Events)-1].EventId, 10)
		for _, all := range []string{"--all=false", "--all"} {
			none := decode[iwfapi.WorkflowHistoryResponse](t, iwfOK(t, srv, "--json", "workflow", "history", "--id", "greet-1", "--after", last, all))
			if none.WorkflowRunId != runID || len(none.Events) != 0 || deref(none.HasMore) {
				t.Fatalf("history %s after the last event: %+v", all, none)
			}
		}
	})

	t.Run("reset", func(t *testing.T) {
		r := decode[iwfapi.WorkflowResetResponse](t, iwfOK(t, srv, "--json", "workflow", "reset", "--id", "greet-1",
			"--type", "STATE_EXECUTION_ID", "--state-execution-id", "Greet-1", "--reason", "test", "--skip-signal-reapply"))
		if r.WorkflowRunId == "" || r.WorkflowRunId == runID {
			t.Fatalf("reset: new run %q, old %q", r.WorkflowRunId, runID)
		}
		out := iwfOK(t, srv, "workflow", "get", "--id", "greet-1")
		if field(t, out, "Run ID") != r.WorkflowRunId || field(t, out, "Status") != "RUNNING" {
			t.Fatalf("after the reset:\n%s", out)
		}
		iwfFails(t, exitUsage, nil, "--server", srv, "workflow", "reset", "--id", "greet-1", "--type", "STATE_ID")
		iwfFails(t, exitUsage, nil, "--server", srv, "workflow", "reset", "--id", "greet-1", "--type", "SOMEWHERE")
	})
}

func TestStopAndSkipTimer(t *testing.T) {
	env := newEnv(t)
	srv := env.ServerURL()

	iwfOK(t, srv, "workflow", "start", "--id", "nap-1", "--type", "Nap", "--worker-url", env.WorkerURL(), "--start-state", "Nap")
	// The timer exists once the engine has applied waitUntil's answer.
	env.WaitIdle()
	iwfFails(t, exitUsage, nil, "--server", srv, "workflow", "skip-timer", "--id", "nap-1", "--state-execution-id", "Nap-1")
	out := iwfOK(t, srv, "workflow", "describe", "--id", "nap-1")
	for _, want := range []string{"Type:", "Nap", "Status:", "RUNNING", "Pending states:", "Nap-1", "WAITING_COMMANDS", "timer nap at "} {
		if !strings.Contains(out, want) {
			t.Fatalf("describe lacks %q:\n%s", want, out)
		}
	}
	d := decode[iwfapi.WorkflowDescribeResponse](t, iwfOK(t, srv, "workflow", "describe", "--id", "nap-1", "--json"))
	if d.WorkflowType != "Nap" || len(d.PendingStates) != 1 || d.PendingStates[0].Phase != iwfapi.PendingStateExecutionPhaseWAITINGCOMMANDS {
		t.Fatalf("describe --json: %+v", d)
	}
	out = iwfOK(t, srv, "workflow", "skip-timer", "--id", "nap-1", "--state-execution-id", "Nap-1", "--timer-command-id", "nap")
	if !strings.Contains(out, "skipped") {
		t.Fatalf("skip-timer printed %q", out)
	}
	out = iwfOK(t, srv, "workflow", "get", "--id", "nap-1", "--wait", "--timeout", "2m")
	if field(t, out, "Status") != "COMPLETED" || field(t, out, "Result of Nap-1") != `"rested"` {
		t.Fatalf("after skipping the timer:\n%s", out)
	}

	iwfOK(t, srv, "workflow", "start", "--id", "stop-1", "--type", "Greet", "--worker-url", env.WorkerURL(), "--start-state", "Greet")
	iwfFails(t, exitUsage, nil, "--server", srv, "workflow", "stop", "--id", "stop-1", "--type", "PAUSE")
	out = iwfOK(t, srv, "workflow", "stop", "--id", "stop-1", "--type", "fail", "--reason", "by the test")
	if !strings.Contains(out, "FAIL") {
		t.Fatalf("stop printed %q", out)
	}
	got := decode[iwfapi.WorkflowGetResponse](t, iwfOK(t, srv, "--json", "workflow", "get", "--id", "stop-1"))
	if got.WorkflowStatus != iwfapi.WorkflowStatusFailed || deref(got.ErrorMessage) != "by the test" {
		t.Fatalf("after stop --type FAIL: %+v", got)
	}
	out = iwfOK(t, srv, "workflow", "get", "--id", "stop-1")
	if field(t, out, "Error message") != "by the test" {
		t.Fatalf("get of the failed run:\n%s", out)
	}

	iwfOK(t, srv, "workflow", "start", "--id", "stop-2", "--type", "Greet", "--worker-url", env.WorkerURL(), "--start-state", "Greet")
	iwfOK(t, srv, "workflow", "stop", "--id", "stop-2", "--type", "TERMINATE")
	if out := iwfOK(t, srv, "workflow", "get", "--id", "stop-2"); field(t, out, "Status") != "TERMINATED" {
		t.Fatalf("after stop --type TERMINATE:\n%s", out)
	}
}

func TestErrorsAndExitCodes(t *testing.T) {
	env := newEnv(t)
	srv := env.ServerURL()

	out := iwfOK(t, srv, "health")
	if field(t, out, "Condition") != "OK" {
		t.Fatalf("health printed\n%s", out)
	}
	h := decode[iwfapi.HealthInfo](t, iwfOK(t, srv, "health", "--json"))
	if deref(h.Condition) != "OK" {
		t.Fatalf("health --json: %+v", h)
	}
	// IWF_SERVER is the default of --server.
	if r := cliRun(t, map[string]string{"IWF_SERVER": srv}, "health"); r.code != 0 {
		t.Fatalf("health with IWF_SERVER: %+v", r)
	}

	stderr := iwfFails(t, exitNotFound, nil, "--server", srv, "workflow", "get", "--id", "no-such-workflow")
	if !strings.Contains(stderr, "WORKFLOW_NOT_EXISTS_SUB_STATUS") || !strings.Contains(stderr, "400") {
		t.Fatalf("unknown workflow: %q", stderr)
	}
	iwfFails(t, exitNotFound, nil, "--server", srv, "workflow", "signal", "--id", "no-such-workflow", "--channel", "c")
	iwfFails(t, exitNotFound, nil, "--server", srv, "workflow", "history", "--id", "no-such-workflow")

	// A server that is gone: the port of a closed listener.
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	stderr = iwfFails(t, exitUnreachable, nil, "--server", gone.URL, "workflow", "get", "--id", "x")
	if !strings.Contains(stderr, "cannot reach the server") {
		t.Fatalf("unreachable: %q", stderr)
	}
	iwfFails(t, exitUnreachable, map[string]string{"IWF_SERVER": gone.URL}, "health")

	for _, args := range [][]string{
		{},
		{"bogus"},
		{"workflow"},
		{"workflow", "bogus"},
		{"workflow", "get"},
		{"workflow", "get", "--id", "x", "--bogus"},
		{"workflow", "get", "--id", "x", "extra"},
		{"--timeout", "soon", "health"},
		{"--server", "ftp://example", "health"},
		{"workflow", "start", "--id", "x", "--type", "T", "--worker-url", "http://w", "--input", "{not json"},
		{"workflow", "start", "--id", "x", "--type", "T", "--worker-url", "http://w", "--search-attribute", "A=NUMBER:1"},
		{"workflow", "signal", "--id", "x"},
		{"workflow", "skip-timer", "--id", "x", "--state-execution-id", "S-1", "--timer-command-id", "t", "--timer-index", "0"},
	} {
		iwfFails(t, exitUsage, nil, append([]string{"--server", srv}, args...)...)
	}

	// Help is not an error, and documents the exit codes.
	for _, args := range [][]string{{"--help"}, {"help"}, {"workflow", "start", "--help"}} {
		r := cliRun(t, nil, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "Exit codes:") || r.stderr != "" {
			t.Fatalf("iwf %v: %+v", args, r)
		}
	}
}

// stub is a server answering canned JSON per path, recording the
// Authorization header of each request.
type stub struct {
	mu      sync.Mutex
	auth    []string
	answers map[string]string
}

func (s *stub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.auth = append(s.auth, r.Header.Get("Authorization"))
	s.mu.Unlock()
	body, ok := s.answers[r.URL.Path]
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		body = `{"detail":"not found: ` + r.Method + " " + r.URL.Path + `"}`
	}
	_, _ = w.Write([]byte(body))
}

func (s *stub) authorizations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auth...)
}

const describeAnswer = `{
  "workflowId": "order-1", "workflowRunId": "run-1", "workflowType": "Order", "status": "RUNNING",
  "workerUrl": "http://worker", "startedTimestampMs": 1735689600000, "timeoutTimestampMs": 1735693200000,
  "pendingStates": [
    {"stateExecutionId": "Charge-1", "stateId": "Charge", "phase": "EXECUTE", "attempt": 3,
     "firstAttemptTimestampMs": 1735689601000, "nextAttemptTimestampMs": 1735689700000,
     "lastFailure": {"api": "EXECUTE", "attempt": 2, "timestampMs": 1735689650000, "httpStatus": 500, "error": "card\ndeclined"}},
    {"stateExecutionId": "Wait-1", "stateId": "Wait", "phase": "WAITING_COMMANDS", "commandWaitingType": "ANY_COMPLETED",
     "commands": [{"kind": "TIMER", "commandId": "t", "firingTimestampMs": 1735776000000, "done": false},
                  {"kind": "SIGNAL", "commandId": "s", "channelName": "approve", "done": true}]}
  ]
}`

func TestTokenAndDescribe(t *testing.T) {
	s := &stub{answers: map[string]string{
		"/info/healthcheck":         `{"condition":"OK","hostname":"h","duration":0}`,
		"/api/v1/workflow/describe": describeAnswer,
	}}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)

	// --token wins over IWF_TOKEN; without either no header is sent.
	envToken := map[string]string{"IWF_SERVER": hs.URL, "IWF_TOKEN": "from-env"}
	for _, args := range [][]string{{"health"}, {"--token", "from-flag", "health"}, {"health", "--token", "after"}} {
		if r := cliRun(t, envToken, args...); r.code != 0 {
			t.Fatalf("iwf %v: %+v", args, r)
		}
	}
	iwfOK(t, hs.URL, "health")
	want := []string{"Bearer from-env", "Bearer from-flag", "Bearer after", ""}
	if got := s.authorizations(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("Authorization headers %q, want %q", got, want)
	}

	out := iwfOK(t, hs.URL, "workflow", "describe", "--id", "order-1")
	for _, want := range []string{"Type:", "Order", "Times out:", "Charge-1", "EXECUTE", "Wait-1",
		"ANY_COMPLETED: timer t at", "signal approve (done)", "Last failures:", "card declined", "HTTP 500"} {
		if !strings.Contains(out, want) {
			t.Fatalf("describe output lacks %q:\n%s", want, out)
		}
	}
	d := decode[iwfapi.WorkflowDescribeResponse](t, iwfOK(t, hs.URL, "workflow", "describe", "--id", "order-1", "--json"))
	if len(d.PendingStates) != 2 || d.PendingStates[0].LastFailure == nil || deref(deref(d.PendingStates[1].Commands)[1].ChannelName) != "approve" {
		t.Fatalf("describe --json: %+v", d)
	}
	// A server without the endpoint: exit 4 and a message that says so.
	empty := httptest.NewServer(&stub{})
	t.Cleanup(empty.Close)
	stderr := iwfFails(t, exitNotFound, nil, "--server", empty.URL, "workflow", "describe", "--id", "x")
	if !strings.Contains(stderr, "no describe endpoint") {
		t.Fatalf("describe on an older server: %q", stderr)
	}
}

// An older server without describe: list falls back to get and history.
func TestListWithoutDescribe(t *testing.T) {
	hs := httptest.NewServer(&stub{answers: map[string]string{
		"/api/v1/workflow/search":  `{"workflowExecutions":[{"workflowId":"a","workflowRunId":"r1"}],"nextPageToken":""}`,
		"/api/v1/workflow/get":     `{"workflowRunId":"r1","workflowStatus":"RUNNING"}`,
		"/api/v1/workflow/history": `{"workflowRunId":"r1","events":[{"eventId":1,"timestampMs":1735689600000,"eventType":"WorkflowStarted","data":{"workflowType":"Order"}}],"hasMore":true}`,
	}})
	t.Cleanup(hs.Close)
	out := iwfOK(t, hs.URL, "workflow", "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("list printed\n%s", out)
	}
	cols := strings.Fields(lines[1])
	if len(cols) != 6 || cols[0] != "a" || cols[1] != "r1" || cols[2] != "Order" || cols[3] != "RUNNING" || cols[5] != "-" {
		t.Fatalf("list row %q", lines[1])
	}
	if _, err := time.Parse(time.RFC3339, cols[4]); err != nil {
		t.Fatalf("start column %q: %v", cols[4], err)
	}
}
