package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/internal/crashtest"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
)

// TestAllOptions starts two nodes on one PostgreSQL database with every
// kind of option on at once — tokens with roles, TLS with client
// certificates, tracing, all three kinds of limits, an allow-list of worker
// URLs, worker headers, retention with an archive, the audit log, a config
// file, external storage for payloads — and runs the chaos workload through them with kills, a pause and
// cut connections, and a pause and resume of its workflow type: it starts,
// serves, and loses nothing. An option that
// cannot be combined with the others (tracing once hid the store's
// permits, so limits refused to start) fails here first. Every new option
// joins this test in the change that adds it.
func TestAllOptions(t *testing.T) {
	db := crashtest.PostgresDB(t)
	dir := t.TempDir()
	app := "iwf-options-" + strconv.FormatUint(uint64(time.Now().UnixNano()), 36)
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()

	// Tokens with roles: the workload's (all), and a reader's that must
	// not start workflows.
	token := func() string {
		var b [16]byte
		_, _ = rand.Read(b[:])
		return hex.EncodeToString(b[:])
	}
	driverToken, readerToken := token(), token()
	tokens := filepath.Join(dir, "tokens")
	writeFile(t, tokens, fmt.Sprintf("# name role\n%s driver all\n%s watcher reader\n%s oncall operator\n", driverToken, readerToken, token()))
	certs := crashtest.NewTLS(t, dir, "chaos-client")

	// Tracing to an OTLP/HTTP receiver that counts what it gets.
	var traceExports atomic.Int64
	otlp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/traces" {
			traceExports.Add(1)
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer otlp.Close()

	worker := crashtest.NewWorker(t)
	workerHost := strings.TrimPrefix(worker.URL(), "http://")
	archiveDir := filepath.Join(dir, "archive")
	if err := os.Mkdir(archiveDir, 0o700); err != nil {
		t.Fatal(err)
	}
	// External storage with a threshold so low that most of the
	// workload's payloads (inputs, attributes, signal values, results) go
	// to the blob store and come back inline.
	payloadDir := filepath.Join(dir, "payloads")
	if err := os.Mkdir(payloadDir, 0o700); err != nil {
		t.Fatal(err)
	}
	// Some settings come from a config file, the rest from flags.
	config := filepath.Join(dir, "iwf.yaml")
	writeFile(t, config, fmt.Sprintf("retention: 30d\nretention-for:\n  Ephemeral: 1s\nretention-interval: 1s\narchive-url: file://%s\nmax-wait: 30s\n", archiveDir))

	node := func(name string) *crashtest.Server {
		return crashtest.NewServer(t, crashtest.Options{Bin: serverBin, DB: u.String(), Name: "node-" + name,
			LeaseDuration: leaseDuration, PollInterval: pollInterval, LogLevel: "info",
			ClientTLS: certs.Client, Token: driverToken,
			Env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + otlp.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
				"OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_SERVICE_NAME=iwf-all-options"},
			Args: []string{
				"--config", config,
				"--worker-header", crashtest.NodeHeader + ": " + name,
				"--auth-token-file", tokens, "--auth-metrics",
				"--tls-cert-file", certs.CertFile, "--tls-key-file", certs.KeyFile,
				"--tls-client-ca-file", certs.CAFile, "--tls-client-role", certs.ClientCN + "=reader",
				"--audit-log", filepath.Join(dir, "audit-"+name+".log"),
				"--worker-concurrency", workerHost + "=64", "--worker-rate", workerHost + "=2000",
				"--type-concurrency", "Chaos=64",
				"--worker-url-allow", "http://127.0.0.1:*",
				"--console-session-ttl", "1h", "--max-searches", "8",
				"--external-storage-url", "local=file://" + payloadDir, "--external-storage-threshold", "4",
			}})
	}
	a, b := node("a"), node("b")
	crashtest.StartAll(t, a, b)

	p := plan{kills: 3, pauses: 1, cuts: 1, clients: 3, worker: worker,
		extra: []extraFault{{name: "pause_type", n: 1, do: pauseChaosType}}}
	res := chaosRun(t, newCluster(a, b), p, func() (int, error) { return cutConnections(pgtest.URL(t), app) })
	if res.workflows == 0 || res.lost != 0 || res.double != 0 {
		t.Fatalf("workflows=%d lost=%d double_applied=%d", res.workflows, res.lost, res.double)
	}

	// Roles hold: the reader's token may read but not start.
	resp := apiCall(t, certs, readerToken, a.URL()+"/api/v1/workflow/start",
		`{"workflowId":"reader-1","iwfWorkflowType":"Chaos","workflowTimeoutSeconds":60,"iwfWorkerUrl":"`+worker.URL()+`"}`)
	if resp != http.StatusForbidden {
		t.Errorf("a reader's start: %d, want 403", resp)
	}

	// Retention with the archive: a closed run of a type kept one second
	// is written to the archive and deleted.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start, err := a.Client().StartWorkflowWithResponse(ctx, iwfapi.WorkflowStartRequest{WorkflowId: "ephemeral-1",
		IwfWorkflowType: "Ephemeral", IwfWorkerUrl: worker.URL(), WorkflowTimeoutSeconds: 60,
		StartStateId: ptr("S"), StateInput: crashtest.Object(kindStop)})
	if err != nil || start.StatusCode() != http.StatusOK {
		t.Fatalf("start ephemeral-1: %v %v", err, start)
	}
	stop, err := a.Client().StopWorkflowWithResponse(ctx, iwfapi.WorkflowStopRequest{WorkflowId: "ephemeral-1"})
	if err != nil || stop.StatusCode() != http.StatusOK {
		t.Fatalf("stop ephemeral-1: %v %v", err, stop)
	}
	waitUntil(t, time.Minute, "ephemeral-1 archived and deleted", func() bool {
		get, err := a.Client().GetWorkflowWithResponse(ctx, iwfapi.WorkflowGetRequest{WorkflowId: "ephemeral-1"})
		return err == nil && get.StatusCode() == http.StatusBadRequest && archived(archiveDir) > 0
	})

	// Every node wrote the audit log and sent spans.
	for _, name := range []string{"a", "b"} {
		raw, err := os.ReadFile(filepath.Join(dir, "audit-"+name+".log"))
		if err != nil || !strings.Contains(string(raw), `"driver"`) {
			t.Errorf("audit log of node %s: %v, %d bytes, want lines naming the token \"driver\"", name, err, len(raw))
		}
	}
	waitUntil(t, time.Minute, "spans exported", func() bool { return traceExports.Load() > 0 })
	if archived(payloadDir) == 0 {
		t.Errorf("no payload went to the external store under %s", payloadDir)
	}
	fmt.Printf("all-options: workflows=%d lost=%d double_applied=%d trace_exports=%d archived=%d external_objects=%d\n",
		res.workflows, res.lost, res.double, traceExports.Load(), archived(archiveDir), archived(payloadDir))
}

// pauseChaosType pauses the workload's workflow type during the run, as
// an operator does in an incident: the calls of its runs are held (those
// of the runs the clients keep starting among them), then resumed at a
// pace; the check that follows the run finds each workflow done once.
func pauseChaosType(d *driver, _ func(*workflow), _ func() *workflow) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := d.c.pick()
	set, err := n.Client().SetPauseWithResponse(ctx, iwfapi.PauseSetRequest{WorkflowType: ptr("Chaos"), Reason: ptr("all options: a pause during the run")})
	if err != nil || set.StatusCode() != http.StatusOK {
		return fmt.Errorf("pause/set: %v %v", err, set)
	}
	for {
		list, err := n.Client().ListPausesWithResponse(ctx, iwfapi.PauseListRequest{})
		if err != nil || list.JSON200 == nil {
			return fmt.Errorf("pause/list: %v %v", err, list)
		}
		if ps := list.JSON200.Pauses; len(ps) == 1 && ps[0].HeldCalls > 0 {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("the paused type held no call within a minute: %+v", list.JSON200.Pauses)
		}
		time.Sleep(50 * time.Millisecond) // the clients start workflows meanwhile
	}
	del, err := n.Client().DeletePauseWithResponse(ctx, iwfapi.PauseDeleteRequest{WorkflowType: ptr("Chaos"), Rps: ptr(500.0)})
	if err != nil || del.StatusCode() != http.StatusOK {
		return fmt.Errorf("pause/delete: %v %v", err, del)
	}
	return nil
}

// apiCall posts body to url with the test's client certificate and token
// and returns the status.
func apiCall(t *testing.T, certs *crashtest.TLSFiles, token, url, body string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: certs.Client.Clone()}}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// archived counts the files under dir.
func archived(dir string) int {
	n := 0
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	return n
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
