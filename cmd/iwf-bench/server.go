package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// moduleRoot returns the directory of the main module's go.mod.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the iwf-server module: run from the repository (make bench)")
	}
	return filepath.Dir(mod), nil
}

// pprofOverlay is added to package main of cmd/iwf-server at build time
// (go build -overlay) when -pprof is set. It serves net/http/pprof on a
// free loopback port and writes the address to $IWF_BENCH_PPROF_FILE. The
// server's own sources are not touched.
const pprofOverlay = `package main

import (
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
)

func init() {
	path := os.Getenv("IWF_BENCH_PPROF_FILE")
	if path == "" {
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return
	}
	_ = os.WriteFile(path, []byte(ln.Addr().String()), 0o600)
	go http.Serve(ln, nil)
}
`

// buildServer builds cmd/iwf-server into dir the way `make build` does
// (CGO_ENABLED=0) and returns the binary's path. With pprof, the binary also
// serves net/http/pprof (see pprofOverlay).
func buildServer(ctx context.Context, root, dir string, pprof bool) (string, error) {
	bin := filepath.Join(dir, "iwf-server")
	args := []string{"build", "-o", bin}
	if pprof {
		src := filepath.Join(dir, "zz_bench_pprof.go")
		if err := os.WriteFile(src, []byte(pprofOverlay), 0o600); err != nil {
			return "", err
		}
		overlay, _ := json.Marshal(map[string]map[string]string{"Replace": {
			filepath.Join(root, "cmd", "iwf-server", "zz_bench_pprof.go"): src,
		}})
		ov := filepath.Join(dir, "overlay.json")
		if err := os.WriteFile(ov, overlay, 0o600); err != nil {
			return "", err
		}
		args = append(args, "-overlay", ov)
	}
	args = append(args, "./cmd/iwf-server")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/iwf-server: %v\n%s", err, out)
	}
	return bin, nil
}

// serverProc is a running iwf-server child process.
type serverProc struct {
	cmd     *exec.Cmd
	pid     int
	url     string // http://host:port
	pprof   string // host:port of net/http/pprof, "" without -pprof
	logPath string
	exited  chan struct{}
	waitErr error
}

// startServer starts bin on a free port with the store URL db and waits
// until it listens. Its logs go to logPath.
func startServer(ctx context.Context, bin, db, logPath string, extraArgs []string, pprof bool) (*serverProc, error) {
	return startServerEnv(ctx, bin, db, logPath, extraArgs, pprof, nil)
}

// startServerEnv is startServer with env added to the benchmark's own
// environment (a variable in env wins over the same one inherited).
func startServerEnv(ctx context.Context, bin, db, logPath string, extraArgs []string, pprof bool, env []string) (*serverProc, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--log-format", "json"}, extraArgs...)
	cmd := exec.Command(bin, args...)
	cmd.Stderr = logFile
	// Pdeathsig: the server dies with the benchmark, even on kill -9.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	pprofFile := logPath + ".pprof-addr"
	cmd.Env = append(os.Environ(), env...)
	if pprof {
		cmd.Env = append(cmd.Env, "IWF_BENCH_PPROF_FILE="+pprofFile)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &serverProc{cmd: cmd, pid: cmd.Process.Pid, logPath: logPath, exited: make(chan struct{})}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			if !sent && strings.Contains(sc.Text(), "listening on ") {
				lines <- sc.Text()
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	timeout := time.NewTimer(60 * time.Second)
	defer timeout.Stop()
	select {
	case line := <-lines:
		// "iwf-server RELEASE listening on http://127.0.0.1:PORT, data in ..."
		rest := line[strings.Index(line, "listening on ")+len("listening on "):]
		p.url, _, _ = strings.Cut(rest, ",")
	case <-p.exited:
		return nil, fmt.Errorf("iwf-server exited at start-up (%v): %s", p.waitErr, p.logTail())
	case <-timeout.C:
		p.stop()
		return nil, errors.New("iwf-server did not start listening within 60 s: " + p.logTail())
	case <-ctx.Done():
		p.stop()
		return nil, ctx.Err()
	}
	if pprof {
		b, err := os.ReadFile(pprofFile)
		if err != nil {
			p.stop()
			return nil, fmt.Errorf("pprof address: %w", err)
		}
		p.pprof = string(b)
	}
	return p, nil
}

// alive reports whether the process still runs.
func (p *serverProc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM, waits up to 15 s for a clean exit, then kills.
func (p *serverProc) stop() {
	if !p.alive() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// logTail returns the last lines of the server log.
func (p *serverProc) logTail() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(bytes.TrimSpace(b))
}

// logErrors counts the log lines at error level or above.
func (p *serverProc) logErrors() (n int, first string) {
	f, err := os.Open(p.logPath)
	if err != nil {
		return 0, ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.Contains(l, `"level":"error"`) || strings.Contains(l, `"level":"fatal"`) || strings.Contains(l, `"level":"panic"`) {
			if n == 0 {
				first = l
			}
			n++
		}
	}
	return n, first
}

// metrics reads the server's Prometheus metrics (GET /metrics), summing
// each series over its labels. It returns nil when the server has none.
func (p *serverProc) metrics() map[string]float64 {
	resp, err := http.Get(p.url + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil
	}
	return parseMetrics(b)
}

// parseMetrics parses the Prometheus text format into sums per series name
// (labels dropped; histogram buckets skipped).
func parseMetrics(b []byte) map[string]float64 {
	m := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		name := line[:i]
		if j := strings.IndexByte(name, '{'); j >= 0 {
			name = name[:j]
		}
		if strings.HasSuffix(name, "_bucket") {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m[name] += v
	}
	return m
}

// saveGoroutines writes the server's goroutine profile (stacks aggregated,
// with counts) into path: how many goroutines wait where.
func (p *serverProc) saveGoroutines(path string) error {
	resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/goroutine?debug=1", p.pprof))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// cpuProfile collects a CPU profile of d from the server's pprof endpoint
// into path. It runs in the background; the returned channel reports the
// outcome.
func (p *serverProc) cpuProfile(d time.Duration, path string) <-chan error {
	done := make(chan error, 1)
	go func() {
		secs := max(1, int(d.Round(time.Second)/time.Second))
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", p.pprof, secs))
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			done <- fmt.Errorf("pprof: %s", resp.Status)
			return
		}
		f, err := os.Create(path)
		if err != nil {
			done <- err
			return
		}
		_, err = io.Copy(f, resp.Body)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		done <- err
	}()
	return done
}
