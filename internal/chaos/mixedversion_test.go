package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/internal/crashtest"
	"github.com/iwf-server/iwf-server/internal/mixedtest"
)

// TestMixedVersion is a rolling upgrade on one PostgreSQL database: the
// previous release (internal/mixedtest's PREVIOUS_RELEASE, built from git
// history) and this tree side by side under the chaos workload.
//
//  1. Two nodes of the previous release migrate a fresh schema and run the
//     workload until each has made worker calls.
//  2. This tree's `iwf-server migrate` applies its migrations under them;
//     the previous release's `migrate` then runs on the newer schema (as an
//     old pod restarting mid-rollout would at start) and must change
//     nothing and exit 0; old node b is restarted on it (SIGTERM, start).
//  3. Two nodes of this tree start beside the old ones, and all four serve
//     until each has made worker calls since the new ones came up.
//  4. The old nodes are stopped with SIGTERM (each must exit 0); the new
//     ones take their work over and run the workload alone for a while.
//
// Then the chaos checker reads every workflow: each completes as its
// script says, nothing lost, nothing applied twice. No log line of an old
// node may be an error (see acceptedErrors). Finally the previous
// release's PostgreSQL conformance suite runs in its worktree with every
// store schema laid out by this tree's migrate (a previous release older
// than pgtest's IWF_TEST_POSTGRES_MIGRATED_BY cannot do that: the line
// then says the suite was skipped, and steps 2 to 4 are the check).
//
// It prints "mixed-version: previous=<commit> workflows=N old_calls=A
// new_calls=B lost=0 double_applied=0 old_errors=0" and a line for the
// suite. `make mixed-version` runs it (IWF_MIXED_VERSION=1); CI runs that.
func TestMixedVersion(t *testing.T) {
	if os.Getenv("IWF_MIXED_VERSION") != "1" {
		t.Skip("IWF_MIXED_VERSION=1 runs it: `make mixed-version`, which CI runs")
	}
	began := time.Now()
	prev := mixedtest.Checkout(t)
	oldBin, err := prev.BuildServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("previous release: %s = %s, built in %s", prev.Ref, prev.Commit, time.Since(began).Round(time.Millisecond))

	db := crashtest.PostgresDB(t)
	node := func(bin, name string) *crashtest.Server {
		return crashtest.NewServer(t, crashtest.Options{Bin: bin, DB: db, Name: name,
			LeaseDuration: leaseDuration, PollInterval: pollInterval, LogLevel: "info",
			Args: []string{"--worker-header", crashtest.NodeHeader + ": " + name}})
	}
	oldA, oldB := node(oldBin, "old-a"), node(oldBin, "old-b")
	crashtest.StartAll(t, oldA, oldB)
	oldVersion, oldRows := migrations(t, db)

	c := newCluster(oldA, oldB)
	w := crashtest.NewWorker(t)
	var newVersion int
	var newA, newB *crashtest.Server
	upgrade := func(*driver, func(*workflow), func() *workflow) error {
		callsOf := func(name string, since time.Time) int {
			return len(w.Calls(func(call crashtest.Call) bool { return call.Node == name && !call.At.Before(since) }))
		}
		// 1. The old release at work.
		waitUntil(t, 2*time.Minute, "worker calls from both old nodes", func() bool {
			return callsOf("old-a", began) >= 20 && callsOf("old-b", began) >= 20
		})
		// 2. The new migrations under the old nodes, then the old migrate
		// and an old node's start on the newer schema.
		migrate(t, serverBin, db)
		var newRows int
		newVersion, newRows = migrations(t, db)
		migrate(t, oldBin, db)
		if v, rows := migrations(t, db); v != newVersion || rows != newRows {
			t.Errorf("the previous release's migrate changed schema_migrations: version %d, %d rows -> version %d, %d rows", newVersion, newRows, v, rows)
		}
		c.setPaused(oldB, true) // no client calls while it restarts
		if ended := oldB.Terminate(2 * time.Minute); !strings.HasSuffix(ended, "<nil>") {
			t.Errorf("old-b did not exit 0 after SIGTERM: %s", ended)
		}
		oldB.Start()
		c.setPaused(oldB, false)
		// 3. Both releases side by side.
		newA, newB = node(serverBin, "new-a"), node(serverBin, "new-b")
		crashtest.StartAll(t, newA, newB)
		c.mu.Lock()
		c.nodes = append(c.nodes, newA, newB)
		c.mu.Unlock()
		together := time.Now()
		waitUntil(t, 2*time.Minute, "worker calls from all four nodes side by side", func() bool {
			for _, n := range []string{"old-a", "old-b", "new-a", "new-b"} {
				if callsOf(n, together) == 0 {
					return false
				}
			}
			return true
		})
		// 4. The old nodes go, as a rollout stops them.
		c.mu.Lock()
		c.nodes = []*crashtest.Server{newA, newB}
		c.mu.Unlock()
		for _, n := range []*crashtest.Server{oldA, oldB} {
			if ended := n.Terminate(2 * time.Minute); !strings.HasSuffix(ended, "<nil>") {
				t.Errorf("%s did not exit 0 after SIGTERM: %s", n.Name(), ended)
			}
		}
		alone := time.Now()
		waitUntil(t, 2*time.Minute, "worker calls from the new nodes alone", func() bool {
			return callsOf("new-a", alone)+callsOf("new-b", alone) >= 20
		})
		return nil
	}
	res := chaosRun(t, c, plan{clients: 3, worker: w, extra: []extraFault{{name: "upgrade", n: 1, do: upgrade}}}, nil)
	t.Logf("schema version %d (%d migrations) by the previous release, %d by this tree", oldVersion, oldRows, newVersion)

	var oldCalls, newCalls int
	releases := map[string]map[string]bool{} // workflow -> "old-", "new-"
	for _, call := range w.Calls(nil) {
		switch {
		case strings.HasPrefix(call.Node, "old-"):
			oldCalls++
		case strings.HasPrefix(call.Node, "new-"):
			newCalls++
		}
		if releases[call.WorkflowID] == nil {
			releases[call.WorkflowID] = map[string]bool{}
		}
		releases[call.WorkflowID][call.Node[:min(4, len(call.Node))]] = true
	}
	both := 0
	for _, r := range releases {
		if r["old-"] && r["new-"] {
			both++
		}
	}
	t.Logf("%d of %d workflows had worker calls from nodes of both releases", both, len(releases))
	var oldErrors []string
	for _, n := range []*crashtest.Server{oldA, oldB} {
		for _, line := range errorLines(n.Log()) {
			oldErrors = append(oldErrors, n.Name()+": "+line)
		}
	}
	for _, n := range []*crashtest.Server{newA, newB} {
		for _, line := range errorLines(n.Log()) {
			t.Errorf("%s logged an error: %s", n.Name(), line)
		}
	}
	for _, e := range oldErrors {
		t.Errorf("old node logged an error: %s", e)
	}
	fmt.Printf("mixed-version: previous=%s workflows=%d old_calls=%d new_calls=%d lost=%d double_applied=%d old_errors=%d\n",
		prev.Short(), res.workflows, oldCalls, newCalls, res.lost, res.double, len(oldErrors))
	if t.Failed() {
		return
	}

	// The previous release's conformance suite on this tree's schema.
	if ok, err := prev.CanRunConformance(); err != nil {
		t.Fatal(err)
	} else if !ok {
		// Its suite cannot be pointed at a schema it did not migrate
		// without a change to its code: the old migrate and the old
		// nodes above are then what runs its statements on this schema.
		fmt.Printf("mixed-version conformance: previous=%s skipped: its pgtest predates IWF_TEST_POSTGRES_MIGRATED_BY\n", prev.Short())
		return
	}
	suiteBegan := time.Now()
	suite, err := prev.Conformance(serverBin)
	if err != nil {
		t.Errorf("the previous release's conformance suite on this tree's schema: %v\n%s", err, tail(suite.Output, 200))
	}
	if suite.MigratedBy == 0 {
		t.Errorf("the previous release's suite ran, but on no schema laid out by this tree's migrate: " +
			"its pgtest names IWF_TEST_POSTGRES_MIGRATED_BY without honouring it")
	}
	fmt.Printf("mixed-version conformance: previous=%s subtests=%d passed=%d failed=%d schemas_migrated_by_this_tree=%d (%s)\n",
		prev.Short(), suite.Passed+suite.Failed, suite.Passed, suite.Failed, suite.MigratedBy, time.Since(suiteBegan).Round(time.Second))
}

// acceptedErrors are error-level log lines an old node may write during the
// test, each with the reason. None is accepted today: a rolling upgrade
// must not make the previous release log an error.
var acceptedErrors = []struct {
	match  *regexp.Regexp
	reason string
}{}

// errorLines returns the log lines that are errors: level error (or
// fatal or panic), or a database error's text (SQLSTATE, "ERROR:") at any
// level, minus acceptedErrors.
func errorLines(log string) []string {
	var out []string
	for line := range strings.SplitSeq(log, "\n") {
		isErr := strings.Contains(line, `"level":"error"`) || strings.Contains(line, `"level":"fatal"`) ||
			strings.Contains(line, `"level":"panic"`) || strings.Contains(line, "SQLSTATE") || strings.Contains(line, "ERROR:")
		if !isErr {
			continue
		}
		accepted := false
		for _, a := range acceptedErrors {
			if a.match.MatchString(line) {
				accepted = true
				break
			}
		}
		if !accepted {
			out = append(out, line)
		}
	}
	return out
}

// migrate runs bin's `iwf-server migrate` on db; it must exit 0.
func migrate(t *testing.T, bin, db string) {
	t.Helper()
	cmd := exec.Command(bin, "migrate", "--db", db)
	cmd.Env = cleanEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s migrate: %v\n%s", bin, err, out)
	}
}

// cleanEnv is the environment without IWF_* settings: only flags count.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "IWF_") {
			env = append(env, kv)
		}
	}
	return env
}

// migrations reads the highest migration recorded in db's schema_migrations
// and how many rows it has.
func migrations(t *testing.T, db string) (version, rows int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0), COUNT(*) FROM schema_migrations`).Scan(&version, &rows); err != nil {
		t.Fatal(err)
	}
	return version, rows
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
