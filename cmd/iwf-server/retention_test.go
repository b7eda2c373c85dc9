package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMainRetentionOnUpgrade: a database whose runs closed before any
// server ran on it with a retention (here: one run with --retention 0)
// keeps them a whole retention after the first start with one, and that
// start says so: when the first deletions come and how many runs they take.
func TestMainRetentionOnUpgrade(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "iwf.db")
	m, _ := startMain(t, "--db", db, "--retention", "0")
	base := "http://" + m.Addr()
	if status, body := postJSON(t, base+"/api/v1/workflow/start",
		`{"workflowId":"old-1","iwfWorkflowType":"T","workflowTimeoutSeconds":60,"iwfWorkerUrl":"http://127.0.0.1:1"}`); status != 200 {
		t.Fatalf("start: %d %v", status, body)
	}
	if status, body := postJSON(t, base+"/api/v1/workflow/stop", `{"workflowId":"old-1"}`); status != 200 {
		t.Fatalf("stop: %d %v", status, body)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	m, out := startMain(t, "--db", db, "--retention", "1h")
	line := regexp.MustCompile(`retention 1h0m0s of workflows: 1 closed runs \(closed before (\S+)\) are deleted from (\S+) \(retention counts from (\S+),`).
		FindStringSubmatch(out.String())
	if line == nil || line[1] != line[3] {
		t.Fatalf("the start-up output does not say when the old run goes:\n%s", out)
	}
	if !strings.Contains(out.String(), `"message":"retention: what the first deletions take"`) ||
		!strings.Contains(out.String(), `"runs":1`) {
		t.Errorf("no log line with the runs the first deletions take:\n%s", out)
	}
	// The run is still there.
	if status, body := postJSON(t, "http://"+m.Addr()+"/api/v1/workflow/get", `{"workflowId":"old-1"}`); status != 200 {
		t.Fatalf("get old-1: %d %v", status, body)
	}
}
