package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/internal/crashtest"
)

// skew is how far the skewed node's clock is off, ahead and then behind;
// skewCalls is how many worker calls the skewed node makes in each phase.
const (
	skew      = 90 * time.Second
	skewCalls = 60
)

// TestClockSkew runs the mixed workload on two nodes and PostgreSQL; node s
// runs under libfaketime (`faketime -f +90s`), 90 s ahead, and halfway is
// restarted 90 s behind. Nodes run on the database's clock (package
// dbclock), so: no effect applied twice (the checker), no workflow lost,
// no worker call repeated without a fault (a node whose clock is ahead
// would take over leases that have not expired), and every 1 s durable
// timer fires after its due time by the database's clock — the test's
// clock: the database server runs on this host — and, with a wide bound
// for a loaded machine, not much later (the figures are printed).
func TestClockSkew(t *testing.T) {
	if os.Getenv("IWF_CHAOS_NET") != "1" {
		t.Skip("IWF_CHAOS_NET=1 runs it: `make chaos-net`, which CI runs")
	}
	lib := libfaketime()
	if lib == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("libfaketime (Debian package faketime) is not installed: .ci/run installs it")
		}
		t.Skip("libfaketime (Debian package faketime) is not installed")
	}
	db := crashtest.PostgresDB(t)
	// The skewed node starts through a script that reads its offset from
	// a file, so that one Server can be restarted with another skew. The
	// script preloads libfaketime itself, as faketime(1) does: faketime
	// stays the parent of the program it runs, so a SIGKILL of the
	// process the test started would leave the server running.
	dir := t.TempDir()
	skewFile := filepath.Join(dir, "skew")
	writeSkew := func(d time.Duration) {
		t.Helper()
		if err := os.WriteFile(skewFile, []byte(fmt.Sprintf("%+ds", int(d/time.Second))), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeSkew(skew)
	script := filepath.Join(dir, "iwf-server-skewed")
	body := fmt.Sprintf("#!/bin/sh\nLD_PRELOAD=%s FAKETIME=\"$(cat %s)\" exec %s \"$@\"\n", lib, skewFile, serverBin)
	if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	node := func(name, bin string) *crashtest.Server {
		return crashtest.NewServer(t, crashtest.Options{Bin: bin, DB: db, Name: "node-" + name,
			LeaseDuration: leaseDuration, PollInterval: pollInterval, LogLevel: "info",
			Args: []string{"--worker-header", crashtest.NodeHeader + ": " + name}})
	}
	s, b := node("s", script), node("b", serverBin)
	crashtest.StartAll(t, s, b)

	var phases []string
	var w *crashtest.Worker
	p := plan{clients: 3, linear: linearFor(t, "postgres-skew"), extra: []extraFault{{name: "skew_flip", n: 1, unrecorded: true, do: func(d *driver, _ func(*workflow), _ func() *workflow) error {
		// Ahead until node s has done its share of work, then behind
		// until it has done as much again.
		w = d.worker
		if err := untilNodeCalls(d, "s", skewCalls); err != nil {
			return fmt.Errorf("ahead: %w", err)
		}
		phases = append(phases, fmt.Sprintf("+%s until %s", skew, time.Now().Format("15:04:05.000")))
		// Only the restart is a fault: a call repeated at any other
		// moment would be the skew's doing.
		over := d.c.record("restart")
		s.Kill()
		writeSkew(-skew)
		s.Start()
		over()
		if err := untilNodeCalls(d, "s", skewCalls); err != nil {
			return fmt.Errorf("behind: %w", err)
		}
		phases = append(phases, fmt.Sprintf("-%s until %s", skew, time.Now().Format("15:04:05.000")))
		return nil
	}}}}
	c := newCluster(s, b)
	chaosRun(t, c, p, nil)

	late := timerLateness(c, w.Calls(nil))
	if len(late) == 0 {
		t.Fatal("no timer firing to measure")
	}
	slices.Sort(late)
	early := 0
	for _, l := range late {
		// The dbclock's error bound on one host is well under a
		// millisecond; 50 ms leaves room for the worker's own timing.
		if l < -50*time.Millisecond {
			early++
		}
	}
	q := func(f float64) time.Duration { return late[int(f*float64(len(late)-1))].Round(time.Millisecond) }
	fmt.Printf("skew=±%s timers=%d early=%d lateness_by_db_clock p50=%s p99=%s max=%s (%v)\n",
		skew, len(late), early, q(0.5), q(0.99), q(1), phases)
	if early > 0 {
		t.Errorf("%d of %d timers fired before their due time by the database's clock (earliest %s)", early, len(late), late[0])
	}
	// A skew left uncorrected makes timers 90 s late; a loaded machine,
	// a few seconds at worst.
	if max := late[len(late)-1]; max > 15*time.Second {
		t.Errorf("a timer fired %s late by the database's clock", max)
	}
	if !strings.Contains(s.Log(), "running on the database's clock") {
		t.Errorf("node s did not log its offset to the database's clock")
	}
}

// libfaketime returns the path of Debian's libfaketime, "" when absent.
func libfaketime() string {
	for _, p := range []string{"/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1", "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1", "/usr/lib/faketime/libfaketime.so.1"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// untilNodeCalls waits until the worker has seen n more calls of the chaos
// workload from node. The linear check's calls (its state and its RPC) do
// not count: they come many times faster and would end a phase before any
// of the workload's timers fired.
func untilNodeCalls(d *driver, node string, n int) error {
	count := func() int {
		return len(d.worker.Calls(func(c crashtest.Call) bool {
			return c.Node == node && c.StateID != linearState && c.StateID != linearRPC
		}))
	}
	want := count() + n
	deadline := time.Now().Add(3 * time.Minute)
	for count() < want {
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s made fewer than %d worker calls in 3 minutes", node, n)
		}
		time.Sleep(50 * time.Millisecond) // poll the worker's record
	}
	return nil
}

// timerLateness measures the 1 s timers of state S by the test's clock
// (the database's): from the worker's answer to S's waitUntil, which asked
// for the timer, to the arrival of S's execute, which the timer released.
// Workflows of kind mixed also wait for a signal and are left out, as are
// timers with a fault (the restart) in between. The engine computes the
// due time after the answer arrived, so a timer honoured by the database's
// clock gives a lateness of at least 0.
func timerLateness(c *cluster, calls []crashtest.Call) []time.Duration {
	type key struct{ run, exec string }
	answered := map[key]crashtest.Call{}
	var out []time.Duration
	seen := map[key]bool{}
	for _, call := range calls {
		if call.StateID != "S" || call.Input == kindMixed {
			continue
		}
		k := key{call.RunID, call.ExecutionID}
		switch call.API {
		case crashtest.WaitUntil:
			if !call.Answered.IsZero() {
				answered[k] = call
			}
		case crashtest.Execute:
			wu, ok := answered[k]
			if !ok || seen[k] || c.faultBetween(wu.At, call.At) {
				continue
			}
			seen[k] = true
			out = append(out, call.At.Sub(wu.Answered)-time.Second)
		}
	}
	return out
}
