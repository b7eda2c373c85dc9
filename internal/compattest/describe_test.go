package compattest

import (
	"testing"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// TestDescribe reads POST /api/v1/workflow/describe (an extension of this
// server) over HTTP: a run waiting on a signal lists the awaited command,
// a closed run lists nothing pending, an unknown workflow is the iWF
// not-found error.
func TestDescribe(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.w.state("S1", func(iwfapi.WorkflowStateStartRequest) reply {
			return commands(iwfapi.CommandRequest{CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted), SignalCommands: list(iwfapi.SignalCommand{CommandId: ptr("go"), SignalChannelName: "go"})})
		}, complete)
		wfID := e.id("describe")
		runID := e.start(e.startRequest(wfID, "describe", "S1"))
		e.waiting(wfID, "S1-1")

		resp, err := e.api.DescribeWorkflowWithResponse(e.ctx(), iwfapi.WorkflowDescribeRequest{WorkflowId: wfID})
		if err != nil || resp.StatusCode() != 200 || resp.JSON200 == nil {
			t.Fatalf("describe: %v %d %s", err, statusOf(resp), bodyOf(resp))
		}
		d := resp.JSON200
		if d.WorkflowRunId != runID || d.Status != iwfapi.WorkflowStatusRunning || len(d.PendingStates) != 1 {
			t.Fatalf("describe: %s", resp.Body)
		}
		p := d.PendingStates[0]
		if p.Phase != iwfapi.PendingStateExecutionPhaseWAITINGCOMMANDS || p.Commands == nil || len(*p.Commands) != 1 || (*p.Commands)[0].Done {
			t.Fatalf("pending: %s", resp.Body)
		}

		e.signal(wfID, "go", nil)
		e.result(wfID)
		resp, err = e.api.DescribeWorkflowWithResponse(e.ctx(), iwfapi.WorkflowDescribeRequest{WorkflowId: wfID, WorkflowRunId: ptr(runID)})
		if err != nil || resp.StatusCode() != 200 || resp.JSON200 == nil {
			t.Fatalf("describe: %v %d %s", err, statusOf(resp), bodyOf(resp))
		}
		if resp.JSON200.Status != iwfapi.WorkflowStatusCompleted || len(resp.JSON200.PendingStates) != 0 || resp.JSON200.ClosedTimestampMs == nil {
			t.Fatalf("describe of the closed run: %s", resp.Body)
		}

		missing, err := e.api.DescribeWorkflowWithResponse(e.ctx(), iwfapi.WorkflowDescribeRequest{WorkflowId: e.id("nope")})
		if err != nil {
			t.Fatal(err)
		}
		if missing.StatusCode() != 400 || missing.JSON400 == nil || deref(missing.JSON400.SubStatus) != iwfapi.ErrorSubStatusWorkflowNotExists {
			t.Fatalf("describe of a missing workflow: %d %s", missing.StatusCode(), missing.Body)
		}
	})
}
