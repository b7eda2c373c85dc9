package crashtest

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// serverBin is the iwf-server binary built by TestMain.
var serverBin string

// TestMain builds the server binary once for all tests, or uses the one
// named by IWF_CRASHTEST_BIN.
func TestMain(m *testing.M) {
	if bin := os.Getenv("IWF_CRASHTEST_BIN"); bin != "" {
		serverBin = bin
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "crashtest-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "crashtest:", err)
		os.Exit(1)
	}
	start := time.Now()
	serverBin, err = BuildServer(dir)
	if err != nil {
		os.RemoveAll(dir)
		fmt.Fprintln(os.Stderr, "crashtest:", err)
		os.Exit(1)
	}
	flag.Parse()
	if testing.Verbose() {
		fmt.Printf("crashtest: built %s in %s\n", serverBin, time.Since(start).Round(time.Millisecond))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// The timing of every server in these tests.
const (
	leaseDuration = 2 * time.Second
	pollInterval  = 100 * time.Millisecond
)

// forEachStore runs fn as a subtest on a fresh SQLite file and on a fresh
// PostgreSQL schema; db is the --db setting. The two subtests run in
// parallel with each other.
func forEachStore(t *testing.T, fn func(t *testing.T, db string)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, SQLiteDB(t))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, PostgresDB(t))
	})
}

// startServer starts one server on db with the test timing.
func startServer(t *testing.T, db, name string, args ...string) *Server {
	t.Helper()
	return StartServer(t, Options{Bin: serverBin, DB: db, Name: name,
		LeaseDuration: leaseDuration, PollInterval: pollInterval, Args: args})
}

// startNodes starts nodes "a" and "b" on one database at the same moment
// (they run its migrations together). Each sends its name to the worker in
// NodeHeader.
func startNodes(t *testing.T, db string) (a, b *Server) {
	t.Helper()
	node := func(name string) *Server {
		return NewServer(t, Options{Bin: serverBin, DB: db, Name: "node-" + name,
			LeaseDuration: leaseDuration, PollInterval: pollInterval,
			Args: []string{"--worker-header", NodeHeader + ": " + name}})
	}
	a, b = node("a"), node("b")
	StartAll(t, a, b)
	return a, b
}

// metric reads one unlabelled counter or gauge from srv's /metrics; 0 when
// it cannot be read.
func metric(srv *Server, name string) float64 {
	resp, err := http.Get(srv.URL() + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// eventually polls cond every 20 ms until it holds, failing the test after
// timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startWorkflow starts a workflow through srv's API.
func startWorkflow(t *testing.T, srv *Server, w *Worker, id, startState string, input string, opts *iwfapi.WorkflowStateOptions) {
	t.Helper()
	if err := tryStart(srv, w, id, startState, input, opts); err != nil {
		t.Fatal(err)
	}
}

func tryStart(srv *Server, w *Worker, id, startState string, input string, opts *iwfapi.WorkflowStateOptions) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req := iwfapi.WorkflowStartRequest{
		WorkflowId: id, IwfWorkflowType: "CrashTest", IwfWorkerUrl: w.URL(),
		WorkflowTimeoutSeconds: 300, StartStateId: ptr(startState), StateOptions: opts,
	}
	if input != "" {
		req.StateInput = Object(input)
	}
	resp, err := srv.Client().StartWorkflowWithResponse(ctx, req)
	if err != nil {
		return fmt.Errorf("start %s on %s: %w", id, srv.Name(), err)
	}
	if resp.StatusCode() != http.StatusOK {
		return fmt.Errorf("start %s on %s: %d %s", id, srv.Name(), resp.StatusCode(), resp.Body)
	}
	return nil
}

// signal sends a signal through srv's API; it returns once the server
// acknowledged it with 200.
func signal(t *testing.T, srv *Server, id, channel, value string) {
	t.Helper()
	if err := trySignal(srv, id, channel, value); err != nil {
		t.Fatal(err)
	}
}

func trySignal(srv *Server, id, channel, value string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := srv.Client().SignalWorkflowWithResponse(ctx, iwfapi.WorkflowSignalRequest{
		WorkflowId: id, SignalChannelName: channel, SignalValue: Object(value),
	})
	if err != nil {
		return fmt.Errorf("signal %s on %s: %w", id, srv.Name(), err)
	}
	if resp.StatusCode() != http.StatusOK {
		return fmt.Errorf("signal %s on %s: %d %s", id, srv.Name(), resp.StatusCode(), resp.Body)
	}
	return nil
}

// awaitResult waits with getWithWait until the workflow closed, at most
// timeout, and returns the server's answer.
func awaitResult(srv *Server, id string, timeout time.Duration) (iwfapi.WorkflowGetResponse, error) {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return iwfapi.WorkflowGetResponse{}, fmt.Errorf("workflow %s not closed within %s (last answer: %s)", id, timeout, last)
		}
		secs := int32(left / time.Second)
		if secs < 1 {
			secs = 1
		}
		ctx, cancel := context.WithTimeout(context.Background(), left+2*time.Second)
		resp, err := srv.Client().GetWorkflowWithWaitWithResponse(ctx, iwfapi.WorkflowGetRequest{
			WorkflowId: id, WaitTimeSeconds: ptr(secs),
		})
		cancel()
		switch {
		case err != nil:
			last = err.Error()
			time.Sleep(50 * time.Millisecond)
		case resp.JSON200 != nil && resp.JSON200.WorkflowStatus != iwfapi.WorkflowStatusRunning:
			return *resp.JSON200, nil
		default:
			last = fmt.Sprintf("%d %s", resp.StatusCode(), resp.Body)
		}
	}
}

// result is awaitResult that fails the test.
func result(t *testing.T, srv *Server, id string, timeout time.Duration) iwfapi.WorkflowGetResponse {
	t.Helper()
	r, err := awaitResult(srv, id, timeout)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// dumpDoc and dump are the package's Dump and ReadDump under the names the
// tests use.
type dumpDoc = Dump

func dump(srv *Server, id string) (*dumpDoc, error) { return ReadDump(srv, id) }

func mustDump(t *testing.T, srv *Server, id string) *dumpDoc {
	t.Helper()
	d, err := dump(srv, id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// execStatus is the status of one execution in the dump ("" when absent).
func (d *dumpDoc) execStatus(executionID string) string {
	for _, x := range d.Executions {
		if x.ExecutionID == executionID {
			return x.Status
		}
	}
	return ""
}

// attr is the data of a data attribute ("" when absent).
func (d *dumpDoc) attr(key string) string { return d.Attr(key) }

func (d *dumpDoc) events() map[string]int { return d.Events() }

// signalsReceived counts the signals the history records as received
// (SignalReceived events, or ExternalInput events carrying a signal).
func (d *dumpDoc) signalsReceived() int {
	n := 0
	for _, e := range d.History {
		var data struct {
			Signal json.RawMessage `json:"signal"`
		}
		_ = json.Unmarshal(e.Data, &data)
		if e.Type == "SignalReceived" || (e.Type == "ExternalInput" && data.Signal != nil) {
			n++
		}
	}
	return n
}

// buffered is the number of unconsumed messages in all signal channels.
func (d *dumpDoc) buffered() int {
	n := 0
	for _, c := range d.Signals {
		n += int(deref(c.Size))
	}
	return n
}

func checkOnce(d *dumpDoc) []string { return d.CheckOnce() }

// outputsByExecution maps the execution ids of results to their output data.
func outputsByExecution(r iwfapi.WorkflowGetResponse) map[string]string {
	m := map[string]string{}
	for _, o := range deref(r.Results) {
		m[o.CompletedStateExecutionId] = dataOf(o.CompletedStateOutput)
	}
	return m
}

// attempts lists the attempt numbers of calls.
func attempts(calls []Call) []int {
	var out []int
	for _, c := range calls {
		out = append(out, c.Attempt)
	}
	return out
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func equal(a, b any) bool { return reflect.DeepEqual(a, b) }
