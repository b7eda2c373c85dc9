package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// OwnServer is a PostgreSQL server that one test owns: its own data
// directory and port, created with initdb and run with pg_ctl, so that the
// test may stop and start it without touching the shared server.
type OwnServer struct {
	// URL connects to the server's "postgres" database as the superuser.
	URL string

	t       testing.TB
	dir     string
	port    int
	bin     string
	asOther string // the user that runs the server when the test runs as root
	// settings are passed as -c name=value on every Start.
	settings map[string]string
}

// OwnOptions configure StartOwnWith. The zero value starts a server like
// StartOwn does.
type OwnOptions struct {
	// Password, when set, turns on password authentication over TCP: the
	// postgres user's password is Password, and URL carries it.
	Password string
	// Settings are server settings (name to value, e.g.
	// "shared_preload_libraries": "pg_stat_statements"), given to the
	// server as -c name=value on every Start. Names and values must not
	// contain spaces or quotes.
	Settings map[string]string
}

// StartOwn creates and starts a PostgreSQL server for the test, stopped
// and removed at cleanup. It skips the test when PostgreSQL's server
// programs are not installed, or fails it when IWF_TEST_POSTGRES_REQUIRED=1.
func StartOwn(t testing.TB) *OwnServer {
	t.Helper()
	return StartOwnWith(t, OwnOptions{})
}

// StartOwnWithPassword is StartOwn with password authentication over TCP
// when password is set: the postgres user's password is password, and URL
// carries it.
func StartOwnWithPassword(t testing.TB, password string) *OwnServer {
	t.Helper()
	return StartOwnWith(t, OwnOptions{Password: password})
}

// StartOwnWith is StartOwn with options: a password (as
// StartOwnWithPassword) and extra server settings. A setting whose name or
// value contains a space or a quote fails the test.
func StartOwnWith(t testing.TB, opts OwnOptions) *OwnServer {
	t.Helper()
	password := opts.Password
	for k, v := range opts.Settings {
		if k == "" || strings.ContainsAny(k+v, " \t\n'\"\\") {
			t.Fatalf("pgtest: server setting %q=%q: empty name, or a space or quote in it", k, v)
		}
	}
	bin := ServerBin("initdb")
	if bin == "" {
		msg := "no PostgreSQL server programs (initdb, pg_ctl) in /usr/lib/postgresql/*/bin or PATH"
		if os.Getenv(EnvRequired) == "1" {
			t.Fatalf("%s=1 but %s", EnvRequired, msg)
		}
		t.Skip(msg)
	}
	s := &OwnServer{t: t, bin: bin, settings: opts.Settings}
	if os.Geteuid() == 0 {
		// initdb refuses to run as root: the server runs as "postgres".
		if _, err := user.Lookup("postgres"); err != nil {
			t.Skipf("running as root without a postgres user: %v", err)
		}
		s.asOther = "postgres"
	}
	dir, err := os.MkdirTemp("", "iwf-pg-")
	if err != nil {
		t.Fatal(err)
	}
	s.dir = dir
	t.Cleanup(func() { os.RemoveAll(dir) })
	if s.asOther != "" {
		s.run("chown", "-R", s.asOther, dir)
	}
	s.port = FreePort(t)
	if password == "" {
		s.pg("initdb", "-D", s.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
		s.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
	} else {
		pwfile := filepath.Join(dir, "pw")
		if err := os.WriteFile(pwfile, []byte(password+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if s.asOther != "" {
			s.run("chown", s.asOther, pwfile)
		}
		s.pg("initdb", "-D", s.data(), "-U", "postgres", "--auth-local=trust", "--auth-host=scram-sha-256",
			"--pwfile="+pwfile, "-E", "UTF8", "--no-sync")
		s.URL = fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d/postgres?sslmode=disable", password, s.port)
	}
	s.Start()
	t.Cleanup(func() {
		if err := s.ctl("stop", "-m", "immediate"); err != nil {
			t.Logf("stopping the test's PostgreSQL: %v", err)
		}
	})
	return s
}

func (s *OwnServer) data() string { return filepath.Join(s.dir, "data") }

// Start starts the server and waits until it accepts connections.
func (s *OwnServer) Start() {
	s.t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", s.port, s.dir)
	names := make([]string, 0, len(s.settings))
	for k := range s.settings {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		opts += fmt.Sprintf(" -c %s=%s", k, s.settings[k])
	}
	if err := s.ctl("start", "-w", "-t", "60", "-l", filepath.Join(s.dir, "log"), "-o", opts); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		s.t.Fatalf("starting the test's PostgreSQL: %v\n%s", err, log)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		c, err := pgx.Connect(ctx, s.URL)
		if err == nil {
			c.Close(ctx)
			return
		}
		if ctx.Err() != nil {
			s.t.Fatalf("the test's PostgreSQL does not accept connections: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop stops the server in fast mode: clients are disconnected and their
// transactions rolled back.
func (s *OwnServer) Stop() {
	s.t.Helper()
	if err := s.ctl("stop", "-w", "-m", "fast"); err != nil {
		s.t.Fatalf("stopping the test's PostgreSQL: %v", err)
	}
}

func (s *OwnServer) ctl(args ...string) error {
	args = append([]string{"-D", s.data()}, args...)
	_, err := s.output(filepath.Join(s.bin, "pg_ctl"), args...)
	return err
}

func (s *OwnServer) pg(prog string, args ...string) {
	s.t.Helper()
	if out, err := s.output(filepath.Join(s.bin, prog), args...); err != nil {
		s.t.Fatalf("%s: %v\n%s", prog, err, out)
	}
}

func (s *OwnServer) run(name string, args ...string) {
	s.t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		s.t.Fatalf("%s: %v\n%s", name, err, out)
	}
}

func (s *OwnServer) output(name string, args ...string) ([]byte, error) {
	var cmd *exec.Cmd
	if s.asOther != "" {
		cmd = exec.Command("runuser", append([]string{"-u", s.asOther, "--", name}, args...)...)
	} else {
		cmd = exec.Command(name, args...)
	}
	cmd.Dir = s.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%v: %s", err, out)
	}
	return out, nil
}

// ServerBin finds the directory of PostgreSQL's server programs that holds
// tool (initdb, pg_ctl, pg_basebackup): the newest
// /usr/lib/postgresql/<version>/bin that has it, else the directory of tool
// on PATH; "" when there is none.
func ServerBin(tool string) string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, tool)); err == nil {
			return d
		}
	}
	if p, err := exec.LookPath(tool); err == nil {
		return filepath.Dir(p)
	}
	return ""
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
