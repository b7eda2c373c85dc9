package docstest

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/internal/server"
)

// repoRoot is the repository root, two levels up from this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// codeBlocks returns the fenced code blocks of the section of a Markdown
// file that starts at heading (up to the next heading of the same level).
func codeBlocks(t *testing.T, file, heading string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	i := strings.Index(text, heading+"\n")
	if i < 0 {
		t.Fatalf("%s: no section %q", file, heading)
	}
	text = text[i+len(heading):]
	level := heading[:strings.Index(heading, " ")+1]
	if j := strings.Index(text, "\n"+level); j >= 0 {
		text = text[:j]
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```[a-z]*\n(.*?)```").FindAllStringSubmatch(text, -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// commands splits a shell block into commands: comments dropped, lines
// ending in a backslash joined.
func commands(block string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(block, "\n") {
		if i := strings.Index(line, " #"); i >= 0 && !strings.Contains(line[:i], "'") {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") || (line == "" && cur.Len() == 0) {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		if s := strings.TrimSpace(cur.String()); s != "" {
			out = append(out, s)
		}
		cur.Reset()
	}
	return out
}

// startServer runs a server on a fresh SQLite file at a free port and
// returns its address.
func startServer(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	srv, err := server.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "iwf.db"), server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler}
	go hs.Serve(ln)
	t.Cleanup(func() {
		hs.Close()
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Close(cctx)
	})
	return ln.Addr().String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// goEnv is the environment for go commands run by the tests: the caches
// of this process, no network, no workspace.
func goEnv(t *testing.T, home string) []string {
	t.Helper()
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "GOPROXY=off", "GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local"}
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOROOT"} {
		out, err := exec.Command("go", "env", k).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", k, err)
		}
		env = append(env, k+"="+strings.TrimSpace(string(out)))
	}
	return env
}

// run runs a shell command in dir and returns its combined output.
func run(t *testing.T, ctx context.Context, dir string, env []string, command string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail; "+command)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", command, err, out)
	}
	return string(out)
}

// TestSDKTutorial follows sdk-go/README.md from an empty folder: create the
// module as step 2 says, save step 3's main.go, run step 4's command; the
// program prints the greeting.
func TestSDKTutorial(t *testing.T) {
	root := repoRoot(t)
	blocks := codeBlocks(t, filepath.Join(root, "sdk-go", "README.md"), "## Tutorial: from an empty folder to a running workflow")
	if len(blocks) < 5 {
		t.Fatalf("the tutorial has %d code blocks, want make run, the module, main.go, go run and its output", len(blocks))
	}
	setup, program, runCmd := commands(blocks[1]), blocks[2], commands(blocks[3])
	if !strings.HasPrefix(program, "package main") || len(runCmd) != 1 || runCmd[0] != "go run ." {
		t.Fatalf("unexpected tutorial layout: setup %q, run %q", setup, runCmd)
	}

	// $HOME/iwf-server is the checkout the tutorial points the module at.
	home := t.TempDir()
	if err := os.Symlink(root, filepath.Join(home, "iwf-server")); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	env := goEnv(t, home)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run(t, ctx, work, env, strings.Join(setup, " && "))

	serverAddr, workerAddr := startServer(t), freeAddr(t)
	program = strings.NewReplacer(
		"http://localhost:8801", "http://"+serverAddr,
		"http://localhost:8803", "http://"+workerAddr,
		`":8803"`, `"`+workerAddr+`"`,
	).Replace(program)
	if err := os.WriteFile(filepath.Join(work, "hello", "main.go"), []byte(program), 0o644); err != nil {
		t.Fatal(err)
	}
	out := run(t, ctx, filepath.Join(work, "hello"), env, runCmd[0])
	if !regexp.MustCompile(`(?m)^started hello-\d+ run \S+$`).MatchString(out) || !strings.Contains(out, "\nHello, World!\n") {
		t.Fatalf("the tutorial's program printed:\n%s", out)
	}
}

// TestReadmeTryIt runs the README's "Try it": the hello worker, then the
// iwf commands and the curl calls, against a real server.
func TestReadmeTryIt(t *testing.T) {
	root := repoRoot(t)
	blocks := codeBlocks(t, filepath.Join(root, "README.md"), "## Try it")
	if len(blocks) != 3 {
		t.Fatalf("Try it has %d code blocks, want 3", len(blocks))
	}
	start, cli, curl := commands(blocks[0]), commands(blocks[1]), blocks[2]
	if len(start) != 2 || start[0] != "make run" || start[1] != "go run ./samples/hello" {
		t.Fatalf("unexpected first block: %q", start)
	}
	serverAddr, workerAddr := startServer(t), freeAddr(t)
	env := append(goEnv(t, t.TempDir()), "IWF_SERVER=http://"+serverAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The worker, as written but on the test's port; wait for its line.
	worker := exec.CommandContext(ctx, "bash", "-c", start[1]+" -addr "+workerAddr)
	worker.Dir, worker.Env = root, env
	setProcessGroup(worker)
	stderr, err := worker.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killProcessGroup(worker); worker.Wait() })
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		var seen bytes.Buffer
		for sc.Scan() {
			seen.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "listening on") {
				ready <- ""
				io.Copy(io.Discard, stderr)
				return
			}
		}
		ready <- seen.String()
	}()
	select {
	case out := <-ready:
		if out != "" {
			t.Fatalf("the hello worker ended: %s", out)
		}
	case <-ctx.Done():
		t.Fatal("the hello worker did not start")
	}

	ports := strings.NewReplacer("localhost:8803", workerAddr, "localhost:8801", serverAddr)
	var last string
	for _, c := range cli {
		last = run(t, ctx, root, env, ports.Replace(c))
	}
	if !strings.Contains(last, "COMPLETED") || !strings.Contains(last, "Hello, World!") {
		t.Fatalf("the last iwf command printed:\n%s", last)
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Logf("curl not installed: the curl part is not run")
		return
	}
	out := run(t, ctx, root, env, ports.Replace(curl))
	if !strings.Contains(out, `"workflowStatus":"COMPLETED"`) || !strings.Contains(out, `Hello, Ada!`) {
		t.Fatalf("the curl calls printed:\n%s", out)
	}
}
