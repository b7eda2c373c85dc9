package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/internal/archive"
)

// TestConfigArchiveURL: --archive-url, IWF_ARCHIVE_URL and archive-url
// set the archive; unset there is none; a value that is no URL is an
// error that does not echo its secrets.
func TestConfigArchiveURL(t *testing.T) {
	if got := DefaultConfig().ArchiveURL; got != "" {
		t.Fatalf("default archive-url %q, want none", got)
	}
	for _, c := range []struct {
		args []string
		env  env
		want string
	}{
		{[]string{"--archive-url", "s3://flag?region=us-east-1"}, env{"IWF_ARCHIVE_URL": "s3://env"}, "s3://flag?region=us-east-1"},
		{nil, env{"IWF_ARCHIVE_URL": "s3://env"}, "s3://env"},
		{[]string{"--config", writeFile(t, "archive-url: s3://file\n")}, nil, "s3://file"},
	} {
		m, err := parse(t, c.args, c.env)
		if err != nil {
			t.Fatal(err)
		}
		if m.Config.ArchiveURL != c.want {
			t.Fatalf("%v %v: archive-url %q, want %q", c.args, c.env, m.Config.ArchiveURL, c.want)
		}
	}
	_, err := parse(t, []string{"--archive-url", "bucket-with-secret"}, nil)
	if err == nil || !strings.Contains(err.Error(), "archive-url") || strings.Contains(err.Error(), "secret") {
		t.Fatalf("no scheme: %v", err)
	}
}

// TestMainArchivesExpiredRuns: a server with --archive-url writes an
// expired run to the archive and then deletes it; one whose archive
// cannot be opened does not start.
func TestMainArchivesExpiredRuns(t *testing.T) {
	dir := t.TempDir()
	url := "file://" + dir
	m, out := startMain(t, "--archive-url", url, "--retention", "1ms", "--retention-interval", "50ms")
	if !strings.Contains(out.String(), "archived to "+url) {
		t.Fatalf("start-up banner does not say where runs are archived:\n%s", out)
	}
	base := "http://" + m.Addr()
	// A workflow with no start state waits for an RPC; stopping it closes it.
	if status, body := postJSON(t, base+"/api/v1/workflow/start",
		`{"workflowId":"arch-1","iwfWorkflowType":"T","workflowTimeoutSeconds":60,"iwfWorkerUrl":"http://127.0.0.1:1"}`); status != 200 {
		t.Fatalf("start: %d %v", status, body)
	}
	status, got := postJSON(t, base+"/api/v1/workflow/get", `{"workflowId":"arch-1"}`)
	runID, _ := got["workflowRunId"].(string)
	if status != 200 || runID == "" {
		t.Fatalf("get: %d %v", status, got)
	}
	if status, body := postJSON(t, base+"/api/v1/workflow/stop", `{"workflowId":"arch-1","stopType":"TERMINATE"}`); status != 200 {
		t.Fatalf("stop: %d %v", status, body)
	}
	// The sweeper archives the run, then deletes it.
	deadline := time.Now().Add(time.Minute)
	for {
		status, body := postJSON(t, base+"/api/v1/workflow/get", `{"workflowId":"arch-1"}`)
		if status == 400 && body["subStatus"] == "WORKFLOW_NOT_EXISTS_SUB_STATUS" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run was not deleted within a minute: %d %v\n%s", status, body, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	b, err := archive.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	run, err := b.Read(context.Background(), "arch-1", runID, nil)
	if err != nil || run.Status != "TERMINATED" || run.WorkflowType != "T" || run.HistoryEvents < 2 {
		t.Fatalf("archived run: %+v, %v", run, err)
	}

	// An archive that cannot be opened (a directory that does not exist)
	// stops the start.
	m2 := NewMain()
	m2.LookupEnv = env{}.lookup
	m2.Stdout, m2.Stderr = &syncBuffer{}, &syncBuffer{}
	missing := filepath.Join(dir, "missing")
	if err := m2.ParseFlags(context.Background(), []string{"--addr", "127.0.0.1:0", "--db", "sqlite://" + filepath.Join(t.TempDir(), "iwf.db"), "--archive-url", "file://" + missing}); err != nil {
		t.Fatal(err)
	}
	err = m2.Run(context.Background())
	m2.Close()
	if err == nil || !strings.Contains(err.Error(), "archive") {
		t.Fatalf("start with an archive that does not open: %v", err)
	}
	if _, serr := os.Stat(missing); !errors.Is(serr, os.ErrNotExist) {
		t.Fatalf("the missing directory was created: %v", serr)
	}
}
