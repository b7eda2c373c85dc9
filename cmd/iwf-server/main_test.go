package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
	"github.com/iwf-server/iwf-server/search"
)

// env is a fake environment for LookupEnv.
type env map[string]string

func (e env) lookup(k string) (string, bool) { v, ok := e[k]; return v, ok }

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "iwf.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func parse(t *testing.T, args []string, e env) (*Main, error) {
	t.Helper()
	m := NewMain()
	m.LookupEnv = e.lookup
	m.Stderr = io.Discard
	return m, m.ParseFlags(context.Background(), args)
}

func TestConfigDefaults(t *testing.T) {
	m, err := parse(t, nil, env{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Command != CommandServe || m.ConfigFile != "" {
		t.Errorf("command %q file %q", m.Command, m.ConfigFile)
	}
	want := DefaultConfig()
	if !reflect.DeepEqual(m.Config, want) {
		t.Errorf("config = %+v, want %+v", m.Config, want)
	}
	if want.Addr != "127.0.0.1:8801" || want.DB != "sqlite://iwf.db" || want.MaxWait != time.Minute ||
		want.MaxBodyBytes != 4<<20 || want.LogLevel != "info" {
		t.Errorf("defaults changed: %+v", want)
	}
	// The write timeout leaves a long poll (max-wait + request-timeout)
	// more than the margin to write its answer.
	if want.WriteTimeout < want.MaxWait+want.RequestTimeout+LongPollWriteMargin {
		t.Errorf("default write-timeout %s leaves a long poll (%s + %s) less than %s", want.WriteTimeout, want.MaxWait, want.RequestTimeout, LongPollWriteMargin)
	}
}

// TestConfigWriteTimeoutFollows: without write-timeout set, raising
// max-wait or request-timeout raises the write timeout with them; set, it
// is taken as given.
func TestConfigWriteTimeoutFollows(t *testing.T) {
	for _, tt := range []struct {
		args []string
		e    env
		want time.Duration
	}{
		{[]string{"--max-wait", "30s"}, env{}, DefaultWriteTimeout},
		{[]string{"--max-wait", "2m"}, env{}, 2*time.Minute + 30*time.Second + 30*time.Second},
		{nil, env{"IWF_REQUEST_TIMEOUT": "90s"}, time.Minute + 90*time.Second + 30*time.Second},
		{[]string{"--max-wait", "2m", "--write-timeout", "3m"}, env{}, 3 * time.Minute},
	} {
		m, err := parse(t, tt.args, tt.e)
		if err != nil {
			t.Fatalf("%v %v: %v", tt.args, tt.e, err)
		}
		if m.Config.WriteTimeout != tt.want {
			t.Errorf("%v %v: write-timeout %s, want %s", tt.args, tt.e, m.Config.WriteTimeout, tt.want)
		}
	}
}

func TestConfigPrecedence(t *testing.T) {
	file := writeFile(t, `
addr: 127.0.0.1:9000        # only in the file
db: sqlite:///tmp/file.db   # file, overridden by env
max-wait: 10s               # file, overridden by env, overridden by flag
log-level: debug            # file, overridden by flag
concurrency: 8              # only in the file
worker-headers:
  X-From: file
search-attributes:
  - CustomerId=KEYWORD
  - Amount=double
`)
	e := env{
		"IWF_CONFIG":         file,
		"IWF_DB":             "postgres://u:p@db.example:5432/iwf",
		"IWF_MAX_WAIT":       "20s",
		"IWF_WORKER_HEADERS": "X-From: env; Authorization: Bearer t0k",
	}
	m, err := parse(t, []string{"--max-wait", "30s", "--log-level=warn", "--poll-interval", "250ms"}, e)
	if err != nil {
		t.Fatal(err)
	}
	c := m.Config
	checks := []struct {
		name      string
		got, want any
	}{
		{"addr (file)", c.Addr, "127.0.0.1:9000"},
		{"db (env over file)", c.DB, "postgres://u:p@db.example:5432/iwf"},
		{"max-wait (flag over env over file)", c.MaxWait, 30 * time.Second},
		{"log-level (flag over file)", c.LogLevel, "warn"},
		{"concurrency (file)", c.Concurrency, 8},
		{"poll-interval (flag)", c.PollInterval, 250 * time.Millisecond},
		{"lease-duration (default)", c.LeaseDuration, 10 * time.Second},
		{"worker headers (env over file, whole)", c.WorkerHeaders, http.Header{"X-From": {"env"}, "Authorization": {"Bearer t0k"}}},
		{"search attributes (file list)", c.SearchAttributes, map[string]search.ValueType{"CustomerId": "KEYWORD", "Amount": "DOUBLE"}},
		{"config file", m.ConfigFile, file},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}

	// Repeatable flags replace the environment's list.
	m, err = parse(t, []string{"--worker-header", "X-A: 1", "--worker-header", "X-A: 2", "--search-attribute", "N=INT"}, e)
	if err != nil {
		t.Fatal(err)
	}
	if want := (http.Header{"X-A": {"1", "2"}}); !reflect.DeepEqual(m.Config.WorkerHeaders, want) {
		t.Errorf("worker headers = %v, want %v", m.Config.WorkerHeaders, want)
	}
	if want := map[string]search.ValueType{"N": "INT"}; !reflect.DeepEqual(m.Config.SearchAttributes, want) {
		t.Errorf("search attributes = %v, want %v", m.Config.SearchAttributes, want)
	}

	// --config wins over IWF_CONFIG; a file mapping of headers works.
	other := writeFile(t, "worker-headers:\n  X-Other: yes\nsearch-attributes:\n  Tags: KEYWORD_ARRAY\n")
	m, err = parse(t, []string{"--config", other}, env{"IWF_CONFIG": file})
	if err != nil {
		t.Fatal(err)
	}
	if m.ConfigFile != other || m.Config.Addr != DefaultConfig().Addr || m.Config.WorkerHeaders.Get("X-Other") != "yes" ||
		m.Config.SearchAttributes["Tags"] != "KEYWORD_ARRAY" {
		t.Errorf("--config %s: file %q config %+v", other, m.ConfigFile, m.Config)
	}
}

// TestConfigRetention: --retention takes Go durations and days, 0 keeps
// runs forever; --retention-for is per type, from a flag, the environment
// or a mapping in the file.
func TestConfigRetention(t *testing.T) {
	if got := DefaultConfig().Retention; got != 30*24*time.Hour {
		t.Fatalf("default retention %s, want 30 days", got)
	}
	file := writeFile(t, "retention: 7d\nretention-for:\n  Order: 90d\n  Audit: 0\n")
	m, err := parse(t, []string{"--config", file}, env{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Duration{"Order": 90 * 24 * time.Hour, "Audit": 0}
	if m.Config.Retention != 7*24*time.Hour || !reflect.DeepEqual(m.Config.RetentionFor, want) {
		t.Fatalf("from the file: %s %v", m.Config.Retention, m.Config.RetentionFor)
	}
	m, err = parse(t, []string{"--retention", "0", "--retention-for", "Order=2s", "--retention-for", "Cart=36h"}, env{"IWF_RETENTION": "1d", "IWF_RETENTION_FOR": "X=1d"})
	if err != nil {
		t.Fatal(err)
	}
	want = map[string]time.Duration{"Order": 2 * time.Second, "Cart": 36 * time.Hour}
	if m.Config.Retention != 0 || !reflect.DeepEqual(m.Config.RetentionFor, want) {
		t.Fatalf("from flags: %s %v", m.Config.Retention, m.Config.RetentionFor)
	}
	m, err = parse(t, nil, env{"IWF_RETENTION": "12h", "IWF_RETENTION_FOR": "A=1d, B=0"})
	if err != nil {
		t.Fatal(err)
	}
	want = map[string]time.Duration{"A": 24 * time.Hour, "B": 0}
	if m.Config.Retention != 12*time.Hour || !reflect.DeepEqual(m.Config.RetentionFor, want) {
		t.Fatalf("from the environment: %s %v", m.Config.Retention, m.Config.RetentionFor)
	}
	summary := engine.Config{Retention: m.Config.Retention, RetentionByType: m.Config.RetentionFor}.RetentionSummary()
	if summary != "12h0m0s (A=1d, B=forever)" {
		t.Fatalf("summary %q", summary)
	}
}

func TestConfigMigrateCommand(t *testing.T) {
	m, err := parse(t, []string{"migrate", "--db", "sqlite:///var/lib/iwf/x.db"}, env{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Command != CommandMigrate || m.Config.DB != "sqlite:///var/lib/iwf/x.db" {
		t.Errorf("command %q db %q", m.Command, m.Config.DB)
	}
	for _, args := range [][]string{{"-h"}, {"--help"}, {"migrate", "--help"}} {
		m := NewMain()
		m.LookupEnv = env{}.lookup
		var usage strings.Builder
		m.Stderr = &usage
		if err := m.ParseFlags(context.Background(), args); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%v: %v, want flag.ErrHelp", args, err)
		}
		// The usage names every flag and nothing panics while printing it
		// (the flag package asks a zero value of each flag for its default).
		if out := usage.String(); !strings.Contains(out, "-auth-metrics") || strings.Contains(out, "panic") {
			t.Errorf("%v printed:\n%s", args, out)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	tests := []struct {
		name string
		args []string
		env  env
		file string // config file content, passed with --config
		want string // substring of the error
	}{
		{"bad flag duration", []string{"--max-wait", "soon"}, nil, "", "max-wait"},
		{"bad env duration", nil, env{"IWF_MAX_WAIT": "soon"}, "", `IWF_MAX_WAIT: invalid duration "soon"`},
		{"bad file duration", nil, nil, "max-wait: soon\n", `max-wait: invalid duration "soon"`},
		{"negative duration", []string{"--lease-duration", "-1s"}, nil, "", "lease-duration must be positive"},
		{"lease too short", []string{"--lease-duration", "10ms"}, nil, "", "at least 100ms"},
		{"zero concurrency", nil, env{"IWF_CONCURRENCY": "0"}, "", "concurrency must be positive"},
		{"bad concurrency", []string{"--concurrency", "many"}, nil, "", "concurrency"},
		{"zero body limit", []string{"--max-body-bytes", "0"}, nil, "", "max-body-bytes must be positive"},
		{"bad db scheme", []string{"--db", "mysql://x"}, nil, "", "want sqlite://<path>"},
		{"empty sqlite path", []string{"--db", "sqlite://"}, nil, "", "missing file path"},
		{"password not echoed", []string{"--db", "mongodb://u:hunter2@h/db"}, nil, "", "mongodb://u:xxxxx@h/db"},
		{"bad addr", []string{"--addr", "8801"}, nil, "", "want host:port"},
		{"bad log format", []string{"--log-format", "xml"}, nil, "", "want json or console"},
		{"bad log level", nil, env{"IWF_LOG_LEVEL": "loud"}, "", "log-level"},
		{"bad header", []string{"--worker-header", "NoColon"}, nil, "", `want "Name: value"`},
		{"bad header name", []string{"--worker-header", "Bad Name: v"}, nil, "", "invalid header name"},
		{"bad search attribute type", []string{"--search-attribute", "A=STRING"}, nil, "", `unknown type "STRING"`},
		{"bad search attribute syntax", nil, env{"IWF_SEARCH_ATTRIBUTES": "A"}, "", "want Name=TYPE"},
		{"unknown file key", nil, nil, "adr: x\n", `unknown key "adr"`},
		{"file scalar for list", nil, nil, "worker-headers: X\n", "want a mapping or a list"},
		{"file list for scalar", nil, nil, "addr: [a, b]\n", "want a single value"},
		{"file not a mapping", nil, nil, "- a\n", "want a mapping"},
		{"file syntax", nil, nil, "addr: [\n", "config file"},
		{"missing file", []string{"--config", missing}, nil, "", "nope.yaml"},
		{"unknown command", []string{"serv"}, nil, "", `unknown command "serv"`},
		{"stray argument", []string{"--addr", ":1", "extra"}, nil, "", `unexpected argument "extra"`},
		{"unknown flag", []string{"--nope"}, nil, "", "nope"},
		{"bad retention", []string{"--retention", "a month"}, nil, "", `invalid retention "a month"`},
		{"negative retention", nil, env{"IWF_RETENTION": "-1h"}, "", `invalid retention "-1h"`},
		{"bad retention-for", []string{"--retention-for", "Order"}, nil, "", "want Type=DURATION"},
		{"bad retention-for duration", nil, nil, "retention-for:\n  Order: soon\n", `retention-for Order: invalid retention "soon"`},
		{"request timeout not below write timeout", []string{"--request-timeout", "2m", "--write-timeout", "2m"}, nil, "", "write-timeout (2m0s) must be at least max-wait (1m0s) + request-timeout (2m0s) + 5s = 3m5s"},
		// A long poll's deadline is max-wait + request-timeout; a write
		// timeout equal to it (the old default, 90s) closes the connection
		// before the long poll's 504 is written.
		{"write timeout at the long-poll deadline", []string{"--write-timeout", "90s"}, nil, "", "write-timeout (1m30s) must be at least max-wait (1m0s) + request-timeout (30s) + 5s = 1m35s"},
		{"write timeout within the margin", nil, env{"IWF_WRITE_TIMEOUT": "94s"}, "", "raise write-timeout or lower max-wait or request-timeout"},
		{"max wait past the write timeout", nil, nil, "write-timeout: 2m\nmax-wait: 2m\n", "write-timeout (2m0s) must be at least max-wait (2m0s) + request-timeout (30s) + 5s = 2m35s"},
		{"zero request timeout", []string{"--request-timeout", "0s"}, nil, "", "request-timeout must be positive"},
		{"zero session ttl", nil, env{"IWF_CONSOLE_SESSION_TTL": "0s"}, "", "console-session-ttl must be positive"},
		{"allowed host with scheme", []string{"--allowed-hosts", "http://iwf.example.com"}, nil, "", `allowed-hosts: "http://iwf.example.com" is not a host name`},
		{"allowed host with port", nil, nil, "allowed-hosts: [iwf.example.com:8801]\n", "is not a host name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.file != "" {
				args = append([]string{"--config", writeFile(t, tt.file)}, args...)
			}
			e := tt.env
			if e == nil {
				e = env{}
			}
			_, err := parse(t, args, e)
			if err == nil {
				t.Fatalf("no error, want one containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

// syncBuffer collects output written from the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startMain runs a real Main on a free port with a temporary SQLite file.
func startMain(t *testing.T, args ...string) (*Main, *syncBuffer) {
	t.Helper()
	return startMainEnv(t, env{}, args...)
}

// startMainEnv runs the server in-process with environment e, on a fresh
// SQLite file unless args name another --db; Close runs at cleanup.
func startMainEnv(t *testing.T, e env, args ...string) (*Main, *syncBuffer) {
	t.Helper()
	db := filepath.Join(t.TempDir(), "iwf.db")
	out := &syncBuffer{}
	m := NewMain()
	m.LookupEnv = e.lookup
	m.Stdout, m.Stderr = out, out
	args = append([]string{"--addr", "127.0.0.1:0", "--db", "sqlite://" + db, "--log-format", "json"}, args...)
	if err := m.ParseFlags(context.Background(), args); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		_ = m.Close()
		t.Fatalf("Run: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return m, out
}

func postJSON(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("POST %s: body is not JSON: %v", url, err)
	}
	return resp.StatusCode, m
}

func TestMainServesOnSQLite(t *testing.T) {
	m, out := startMain(t)
	base := "http://" + m.Addr()
	if strings.HasSuffix(m.Addr(), ":0") {
		t.Fatalf("Addr() = %q, want the bound port", m.Addr())
	}
	if !strings.Contains(out.String(), "listening on "+base) || !strings.Contains(out.String(), "SQLite ") {
		t.Errorf("start-up banner missing: %s", out)
	}

	resp, err := http.Get(base + "/info/healthcheck")
	if err != nil {
		t.Fatal(err)
	}
	var health map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&health)
	resp.Body.Close()
	if resp.StatusCode != 200 || health["condition"] != "OK" {
		t.Fatalf("healthcheck: %d %v", resp.StatusCode, health)
	}

	status, body := postJSON(t, base+"/api/v1/workflow/start",
		`{"iwfWorkflowType":"T","workflowTimeoutSeconds":10,"iwfWorkerUrl":"http://127.0.0.1:1"}`)
	if d, _ := body["detail"].(string); status != 400 || !strings.Contains(d, "workflowId") {
		t.Errorf("start without workflowId: %d %v", status, body)
	}

	status, body = postJSON(t, base+"/api/v1/workflow/start", `{"workflowId":`)
	if d, _ := body["detail"].(string); status != 400 || !strings.Contains(d, "malformed JSON") {
		t.Errorf("malformed JSON: %d %v", status, body)
	}

	status, body = postJSON(t, base+"/api/v1/workflow/get", `{"workflowId":"never-started"}`)
	if status != 400 || body["subStatus"] != "WORKFLOW_NOT_EXISTS_SUB_STATUS" {
		t.Errorf("get unknown workflow: %d %v", status, body)
	}
}

func TestMainMigrateCommand(t *testing.T) {
	db := filepath.Join(t.TempDir(), "iwf.db")
	out := &syncBuffer{}
	m := NewMain()
	m.LookupEnv = env{}.lookup
	m.Stdout, m.Stderr = out, out
	if err := m.ParseFlags(context.Background(), []string{"migrate", "--db", "sqlite://" + db, "--log-format", "json"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.Wait(ctx); err != nil || ctx.Err() != nil {
		t.Fatalf("Wait after migrate: %v (should return at once)", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(db); err != nil {
		t.Fatalf("database file not created: %v", err)
	}
	if !strings.Contains(out.String(), "migrations applied") {
		t.Errorf("output: %s", out)
	}

	// The server starts on the migrated file.
	m2 := NewMain()
	m2.LookupEnv = env{}.lookup
	m2.Stdout, m2.Stderr = io.Discard, io.Discard
	if err := m2.ParseFlags(context.Background(), []string{"--addr", "127.0.0.1:0", "--db", "sqlite://" + db}); err != nil {
		t.Fatal(err)
	}
	if err := m2.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := m2.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestMainServesOnPostgres(t *testing.T) {
	db := postgresDB(t)
	u, _ := url.Parse(db)
	m, out := startMain(t, "--db", db)
	if !strings.Contains(out.String(), "data in PostgreSQL "+u.Host+u.Path) {
		t.Errorf("start-up banner: %s", out)
	}
	status, body := postJSON(t, "http://"+m.Addr()+"/api/v1/workflow/start",
		`{"workflowId":"pg-1","iwfWorkflowType":"T","workflowTimeoutSeconds":10,"iwfWorkerUrl":"http://127.0.0.1:1"}`)
	if status != 200 || body["workflowRunId"] == nil {
		t.Fatalf("start: %d %v", status, body)
	}
	status, body = postJSON(t, "http://"+m.Addr()+"/api/v1/workflow/get", `{"workflowId":"pg-1"}`)
	if status != 200 || body["workflowStatus"] != "RUNNING" {
		t.Fatalf("get: %d %v", status, body)
	}
}

// postgresDB returns a --db URL of the test PostgreSQL whose tables go to
// a fresh schema, dropped at cleanup. It skips (or fails in CI) without a
// PostgreSQL server.
func postgresDB(t *testing.T) string {
	t.Helper()
	base := pgtest.URL(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "iwf_main_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	// Cleanups run last-registered first: the server started after this
	// call closes before the schema is dropped, on a connection of its own.
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), base)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})

	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema) // a runtime parameter: the store's tables go to the test schema
	u.RawQuery = q.Encode()
	return u.String()
}

// TestMainUnreachablePostgres: a PostgreSQL that does not answer (here a
// closed port) is an error naming it, for serve and migrate alike, and
// Close afterwards is safe (it used to dereference a nil pool).
func TestMainUnreachablePostgres(t *testing.T) {
	for _, cmd := range [][]string{nil, {"migrate"}} {
		out := &syncBuffer{}
		m := NewMain()
		m.LookupEnv = env{}.lookup
		m.Stdout, m.Stderr = out, out
		args := append(cmd, "--addr", "127.0.0.1:0", "--db", "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=5", "--log-format", "json")
		if err := m.ParseFlags(context.Background(), args); err != nil {
			t.Fatal(err)
		}
		err := m.Run(context.Background())
		if err == nil || !strings.Contains(err.Error(), "open PostgreSQL 127.0.0.1:1/test as postgres: PostgreSQL does not answer") {
			t.Errorf("%v: Run returned %v, want an error naming the database and the cause", cmd, err)
		}
		if err := m.Close(); err != nil {
			t.Errorf("%v: Close after a failed Run: %v", cmd, err)
		}
	}
}

// TestMainRefusesAnOwnedSQLiteFile: a second server on the SQLite file of a
// running one fails to start, naming the owner, and the first one keeps
// serving.
func TestMainRefusesAnOwnedSQLiteFile(t *testing.T) {
	first, _ := startMain(t)
	out := &syncBuffer{}
	m := NewMain()
	m.LookupEnv = env{}.lookup
	m.Stdout, m.Stderr = out, out
	if err := m.ParseFlags(context.Background(), []string{"--addr", "127.0.0.1:0", "--db", first.Config.DB, "--log-format", "json"}); err != nil {
		t.Fatal(err)
	}
	err := m.Run(context.Background())
	_ = m.Close()
	want := fmt.Sprintf("is in use by another iwf-server (pid %d)", os.Getpid())
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("second server: %v; want an error containing %q", err, want)
	}
	resp, err := http.Get("http://" + first.Addr() + "/info/healthcheck")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the first server stopped serving: %v", err)
	}
	resp.Body.Close()
}

// TestMainDisconnectsSlowClients: a client that sends its headers and one
// byte of its body, then nothing, is disconnected after read-timeout; and a
// write-timeout that long polls could not live within is refused.
func TestMainDisconnectsSlowClients(t *testing.T) {
	m, _ := startMain(t, "--read-timeout", "1s")
	conn, err := net.Dial("tcp", m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /api/v1/workflow/get HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	// The failure deadline is far above the 1 s timeout; the server must
	// close the connection (EOF, possibly after an error answer) first.
	conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	answer, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("the slow client was not disconnected: %v", err)
	}
	// When the answer reaches the client, it says why and names no socket.
	if len(answer) > 0 && (!strings.Contains(string(answer), "did not arrive within the read timeout") || strings.Contains(string(answer), "127.0.0.1")) {
		t.Fatalf("answer to the slow client: %q", answer)
	}

	bad := NewMain()
	bad.LookupEnv = env{}.lookup
	bad.Stderr = io.Discard
	err = bad.ParseFlags(context.Background(), []string{"--write-timeout", "30s", "--max-wait", "60s"})
	if err == nil || !strings.Contains(err.Error(), "write-timeout (30s) must be at least max-wait (1m0s)") {
		t.Fatalf("write-timeout below max-wait: %v", err)
	}
}

// TestMainLongPollDeadline: a long poll that runs into its deadline
// (max-wait + request-timeout: here its reads wait on a table lock) gets
// its 504 with the smallest write-timeout the configuration allows, not a
// connection closed by the write timeout.
func TestMainLongPollDeadline(t *testing.T) {
	db := postgresDB(t)
	m, _ := startMain(t, "--db", db, "--max-wait", "1s", "--request-timeout", "1s", "--write-timeout", "7s")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "LOCK TABLE workflows, runs IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resp, err := http.Post("http://"+m.Addr()+"/api/v1/workflow/getWithWait", "application/json", strings.NewReader(`{"workflowId":"locked-out"}`))
	if err != nil {
		t.Fatalf("the long poll got no answer after %s: %v", time.Since(start), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("the long poll's answer was cut after %s: %v", time.Since(start), err)
	}
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(string(body), "deadline of 2s") {
		t.Fatalf("long poll past its deadline: %d %s", resp.StatusCode, body)
	}
	if d := time.Since(start); d < 2*time.Second {
		t.Fatalf("answered after %s, before its deadline of 2s", d)
	}
}

// TestMainMissingPostgresDatabase: a database that does not exist on a
// PostgreSQL that answers is named as such, in one line, with no panic.
func TestMainMissingPostgresDatabase(t *testing.T) {
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/iwf_no_such_database"
	out := &syncBuffer{}
	m := NewMain()
	m.LookupEnv = env{}.lookup
	m.Stdout, m.Stderr = out, out
	if err := m.ParseFlags(context.Background(), []string{"migrate", "--db", u.String(), "--db-connect-timeout", "30s", "--log-format", "json"}); err != nil {
		t.Fatal(err)
	}
	err = m.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "the database does not exist (create it, or fix the URL)") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Run returned %v, want one line saying the database does not exist", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSetGCPercent checks that the server sets the collector's target to
// defaultGCPercent when GOGC is unset, and leaves it alone when GOGC is set.
func TestSetGCPercent(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	t.Setenv("GOGC", "100") // restored after the test
	setGCPercent()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("with GOGC set the target became %d, want it left at 100", got)
	}
	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
	setGCPercent()
	if got := debug.SetGCPercent(100); got != defaultGCPercent {
		t.Fatalf("without GOGC the target is %d, want %d", got, defaultGCPercent)
	}
}
