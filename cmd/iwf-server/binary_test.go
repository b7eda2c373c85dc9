package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/internal/crashtest"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
)

var built struct {
	once sync.Once
	bin  string
	err  error
	dir  string
}

// serverBinary builds cmd/iwf-server once per test process.
func serverBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "iwf-server-bin-")
		if built.err == nil {
			built.bin, built.err = crashtest.BuildServer(built.dir)
		}
	})
	if built.err != nil {
		t.Fatalf("build the server: %v", built.err)
	}
	return built.bin
}

// runBinary runs the server binary to its end (it must end within two
// minutes) and returns its exit code, stdout and stderr.
func runBinary(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, serverBinary(t), args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir()}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	code := 0
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("run the server: %v", err)
	}
	return code, stdout.String(), stderr.String()
}

// TestBinaryStartupErrors runs the real binary against databases that
// cannot work: each start (and migrate) exits 1 with one line naming the
// problem, and never panics.
func TestBinaryStartupErrors(t *testing.T) {
	shared := pgtest.URL(t)
	missing := strings.Replace(shared, "/test?", "/iwf_missing_db?", 1)
	if missing == shared {
		missing = "postgres://postgres@127.0.0.1:5432/iwf_missing_db?sslmode=disable"
	}
	closed := closedPort(t)
	locked := pgtest.StartOwnWithPassword(t, "right-password")
	wrongPassword := strings.Replace(locked.URL, "right-password", "wrong-password", 1)

	for _, tc := range []struct {
		name, db, want string
	}{
		{"missing database", missing, "the database does not exist"},
		{"unreachable", fmt.Sprintf("postgres://postgres@127.0.0.1:%d/x?sslmode=disable", closed), "PostgreSQL does not answer"},
		// sslmode=prefer (the default) tries TLS, then plain: two errors.
		{"unreachable, sslmode default", fmt.Sprintf("postgres://postgres@127.0.0.1:%d/x", closed), "PostgreSQL does not answer"},
		{"bad credentials", wrongPassword, "PostgreSQL refused the credentials"},
		{"malformed URL", "postgres://user:pa%zzss@host/db", "cannot parse the PostgreSQL URL"},
		{"unknown scheme", "mysql://localhost/db", "want sqlite://<path>, postgres://"},
	} {
		for _, cmd := range []string{"serve", "migrate"} {
			t.Run(tc.name+"/"+cmd, func(t *testing.T) {
				code, stdout, stderr := runBinary(t, cmd, "--addr", "127.0.0.1:0", "--db", tc.db, "--log-level", "error", "--db-connect-timeout", "5s")
				// One line for the operator; JSON log lines may come before it.
				var lines []string
				for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
					if !strings.HasPrefix(l, "{") {
						lines = append(lines, l)
					}
				}
				if code != 1 || len(lines) != 1 || !strings.HasPrefix(lines[0], "iwf-server: ") || !strings.Contains(lines[0], tc.want) {
					t.Fatalf("exit %d, stderr %q; want exit 1 and one line with %q", code, stderr, tc.want)
				}
				if strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine ") {
					t.Fatalf("stderr shows a panic: %s", stderr)
				}
				if strings.Contains(stderr, "wrong-password") || strings.Contains(stdout, "wrong-password") {
					t.Fatalf("the password was printed: %s", stderr)
				}
			})
		}
	}
}

func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// TestBinaryOneOwnerPerSQLiteFile: a second server on the SQLite file of a
// running one exits 1 at once, naming the first one's pid, and leaves it
// running undisturbed.
func TestBinaryOneOwnerPerSQLiteFile(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "iwf.db")
	first := crashtest.StartServer(t, crashtest.Options{Bin: serverBinary(t), DB: db, Name: "first"})
	code, _, stderr := runBinary(t, "--addr", "127.0.0.1:0", "--db", db)
	if code != 1 || !strings.Contains(stderr, "is in use by another iwf-server (pid ") {
		t.Fatalf("second server: exit %d, stderr %q", code, stderr)
	}
	resp, err := http.Get(first.URL() + "/info/healthcheck")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the first server after the second one's attempt: %d", resp.StatusCode)
	}
	if strings.Contains(first.Log(), "released leases of a previous process") {
		t.Fatalf("the first server's leases were touched:\n%s", first.Log())
	}
}
