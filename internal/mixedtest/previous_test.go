package mixedtest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/internal/buildinfo"
)

// TestPreviousRelease checks PREVIOUS_RELEASE: it parses, and the release it
// names is not newer than this tree's (internal/buildinfo/VERSION), which
// would mean the file was not moved when the version was.
func TestPreviousRelease(t *testing.T) {
	n, err := Previous()
	if err != nil {
		t.Fatal(err)
	}
	prev, ok := semver(strings.TrimPrefix(n.Tag, "v"))
	if !ok || !strings.HasPrefix(n.Tag, "v") {
		t.Fatalf("PREVIOUS_RELEASE tag %q: want v<major>.<minor>.<patch>", n.Tag)
	}
	cur, ok := semver(buildinfo.Release())
	if !ok {
		t.Fatalf("internal/buildinfo/VERSION %q is not <major>.<minor>.<patch>", buildinfo.Release())
	}
	if compare(prev, cur) > 0 {
		t.Errorf("PREVIOUS_RELEASE names %s, newer than this tree's release %s", n.Tag, buildinfo.Release())
	}
}

func TestParse(t *testing.T) {
	const hash = "0123456789abcdef0123456789abcdef01234567"
	good := "# comment\n\ntag    v1.2.3\ncommit " + hash + "\n"
	n, err := parse(good)
	if err != nil || n != (Named{Tag: "v1.2.3", Commit: hash}) {
		t.Fatalf("parse(%q) = %+v, %v", good, n, err)
	}
	for _, bad := range []string{
		"",
		"tag v1.2.3\n",                       // no commit
		"commit " + hash + "\n",              // no tag
		"tag v1.2.3\ncommit 0123456789abc\n", // a short hash
		"tag v1.2.3\ncommit " + hash + "\nbranch main\n",
	} {
		if n, err := parse(bad); err == nil {
			t.Errorf("parse(%q) = %+v, want an error", bad, n)
		}
	}
}

// semver splits "1.2.3" (a pre-release suffix is ignored).
func semver(s string) ([3]int, bool) {
	s, _, _ = strings.Cut(s, "-")
	parts := strings.Split(s, ".")
	var v [3]int
	if len(parts) != 3 {
		return v, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return v, false
		}
		v[i] = n
	}
	return v, true
}

func compare(a, b [3]int) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// TestCanRunConformance: a release whose pgtest knows the variable can run
// its suite on a later release's schema; an older one cannot.
func TestCanRunConformance(t *testing.T) {
	for _, tc := range []struct {
		pgtest string
		want   bool
	}{
		{"package pgtest\n\nconst EnvMigratedBy = \"IWF_TEST_POSTGRES_MIGRATED_BY\"\n", true},
		{"package pgtest\n\nconst EnvURL = \"IWF_TEST_POSTGRES_URL\"\n", false},
	} {
		dir := t.TempDir()
		p := filepath.Join(dir, "internal", "store", "postgres", "pgtest")
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "pgtest.go"), []byte(tc.pgtest), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := (&Release{Dir: dir}).CanRunConformance()
		if err != nil || got != tc.want {
			t.Errorf("CanRunConformance with %q = %v, %v; want %v", tc.pgtest, got, err, tc.want)
		}
	}
}
