package main

import (
	"regexp"
	"strings"
	"testing"
)

// TestPauseCommands: iwf workflow pause and resume, iwf pause set, list
// and delete, and the pause and re-route batches, against the real server.
func TestPauseCommands(t *testing.T) {
	env := newEnv(t)
	srv := env.ServerURL()
	iwfOK(t, srv, "workflow", "start", "--id", "greet-p", "--type", "Greet", "--worker-url", env.WorkerURL(), "--start-state", "Greet", "--input", `"Hello"`)
	env.WaitIdle()

	out := iwfOK(t, srv, "workflow", "pause", "--id", "greet-p", "--reason", "worker down")
	if !strings.Contains(out, "greet-p paused") {
		t.Fatalf("pause printed %q", out)
	}
	if got := field(t, iwfOK(t, srv, "workflow", "describe", "--id", "greet-p"), "Paused"); !strings.HasPrefix(got, "the run") || !strings.HasSuffix(got, ": worker down") {
		t.Fatalf("describe Paused = %q", got)
	}
	if out := iwfOK(t, srv, "workflow", "list", "--query", "IwfPaused = true", "--brief"); !strings.Contains(out, "greet-p") {
		t.Fatalf("list of paused runs:\n%s", out)
	}
	if msg := iwfFails(t, exitServerError, nil, "--server", srv, "workflow", "rpc", "--id", "greet-p", "--name", "peek", "--input", `"x"`); !strings.Contains(msg, "409") || !strings.Contains(msg, "is paused") {
		t.Fatalf("RPC of a paused run: %q", msg)
	}
	if msg := iwfFails(t, exitServerError, nil, "--server", srv, "workflow", "pause", "--id", "greet-p"); !strings.Contains(msg, "paused already") {
		t.Fatalf("second pause: %q", msg)
	}
	iwfOK(t, srv, "workflow", "signal", "--id", "greet-p", "--channel", "name", "--value", `"World"`)
	env.WaitIdle()
	if got := field(t, iwfOK(t, srv, "workflow", "get", "--id", "greet-p"), "Status"); got != "RUNNING" {
		t.Fatalf("a paused run went on to %s", got)
	}
	iwfOK(t, srv, "workflow", "resume", "--id", "greet-p")
	if out := iwfOK(t, srv, "workflow", "get", "--id", "greet-p", "--wait"); field(t, out, "Status") != "COMPLETED" {
		t.Fatalf("after resume:\n%s", out)
	}

	// A workflow type.
	iwfFails(t, exitUsage, nil, "--server", srv, "pause", "set")
	iwfFails(t, exitUsage, nil, "--server", srv, "pause", "set", "--type", "Nap", "--host", "h:1")
	iwfFails(t, exitUsage, nil, "--server", srv, "pause", "frobnicate")
	if out := iwfOK(t, srv, "pause", "set", "--type", "Nap", "--reason", "bad deploy"); !strings.Contains(out, "workflow type Nap paused") {
		t.Fatalf("pause set printed %q", out)
	}
	iwfOK(t, srv, "workflow", "start", "--id", "nap-p", "--type", "Nap", "--worker-url", env.WorkerURL(), "--start-state", "Nap")
	env.WaitIdle()
	out = iwfOK(t, srv, "pause", "list")
	if !strings.Contains(out, "workflow type Nap") || !strings.Contains(out, "bad deploy") || strings.Fields(strings.Split(out, "\n")[1])[3] != "1" {
		t.Fatalf("pause list (one held call):\n%s", out)
	}
	if got := field(t, iwfOK(t, srv, "workflow", "describe", "--id", "nap-p"), "Paused"); !strings.HasPrefix(got, "workflow type Nap") {
		t.Fatalf("describe Paused = %q", got)
	}
	if out := iwfOK(t, srv, "workflow", "stats", "--type", "Nap"); !regexp.MustCompile(`(?m)^Nap\s+PAUSED\s+1\s+\S.*nap-p\s+Nap-1\s*$`).MatchString(out) ||
		!strings.Contains(out, "PAUSED: calls held") {
		t.Fatalf("stats of a held call:\n%s", out)
	}
	if out := iwfOK(t, srv, "pause", "delete", "--type", "Nap", "--rps", "5"); !strings.Contains(out, "workflow type Nap resumed: 1 held calls") {
		t.Fatalf("pause delete printed %q", out)
	}
	if out := iwfOK(t, srv, "pause", "list"); strings.Count(out, "\n") != 1 {
		t.Fatalf("pause list after delete:\n%s", out)
	}

	// The batches: pause by query, and a re-route needs its URL.
	iwfFails(t, exitUsage, nil, "--server", srv, "batch", "start", "--query", "WorkflowType = 'Nap'", "--operation", "terminate", "--worker-url", "http://x:1")
	if msg := iwfFails(t, exitServerError, nil, "--server", srv, "batch", "start", "--query", "WorkflowType = 'Nap'", "--operation", "set-worker-url"); !strings.Contains(msg, "workerUrl") {
		t.Fatalf("re-route without a URL: %q", msg)
	}
	id := strings.TrimSpace(iwfOK(t, srv, "batch", "start", "--query", "WorkflowType = 'Nap'", "--operation", "set-worker-url", "--worker-url", env.WorkerURL(), "--rps", "1000"))
	if out := iwfOK(t, srv, "batch", "describe", "--id", id); !strings.Contains(field(t, out, "Operation"), "set-worker-url ("+env.WorkerURL()+")") {
		t.Fatalf("describe of a re-route batch:\n%s", out)
	}
}
