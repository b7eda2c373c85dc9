package upgradetest

import (
	"strings"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// checkBatches runs a batch operation on the upgraded data: the batch
// tables, which release v1 did not have, exist after the migration and a
// batch over the runs v1 wrote processes each of them. The batch stops the
// completed runs, so each is a failure with its reason and no worker is
// called.
func checkBatches(s *stack) {
	s.t.Helper()
	var list iwfapi.BatchListResponse
	s.api.must("/api/v1/batch/list", iwfapi.BatchListRequest{}, &list)
	equal(s.t, "batches in the upgraded data", len(list.Batches), 0)
	const query = "WorkflowId STARTS_WITH 'upg-' AND ExecutionStatus='Completed'"
	var started iwfapi.BatchStartResponse
	s.api.must("/api/v1/batch/start", iwfapi.BatchStartRequest{Query: query, Operation: iwfapi.BatchOperationTerminate, Rps: ptr(1000.0)}, &started)
	equal(s.t, "runs the batch matched", started.Matched, int64(len(s.api.search(query))))
	var d iwfapi.BatchDescribeResponse
	deadline := time.Now().Add(time.Minute)
	for {
		s.api.must("/api/v1/batch/describe", iwfapi.BatchDescribeRequest{BatchId: started.BatchId}, &d)
		if d.Batch.State == iwfapi.BatchStateCompleted {
			break
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the batch did not complete: %s", mustJSON(d))
		}
		time.Sleep(20 * time.Millisecond)
	}
	equal(s.t, "batch done", d.Batch.Done, int64(0))
	equal(s.t, "batch failed", d.Batch.Failed, started.Matched)
	for _, f := range d.Failures {
		if !strings.Contains(f.Reason, "already closed") {
			s.t.Errorf("failure %s: want a reason saying the run is closed", mustJSON(f))
		}
	}
}
