package compattest

import (
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// TestStateAPITimeoutMessage: a state API attempt that times out fails the
// workflow with iWF's activity-timeout message, whose "activity error"
// prefix apps and tests match on.
func TestStateAPITimeoutMessage(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.w.state("S1", nil, func(req iwfapi.WorkflowStateDecideRequest) reply {
			e.w.sleep(20 * time.Second) // cut short when the test ends
			return reply{}
		})
		wfID := e.id("wf-timeout-message")
		req := e.startRequest(wfID, "wf_timeout_message", "S1")
		req.StateOptions = &iwfapi.WorkflowStateOptions{
			SkipWaitUntil:            ptr(true),
			ExecuteApiTimeoutSeconds: ptr(int32(1)),
			ExecuteApiRetryPolicy:    &iwfapi.RetryPolicy{MaximumAttempts: ptr(int32(1))},
		}
		e.start(req)
		r, _ := e.result(wfID)
		msg := deref(r.ErrorMessage)
		want := "activity error (type: StateApiExecute, scheduledEventID: 0, startedEventID: 0, identity: iwf-server): activity StartToClose timeout (type: StartToClose)"
		if r.WorkflowStatus != iwfapi.WorkflowStatusFailed || deref(r.ErrorType) != iwfapi.WorkflowErrorTypeStateApiFail || msg != want {
			t.Fatalf("got %s %s %q\nwant FAILED STATE_API_FAIL_ERROR_TYPE %q", r.WorkflowStatus, deref(r.ErrorType), msg, want)
		}
		if !strings.HasPrefix(msg, "activity error") {
			t.Fatalf("message %q lacks iWF's prefix", msg)
		}
	})
}
