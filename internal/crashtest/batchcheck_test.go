package crashtest

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// envInt reads a positive integer from the environment, def when unset.
func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// TestBatchUnderLoad is the measurement of `make batch-check`, not part of
// make test (it skips without BATCH_CHECK_RUNS): BATCH_CHECK_RUNS parked
// runs (the 10,000) are terminated by one batch at BATCH_CHECK_RPS
// (default 100) while a W1 load (S1 -> S2 -> completion, both states
// without waitUntil, BATCH_CHECK_INFLIGHT in flight, default 64) runs; the
// server is killed with SIGKILL mid-batch and restarted. It prints W1's
// throughput alone and during the batch, and fails when the latter is below
// 70 % of the former, or when a run was not stopped exactly once.
func TestBatchUnderLoad(t *testing.T) {
	if os.Getenv("BATCH_CHECK_RUNS") == "" {
		t.Skip("a measurement: run it with make batch-check")
	}
	runs := envInt(t, "BATCH_CHECK_RUNS", 10000)
	rps := envInt(t, "BATCH_CHECK_RPS", 100)
	inflight := envInt(t, "BATCH_CHECK_INFLIGHT", 64)
	window := time.Duration(envInt(t, "BATCH_CHECK_WINDOW_SECONDS", 20)) * time.Second
	forEachStore(t, func(t *testing.T, db string) {
		w := NewWorker(t)
		w.State("Park", State{WaitUntil: func(*iwfapi.WorkflowStateStartRequest) *iwfapi.WorkflowStateStartResponse {
			return &iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
				CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
				SignalCommands:     &[]iwfapi.SignalCommand{{SignalChannelName: "go"}},
			}}
		}})
		skip := &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
		w.State("S1", State{Execute: func(*iwfapi.WorkflowStateDecideRequest) *iwfapi.WorkflowStateDecideResponse {
			return decide(nil, iwfapi.StateMovement{StateId: "S2", StateOptions: skip})
		}})
		w.State("S2", State{Execute: func(*iwfapi.WorkflowStateDecideRequest) *iwfapi.WorkflowStateDecideResponse {
			return decide(nil, iwfapi.StateMovement{StateId: engine.GracefulCompletingState})
		}})
		srv := startServer(t, db, "first", "--max-batch-runs", strconv.Itoa(runs))
		parallel(t, runs, 32, func(i int) error {
			resp, err := srv.Client().StartWorkflowWithResponse(Ctx(t, time.Minute), iwfapi.WorkflowStartRequest{
				WorkflowId: fmt.Sprintf("doomed-%d", i), IwfWorkflowType: "Doomed", IwfWorkerUrl: w.URL(), StartStateId: ptr("Park"),
			})
			if err != nil || resp.StatusCode() != http.StatusOK {
				return fmt.Errorf("start doomed-%d: %v %s", i, err, resp.Body)
			}
			return nil
		})
		if t.Failed() {
			return
		}
		var seq atomic.Int64
		// w1 runs W1 workflows, inflight at a time, for window and returns
		// the completions per second.
		w1 := func(srv *Server) float64 {
			var done atomic.Int64
			deadline := time.Now().Add(window)
			var wg sync.WaitGroup
			for range inflight {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for time.Now().Before(deadline) {
						id := fmt.Sprintf("w1-%d", seq.Add(1))
						if err := tryStart(srv, w, id, "S1", "", skip); err != nil {
							t.Errorf("W1 start: %v", err)
							return
						}
						if r, err := awaitResult(srv, id, time.Minute); err != nil || r.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
							t.Errorf("W1 %s: %v %v", id, err, r.WorkflowStatus)
							return
						}
						if time.Now().Before(deadline) {
							done.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			return float64(done.Load()) / window.Seconds()
		}
		alone := w1(srv)

		begin := time.Now()
		started, err := srv.Client().StartBatchWithResponse(Ctx(t, 5*time.Minute), iwfapi.BatchStartRequest{
			Query: "WorkflowType = 'Doomed'", Operation: iwfapi.BatchOperationTerminate, Rps: ptr(float64(rps)),
		})
		if err != nil || started.JSON200 == nil {
			t.Fatalf("batch start: %v %s", err, started.Body)
		}
		startSeconds := time.Since(begin).Seconds()
		id := started.JSON200.BatchId
		during := w1(srv)
		processed := metric(srv, "iwf_batch_items_processed_total")
		srv.Kill()
		killedAt := time.Since(begin)

		next := startServer(t, db, "second", "--max-batch-runs", strconv.Itoa(runs))
		var d iwfapi.BatchDescribeResponse
		eventually(t, time.Duration(runs/rps+300)*time.Second, "the batch completed", func() bool {
			resp, err := next.Client().DescribeBatchWithResponse(Ctx(t, time.Minute), iwfapi.BatchDescribeRequest{BatchId: id})
			if err != nil || resp.JSON200 == nil {
				return false
			}
			d = *resp.JSON200
			return d.Batch.State == iwfapi.BatchStateCompleted
		})
		total := time.Since(begin)
		if b := d.Batch; b.Matched != int64(runs) || b.Done != int64(runs) || b.Failed != 0 {
			t.Errorf("batch = %s", mustJSON(b))
		}
		var twice atomic.Int64
		parallel(t, runs, 16, func(i int) error {
			wf := fmt.Sprintf("doomed-%d", i)
			hist, err := next.Client().GetWorkflowHistoryWithResponse(Ctx(t, time.Minute), iwfapi.WorkflowHistoryRequest{WorkflowId: wf, PageSize: ptr(int32(1000))})
			if err != nil || hist.JSON200 == nil {
				return fmt.Errorf("history %s: %v", wf, err)
			}
			closed := 0
			for _, ev := range hist.JSON200.Events {
				if ev.EventType == "WorkflowClosed" {
					closed++
				}
			}
			if closed != 1 {
				twice.Add(1)
				return fmt.Errorf("%s has %d WorkflowClosed events", wf, closed)
			}
			return nil
		})
		ratio := during / alone
		line := fmt.Sprintf("batch-check %s: runs=%d rps=%d start=%.1fs w1_alone=%.0f/s w1_during_batch=%.0f/s (%.0f%%) killed_at=%s after %.0f processed, completed_at=%s, not_exactly_once=%d",
			t.Name(), runs, rps, startSeconds, alone, during, 100*ratio, killedAt.Round(time.Second), processed, total.Round(time.Second), twice.Load())
		fmt.Println(line)
		t.Log(line)
		if ratio < 0.7 {
			t.Errorf("W1 kept %.0f%% of its throughput during the batch, want at least 70%%", 100*ratio)
		}
	})
}
