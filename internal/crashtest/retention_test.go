package crashtest

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// TestKillDuringRetentionSweep kills the server in the middle of a
// retention sweep. Each run is then whole or gone — a run still there has
// its whole history — and nothing running, nor any run of a type kept
// forever, was deleted. A restarted server finishes the sweep.
func TestKillDuringRetentionSweep(t *testing.T) {
	forEachStore(t, func(t *testing.T, db string) {
		const closed, running, kept = 1200, 5, 20
		w := NewWorker(t)
		done := func(next string) State {
			return State{Execute: func(*iwfapi.WorkflowStateDecideRequest) *iwfapi.WorkflowStateDecideResponse {
				return &iwfapi.WorkflowStateDecideResponse{StateDecision: &iwfapi.StateDecision{
					NextStates: &[]iwfapi.StateMovement{{StateId: next, StateOptions: &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}}},
				}}
			}}
		}
		w.State("A", done("B"))
		w.State("B", done("_SYS_GRACEFUL_COMPLETING_WORKFLOW"))
		w.State("Park", State{WaitUntil: func(*iwfapi.WorkflowStateStartRequest) *iwfapi.WorkflowStateStartResponse {
			return &iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
				CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
				SignalCommands:     &[]iwfapi.SignalCommand{{SignalChannelName: "go"}},
			}}
		}, Execute: done("_SYS_GRACEFUL_COMPLETING_WORKFLOW").Execute})

		// Fill the store with retention off.
		srv := startServer(t, db, "fill", "--retention", "0")
		start := func(srv *Server, id, typ, state string) {
			ctx := Ctx(t, time.Minute)
			resp, err := srv.Client().StartWorkflowWithResponse(ctx, iwfapi.WorkflowStartRequest{
				WorkflowId: id, IwfWorkflowType: typ, IwfWorkerUrl: w.URL(), WorkflowTimeoutSeconds: 0,
				StartStateId: ptr(state), StateOptions: &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(state != "Park")},
			})
			if err != nil || resp.StatusCode() != http.StatusOK {
				t.Errorf("start %s: %v %s", id, err, resp.Body)
			}
		}
		var wg sync.WaitGroup
		ids := make(chan string)
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for id := range ids {
					start(srv, id, "Brief", "A")
				}
			}()
		}
		for i := range closed {
			ids <- fmt.Sprintf("brief-%d", i)
		}
		close(ids)
		wg.Wait()
		for i := range kept {
			start(srv, fmt.Sprintf("kept-%d", i), "Kept", "A")
		}
		for i := range running {
			start(srv, fmt.Sprintf("running-%d", i), "Brief", "Park")
		}
		if t.Failed() {
			return
		}
		// Every run's history as it is once closed.
		historyLen := func(srv *Server, id string) (int, bool) {
			t.Helper()
			ctx := Ctx(t, time.Minute)
			resp, err := srv.Client().GetWorkflowHistoryWithResponse(ctx, iwfapi.WorkflowHistoryRequest{WorkflowId: id, PageSize: ptr(int32(1000))})
			if err != nil {
				t.Fatalf("history %s: %v", id, err)
			}
			if resp.StatusCode() == http.StatusBadRequest && resp.JSON400 != nil && deref(resp.JSON400.SubStatus) == iwfapi.ErrorSubStatusWorkflowNotExists {
				return 0, false
			}
			if resp.JSON200 == nil {
				t.Fatalf("history %s: %d %s", id, resp.StatusCode(), resp.Body)
			}
			return len(resp.JSON200.Events), true
		}
		want := map[string]int{}
		for i := range closed {
			id := fmt.Sprintf("brief-%d", i)
			r := result(t, srv, id, time.Minute)
			if r.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
				t.Fatalf("%s: %s", id, mustJSON(r))
			}
			want[id], _ = historyLen(srv, id)
		}
		srv.Kill()

		// Sweep with Brief's retention at 1 ms, and kill the server as soon
		// as its first batch is deleted.
		sweeping := startServer(t, db, "sweep", "--retention", "0", "--retention-for", "Brief=1ms", "--retention-interval", "50ms")
		eventually(t, time.Minute, "the first batch deleted", func() bool { return metric(sweeping, "iwf_retention_runs_deleted_total") > 0 })
		sweeping.Kill()

		check := startServer(t, db, "check", "--retention", "0")
		left := 0
		for id, n := range want {
			got, ok := historyLen(check, id)
			if ok && got != n {
				t.Fatalf("%s half deleted: %d history events, %d before the sweep", id, got, n)
			}
			if ok {
				left++
			}
		}
		t.Logf("killed mid-sweep: %d of %d expired runs left", left, closed)
		if left == 0 {
			t.Log("the sweep had finished before the kill; the check above still holds")
		}
		for i := range kept {
			if _, ok := historyLen(check, fmt.Sprintf("kept-%d", i)); !ok {
				t.Fatalf("kept-%d (a type without retention) was deleted", i)
			}
		}
		for i := range running {
			if _, ok := historyLen(check, fmt.Sprintf("running-%d", i)); !ok {
				t.Fatalf("running-%d was deleted", i)
			}
		}
		check.Kill()

		// A new sweep finishes the work and leaves the running runs, which
		// then complete and go in their turn.
		final := startServer(t, db, "final", "--retention", "0", "--retention-for", "Brief=1ms", "--retention-interval", "50ms")
		eventually(t, 2*time.Minute, "every expired run deleted", func() bool {
			_, ok := historyLen(final, fmt.Sprintf("brief-%d", closed-1))
			return !ok && metric(final, "iwf_retention_backlog_runs") == 0 && metric(final, "iwf_retention_runs_deleted_total") >= float64(left)
		})
		for id := range want {
			if _, ok := historyLen(final, id); ok {
				t.Fatalf("%s left after the second sweep", id)
			}
		}
		for i := range running {
			id := fmt.Sprintf("running-%d", i)
			if _, ok := historyLen(final, id); !ok {
				t.Fatalf("%s was deleted while running", id)
			}
			signal(t, final, id, "go", "1")
		}
		eventually(t, time.Minute, "the runs that completed deleted in turn", func() bool {
			for i := range running {
				if _, ok := historyLen(final, fmt.Sprintf("running-%d", i)); ok {
					return false
				}
			}
			return true
		})
		// An id whose runs are gone starts anew.
		start(final, "brief-0", "Brief", "A")
		if r := result(t, final, "brief-0", time.Minute); r.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			t.Fatalf("brief-0 started again: %s", mustJSON(r))
		}
	})
}
