package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/internal/buildinfo"
)

// versionOutput is what `iwf-server version` and --version print.
func versionOutput() string { return "iwf-server\n" + buildinfo.Get().Lines() }

// TestVersionCommand: `version` and --version (alone, after a command, and
// with an environment that would not start a server) print the build and
// open nothing; version refuses arguments.
func TestVersionCommand(t *testing.T) {
	bad := env{"IWF_DB": "nonsense://", "IWF_CONFIG": filepath.Join(t.TempDir(), "missing.yaml")}
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}, {"migrate", "--version"}} {
		m := NewMain()
		m.LookupEnv = bad.lookup
		var out strings.Builder
		m.Stdout, m.Stderr = &out, &out
		if err := m.ParseFlags(context.Background(), args); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if m.Command != CommandVersion {
			t.Fatalf("%v: command %q", args, m.Command)
		}
		if err := m.Run(context.Background()); err != nil {
			t.Fatalf("%v: Run: %v", args, err)
		}
		if err := m.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		if out.String() != versionOutput() {
			t.Fatalf("%v printed\n%s\nwant\n%s", args, out.String(), versionOutput())
		}
	}
	want := "release:    " + buildinfo.Release() + "\n"
	if !strings.Contains(versionOutput(), want) || !strings.Contains(versionOutput(), "go version: "+runtime.Version()+"\n") {
		t.Fatalf("version output %q lacks %q or the Go version", versionOutput(), want)
	}
	if err := NewMain().ParseFlags(context.Background(), []string{"version", "now"}); err == nil {
		t.Fatal("version with an argument was accepted")
	}
	var usage strings.Builder
	m := NewMain()
	m.Stderr = &usage
	_ = m.ParseFlags(context.Background(), []string{"-help"})
	if !strings.Contains(usage.String(), "[serve|migrate|version]") || !strings.Contains(usage.String(), "-version") {
		t.Fatalf("usage does not name version:\n%s", usage.String())
	}
}

// TestVersionServed: the start-up line and log name the release; GET
// /info/version answers without a token where the API needs one, with the
// store's schema version; /metrics has iwf_build_info.
func TestVersionServed(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("version-test-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m, out := startMain(t, "--auth-token-file", file)
	base := "http://" + m.Addr()
	info := buildinfo.Get()
	var first string // stdout's first line; the JSON log shares the buffer
	for _, line := range strings.Split(out.String(), "\n") {
		if !strings.HasPrefix(line, "{") {
			first = line
			break
		}
	}
	if want := "iwf-server " + info.Release + " listening on " + base + ", data in SQLite "; !strings.HasPrefix(first, want) {
		t.Errorf("first line %q, want it to begin %q", first, want)
	}
	var logged bool
	for _, line := range strings.Split(out.String(), "\n") {
		var e map[string]any
		if json.Unmarshal([]byte(line), &e) == nil && e["message"] == "iwf-server listening" {
			logged = e["release"] == info.Release && e["commit"] == info.Commit
		}
	}
	if !logged {
		t.Errorf("the listening log line lacks release %q and commit %q:\n%s", info.Release, info.Commit, out)
	}

	if status, body := postJSON(t, base+"/api/v1/workflow/search", `{"query":""}`); status != http.StatusUnauthorized {
		t.Fatalf("the API without a token: %d %v", status, body)
	}
	resp, err := http.Get(base + "/info/version")
	if err != nil {
		t.Fatal(err)
	}
	var v iwfapi.VersionInfo
	err = json.NewDecoder(resp.Body).Decode(&v)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("version: %d %v", resp.StatusCode, err)
	}
	if v.Release != info.Release || v.Commit != info.Commit || v.BuildDate != info.BuildDate || v.GoVersion != info.GoVersion {
		t.Errorf("version %+v, want %+v", v, info)
	}
	want, err := m.srv.Engine.SchemaVersion(context.Background())
	if err != nil || want < 1 || v.SchemaVersion == nil || int(*v.SchemaVersion) != want {
		t.Errorf("schemaVersion %v, want the store's %d (%v)", v.SchemaVersion, want, err)
	}

	resp, err = http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	gauge := `iwf_build_info{release="` + info.Release + `",commit="` + info.Commit + `",goversion="` + info.GoVersion + `"} 1` + "\n"
	if resp.StatusCode != 200 || !strings.Contains(string(body), "# TYPE iwf_build_info gauge\n"+gauge) {
		t.Errorf("metrics (%d) lack %q", resp.StatusCode, gauge)
	}
}
