package crashtest

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// TestKillDuringBatch terminates a few hundred runs by query and kills the
// server (SIGKILL) in the middle of the batch. The batch then resumes —
// on SQLite in the restarted process, on PostgreSQL on a second node once
// the dead node's lease expired — and every run it matched is stopped
// exactly once: one WorkflowClosed event per run, and counters that add up.
func TestKillDuringBatch(t *testing.T) {
	forEachStore(t, func(t *testing.T, db string) {
		const runs, spared = 300, 5
		w := NewWorker(t)
		w.State("Park", State{WaitUntil: func(*iwfapi.WorkflowStateStartRequest) *iwfapi.WorkflowStateStartResponse {
			return &iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
				CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
				SignalCommands:     &[]iwfapi.SignalCommand{{SignalChannelName: "go"}},
			}}
		}})
		srv := startServer(t, db, "first")
		start := func(id, typ string) {
			ctx := Ctx(t, time.Minute)
			resp, err := srv.Client().StartWorkflowWithResponse(ctx, iwfapi.WorkflowStartRequest{
				WorkflowId: id, IwfWorkflowType: typ, IwfWorkerUrl: w.URL(), WorkflowTimeoutSeconds: 0, StartStateId: ptr("Park"),
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
					start(id, "Doomed")
				}
			}()
		}
		for i := range runs {
			ids <- fmt.Sprintf("doomed-%d", i)
		}
		close(ids)
		wg.Wait()
		for i := range spared {
			start(fmt.Sprintf("spared-%d", i), "Spared")
		}
		if t.Failed() {
			return
		}

		ctx := Ctx(t, time.Minute)
		started, err := srv.Client().StartBatchWithResponse(ctx, iwfapi.BatchStartRequest{
			Query: "WorkflowType = 'Doomed'", Operation: iwfapi.BatchOperationTerminate, Rps: ptr(100.0), Reason: ptr("crash test"),
		})
		if err != nil || started.JSON200 == nil {
			t.Fatalf("batch start: %v %s", err, started.Body)
		}
		if started.JSON200.Matched != runs {
			t.Fatalf("matched %d, want %d", started.JSON200.Matched, runs)
		}
		id := started.JSON200.BatchId
		describe := func(srv *Server) iwfapi.BatchDescribeResponse {
			t.Helper()
			resp, err := srv.Client().DescribeBatchWithResponse(Ctx(t, time.Minute), iwfapi.BatchDescribeRequest{BatchId: id})
			if err != nil || resp.JSON200 == nil {
				t.Fatalf("batch describe: %v %s", err, resp.Body)
			}
			return *resp.JSON200
		}
		eventually(t, 2*time.Minute, "the batch under way", func() bool { return metric(srv, "iwf_batch_items_processed_total") >= 30 })
		srv.Kill()
		t.Logf("killed after at least 30 of %d runs processed", runs)

		// The rest is done elsewhere: a second node (PostgreSQL) or the
		// restarted process (SQLite).
		next := startServer(t, db, "second")
		eventually(t, 2*time.Minute, "the batch completed", func() bool {
			return describe(next).Batch.State == iwfapi.BatchStateCompleted
		})
		d := describe(next)
		if b := d.Batch; b.Matched != runs || b.Done != runs || b.Failed != 0 || b.Pending != 0 {
			t.Fatalf("batch = %s failures %s", mustJSON(b), mustJSON(d.Failures))
		}
		for i := range runs {
			wf := fmt.Sprintf("doomed-%d", i)
			hist, err := next.Client().GetWorkflowHistoryWithResponse(Ctx(t, time.Minute), iwfapi.WorkflowHistoryRequest{WorkflowId: wf, PageSize: ptr(int32(1000))})
			if err != nil || hist.JSON200 == nil {
				t.Fatalf("history %s: %v", wf, err)
			}
			closed := 0
			for _, ev := range hist.JSON200.Events {
				if ev.EventType == "WorkflowClosed" {
					closed++
					if s := fmt.Sprint(deref(ev.Data)["status"]); !strings.Contains(s, "TERMINATED") {
						t.Errorf("%s closed as %s", wf, s)
					}
				}
			}
			if closed != 1 {
				t.Fatalf("%s has %d WorkflowClosed events, want exactly 1", wf, closed)
			}
		}
		for i := range spared {
			wf := fmt.Sprintf("spared-%d", i)
			resp, err := next.Client().GetWorkflowWithResponse(Ctx(t, time.Minute), iwfapi.WorkflowGetRequest{WorkflowId: wf})
			if err != nil || resp.JSON200 == nil || resp.JSON200.WorkflowStatus != iwfapi.WorkflowStatusRunning {
				t.Fatalf("%s, of a type the query does not match: %v %s", wf, err, resp.Body)
			}
		}
	})
}
