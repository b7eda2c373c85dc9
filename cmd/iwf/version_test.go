package main

import (
	"runtime"
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/internal/buildinfo"
)

// `iwf version` prints the command line's build without calling a server
// (none listens at the address given), as a table or with --json.
func TestVersion(t *testing.T) {
	info := buildinfo.Get()
	noServer := map[string]string{"IWF_SERVER": "http://127.0.0.1:1"}
	r := cliRun(t, noServer, "version")
	want := "Release:    " + info.Release + "\nCommit:     " + info.Commit + "\nBuild date: " + info.BuildDate +
		"\nGo version: " + runtime.Version() + "\n"
	if r.code != 0 || r.stderr != "" || r.stdout != want {
		t.Fatalf("iwf version: exit %d, stderr %q, stdout\n%s\nwant\n%s", r.code, r.stderr, r.stdout, want)
	}
	r = cliRun(t, noServer, "version", "--json")
	if r.code != 0 {
		t.Fatalf("iwf version --json: exit %d %q", r.code, r.stderr)
	}
	v := decode[iwfapi.VersionInfo](t, r.stdout)
	if v.Release != buildinfo.Release() || v.Commit != info.Commit || v.BuildDate != info.BuildDate ||
		v.GoVersion != runtime.Version() || v.SchemaVersion != nil {
		t.Fatalf("iwf version --json: %+v", v)
	}
	if r := cliRun(t, nil, "version", "extra"); r.code != exitUsage {
		t.Fatalf("iwf version extra: exit %d", r.code)
	}
	if r := cliRun(t, nil, "--help"); r.code != 0 || !strings.Contains(r.stdout, "iwf [global flags] version") {
		t.Fatalf("iwf --help does not name version:\n%s", r.stdout)
	}
}
