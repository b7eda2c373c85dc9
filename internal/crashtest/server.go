package crashtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// BuildServer compiles the module's cmd/iwf-server into dir and returns the
// path of the binary. It finds the module root with `go env GOMOD`, so it
// works from any package directory of the module.
func BuildServer(dir string) (string, error) {
	goBin := "go"
	if root := os.Getenv("GOROOT"); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			goBin = p
		}
	}
	out, err := exec.Command(goBin, "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("go env GOMOD: not inside the module")
	}
	bin := filepath.Join(dir, "iwf-server")
	var errs []error
	// A second try rides out a transient failure of the shared build cache
	// while other go commands use it.
	for range 2 {
		cmd := exec.Command(goBin, "build", "-o", bin, "./cmd/iwf-server")
		cmd.Dir = filepath.Dir(gomod)
		out, err := cmd.CombinedOutput()
		if err == nil {
			return bin, nil
		}
		errs = append(errs, fmt.Errorf("go build ./cmd/iwf-server: %v\n%s", err, out))
	}
	return "", errors.Join(errs...)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Options configure a Server.
type Options struct {
	// Bin is the server binary (from BuildServer).
	Bin string
	// DB is the --db setting: sqlite:///abs/path.db or a postgres:// URL.
	DB string
	// Name labels the process in the test log (e.g. "node-a").
	Name string
	// LeaseDuration is --lease-duration. Default 2s.
	LeaseDuration time.Duration
	// PollInterval is --poll-interval. Default 100ms.
	PollInterval time.Duration
	// LogLevel is --log-level. Default "debug".
	LogLevel string
	// Args are further command-line arguments.
	Args []string
	// Env are further environment variables of the process (NAME=value),
	// such as OTEL_* for tracing. IWF_* settings belong in Args.
	Env []string
	// ClientTLS, when set, is the TLS configuration of the test's clients
	// (the server's CA, a client certificate): the server is reached over
	// https. Its Args must turn TLS on.
	ClientTLS *tls.Config
	// Token, when set, is sent as a bearer token with every API call the
	// test makes through Client and with the health check.
	Token string
}

func (o Options) withDefaults() Options {
	if o.Name == "" {
		o.Name = "server"
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = 2 * time.Second
	}
	if o.PollInterval == 0 {
		o.PollInterval = 100 * time.Millisecond
	}
	if o.LogLevel == "" {
		o.LogLevel = "debug"
	}
	return o
}

// Server is an iwf-server child process that a test can kill with SIGKILL
// and start again on the same database. Its output is kept and written to
// the test log when the test fails.
type Server struct {
	t    testing.TB
	opts Options

	mu     sync.Mutex
	addr   string
	cmd    *exec.Cmd
	exited chan struct{} // closed when the current process has exited
	log    *processLog   // the current process's output
	logs   []*processLog // one per process started
	client *iwfapi.ClientWithResponses
}

// processLog is the output of one process.
type processLog struct {
	name    string
	started time.Time
	mu      sync.Mutex
	buf     bytes.Buffer
	ended   string
	// healthy is set once the process answered its health check; killed
	// once Kill sent SIGKILL. A healthy process that ends unkilled crashed.
	healthy, killed bool
}

func (l *processLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *processLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// StartServer starts a server process and waits until it answers
// /info/healthcheck. The process is killed when the test ends.
func StartServer(t testing.TB, opts Options) *Server {
	t.Helper()
	s := NewServer(t, opts)
	s.Start()
	return s
}

// NewServer returns a Server that is not running yet; call Start. The
// process is killed when the test ends, and its output is logged if the
// test failed.
func NewServer(t testing.TB, opts Options) *Server {
	t.Helper()
	s := &Server{t: t, opts: opts.withDefaults()}
	t.Cleanup(func() {
		s.mu.Lock()
		logs := append([]*processLog(nil), s.logs...)
		s.mu.Unlock()
		for _, l := range logs {
			l.mu.Lock()
			if l.healthy && !l.killed && l.ended != "" {
				t.Errorf("%s ended on its own (not killed by the test): %s", l.name, l.ended)
			}
			l.mu.Unlock()
		}
		s.Kill()
		if t.Failed() || os.Getenv("IWF_CRASHTEST_VERBOSE") == "1" {
			s.dumpLogs()
		}
	})
	return s
}

// maxLogBytes bounds how much of one process's output is written to the
// test log.
const maxLogBytes = 64 << 10

func (s *Server) dumpLogs() {
	s.mu.Lock()
	logs := append([]*processLog(nil), s.logs...)
	s.mu.Unlock()
	for _, l := range logs {
		out := quiet(l.String())
		if len(out) > maxLogBytes {
			cut := len(out) - maxLogBytes
			if i := strings.IndexByte(out[cut:], '\n'); i >= 0 {
				cut += i + 1
			}
			out = warnings(out[:cut]) + fmt.Sprintf("[... %d bytes cut ...]\n", cut) + out[cut:]
		}
		s.t.Logf("==== %s (started %s, %s) output:\n%s", l.name, l.started.Format("15:04:05.000"), l.ended, out)
	}
}

// maxWarningBytes bounds the warn and error lines kept from the part of a
// log that dumpLogs cuts.
const maxWarningBytes = 32 << 10

// warnings returns the warn and error lines of a log part that is cut, so
// that a goroutine dump at its end (Server.DumpGoroutines) does not take
// the lines that say what went wrong out of the test log; the last ones
// when there are more than maxWarningBytes.
func warnings(out string) string {
	var lines []string
	n := 0
	for line := range strings.SplitAfterSeq(out, "\n") {
		if strings.Contains(line, `"level":"warn"`) || strings.Contains(line, `"level":"error"`) {
			lines = append(lines, line)
			n += len(line)
		}
	}
	for n > maxWarningBytes && len(lines) > 0 {
		n -= len(lines[0])
		lines = lines[1:]
	}
	if len(lines) == 0 {
		return ""
	}
	return fmt.Sprintf("[the %d warn and error lines of the part cut:]\n", len(lines)) + strings.Join(lines, "")
}

// noisyPaths are request paths whose access-log lines the tests produce by
// polling; they are left out of the test log.
var noisyPaths = []string{`"path":"/api/v1/workflow/internal/dump"`, `"path":"/info/healthcheck"`}

// quiet drops the access-log lines of noisyPaths from a process's output.
func quiet(out string) string {
	var b strings.Builder
	dropped := 0
	for line := range strings.SplitAfterSeq(out, "\n") {
		noisy := false
		for _, p := range noisyPaths {
			if strings.Contains(line, p) && strings.Contains(line, `"component":"http"`) {
				noisy = true
				break
			}
		}
		if noisy {
			dropped++
			continue
		}
		b.WriteString(line)
	}
	if dropped > 0 {
		fmt.Fprintf(&b, "[%d access-log lines of polled paths (dump, healthcheck) left out]\n", dropped)
	}
	return b.String()
}

// Start starts the server process (again, after Kill) on the same database
// and waits until it is healthy. It keeps the previous address when it can,
// so that clients need not change.
func (s *Server) Start() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatalf("%s: %v", s.opts.Name, err)
	}
}

// StartAll starts several servers at the same moment (e.g. nodes that
// migrate one database together) and waits until all are healthy.
func StartAll(t testing.TB, servers ...*Server) {
	t.Helper()
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.start()
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("%s: %v", servers[i].opts.Name, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

func (s *Server) start() error {
	if s.Running() {
		return errors.New("start while running")
	}
	var lastErr error
	for try := 0; try < 4; try++ {
		if s.addr == "" || try > 0 {
			addr, err := freeAddr()
			if err != nil {
				return err
			}
			s.mu.Lock()
			s.addr, s.client = addr, nil
			s.mu.Unlock()
		}
		err := s.startOnce()
		if err == nil {
			return nil
		}
		lastErr = err
		if !errors.Is(err, errAddrInUse) {
			break
		}
	}
	return lastErr
}

var errAddrInUse = errors.New("address already in use")

// healthTimeout bounds how long a started process may take to answer.
const healthTimeout = 30 * time.Second

func (s *Server) startOnce() error {
	o := s.opts
	args := []string{
		"--addr", s.addr,
		"--db", o.DB,
		"--lease-duration", o.LeaseDuration.String(),
		"--poll-interval", o.PollInterval.String(),
		"--log-level", o.LogLevel,
		"--log-format", "json",
	}
	args = append(args, o.Args...)
	cmd := exec.Command(o.Bin, args...)
	s.mu.Lock()
	log := &processLog{name: fmt.Sprintf("%s#%d", o.Name, len(s.logs)+1), started: time.Now()}
	s.logs = append(s.logs, log)
	s.mu.Unlock()
	cmd.Stdout, cmd.Stderr = log, log
	// Make sure no server outlives the test binary; ignore the
	// environment's IWF_* settings so that only the flags count.
	setProcAttr(cmd)
	cmd.Env = append(cleanEnv(), o.Env...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", o.Bin, err)
	}
	exited := make(chan struct{})
	go func() {
		err := cmd.Wait()
		log.mu.Lock()
		log.ended = fmt.Sprintf("exited at %s: %v", time.Now().Format("15:04:05.000"), err)
		log.mu.Unlock()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited, s.log = cmd, exited, log
	s.mu.Unlock()

	deadline := time.Now().Add(healthTimeout)
	hc := &http.Client{Timeout: time.Second, Transport: s.transport(&http.Transport{})}
	for {
		select {
		case <-exited:
			s.mu.Lock()
			s.cmd = nil
			s.mu.Unlock()
			out := log.String()
			if strings.Contains(out, "address already in use") {
				return errAddrInUse
			}
			return fmt.Errorf("server exited before it was healthy (%s):\n%s", log.ended, out)
		default:
		}
		// Only our process's answer counts: when it could not bind the
		// address, another process (of a test running in parallel) may
		// have taken the port and would answer the health check.
		resp, err := hc.Get(s.URL() + "/info/healthcheck")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(log.String(), "iwf-server listening") {
				log.mu.Lock()
				log.healthy = true
				log.mu.Unlock()
				return nil
			}
		}
		if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("server not healthy after %s (last error %v):\n%s", healthTimeout, err, log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cleanEnv is the environment of the test without IWF_* variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "IWF_") {
			env = append(env, kv)
		}
	}
	return env
}

// Kill kills the process with SIGKILL (no shutdown, no flush) and waits
// until it is gone. It does nothing when the process is not running.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exited, log := s.cmd, s.exited, s.log
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-exited:
		// It ended before the kill: leave killed unset so that the
		// cleanup reports it.
		return
	default:
	}
	log.mu.Lock()
	log.killed = true
	log.mu.Unlock()
	_ = cmd.Process.Kill()
	<-exited
}

// DumpGoroutines sends SIGQUIT to the running process, whose Go runtime
// then writes every goroutine's stack to the output the harness keeps and
// exits, and waits until it has exited (at most timeout). For the
// diagnostics of a failed test: the process does not come back.
func (s *Server) DumpGoroutines(timeout time.Duration) {
	s.mu.Lock()
	cmd, exited, log := s.cmd, s.exited, s.log
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	log.mu.Lock()
	log.killed = true // ended by the test, not on its own
	log.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGQUIT); err != nil {
		return
	}
	select {
	case <-exited:
	case <-time.After(timeout):
	}
}

// Restart kills the process and starts a new one on the same database.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	s.Start()
}

// Running reports whether a process is running.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// Pid is the process id of the running process, 0 when none runs.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// URL is the base URL of the server's API.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scheme() + "://" + s.addr
}

// scheme is the scheme of the server's URLs: https with Options.ClientTLS.
func (s *Server) scheme() string {
	if s.opts.ClientTLS != nil {
		return "https"
	}
	return "http"
}

// transport returns base with the server's client TLS configuration and
// bearer token, if it has them.
func (s *Server) transport(base *http.Transport) http.RoundTripper {
	if s.opts.ClientTLS != nil {
		base.TLSClientConfig = s.opts.ClientTLS.Clone()
	}
	if s.opts.Token == "" {
		return base
	}
	return bearer{token: s.opts.Token, next: base}
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(req)
}

// Name is the server's label from Options.
func (s *Server) Name() string { return s.opts.Name }

// Client returns an API client for the server's current address. It may be
// called from any goroutine.
func (s *Server) Client() *iwfapi.ClientWithResponses {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client == nil {
		hc := apiHTTPClient
		if s.opts.ClientTLS != nil || s.opts.Token != "" {
			hc = &http.Client{Transport: observed{s.transport(newAPITransport())}}
		}
		c, err := iwfapi.NewClientWithResponses(s.scheme()+"://"+s.addr, iwfapi.WithHTTPClient(hc))
		if err != nil {
			panic(err) // only for a malformed URL, which "http://host:port" is not
		}
		s.client = c
	}
	return s.client
}

// apiHTTPClient is shared by the API clients. It has no overall timeout:
// calls carry contexts with deadlines.
var apiHTTPClient = &http.Client{Transport: observed{newAPITransport()}}

// newAPITransport is the transport of the API clients.
func newAPITransport() *http.Transport {
	return &http.Transport{
		MaxIdleConnsPerHost: 64,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	}
}

// responseObserver is the function set by ObserveResponses.
var responseObserver atomic.Pointer[func(host string, status int, err error)]

// ObserveResponses has f called with the outcome of every API call made
// through a Server's Client from now on: the server's host:port, the HTTP
// status (0 when err is set) and the transport's error. f runs on the
// caller's goroutine and must be quick and safe for concurrent use. The
// function returned stops the observation. One observer at a time.
func ObserveResponses(f func(host string, status int, err error)) (stop func()) {
	responseObserver.Store(&f)
	return func() { responseObserver.CompareAndSwap(&f, nil) }
}

// observed is the API clients' transport: it reports each outcome to the
// observer set by ObserveResponses.
type observed struct{ next http.RoundTripper }

func (o observed) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := o.next.RoundTrip(req)
	if f := responseObserver.Load(); f != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		(*f)(req.URL.Host, status, err)
	}
	return resp, err
}

// Log returns the output of every process started so far.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, l := range s.logs {
		b.WriteString(l.String())
	}
	return b.String()
}

// freeAddr returns a 127.0.0.1 address with a port that was free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr, nil
}

// Ctx returns a context that ends after d or when the test ends.
func Ctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
