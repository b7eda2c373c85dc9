package main

import (
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// TestLimitAndStats: iwf limit set pauses a worker host (0), iwf workflow
// stats shows the call waiting in its state, raising the limit lets it go
// on to wait for its timer, and list and delete show and remove the
// limit; bad command lines are usage errors, what the server refuses an
// error of the server.
func TestLimitAndStats(t *testing.T) {
	env := newEnv(t)
	srv := env.ServerURL()
	u, err := url.Parse(env.WorkerURL())
	if err != nil {
		t.Fatal(err)
	}
	host := u.Host

	if out := iwfOK(t, srv, "limit", "list"); strings.Count(out, "\n") != 1 {
		t.Fatalf("limits of a new server:\n%s", out)
	}
	out := iwfOK(t, srv, "limit", "set", "--worker-concurrency", host+"=0")
	if want := "worker-concurrency " + host + " = 0 (paused): set"; !strings.HasPrefix(out, want) {
		t.Fatalf("limit set printed %q, want %q", out, want)
	}
	iwfOK(t, srv, "workflow", "start", "--id", "nap-paused", "--type", "Nap", "--worker-url", env.WorkerURL(), "--start-state", "Nap")
	// The waitUntil call waits for the limit (the Env is not idle while it
	// does): its execution stays in WAIT_UNTIL.
	out = iwfOK(t, srv, "workflow", "stats", "--type", "Nap")
	if !strings.Contains(out, "Workflow type Nap: 1 open runs read\n") || !regexp.MustCompile(`(?m)^Nap\s+WAIT_UNTIL\s+1\s+\S.*nap-paused\s+Nap-1\s*$`).MatchString(out) {
		t.Fatalf("stats of a paused call:\n%s", out)
	}

	iwfOK(t, srv, "limit", "set", "--worker-concurrency", strings.ToUpper(host)+"=4")
	env.WaitIdle()
	out = iwfOK(t, srv, "workflow", "stats", "--type", "Nap")
	if !regexp.MustCompile(`(?m)^Nap\s+WAITING_COMMANDS\s+1\s`).MatchString(out) || !strings.Contains(out, "Nap    timer (1)") {
		t.Fatalf("stats of a run waiting for its timer:\n%s", out)
	}
	var stats iwfapi.WorkflowStatsResponse
	if err := json.Unmarshal([]byte(iwfOK(t, srv, "--json", "workflow", "stats", "--type", "Nap")), &stats); err != nil || stats.Runs != 1 || len(stats.States) != 1 {
		t.Fatalf("stats --json: %+v, %v", stats, err)
	}
	out = iwfOK(t, srv, "limit", "list")
	if !regexp.MustCompile(`(?m)^worker-concurrency\s+` + regexp.QuoteMeta(host) + `\s+4\s+api\s+anonymous\s+\S`).MatchString(out) {
		t.Fatalf("limit list:\n%s", out)
	}
	iwfOK(t, srv, "limit", "set", "--worker-rate", host+"=0.5")
	if out := iwfOK(t, srv, "limit", "list"); !strings.Contains(out, "0.5/s") {
		t.Fatalf("a rate in limit list:\n%s", out)
	}
	out = iwfOK(t, srv, "limit", "delete", "--worker-concurrency", host)
	if want := "worker-concurrency " + host + " (was 4): removed"; !strings.HasPrefix(out, want) {
		t.Fatalf("limit delete printed %q", out)
	}
	iwfOK(t, srv, "limit", "delete", "--worker-rate", host)
	if msg := iwfFails(t, exitServerError, nil, "--server", srv, "limit", "delete", "--worker-rate", host); !strings.Contains(msg, "no WORKER_RATE limit is set") {
		t.Fatalf("deleting a limit not set: %s", msg)
	}
	if out := iwfOK(t, srv, "limit", "list"); strings.Count(out, "\n") != 1 {
		t.Fatalf("limits after the deletions:\n%s", out)
	}

	for _, args := range [][]string{
		{"limit", "set"},
		{"limit", "set", "--worker-concurrency", host + "=1", "--type-concurrency", "Nap=1"},
		{"limit", "set", "--type-concurrency", "Nap"},
		{"limit", "set", "--type-concurrency", "Nap=many"},
		{"limit", "delete"},
		{"limit", "frobnicate"},
		{"workflow", "stats"},
		{"workflow", "stats", "--type", "Nap", "--max-runs", "-1"},
	} {
		iwfFails(t, exitUsage, nil, append([]string{"--server", srv}, args...)...)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"limit", "set", "--worker-concurrency", "no-port=1"}, "want HOST:PORT"},
		{[]string{"limit", "set", "--type-concurrency", "Nap=1.5"}, "a whole number"},
		{[]string{"limit", "set", "--worker-rate", host + "=-1"}, "want 0 (pause) or a positive number"},
	} {
		if msg := iwfFails(t, exitServerError, nil, append([]string{"--server", srv}, c.args...)...); !strings.Contains(msg, c.want) {
			t.Errorf("iwf %s: %q, want the server's message naming %q", strings.Join(c.args, " "), msg, c.want)
		}
	}
}
