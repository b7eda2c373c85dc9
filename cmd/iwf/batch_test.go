package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// TestBatch: iwf batch start prints the batch id alone; describe, list and
// cancel show it; bad command lines are usage errors.
func TestBatch(t *testing.T) {
	env := newEnv(t)
	srv := env.ServerURL()
	for i := range 3 {
		iwfOK(t, srv, "workflow", "start", "--id", fmt.Sprintf("nap-%d", i), "--type", "Nap", "--worker-url", env.WorkerURL(), "--start-state", "Nap")
	}
	env.WaitIdle()

	iwfFails(t, exitUsage, nil, "--server", srv, "batch", "start", "--operation", "terminate")
	iwfFails(t, exitUsage, nil, "--server", srv, "batch", "start", "--query", "WorkflowType = 'Nap'", "--operation", "explode")
	// What an operation lacks is the server's answer, as the API and the
	// console give it: the batch is refused, not started to fail on every run.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--operation", "signal"}, "signalChannelName"},
		{[]string{"--operation", "reset"}, "resetType"},
		{[]string{"--operation", "reset", "--reset-type", "STATE_ID"}, "STATE_ID needs reset.stateId"},
		{[]string{"--operation", "reset", "--reset-type", "STATE_EXECUTION_ID"}, "needs reset.stateExecutionId"},
		{[]string{"--operation", "reset", "--reset-type", "HISTORY_EVENT_ID"}, "needs reset.historyEventId"},
		{[]string{"--operation", "reset", "--reset-type", "HISTORY_EVENT_TIME"}, "needs reset.historyEventTime"},
		{[]string{"--operation", "skip-timer", "--state-execution-id", "Nap-1"}, "timerCommandId or timerCommandIndex"},
		{[]string{"--operation", "cancel", "--rps", "-1"}, "rps must be"},
		{[]string{"--operation", "cancel", "--rps", "1e-300"}, "rps must be from 0.01"},
		{[]string{"--operation", "cancel", "--reason", strings.Repeat("r", 2000)}, "reason is 2000 bytes long; the limit is 1024"},
	} {
		args := append([]string{"--server", srv, "batch", "start", "--query", "WorkflowType = 'Nap'"}, c.args...)
		if msg := iwfFails(t, exitServerError, nil, args...); !strings.Contains(msg, c.want) {
			t.Errorf("iwf batch start %s: %q, want the server's message naming %q", strings.Join(c.args, " "), msg, c.want)
		}
	}
	if out := iwfOK(t, srv, "batch", "list"); strings.Count(out, "\n") != 1 { // the header alone
		t.Fatalf("refused batches were stored:\n%s", out)
	}
	iwfFails(t, exitUsage, nil, "--server", srv, "batch", "frobnicate")
	iwfFails(t, exitServerError, nil, "--server", srv, "batch", "start", "--query", "WorkflowType = ", "--operation", "cancel")
	iwfFails(t, exitServerError, nil, "--server", srv, "batch", "describe", "--id", "no-such-batch")

	out := iwfOK(t, srv, "batch", "start", "--query", "WorkflowType = 'Nap'", "--operation", "terminate", "--rps", "1000", "--reason", "by the test")
	if !regexp.MustCompile(`^[0-9a-f-]{36}\n$`).MatchString(out) {
		t.Fatalf("batch start printed %q, want the batch id alone", out)
	}
	id := strings.TrimSpace(out)
	deadline := time.Now().Add(time.Minute)
	var d iwfapi.BatchDescribeResponse
	for {
		d = decode[iwfapi.BatchDescribeResponse](t, iwfOK(t, srv, "batch", "describe", "--id", id, "--json"))
		if d.Batch.State == iwfapi.BatchStateCompleted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch not completed: %+v", d.Batch)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if d.Batch.Matched != 3 || d.Batch.Done != 3 || d.Batch.Failed != 0 || deref(d.Batch.Reason) != "by the test" {
		t.Fatalf("batch = %+v", d.Batch)
	}
	out = iwfOK(t, srv, "batch", "describe", "--id", id)
	for key, want := range map[string]string{"Batch ID": id, "State": "COMPLETED", "Operation": "terminate", "Matched": "3", "Done": "3", "Failed": "0", "Pending": "0"} {
		if got := field(t, out, key); got != want {
			t.Errorf("describe %s = %q, want %q\n%s", key, got, want, out)
		}
	}
	for i := range 3 {
		if out := iwfOK(t, srv, "workflow", "get", "--id", fmt.Sprintf("nap-%d", i)); field(t, out, "Status") != "TERMINATED" {
			t.Fatalf("nap-%d after the batch:\n%s", i, out)
		}
	}
	if out := iwfOK(t, srv, "batch", "list"); !strings.Contains(out, id) || !strings.Contains(out, "COMPLETED") {
		t.Fatalf("batch list:\n%s", out)
	}
	if out := iwfOK(t, srv, "batch", "cancel", "--id", id); !strings.Contains(out, "COMPLETED") {
		t.Fatalf("cancel of a completed batch printed %q", out)
	}
}
