package mixedtest

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

//go:embed PREVIOUS_RELEASE
var previousFile string

// Named is what PREVIOUS_RELEASE names.
type Named struct {
	// Tag is the previous release's git tag ("v1.0.0").
	Tag string
	// Commit is the full hash of the commit the tag stands for, used when
	// the clone has no such tag.
	Commit string
}

var hashRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

// Previous parses PREVIOUS_RELEASE: lines "tag <name>" and "commit <hash>";
// blank lines and lines starting with # are comments.
func Previous() (Named, error) { return parse(previousFile) }

func parse(text string) (Named, error) {
	var n Named
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, _ := strings.Cut(line, " ")
		value = strings.TrimSpace(value)
		switch key {
		case "tag":
			n.Tag = value
		case "commit":
			n.Commit = value
		default:
			return Named{}, fmt.Errorf("PREVIOUS_RELEASE line %d: %q: want \"tag <name>\" or \"commit <hash>\"", i+1, line)
		}
	}
	if n.Tag == "" || !hashRE.MatchString(n.Commit) {
		return Named{}, fmt.Errorf("PREVIOUS_RELEASE names tag %q and commit %q: want a tag and a full 40-digit commit hash", n.Tag, n.Commit)
	}
	return n, nil
}

// Release is a checked-out previous release.
type Release struct {
	// Named is what PREVIOUS_RELEASE says.
	Named Named
	// Ref is what was resolved: the tag, or the commit when the clone has
	// no such tag.
	Ref string
	// Commit is the full hash of the commit checked out.
	Commit string
	// Dir is the root of its worktree.
	Dir string
}

// Short is the commit's first 12 digits.
func (r *Release) Short() string { return r.Commit[:12] }

// Checkout resolves PREVIOUS_RELEASE in the repository that holds the
// current directory and adds a detached worktree of it in a temporary
// directory, removed (with its registration) when the test ends. It fails
// the test when git cannot find the commit.
func Checkout(t testing.TB) *Release {
	t.Helper()
	named, err := Previous()
	if err != nil {
		t.Fatal(err)
	}
	root, err := git("", "rev-parse", "--show-toplevel")
	if err != nil {
		t.Fatalf("mixedtest: not inside a git checkout: %v", err)
	}
	r := &Release{Named: named}
	// The tag wins: it is the release. A clone without tags falls back to
	// the recorded commit.
	if c, err := git(root, "rev-parse", "-q", "--verify", "refs/tags/"+named.Tag+"^{commit}"); err == nil {
		r.Ref, r.Commit = named.Tag, c
		if c != named.Commit {
			t.Logf("mixedtest: tag %s is commit %s, PREVIOUS_RELEASE records %s: using the tag", named.Tag, c, named.Commit)
		}
	} else if c, err := git(root, "rev-parse", "-q", "--verify", named.Commit+"^{commit}"); err == nil {
		r.Ref, r.Commit = named.Commit, c
	} else {
		t.Fatalf("mixedtest: the previous release (tag %s, commit %s) is not in this clone's history; "+
			"a shallow clone needs `git fetch --unshallow` (or `git fetch --tags`)", named.Tag, named.Commit)
	}
	r.Dir = filepath.Join(t.TempDir(), "previous")
	if out, err := git(root, "worktree", "add", "--detach", r.Dir, r.Commit); err != nil {
		t.Fatalf("mixedtest: git worktree add %s: %v\n%s", r.Commit, err, out)
	}
	t.Cleanup(func() {
		if out, err := git(root, "worktree", "remove", "--force", r.Dir); err != nil {
			t.Logf("mixedtest: git worktree remove %s: %v\n%s", r.Dir, err, out)
			_ = os.RemoveAll(r.Dir)
			_, _ = git(root, "worktree", "prune")
		}
	})
	return r
}

// BuildServer builds the release's cmd/iwf-server into dir, statically
// (CGO_ENABLED=0), with the release's own go.mod, and returns the binary's
// path.
func (r *Release) BuildServer(dir string) (string, error) {
	bin := filepath.Join(dir, "iwf-server-"+r.Short())
	// -trimpath keeps the worktree's directory, new at each run, out of
	// the build cache's keys: an unchanged package is then a cache hit.
	cmd := exec.Command(goBin(), "build", "-trimpath", "-o", bin, "./cmd/iwf-server")
	cmd.Dir = r.Dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/iwf-server at %s: %v\n%s", r.Short(), err, out)
	}
	return bin, nil
}

// envMigratedBy is pgtest's EnvMigratedBy, which the release's tests must
// know for Conformance to mean anything.
const envMigratedBy = "IWF_TEST_POSTGRES_MIGRATED_BY"

// CanRunConformance reports whether the release's pgtest lays its schemas
// out with another binary's migrate (EnvMigratedBy): releases older than
// that hook cannot run their suite on a schema a later release migrated
// without a change to their code.
func (r *Release) CanRunConformance() (bool, error) {
	b, err := os.ReadFile(filepath.Join(r.Dir, "internal", "store", "postgres", "pgtest", "pgtest.go"))
	if err != nil {
		return false, err
	}
	return strings.Contains(string(b), envMigratedBy), nil
}

// ConformanceResult is what the release's conformance suite did.
type ConformanceResult struct {
	// Passed and Failed count the suite's subtests (one per store
	// behaviour; their own subtests are not counted).
	Passed, Failed int
	// MigratedBy counts the schemas the newer binary laid out.
	MigratedBy int
	// Output is the whole output of go test -v.
	Output string
}

// Conformance runs the release's PostgreSQL store conformance suite
// (`go test -run '^TestConformance$' ./internal/store/postgres/` in its
// worktree) with every store's schema migrated first by the binary
// migratedBy (pgtest's IWF_TEST_POSTGRES_MIGRATED_BY). env is added to the
// test's environment (IWF_TEST_POSTGRES_URL and the like are passed on as
// they are). The error is go test's when the suite failed or could not
// run.
func (r *Release) Conformance(migratedBy string, env ...string) (ConformanceResult, error) {
	cmd := exec.Command(goBin(), "test", "-trimpath", "-count=1", "-v", "-run", "^TestConformance$", "./internal/store/postgres/")
	cmd.Dir = r.Dir
	cmd.Env = append(append(os.Environ(), "GOWORK=off", envMigratedBy+"="+migratedBy), env...)
	out, err := cmd.CombinedOutput()
	res := ConformanceResult{Output: string(out)}
	for _, line := range strings.Split(res.Output, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case topLevel(line, "--- PASS: TestConformance/"):
			res.Passed++
		case topLevel(line, "--- FAIL: TestConformance/"):
			res.Failed++
		case strings.Contains(line, "pgtest: schema ") && strings.Contains(line, " migrated by "+migratedBy):
			res.MigratedBy++
		}
	}
	if err != nil {
		return res, fmt.Errorf("go test ./internal/store/postgres/ at %s: %w", r.Short(), err)
	}
	return res, nil
}

// topLevel reports whether line, which begins with prefix, is the result
// of a subtest of the suite itself rather than of one of its own subtests.
func topLevel(line, prefix string) bool {
	name, ok := strings.CutPrefix(line, prefix)
	if !ok {
		return false
	}
	name, _, _ = strings.Cut(name, " ")
	return !strings.Contains(name, "/")
}

// goBin is the go command of the toolchain that runs the test.
func goBin() string {
	if root := os.Getenv("GOROOT"); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			return p
		}
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// git runs git in dir ("" for the current directory) and returns its
// trimmed output.
func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	s := strings.TrimSpace(string(out))
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return s, fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, s)
		}
		return s, err
	}
	return s, nil
}
