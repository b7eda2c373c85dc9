// Package pgpair runs a PostgreSQL primary and a streaming standby that one
// test owns, for failover tests: each node has its own temporary data
// directory and port (never the shared server), the standby is made with
// pg_basebackup -R, and replication is synchronous (synchronous_standby_names
// = '*') or asynchronous. The test kills the primary with SIGKILL (the
// postmaster and every backend, as a lost machine), promotes the standby
// with pg_ctl promote, and rebuilds the old primary as the new standby with
// pg_basebackup.
//
// Clients are given URL, which names both hosts with
// target_session_attrs=read-write: libpq and pgx try the hosts in order and
// keep the one that accepts writes.
//
// With synchronous replication the pair behaves like Patroni's
// synchronous_mode (not strict): while the new primary has no standby (from
// the promotion until the rebuilt standby streams), synchronous_standby_names
// is empty and commits wait for no one; once the standby streams, it is set
// to '*' again and every acknowledged commit is on both nodes. Kill the
// primary only after Rebuild (or Start) returned, or nothing protects what
// it acknowledged since the last promotion.
package pgpair

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
)

// Options configure Start.
type Options struct {
	// Async makes the standby asynchronous: synchronous_standby_names stays
	// empty, and a commit is acknowledged once it is on the primary alone.
	Async bool
	// Settings are further server settings (name to value) written to
	// postgresql.conf of the first primary, which pg_basebackup copies to
	// every standby. Names and values must not contain quotes or newlines.
	Settings map[string]string
}

// Pair is a primary and a standby. Its methods must be called from one
// goroutine at a time (the test's fault loop); URL may be read from any.
type Pair struct {
	// URL connects to the primary, whichever node it is: both hosts with
	// target_session_attrs=read-write, database "postgres", user postgres.
	URL string

	t       testing.TB
	bin     string
	asOther string
	async   bool
	nodes   [2]*node
	primary int // index of the primary in nodes

	mu        sync.Mutex
	failovers int
}

// node is one PostgreSQL server of the pair.
type node struct {
	name string
	dir  string // the node's temporary directory (socket, log)
	port int
}

func (n *node) data() string { return filepath.Join(n.dir, "data") }

func (n *node) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", n.port)
}

// Start creates the primary with initdb, the standby with pg_basebackup -R,
// starts both and waits until the standby streams (and, unless o.Async, is
// synchronous). Both are stopped and removed when the test ends. It skips
// the test when PostgreSQL's server programs are not installed, or fails it
// when IWF_TEST_POSTGRES_REQUIRED=1.
func Start(t testing.TB, o Options) *Pair {
	t.Helper()
	bin := pgtest.ServerBin("pg_basebackup")
	if bin == "" {
		msg := "no PostgreSQL server programs (initdb, pg_ctl, pg_basebackup) in /usr/lib/postgresql/*/bin or PATH"
		if os.Getenv("IWF_TEST_POSTGRES_REQUIRED") == "1" {
			t.Fatalf("IWF_TEST_POSTGRES_REQUIRED=1 but %s", msg)
		}
		t.Skip(msg)
	}
	p := &Pair{t: t, bin: bin, async: o.Async}
	if os.Geteuid() == 0 {
		// initdb and postgres refuse to run as root.
		if _, err := user.Lookup("postgres"); err != nil {
			t.Skipf("running as root without a postgres user: %v", err)
		}
		p.asOther = "postgres"
	}
	for i, name := range []string{"pg-a", "pg-b"} {
		dir, err := os.MkdirTemp("", "iwf-pgpair-"+name+"-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if p.asOther != "" {
			if out, err := exec.Command("chown", p.asOther, dir).CombinedOutput(); err != nil {
				t.Fatalf("chown %s: %v: %s", dir, err, out)
			}
		}
		p.nodes[i] = &node{name: name, dir: dir, port: pgtest.FreePort(t)}
	}
	p.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write",
		p.nodes[0].port, p.nodes[1].port)
	t.Cleanup(func() {
		for _, n := range p.nodes {
			if _, err := os.Stat(filepath.Join(n.data(), "postmaster.pid")); err == nil {
				_ = p.ctl(n, "stop", "-m", "immediate")
			}
			p.killNode(n) // whatever the stop left
		}
	})

	a := p.nodes[0]
	if err := p.initdb(a.data()); err != nil {
		t.Fatal(err)
	}
	conf := "\n# pgpair\nlisten_addresses = '127.0.0.1'\nwal_level = replica\nmax_wal_senders = 10\nhot_standby = on\n" +
		"wal_keep_size = '256MB'\nmax_connections = 100\n"
	names := make([]string, 0, len(o.Settings))
	for k := range o.Settings {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		v := o.Settings[k]
		if k == "" || strings.ContainsAny(k+v, "'\"\n\\") {
			t.Fatalf("pgpair: setting %q=%q: empty name, or a quote or newline in it", k, v)
		}
		conf += fmt.Sprintf("%s = '%s'\n", k, v)
	}
	f, err := os.OpenFile(filepath.Join(a.data(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString(conf)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := p.start(a); err != nil {
		t.Fatal(err)
	}
	p.primary = 0
	if err := p.rebuild(p.nodes[1]); err != nil {
		t.Fatal(err)
	}
	return p
}

// template is a data directory fresh from initdb, made once per process:
// initdb takes seconds of CPU (half a minute on a loaded machine), a copy
// a fraction of one.
var template struct {
	once sync.Once
	dir  string
	err  error
}

// initdb puts a fresh cluster in data: a copy of the template, made with
// initdb on first use.
func (p *Pair) initdb(data string) error {
	template.once.Do(func() {
		dir, err := os.MkdirTemp("", "iwf-pgpair-template-")
		if err != nil {
			template.err = err
			return
		}
		template.dir = dir
		if p.asOther != "" {
			if out, err := exec.Command("chown", p.asOther, dir).CombinedOutput(); err != nil {
				template.err = fmt.Errorf("chown %s: %v: %s", dir, err, out)
				return
			}
		}
		template.err = p.run("initdb", "-D", filepath.Join(dir, "data"), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	})
	if template.err != nil {
		return template.err
	}
	// cp -a keeps the owner (postgres) and the modes PostgreSQL checks.
	if out, err := exec.Command("cp", "-a", filepath.Join(template.dir, "data"), data).CombinedOutput(); err != nil {
		return fmt.Errorf("pgpair: copy the initdb template: %v: %s", err, out)
	}
	return nil
}

// Cleanup removes the data directory template that Start makes once per
// process. Call it from TestMain after m.Run; without it the template
// stays in the temporary directory.
func Cleanup() {
	if template.dir != "" {
		os.RemoveAll(template.dir)
	}
}

// Primary and Standby are the URLs of the current primary and standby
// alone (one host each).
func (p *Pair) Primary() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nodes[p.primary].url()
}

// Standby is the URL of the current standby alone.
func (p *Pair) Standby() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nodes[1-p.primary].url()
}

// Failovers is the number of promotions so far.
func (p *Pair) Failovers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failovers
}

// KillPrimary kills the primary's postmaster and every process it started
// with SIGKILL, at once, and waits until they are gone: a crash of the
// machine, except that the clients' connections are reset rather than left
// hanging.
func (p *Pair) KillPrimary() error {
	n := p.nodes[p.primary]
	if !p.killNode(n) {
		return fmt.Errorf("pgpair: %s: no running postmaster to kill", n.name)
	}
	return nil
}

// Promote promotes the standby (pg_ctl promote) and waits until it accepts
// writes; it is then the primary. With synchronous replication its
// synchronous_standby_names is emptied until Rebuild gives it a standby.
func (p *Pair) Promote() error {
	s := p.nodes[1-p.primary]
	if err := p.ctl(s, "promote", "-w", "-t", "120"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := poll(ctx, s.url(), "SELECT NOT pg_is_in_recovery()"); err != nil {
		return fmt.Errorf("pgpair: %s after promotion: %w", s.name, err)
	}
	if !p.async {
		if err := p.setSync(ctx, s, ""); err != nil {
			return err
		}
	}
	p.mu.Lock()
	p.primary = 1 - p.primary
	p.failovers++
	p.mu.Unlock()
	return nil
}

// Rebuild makes the node that is not the primary (the old primary after a
// failover) a standby of the primary again: its data directory is replaced
// by a pg_basebackup -R of the primary, it starts, and Rebuild waits until it
// streams and, with synchronous replication, is the synchronous standby.
func (p *Pair) Rebuild() error {
	s := p.nodes[1-p.primary]
	p.killNode(s)
	if err := os.RemoveAll(s.data()); err != nil {
		return fmt.Errorf("pgpair: remove %s: %w", s.data(), err)
	}
	return p.rebuild(s)
}

// WaitCaughtUp waits until the standby has replayed everything the primary
// had written when it was called.
func (p *Pair) WaitCaughtUp() error {
	prim, stby := p.Primary(), p.Standby()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, prim)
	if err != nil {
		return fmt.Errorf("pgpair: %w", err)
	}
	var lsn string
	err = conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn)
	conn.Close(context.Background())
	if err != nil {
		return fmt.Errorf("pgpair: %w", err)
	}
	return poll(ctx, stby, fmt.Sprintf("SELECT pg_last_wal_replay_lsn() >= '%s'::pg_lsn", lsn))
}

// StopStandby stops the standby (fast shutdown). Nothing the primary
// commits while it is stopped reaches it; with asynchronous replication the
// primary goes on acknowledging commits.
func (p *Pair) StopStandby() error {
	return p.ctl(p.nodes[1-p.primary], "stop", "-w", "-t", "120", "-m", "fast")
}

// StartStandby starts the standby stopped by StopStandby, without waiting
// for it to stream (its primary may be gone).
func (p *Pair) StartStandby() error {
	return p.start(p.nodes[1-p.primary])
}

// rebuild takes a base backup of the primary into s's data directory,
// starts s and waits until it is a streaming (synchronous) standby.
func (p *Pair) rebuild(s *node) error {
	prim := p.nodes[p.primary]
	if err := p.run("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(prim.port), "-U", "postgres",
		"-D", s.data(), "-R", "-X", "stream", "-c", "fast", "--no-sync",
		"-d", "application_name="+s.name); err != nil {
		return err
	}
	if err := p.start(s); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := poll(ctx, prim.url(), fmt.Sprintf(
		"SELECT EXISTS (SELECT FROM pg_stat_replication WHERE application_name = '%s' AND state = 'streaming')", s.name)); err != nil {
		return fmt.Errorf("pgpair: %s does not stream from %s: %w", s.name, prim.name, err)
	}
	if p.async {
		return nil
	}
	if err := p.setSync(ctx, prim, "*"); err != nil {
		return err
	}
	if err := poll(ctx, prim.url(), fmt.Sprintf(
		"SELECT EXISTS (SELECT FROM pg_stat_replication WHERE application_name = '%s' AND sync_state = 'sync')", s.name)); err != nil {
		return fmt.Errorf("pgpair: %s is not the synchronous standby of %s: %w", s.name, prim.name, err)
	}
	return nil
}

// setSync sets synchronous_standby_names on n (ALTER SYSTEM) and reloads
// its configuration, then waits until the setting is in force.
func (p *Pair) setSync(ctx context.Context, n *node, names string) error {
	conn, err := pgx.Connect(ctx, n.url())
	if err != nil {
		return fmt.Errorf("pgpair: %s: %w", n.name, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER SYSTEM SET synchronous_standby_names = '%s'", names)); err != nil {
		return fmt.Errorf("pgpair: %s: %w", n.name, err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return fmt.Errorf("pgpair: %s: %w", n.name, err)
	}
	// The postmaster rereads the file asynchronously; a new session sees
	// the setting once it did.
	return poll(ctx, n.url(), fmt.Sprintf("SELECT current_setting('synchronous_standby_names') = '%s'", names))
}

// start starts n's server on its port and waits until it accepts
// connections (a standby accepts read-only ones).
func (p *Pair) start(n *node) error {
	opts := fmt.Sprintf("-p %d -k %s", n.port, n.dir)
	if err := p.ctl(n, "start", "-w", "-t", "120", "-l", filepath.Join(n.dir, "log"), "-o", opts); err != nil {
		log, _ := os.ReadFile(filepath.Join(n.dir, "log"))
		return fmt.Errorf("%w\n%s", err, tail(log, 4000))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return poll(ctx, n.url(), "SELECT true")
}

// killNode SIGKILLs n's postmaster and its children, if it runs, and waits
// until they are gone. It reports whether a postmaster ran.
func (p *Pair) killNode(n *node) bool {
	b, err := os.ReadFile(filepath.Join(n.data(), "postmaster.pid"))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil || pid <= 0 || !alive(pid) {
		return false
	}
	procs := append([]int{pid}, children(pid)...)
	for _, q := range procs {
		_ = syscall.Kill(q, syscall.SIGKILL)
	}
	// A backend forked between the listing and the kill dies with the
	// postmaster's death; list again until nothing is left.
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		left := 0
		for _, q := range append(procs, children(pid)...) {
			if alive(q) {
				_ = syscall.Kill(q, syscall.SIGKILL)
				left++
			}
		}
		if left == 0 {
			// The killed postmaster can linger as a zombie until its
			// parent (init, after pg_ctl's daemonizing) reaps it; a new
			// postmaster would take the zombie's PID in the socket's lock
			// file for a live one and refuse to start. It is dead: remove
			// its socket and lock file.
			sock := filepath.Join(n.dir, fmt.Sprintf(".s.PGSQL.%d", n.port))
			_ = os.Remove(sock + ".lock")
			_ = os.Remove(sock)
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.t.Errorf("pgpair: %s: processes survive SIGKILL", n.name)
	return true
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

// children lists the processes whose parent is pid.
func children(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		q, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, q)
		}
	}
	return out
}

// poll runs query (one boolean) on url until it answers true.
func poll(ctx context.Context, url, query string) error {
	var last error
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		conn, err := pgx.Connect(cctx, url)
		if err == nil {
			var ok bool
			err = conn.QueryRow(cctx, query).Scan(&ok)
			conn.Close(context.Background())
			if err == nil && ok {
				cancel()
				return nil
			}
			if err == nil {
				err = errors.New("not yet: " + query)
			}
		}
		cancel()
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (p *Pair) ctl(n *node, args ...string) error {
	return p.run("pg_ctl", append([]string{"-D", n.data()}, args...)...)
}

// run runs one of PostgreSQL's programs, as the postgres user when the
// test runs as root.
func (p *Pair) run(prog string, args ...string) error {
	name := filepath.Join(p.bin, prog)
	var cmd *exec.Cmd
	if p.asOther != "" {
		cmd = exec.Command("runuser", append([]string{"-u", p.asOther, "--", name}, args...)...)
	} else {
		cmd = exec.Command(name, args...)
	}
	cmd.Dir = os.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgpair: %s %s: %v: %s", prog, strings.Join(args, " "), err, tail(out, 4000))
	}
	return nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
