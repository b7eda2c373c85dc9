package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/internal/crashtest"
)

// Scope pauses: the operator's incident control (engine/pause.go,
// docs/operations.md "Incident controls") used during the run. A fault of
// kind scopeType pauses the workload's workflow type, one of kind
// scopeHost the worker's host (127.0.0.1:PORT, the host every run of the
// run calls, the linear workload's among them), each through the API of a
// running node; once every node must hold the pause it starts a probe
// workflow of the scope and waits until the engine holds its first call,
// kills and restarts a node meanwhile every other time (the pause is a
// stored row: the new process must hold it from its first claim), and
// resumes the scope. The resume is always sent, whatever happened in
// between.
//
// The check (checkScopePauses) is built on what the engine promises: a
// node decides a waitUntil or execute call, or an RPC, by reading its
// cache of the paused scopes (pausedBy), not the store; the node that
// paused the scope holds it before it answers, the others once the change
// feed tells them or their refresh reads it, and a call decided before
// the node read it is under way and is made. So the driver waits, after
// the API acknowledged the pause (the 200, or the "paused already" of an
// attempt after one whose answer was lost), until every running node's
// cache holds it (its iwf_paused_scopes gauge): a call of the scope that
// reaches the worker after that moment and before the resume was sent is
// a violation (but for inFlightGrace: a call decided just before a node
// held the pause may still be on its way); one before was under way.
const (
	scopeType = "scope_pause_type"
	scopeHost = "scope_pause_host"
)

// scopePause is one pause of a scope the run made and resumed.
type scopePause struct {
	kind string
	// scope is the scope as the engine names it ("type:NAME",
	// "host:HOST:PORT"): the pausedBy of the StateCallHeld events.
	scope string
	// acked is when the API of node ackedBy acknowledged the pause, held
	// when every running node was seen holding it, resumeSent when the
	// first resume request was sent.
	acked, held, resumeSent time.Time
	ackedBy                 string
	// resumed is how many held calls the resume made due (its answer);
	// killed says a node was killed and restarted while paused.
	resumed int64
	killed  bool
}

// pauseScope pauses a scope (kind scopeType or scopeHost); once every
// running node holds it (awaitHeld) it starts a
// workflow of the scope with probe and waits until the engine holds its
// first call, calls between (a kill and restart of a node, or nothing) and
// resumes the scope. The resume is sent even when what comes before fails.
func (d *driver) pauseScope(kind string, probe func() *workflow, between func() bool) (sp scopePause, err error) {
	sp.kind = kind
	var set iwfapi.PauseSetRequest
	var del iwfapi.PauseDeleteRequest
	switch kind {
	case scopeType:
		set.WorkflowType, del.WorkflowType = ptr(chaosType), ptr(chaosType)
		sp.scope = "type:" + chaosType
	case scopeHost:
		host := strings.TrimPrefix(d.worker.URL(), "http://")
		set.WorkerHost, del.WorkerHost = &host, &host
		sp.scope = "host:" + host
	default:
		return sp, fmt.Errorf("no scope pause %q", kind)
	}
	set.Reason = ptr("chaos: " + kind)
	defer func() {
		sp.resumeSent = time.Now()
		tries := 0
		rerr := d.retry("pause/delete "+sp.scope, func(ctx context.Context, srv *crashtest.Server) (bool, error) {
			tries++
			resp, err := srv.Client().DeletePauseWithResponse(ctx, del)
			if err != nil {
				return false, err
			}
			switch {
			case resp.JSON200 != nil:
				sp.resumed = resp.JSON200.Resumed
				return true, nil
			case (tries > 1 || sp.acked.IsZero()) && resp.StatusCode() == http.StatusBadRequest && strings.Contains(string(resp.Body), "not paused"):
				return true, nil // an earlier attempt resumed it (or the pause never took effect)
			}
			return false, fmt.Errorf("%d %s", resp.StatusCode(), resp.Body)
		})
		if err == nil {
			err = rerr
		}
	}()
	tries := 0
	if err := d.retry("pause/set "+sp.scope, func(ctx context.Context, srv *crashtest.Server) (bool, error) {
		tries++
		resp, err := srv.Client().SetPauseWithResponse(ctx, set)
		if err != nil {
			return false, err
		}
		switch {
		case resp.StatusCode() == http.StatusOK:
			sp.acked, sp.ackedBy = time.Now(), srv.Name()
			return true, nil
		case tries > 1 && resp.StatusCode() == http.StatusBadRequest && strings.Contains(string(resp.Body), "paused already"):
			sp.acked, sp.ackedBy = time.Now(), srv.Name() // an earlier attempt paused it; its answer was lost
			return true, nil
		}
		return false, fmt.Errorf("%d %s", resp.StatusCode(), resp.Body)
	}); err != nil {
		return sp, err
	}
	// The probe starts where the check's window begins: from then on no
	// node may make a call of the scope, the probe's first among them.
	if err := d.awaitHeld(); err != nil {
		return sp, fmt.Errorf("%s: %w", sp.scope, err)
	}
	sp.held = time.Now()
	wf := probe()
	made := false
	if err := d.waitFor(wf, "its first call held", func(dd *crashtest.Dump) bool {
		if d.worker.Count(wf.id, "S", crashtest.WaitUntil) > 0 {
			made = true
			return true
		}
		for _, e := range dd.History {
			if e.Type == "StateCallHeld" {
				return true
			}
		}
		return false
	}); err != nil {
		return sp, err
	}
	if made {
		return sp, fmt.Errorf("%s started once every node held the pause of %s, and its worker was called", wf.id, sp.scope)
	}
	sp.killed = between()
	return sp, nil
}

// inFlightGrace is how long after every node held a pause a call may
// still reach the worker that a node decided just before it held it: the
// moment the driver saw the gauges is after the caches changed, not after
// every call decided before them was sent. It only widens what counts as
// under way; nothing waits for it.
const inFlightGrace = 2 * pollInterval

// awaitHeld waits until every node that runs and is not stopped holds a
// paused scope in its cache: its iwf_paused_scopes gauge counts one (the
// run pauses one scope at a time). A node restarted meanwhile reads the
// scopes before it claims any work.
func (d *driver) awaitHeld() error {
	deadline := time.Now().Add(opTimeout)
	for {
		d.c.mu.Lock()
		var up []*crashtest.Server
		for _, n := range d.c.nodes {
			if !d.c.paused[n] && n.Running() {
				up = append(up, n)
			}
		}
		d.c.mu.Unlock()
		missing := ""
		for _, n := range up {
			if metricValue(n, "iwf_paused_scopes") < 1 {
				missing = n.Name()
				break
			}
		}
		if missing == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s did not hold the pause within %s", missing, opTimeout)
		}
		time.Sleep(10 * time.Millisecond) // the next look at the gauges
	}
}

// chaosType is the workflow type of the mixed workload.
const chaosType = "Chaos"

// heldCall is a call the engine held (a StateCallHeld event): run,
// execution and API.
type heldCall struct{ runID, executionID, api string }

// heldCalls returns the calls dd's history says were held, and by what
// scope; runID is dd's run.
func heldCalls(runID string, dd *crashtest.Dump) map[heldCall]string {
	out := map[heldCall]string{}
	for _, e := range dd.History {
		if e.Type != "StateCallHeld" {
			continue
		}
		var data struct {
			API      string `json:"api"`
			PausedBy string `json:"pausedBy"`
		}
		if err := json.Unmarshal(e.Data, &data); err != nil {
			continue
		}
		out[heldCall{runID, e.ExecutionID, data.API}] = data.PausedBy
	}
	return out
}

// readRunDump reads the internal dump of one run of a workflow.
func readRunDump(srv *crashtest.Server, workflowID, runID string) (*crashtest.Dump, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var data strings.Builder
	for page := int32(0); ; page++ {
		resp, err := srv.Client().DumpWorkflowInternalWithResponse(ctx, iwfapi.WorkflowDumpRequest{WorkflowId: workflowID, WorkflowRunId: runID, PageNum: page})
		if err != nil {
			return nil, fmt.Errorf("dump %s run %s: %w", workflowID, runID, err)
		}
		if resp.JSON200 == nil {
			return nil, fmt.Errorf("dump %s run %s: %d %s", workflowID, runID, resp.StatusCode(), resp.Body)
		}
		data.WriteString(resp.JSON200.JsonData)
		if page+1 >= resp.JSON200.TotalPages {
			break
		}
	}
	var dd crashtest.Dump
	if err := json.Unmarshal([]byte(data.String()), &dd); err != nil {
		return nil, fmt.Errorf("dump %s run %s: %w", workflowID, runID, err)
	}
	return &dd, nil
}

// scopeFindings is what checkScopePauses found.
type scopeFindings struct {
	// violations are the calls made while their scope was paused.
	violations []string
	// inFlight are the calls of a paused scope that reached the worker
	// between the acknowledgement and the moment every node held it;
	// maxLag is the latest of them, after the acknowledgement.
	inFlight []string
	maxLag   time.Duration
	// madeAfter counts, per kind, the held calls the worker received
	// after a resume of their scope.
	madeAfter map[string]int
}

// checkScopePauses checks the calls against the pauses: none of a scope
// from the moment every node held its pause until its resume was sent. chaos says which workflows are of the workload's type (the
// host pauses hold every call: every run of the run calls the one worker).
// held are the calls the histories say were held, by scope.
func checkScopePauses(pauses []scopePause, calls []crashtest.Call, chaos map[string]bool, held map[heldCall]string) scopeFindings {
	f := scopeFindings{madeAfter: map[string]int{}}
	inScope := func(p scopePause, c crashtest.Call) bool {
		return p.kind == scopeHost || chaos[c.WorkflowID]
	}
	made := map[heldCall]bool{}
	for _, c := range calls {
		for _, p := range pauses {
			if !inScope(p, c) || p.acked.IsZero() || !c.At.After(p.acked) {
				continue
			}
			if scope, ok := held[heldCall{c.RunID, c.ExecutionID, c.API}]; ok && scope == p.scope && c.At.After(p.resumeSent) &&
				!made[heldCall{c.RunID, c.ExecutionID, c.API}] {
				made[heldCall{c.RunID, c.ExecutionID, c.API}] = true
				f.madeAfter[p.kind]++
			}
			if !c.At.Before(p.resumeSent) {
				continue
			}
			if !c.At.After(p.held.Add(inFlightGrace)) {
				lag := c.At.Sub(p.acked)
				f.inFlight = append(f.inFlight, fmt.Sprintf("%s %s %s (node %q) %s after %s paused it (through %s)",
					c.WorkflowID, c.ExecutionID, c.API, c.Node, lag.Round(time.Millisecond), p.scope, p.ackedBy))
				f.maxLag = max(f.maxLag, lag)
				continue
			}
			f.violations = append(f.violations, fmt.Sprintf("%s %s %s %s attempt %d (node %q) reached the worker at %s, %s after %s was paused (acknowledged %s, resume sent %s)",
				c.WorkflowID, c.RunID, c.ExecutionID, c.API, c.Attempt, c.Node, c.At.Format("15:04:05.000"),
				c.At.Sub(p.acked).Round(time.Millisecond), p.scope, p.acked.Format("15:04:05.000"), p.resumeSent.Format("15:04:05.000")))
		}
	}
	return f
}

// reportScopePauses checks the run's scope pauses and reports what it
// found; it returns the number of violations and of held calls made after
// a resume. calls are the worker's, workflows the mixed workload's, dumps
// their current runs' dumps by workflow id and current their current runs.
func reportScopePauses(t *testing.T, c *cluster, pauses []scopePause, calls []crashtest.Call, workflows []*workflow,
	dumps map[string]*crashtest.Dump, current map[string]string) (violations, madeAfter int) {
	if len(pauses) == 0 {
		return 0, 0
	}
	chaos := map[string]bool{}
	for _, wf := range workflows {
		chaos[wf.id] = true
	}
	held := map[heldCall]string{}
	for id, dd := range dumps {
		for k, v := range heldCalls(current[id], dd) {
			held[k] = v
		}
	}
	f := checkScopePauses(pauses, calls, chaos, held)
	// The held calls of earlier runs (a reset's base run, a retried
	// run's first) are in those runs' histories: read them when the
	// current runs' show none made after a resume.
	kinds := map[string]bool{}
	for _, p := range pauses {
		kinds[p.kind] = true
	}
	missing := func() bool {
		for k := range kinds {
			if f.madeAfter[k] == 0 {
				return true
			}
		}
		return false
	}
	if missing() {
		runs := map[string]map[string]bool{}
		for _, call := range calls {
			if chaos[call.WorkflowID] && call.RunID != current[call.WorkflowID] {
				if runs[call.WorkflowID] == nil {
					runs[call.WorkflowID] = map[string]bool{}
				}
				runs[call.WorkflowID][call.RunID] = true
			}
		}
		for _, id := range sortedKeys(runs) {
			for _, runID := range sortedKeys(runs[id]) {
				dd, err := readRunDump(c.pick(), id, runID)
				if err != nil {
					t.Errorf("scope pauses: %v", err)
					continue
				}
				for k, v := range heldCalls(runID, dd) {
					held[k] = v
				}
			}
		}
		f = checkScopePauses(pauses, calls, chaos, held)
	}
	var resumed int64
	killed := 0
	for _, p := range pauses {
		resumed += p.resumed
		if p.killed {
			killed++
		}
	}
	for _, n := range f.madeAfter {
		madeAfter += n
	}
	t.Logf("scope pauses: %d (%d with a node killed and restarted while paused); the resumes made %d held calls due, %d of them seen made after the resume (by kind: %v); %d calls of a paused scope reached the worker before every node held the pause (the latest %s after the acknowledgement)",
		len(pauses), killed, resumed, madeAfter, f.madeAfter, len(f.inFlight), f.maxLag.Round(time.Millisecond))
	for _, s := range f.inFlight {
		t.Logf("  in flight: %s", s)
	}
	for _, p := range pauses {
		t.Logf("  %s: acknowledged by %s at %s, resume sent %s (%s paused), %d calls resumed",
			p.scope, p.ackedBy, p.acked.Format("15:04:05.000"), p.resumeSent.Format("15:04:05.000"), p.resumeSent.Sub(p.acked).Round(time.Millisecond), p.resumed)
	}
	for k := range kinds {
		if f.madeAfter[k] == 0 {
			t.Errorf("scope pauses: no call held by a %s pause was seen made after its resume: the check of the calls while paused proves nothing", k)
		}
	}
	sort.Strings(f.violations)
	for i, v := range f.violations {
		if i == 20 {
			t.Errorf("... and %d more", len(f.violations)-20)
			break
		}
		t.Errorf("worker call while its scope was paused: %s", v)
	}
	return len(f.violations), madeAfter
}

// TestScopePauseCheck runs the check on calls of known outcome: one of
// the paused type made after every node held the pause and before the
// resume is a violation, one before every node held it is in flight, one of another type or
// after the resume is none, and a held call made after the resume is
// counted as such.
func TestScopePauseCheck(t *testing.T) {
	t0 := time.Now()
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	const grace = 100 * time.Millisecond // from the acknowledgement until every node held the pause
	pauses := []scopePause{{kind: scopeType, scope: "type:" + chaosType, acked: at(0), held: at(grace), resumeSent: at(time.Second)}}
	chaos := map[string]bool{"c1": true, "c2": true}
	calls := []crashtest.Call{
		{API: crashtest.WaitUntil, WorkflowID: "c1", RunID: "r1", ExecutionID: "S-1", At: at(-time.Millisecond)},                        // before the pause
		{API: crashtest.Execute, WorkflowID: "c1", RunID: "r1", ExecutionID: "S-1", At: at(grace / 2)},                                  // in flight
		{API: crashtest.WaitUntil, WorkflowID: "c2", RunID: "r2", ExecutionID: "S-1", At: at(grace + inFlightGrace + time.Millisecond)}, // while paused
		{API: crashtest.RPC, WorkflowID: "c2", RunID: "r2", StateID: "bump", At: at(500 * time.Millisecond)},                            // while paused
		{API: crashtest.WaitUntil, WorkflowID: "linear", RunID: "r3", ExecutionID: "LC-1", At: at(500 * time.Millisecond)},              // another type
		{API: crashtest.WaitUntil, WorkflowID: "c1", RunID: "r1", ExecutionID: "J-1", At: at(2 * time.Second)},                          // held, made after
	}
	held := map[heldCall]string{{"r1", "J-1", crashtest.WaitUntil}: "type:" + chaosType}
	f := checkScopePauses(pauses, calls, chaos, held)
	if len(f.violations) != 2 || len(f.inFlight) != 1 || f.maxLag != grace/2 || f.madeAfter[scopeType] != 1 {
		t.Fatalf("violations %q, in flight %q (latest %s), made after a resume %v; want 2, 1 (%s), 1",
			f.violations, f.inFlight, f.maxLag, f.madeAfter, grace/2)
	}
	// A pause of the host holds every call.
	pauses[0].kind, pauses[0].scope = scopeHost, "host:127.0.0.1:1"
	if f := checkScopePauses(pauses, calls, chaos, held); len(f.violations) != 3 || f.madeAfter[scopeHost] != 0 {
		t.Fatalf("host pause: violations %q, made after a resume %v; want 3, none (the held call was held by the type)", f.violations, f.madeAfter)
	}
}
