package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/internal/crashtest"
)

// TestBinaryBackupWhileServing: `iwf-server backup` copies the SQLite file
// of a server that keeps serving (workflows being started during the copy,
// worker calls in flight), and a server started on the copy finishes every
// workflow that was acknowledged before the backup began: those whose
// signal was acknowledged then finish without it being sent again, the
// others once it is sent to the new server.
func TestBinaryBackupWhileServing(t *testing.T) {
	bin := serverBinary(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "iwf.db")
	w := crashtest.NewWorker(t)
	next := func(state string) func(*iwfapi.WorkflowStateDecideRequest) *iwfapi.WorkflowStateDecideResponse {
		return func(*iwfapi.WorkflowStateDecideRequest) *iwfapi.WorkflowStateDecideResponse {
			return &iwfapi.WorkflowStateDecideResponse{StateDecision: &iwfapi.StateDecision{
				NextStates: &[]iwfapi.StateMovement{{StateId: state}},
			}}
		}
	}
	w.State("Wait", crashtest.State{
		WaitUntil: func(*iwfapi.WorkflowStateStartRequest) *iwfapi.WorkflowStateStartResponse {
			all := iwfapi.CommandWaitingTypeAllCompleted
			return &iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
				CommandWaitingType: &all,
				SignalCommands:     &[]iwfapi.SignalCommand{{SignalChannelName: "go"}},
			}}
		},
		Execute: next("Last"),
	})
	w.State("Last", crashtest.State{Execute: next("_SYS_GRACEFUL_COMPLETING_WORKFLOW")})

	a := crashtest.StartServer(t, crashtest.Options{Bin: bin, DB: "sqlite://" + db, Name: "a", LogLevel: "info"})
	const n, signalled, held = 12, 6, 3
	start := func(srv *crashtest.Server, id string) error {
		ctx := crashtest.Ctx(t, time.Minute)
		resp, err := srv.Client().StartWorkflowWithResponse(ctx, iwfapi.WorkflowStartRequest{
			WorkflowId: id, IwfWorkflowType: "Backup", IwfWorkerUrl: w.URL(), WorkflowTimeoutSeconds: 0, StartStateId: ptrTo("Wait"),
		})
		if err != nil {
			return err
		}
		if resp.StatusCode() != http.StatusOK {
			return fmt.Errorf("start %s: %d %s", id, resp.StatusCode(), resp.Body)
		}
		return nil
	}
	signal := func(srv *crashtest.Server, id string) {
		t.Helper()
		ctx := crashtest.Ctx(t, time.Minute)
		resp, err := srv.Client().SignalWorkflowWithResponse(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: id, SignalChannelName: "go"})
		if err != nil || resp.StatusCode() != http.StatusOK {
			t.Fatalf("signal %s: %v %v", id, err, resp)
		}
	}
	// The last state of the first workflows is in flight at the worker
	// while the copy is taken.
	hold := w.Hold(held, crashtest.Match("", "Last", crashtest.Execute))
	for i := range n {
		if err := start(a, fmt.Sprintf("wf-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range signalled {
		signal(a, fmt.Sprintf("wf-%d", i))
	}
	hold.Wait(t, held, 2*time.Minute)

	// Workflows keep being started while the copy is taken.
	stop := make(chan struct{})
	var extra atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := start(a, fmt.Sprintf("extra-%d", i)); err != nil {
				t.Errorf("start during the backup: %v", err)
				return
			}
			extra.Add(1)
		}
	}()
	// Let the writes and the copy overlap: wait for the first ones.
	for extra.Load() < 5 && !t.Failed() {
		time.Sleep(5 * time.Millisecond)
	}
	backup := filepath.Join(dir, "backups", "copy.db")
	if err := os.MkdirAll(filepath.Dir(backup), 0o755); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runBinary(t, "backup", "--db", "sqlite://"+db, "--to", backup)
	close(stop)
	wg.Wait()
	if code != 0 || !strings.Contains(stdout, "backed up SQLite "+db+" to "+backup) {
		t.Fatalf("backup: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	t.Logf("%s(%d workflows started during the run of the backup command)", stdout, extra.Load())
	// Still serving: the source server was not disturbed.
	if err := start(a, "after-backup"); err != nil {
		t.Fatal(err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(backup), ".*partial*"))
	if len(leftovers) > 0 {
		t.Fatalf("temporary files left: %v", leftovers)
	}
	// A second backup to the same name is refused: a backup is never overwritten.
	if code, _, stderr := runBinary(t, "backup", "--db", "sqlite://"+db, "--to", backup); code != 1 || !strings.Contains(stderr, "exists") {
		t.Fatalf("backup onto an existing file: exit %d, %s", code, stderr)
	}
	hold.Release()
	a.Terminate(2 * time.Minute)

	// Restore: the copy alone, in a new place, as an operator would.
	restored := filepath.Join(t.TempDir(), "iwf.db")
	data, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(restored, data, 0o600); err != nil {
		t.Fatal(err)
	}
	b := crashtest.StartServer(t, crashtest.Options{Bin: bin, DB: "sqlite://" + restored, Name: "b", LogLevel: "info"})
	for i := signalled; i < n; i++ {
		signal(b, fmt.Sprintf("wf-%d", i))
	}
	deadline := time.Now().Add(2 * time.Minute)
	for i := range n {
		id := fmt.Sprintf("wf-%d", i)
		for {
			ctx := crashtest.Ctx(t, time.Minute)
			resp, err := b.Client().GetWorkflowWithResponse(ctx, iwfapi.WorkflowGetRequest{WorkflowId: id})
			if err != nil || resp.JSON200 == nil {
				t.Fatalf("get %s on the restored copy: %v %v", id, err, resp)
			}
			if resp.JSON200.WorkflowStatus == iwfapi.WorkflowStatusCompleted {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s is %s on the restored copy two minutes on\n%s", id, resp.JSON200.WorkflowStatus, b.Log())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestBackupRefusals: backup says what is wrong, in one error, for each
// way it cannot work, and writes nothing.
func TestBackupRefusals(t *testing.T) {
	dir := t.TempDir()
	notStore := filepath.Join(dir, "other.db")
	copyOf := func(name string) string { return filepath.Join(dir, name) }
	m, _ := startMain(t)
	db := m.Config.DB
	path := strings.TrimPrefix(db, "sqlite://")
	if err := os.WriteFile(copyOf("taken.db"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A SQLite file that is not a store.
	if code, _, stderr := runBinary(t, "backup", "--db", "sqlite://"+filepath.Join(dir, "made.db"), "--to", copyOf("x.db")); code != 1 || !strings.Contains(stderr, "no database") {
		t.Fatalf("missing source: %d %s", code, stderr)
	}
	if err := os.WriteFile(notStore, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"postgres", []string{"--db", "postgres://u:secret@db.example:5432/iwf", "--to", copyOf("pg.db")}, "pg_dump"},
		{"no to", []string{"--db", db}, "--to FILE is required"},
		{"no db", []string{"--to", copyOf("a.db")}, "--db sqlite://PATH is required"},
		{"existing target", []string{"--db", db, "--to", copyOf("taken.db")}, "exists"},
		{"the store itself", []string{"--db", db, "--to", path + "-wal"}, "a file of the database itself"},
		{"not a store", []string{"--db", "sqlite://" + notStore, "--to", copyOf("b.db")}, "not an iwf-server store"},
		{"memory", []string{"--db", "sqlite://:memory:", "--to", copyOf("c.db")}, "in-memory"},
		{"bad flag", []string{"--nope"}, "see iwf-server backup -help"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := runBackup(context.Background(), c.args, env{}.lookup, &out, &errOut)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want one containing %q", err, c.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Fatalf("the password was repeated: %v", err)
			}
		})
	}
	for _, name := range []string{"pg.db", "a.db", "b.db", "c.db", "x.db"} {
		if _, err := os.Stat(copyOf(name)); err == nil {
			t.Errorf("%s was written by a refused backup", name)
		}
	}
	if got, _ := os.ReadFile(copyOf("taken.db")); string(got) != "x" {
		t.Fatal("an existing file was overwritten")
	}
	// IWF_DB stands for --db, and the in-process command copies a live store.
	var out bytes.Buffer
	if err := runBackup(context.Background(), []string{"--to", copyOf("env.db")}, env{"IWF_DB": db}.lookup, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "schema version ") {
		t.Fatalf("output %q", out.String())
	}
}

// TestBackupConfigFile: backup finds the store where the server does:
// the config file's db (--config, or IWF_CONFIG) when neither --db nor
// IWF_DB is given, and IWF_DB before the file.
func TestBackupConfigFile(t *testing.T) {
	m, _ := startMain(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "iwf.yaml")
	if err := os.WriteFile(cfg, []byte("db: "+m.Config.DB+"\nlog-level: info\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The server, given this file, serves this store.
	if _, _, c, err := parseConfig([]string{"--config", cfg}, env{}.lookup, io.Discard); err != nil || c.DB != m.Config.DB {
		t.Fatalf("the server reads db %q from the file (%v), want %q", c.DB, err, m.Config.DB)
	}
	path := strings.TrimPrefix(m.Config.DB, "sqlite://")
	for _, c := range []struct {
		name string
		args []string
		env  env
	}{
		{"--config", []string{"--config", cfg}, env{}},
		{"IWF_CONFIG", nil, env{"IWF_CONFIG": cfg}},
	} {
		t.Run(c.name, func(t *testing.T) {
			to := filepath.Join(dir, strings.TrimPrefix(c.name, "--")+".db")
			var out bytes.Buffer
			if err := runBackup(context.Background(), append(c.args, "--to", to), c.env.lookup, &out, io.Discard); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), "backed up SQLite "+path+" to "+to) {
				t.Fatalf("output %q", out.String())
			}
			if _, err := os.Stat(to); err != nil {
				t.Fatal(err)
			}
		})
	}

	// IWF_DB comes before the file, --db before both, as for the server.
	elsewhere := filepath.Join(dir, "elsewhere.db")
	err := runBackup(context.Background(), []string{"--config", cfg, "--to", filepath.Join(dir, "x.db")},
		env{"IWF_DB": "sqlite://" + elsewhere}.lookup, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "no database at "+elsewhere) {
		t.Fatalf("IWF_DB beside --config: %v, want the IWF_DB store", err)
	}
	err = runBackup(context.Background(), []string{"--db", "sqlite://" + elsewhere, "--to", filepath.Join(dir, "y.db")},
		env{"IWF_CONFIG": cfg}.lookup, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "no database at "+elsewhere) {
		t.Fatalf("--db beside IWF_CONFIG: %v, want the --db store", err)
	}

	// A file the server would refuse, or one without db.
	for name, content := range map[string]string{
		"unknown key": "db: " + m.Config.DB + "\nno-such-setting: 1\n",
		"no db":       "log-level: info\n",
	} {
		bad := filepath.Join(t.TempDir(), "iwf.yaml")
		if err := os.WriteFile(bad, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		err := runBackup(context.Background(), []string{"--config", bad, "--to", filepath.Join(dir, "z.db")}, env{}.lookup, io.Discard, io.Discard)
		want := map[string]string{"unknown key": `unknown key "no-such-setting"`, "no db": "--db sqlite://PATH is required"}[name]
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, want)
		}
	}
}
