package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestFlagsThatDoNotApply: a flag given where it has no effect is a usage
// error (exit 2) that names it and where it applies, before any request;
// the same flag where it applies is taken (here the command goes on to
// find no server: exit 3, or no archived run: exit 4).
func TestFlagsThatDoNotApply(t *testing.T) {
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	archive := "file://" + t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"workflow", "get", "--id", "x", "--archive-url", archive}, "workflow get: --archive-url applies only with --archived"},
		{[]string{"workflow", "history", "--id", "x", "--archive-url", archive, "--all"}, "workflow history: --archive-url applies only with --archived"},
		{[]string{"workflow", "start", "--id", "x", "--type", "T", "--worker-url", "http://w", "--input", "1"}, "--input applies only with --start-state"},
		{[]string{"workflow", "reset", "--id", "x", "--type", "BEGINNING", "--state-id", "S"}, "--state-id applies only with --type STATE_ID (here --type BEGINNING)"},
		{[]string{"workflow", "reset", "--id", "x", "--type", "STATE_ID", "--state-id", "S", "--event-id", "3"}, "--event-id applies only with --type HISTORY_EVENT_ID (here --type STATE_ID)"},
		{[]string{"workflow", "reset", "--id", "x", "--type", "state_execution_id", "--state-execution-id", "S-1", "--event-time", "2025-01-02T03:04:05Z"}, "--event-time applies only with --type HISTORY_EVENT_TIME"},
		{[]string{"workflow", "list", "--brief", "--json"}, "--brief applies only without --json"},
		{[]string{"--json", "workflow", "list", "--brief"}, "--brief applies only without --json"},
		{[]string{"batch", "start", "--query", "q", "--operation", "terminate", "--channel", "go"}, "batch start: --channel applies only with --operation signal (here --operation terminate)"},
		{[]string{"batch", "start", "--query", "q", "--operation", "cancel", "--channel", "go", "--value", "1"}, "--channel, --value apply only with --operation signal"},
		{[]string{"batch", "start", "--query", "q", "--operation", "signal", "--channel", "go", "--reset-type", "BEGINNING"}, "--reset-type applies only with --operation reset"},
		{[]string{"batch", "start", "--query", "q", "--operation", "fail", "--state-execution-id", "S-1"}, "--state-execution-id applies only with --operation reset or skip-timer"},
		{[]string{"batch", "start", "--query", "q", "--operation", "reset", "--reset-type", "BEGINNING", "--timer-index", "0"}, "--timer-index applies only with --operation skip-timer"},
		{[]string{"batch", "start", "--query", "q", "--operation", "skip-timer", "--state-execution-id", "S-1", "--timer-command-id", "t", "--timer-index", "0"}, "--timer-index applies only without --timer-command-id"},
	} {
		msg := iwfFails(t, exitUsage, nil, append([]string{"--server", gone.URL}, c.args...)...)
		if !strings.Contains(msg, c.want) {
			t.Errorf("iwf %s: %q, want %q", strings.Join(c.args, " "), msg, c.want)
		}
	}
	// Where they apply, the same flags pass the check.
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"workflow", "get", "--id", "x", "--archived", "--archive-url", archive}, exitNotFound},
		{[]string{"workflow", "history", "--id", "x", "--archived", "--archive-url", archive}, exitNotFound},
		{[]string{"workflow", "start", "--id", "x", "--type", "T", "--worker-url", "http://w", "--start-state", "S", "--input", "1"}, exitUnreachable},
		{[]string{"workflow", "reset", "--id", "x", "--type", "state_id", "--state-id", "S", "--skip-signal-reapply"}, exitUnreachable},
		{[]string{"workflow", "list", "--brief"}, exitUnreachable},
		{[]string{"batch", "start", "--query", "q", "--operation", "SIGNAL", "--channel", "go", "--value", "1", "--reason", "r"}, exitUnreachable},
		{[]string{"batch", "start", "--query", "q", "--operation", "reset", "--reset-type", "STATE_EXECUTION_ID", "--state-execution-id", "S-1"}, exitUnreachable},
		{[]string{"batch", "start", "--query", "q", "--operation", "skip-timer", "--state-execution-id", "S-1", "--timer-index", "0"}, exitUnreachable},
	} {
		iwfFails(t, c.code, nil, append([]string{"--server", gone.URL}, c.args...)...)
	}
	// A bad value of the deciding flag is the command's own error.
	if msg := iwfFails(t, exitUsage, nil, "--server", gone.URL, "batch", "start", "--query", "q", "--operation", "explode", "--channel", "c"); !strings.Contains(msg, `--operation "explode"`) {
		t.Errorf("unknown operation: %q", msg)
	}
}
