package buildinfo

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// The release is a semantic version without a leading v, read from VERSION
// with its newline dropped.
func TestRelease(t *testing.T) {
	b, err := os.ReadFile("VERSION")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := Release(), strings.TrimSpace(string(b)); got != want {
		t.Fatalf("Release() = %q, VERSION holds %q", got, want)
	}
	if !regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`).MatchString(Release()) {
		t.Fatalf("VERSION %q is not MAJOR.MINOR.PATCH[-PRE]", Release())
	}
	if info := Get(); info.Release != Release() || info.GoVersion != runtime.Version() {
		t.Fatalf("Get() = %+v", info)
	}
}

func TestResolve(t *testing.T) {
	vcs := map[string]string{"vcs.revision": "0123456789abcdef0123", "vcs.time": "2026-12-01T09:00:00Z", "vcs.modified": "false"}
	for _, tc := range []struct {
		name         string
		commit, date string
		vcs          map[string]string
		want         Info
		short, line  string
	}{
		{"version control stamp", "", "", vcs,
			Info{"1.0.0", "0123456789abcdef0123", "2026-12-01T09:00:00Z", "go1.26.8"},
			"0123456789ab", "1.0.0 (commit 0123456789ab, built 2026-12-01T09:00:00Z, go1.26.8)"},
		{"modified tree", "", "", map[string]string{"vcs.revision": "0123456789abcdef0123", "vcs.modified": "true"},
			Info{"1.0.0", "0123456789abcdef0123-dirty", Unknown, "go1.26.8"},
			"0123456789ab-dirty", "1.0.0 (commit 0123456789ab-dirty, built unknown, go1.26.8)"},
		{"linker values win", "feedface", "2026-12-06T10:00:00Z", vcs,
			Info{"1.0.0", "feedface", "2026-12-06T10:00:00Z", "go1.26.8"},
			"feedface", "1.0.0 (commit feedface, built 2026-12-06T10:00:00Z, go1.26.8)"},
		{"nothing recorded", "", "", nil,
			Info{"1.0.0", Unknown, Unknown, "go1.26.8"},
			Unknown, "1.0.0 (commit unknown, built unknown, go1.26.8)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := resolve("1.0.0", tc.commit, tc.date, "go1.26.8", tc.vcs)
			if got != tc.want {
				t.Fatalf("resolve = %+v, want %+v", got, tc.want)
			}
			if s := got.ShortCommit(); s != tc.short {
				t.Errorf("ShortCommit = %q, want %q", s, tc.short)
			}
			if s := got.String(); s != tc.line {
				t.Errorf("String = %q, want %q", s, tc.line)
			}
		})
	}
}

// TestLinkerFlags builds a program with the -X flags that make release and
// the Dockerfile pass, so a renamed variable fails here and not in a
// release that says "unknown".
func TestLinkerFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	bin := filepath.Join(t.TempDir(), "printinfo")
	const pkg = "github.com/iwf-server/iwf-server/internal/buildinfo"
	build := exec.Command("go", "build", "-trimpath", "-o", bin,
		"-ldflags", "-X "+pkg+".commit=c0ffee -X "+pkg+".buildDate=2026-12-06T10:00:00Z", "./testdata/printinfo")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "release:    " + Release() + "\ncommit:     c0ffee\nbuild date: 2026-12-06T10:00:00Z\ngo version: " + runtime.Version() + "\n"
	if string(out) != want {
		t.Fatalf("printed\n%s\nwant\n%s", out, want)
	}
}

// The command line links this package: it imports the standard library
// only.
func TestImportsStandardLibraryOnly(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "buildinfo.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range f.Imports {
		path := strings.Trim(imp.Path.Value, `"`)
		if first, _, _ := strings.Cut(path, "/"); strings.Contains(first, ".") {
			t.Errorf("buildinfo imports %s; it may import the standard library only", path)
		}
	}
}
