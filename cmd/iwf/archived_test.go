package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/archivedoc"
	"github.com/iwf-server/iwf-server/internal/archive"
)

// putArchived writes an archived run of workflowID with events history
// events (ids 1..events) to the archive at url, as the server does
// (through internal/archive, which the command line does not link).
func putArchived(t *testing.T, url, workflowID, runID string, closedMs int64, events int) {
	t.Helper()
	ctx := context.Background()
	b, err := archive.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	r := &archive.Run{
		WorkflowID: workflowID, RunID: runID, WorkflowType: "Greet", Status: "COMPLETED",
		StartedMs: closedMs - 1000, ClosedMs: closedMs, ArchivedMs: closedMs + 1000,
		Input:            &archivedoc.Value{Encoding: ptr("json"), Data: ptr(`"Hello"`)},
		Results:          []archivedoc.StateOutput{{CompletedStateID: "Greet", CompletedStateExecutionID: "Greet-1", CompletedStateOutput: &archivedoc.Value{Encoding: ptr("json"), Data: ptr(`"Hello, ` + runID + `"`)}}},
		DataAttributes:   []archivedoc.KeyValue{{Key: ptr("lang"), Value: &archivedoc.Value{Encoding: ptr("json"), Data: ptr(`"en"`)}}},
		SearchAttributes: []archivedoc.SearchAttribute{{Key: ptr("CustomerId"), ValueType: ptr("KEYWORD"), StringValue: ptr("c-17")}},
	}
	sent := 0
	err = b.Put(ctx, r, func(context.Context) ([]archivedoc.Event, error) {
		var page []archivedoc.Event
		for ; sent < events && len(page) < 7; sent++ {
			ev := archivedoc.Event{EventID: int64(sent + 1), TimestampMs: closedMs - 1000 + int64(sent), EventType: fmt.Sprintf("Event%d", sent+1)}
			if sent == 0 {
				ev.ExecutionID, ev.Data = "Greet-1", json.RawMessage(`{"stateId":"Greet","n":1}`)
			}
			page = append(page, ev)
		}
		return page, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestArchived: get and history --archived read a run from a file://
// archive, the newest run of the id without --run-id, page and stream its
// history as history does, and fail as documented.
func TestArchived(t *testing.T) {
	url := "file://" + t.TempDir()
	const id = "greet/archived 1"
	putArchived(t, url, id, "run-old", 1_700_000_000_000, 3)
	putArchived(t, url, id, "run-new", 1_700_000_100_000, 25)
	env := map[string]string{"IWF_ARCHIVE_URL": url}
	ok := func(env map[string]string, args ...string) string {
		t.Helper()
		r := cliRun(t, env, args...)
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("iwf %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
		}
		return r.stdout
	}

	// The newest run, its URL from the environment.
	out := ok(env, "workflow", "get", "--archived", "--id", id)
	for k, want := range map[string]string{
		"Workflow ID": id, "Run ID": "run-new", "Type": "Greet", "Status": "COMPLETED",
		"Result of Greet-1": `"Hello, run-new"`, "Data attribute lang": `"en"`, "Search attribute CustomerId": "c-17",
		"History events": "25", "Input": `"Hello"`,
	} {
		if got := field(t, out, k); got != want {
			t.Fatalf("%s: %q, want %q in\n%s", k, got, want, out)
		}
	}
	if !strings.Contains(field(t, out, "Archived runs"), "2") {
		t.Fatalf("no count of archived runs in\n%s", out)
	}
	// A run named, the URL as a flag, which wins over the environment;
	// --json prints the archived summary.
	out = ok(map[string]string{"IWF_ARCHIVE_URL": "file:///nonexistent"}, "workflow", "get", "--archived", "--archive-url", url, "--id", id, "--run-id", "run-old", "--json")
	got := decode[archive.Run](t, out)
	if got.RunID != "run-old" || got.HistoryEvents != 3 || got.ClosedMs != 1_700_000_000_000 || len(got.Results) != 1 {
		t.Fatalf("--json: %s", out)
	}

	// History: a page of --limit events, then the rest after it.
	out = ok(env, "workflow", "history", "--archived", "--id", id, "--limit", "10")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if lines[0] != "Run ID: run-new" || !strings.HasPrefix(lines[1], "EVENT") || !strings.HasPrefix(lines[2], "1 ") || !strings.HasPrefix(lines[11], "10 ") {
		t.Fatalf("first page:\n%s", out)
	}
	if want := "More events: iwf workflow history --archived --id 'greet/archived 1' --run-id run-new --after 10 (or --all)"; lines[len(lines)-1] != want {
		t.Fatalf("last line %q, want %q", lines[len(lines)-1], want)
	}
	out = ok(env, "workflow", "history", "--archived", "--id", id, "--run-id", "run-new", "--after", "10", "--json")
	page := decode[iwfapi.WorkflowHistoryResponse](t, out)
	if len(page.Events) != 15 || page.Events[0].EventId != 11 || page.Events[14].EventType != "Event25" || deref(page.HasMore) || page.WorkflowRunId != "run-new" {
		t.Fatalf("second page: %s", out)
	}
	// The events as the history API shows them: the first one's
	// execution and data too.
	out = ok(env, "workflow", "history", "--archived", "--id", id, "--limit", "1", "--json")
	if first := decode[iwfapi.WorkflowHistoryResponse](t, out); len(first.Events) != 1 || deref(first.Events[0].StateExecutionId) != "Greet-1" ||
		first.Events[0].Data == nil || (*first.Events[0].Data)["stateId"] != "Greet" || (*first.Events[0].Data)["n"] != 1.0 {
		t.Fatalf("the first event: %s", out)
	}
	// --all streams every event, several of the printer's pages.
	defer func(n int) { historyPage = n }(historyPage)
	historyPage = 4
	out = ok(env, "workflow", "history", "--archived", "--id", id, "--all", "--json")
	if page := decode[iwfapi.WorkflowHistoryResponse](t, out); len(page.Events) != 25 || page.Events[24].EventId != 25 {
		t.Fatalf("--all: %d events", len(page.Events))
	}

	// Not archived: exit 4; no URL: a usage error; --wait makes no sense.
	if e := iwfFails(t, exitNotFound, env, "workflow", "get", "--archived", "--id", "never"); !strings.Contains(e, "no archived run") {
		t.Fatalf("stderr %q", e)
	}
	iwfFails(t, exitNotFound, env, "workflow", "history", "--archived", "--id", id, "--run-id", "run-none")
	iwfFails(t, exitUsage, nil, "workflow", "get", "--archived", "--id", id)
	// The help does not show the environment's URL, which may hold a secret.
	if r := cliRun(t, map[string]string{"IWF_ARCHIVE_URL": url + "?secret=1"}, "workflow", "get", "--help"); r.code != 0 || !strings.Contains(r.stdout, "--archived") || strings.Contains(r.stdout, "secret") {
		t.Fatalf("get --help: exit %d\n%s", r.code, r.stdout)
	}
	iwfFails(t, exitUsage, env, "workflow", "get", "--archived", "--wait", "--id", id)

	// A cloud archive is the server's to read: a usage error that names
	// the run's page in the server's console.
	for _, u := range []string{"s3://iwf-archive?region=eu-west-1", "gs://iwf-archive", "azblob://iwf-archive"} {
		e := iwfFails(t, exitUsage, map[string]string{"IWF_ARCHIVE_URL": u, "IWF_SERVER": "http://iwf.example:8801/"}, "workflow", "history", "--archived", "--id", id, "--run-id", "run 1")
		if want := "http://iwf.example:8801/ui/workflows/greet%2Farchived%201?run=run+1"; !strings.Contains(e, "file://") || !strings.Contains(e, want) {
			t.Fatalf("%s: stderr %q, want the console's page %s", u, e, want)
		}
	}
	// An archive whose directory is missing is an error, not an empty one.
	iwfFails(t, exitServerError, map[string]string{"IWF_ARCHIVE_URL": url + "/missing"}, "workflow", "get", "--archived", "--id", id)
}
