package upgradetest

import (
	"context"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// driver runs scenario steps against an engine, failing the test on any
// error.
type driver struct {
	t   *testing.T
	eng *engine.Engine
	ctx context.Context
}

func (d driver) start(id, wfType, state string, mod ...func(*iwfapi.WorkflowStartRequest)) string {
	d.t.Helper()
	req := iwfapi.WorkflowStartRequest{WorkflowId: id, IwfWorkflowType: wfType, IwfWorkerUrl: workerURL, StartStateId: ptr(state)}
	for _, m := range mod {
		m(&req)
	}
	resp, err := d.eng.StartWorkflow(d.ctx, req)
	if err != nil {
		d.t.Fatalf("start %s: %v", id, err)
	}
	return deref(resp.WorkflowRunId)
}

// result waits for the run (the current one when runID is "") to close.
func (d driver) result(id, runID string) iwfapi.WorkflowGetResponse {
	d.t.Helper()
	req := iwfapi.WorkflowGetRequest{WorkflowId: id, NeedsResults: ptr(true)}
	if runID != "" {
		req.WorkflowRunId = ptr(runID)
	}
	for {
		resp, err := d.eng.GetWorkflowWithWait(d.ctx, req)
		if engine.CodeOf(err) == engine.CodeLongPollTimeout {
			continue
		}
		if err != nil {
			d.t.Fatalf("getWithWait %s: %v", id, err)
		}
		return resp
	}
}

func (d driver) signal(id, channel string, value *iwfapi.EncodedObject) {
	d.t.Helper()
	if err := d.eng.SignalWorkflow(d.ctx, iwfapi.WorkflowSignalRequest{WorkflowId: id, SignalChannelName: channel, SignalValue: value}); err != nil {
		d.t.Fatalf("signal %s: %v", id, err)
	}
}

func (d driver) history(id, runID string) []iwfapi.WorkflowHistoryEvent {
	d.t.Helper()
	req := iwfapi.WorkflowHistoryRequest{WorkflowId: id}
	if runID != "" {
		req.WorkflowRunId = ptr(runID)
	}
	resp, err := d.eng.WorkflowHistory(d.ctx, req)
	if err != nil {
		d.t.Fatalf("history %s: %v", id, err)
	}
	return resp.Events
}

// waitHistory waits until the current run's history has n events of type
// typ (a generator step: the scenario reaches the point it is saved at).
func (d driver) waitHistory(id, typ string, n int) {
	d.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		count := 0
		for _, ev := range d.history(id, "") {
			if ev.EventType == typ {
				count++
			}
		}
		if count >= n {
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("%s: %d %s events after a minute, want %d", id, count, typ, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The workflows of the scenario, by id.
const (
	wfEveryShape     = "every-shape"
	wfFailedDecision = "failed-decision"
	wfFailedAPI      = "failed-api"
	wfCanceled       = "stopped-cancel"
	wfTerminated     = "stopped-terminate"
	wfTimeout        = "timeout"
	wfRetryChain     = "retry-chain"
	wfReset          = "reset"
	wfWaitTimer      = "wait-timer"
	wfWaitSignal     = "wait-signal"
	wfWaitInternal   = "wait-internal"
	wfAnyCombination = "any-combination"
	wfFailingWait    = "failing-waituntil"
	wfWithOptions    = "with-options"
)

// writeScenario starts every workflow of the scenario and drives each to
// the point at which the data is saved: closed, or waiting.
func writeScenario(d driver) {
	d.start(wfEveryShape, "every-shape", "S1", func(r *iwfapi.WorkflowStartRequest) {
		r.StateInput = obj(`"every input"`)
		r.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{DataAttributes: &[]iwfapi.KeyValue{{Key: ptr("initial"), Value: obj(`1`)}}}
	})
	d.start(wfFailedDecision, "failed-decision", "S1")
	d.start(wfFailedAPI, "failed-api", "S1", func(r *iwfapi.WorkflowStartRequest) {
		r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true),
			ExecuteApiRetryPolicy: &iwfapi.RetryPolicy{MaximumAttempts: ptr(int32(2)), InitialIntervalSeconds: ptr(int32(1))}}
	})
	d.start(wfCanceled, "stopped", "S1")
	d.start(wfTerminated, "stopped", "S1")
	d.start(wfTimeout, "timeout", "S1", func(r *iwfapi.WorkflowStartRequest) { r.WorkflowTimeoutSeconds = 1 })
	d.start(wfRetryChain, "failed-decision", "S1", func(r *iwfapi.WorkflowStartRequest) {
		r.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{RetryPolicy: &iwfapi.WorkflowRetryPolicy{MaximumAttempts: ptr(int32(2)), InitialIntervalSeconds: ptr(int32(1))}}
	})
	d.start(wfReset, "two-states", "S1")
	d.start(wfWaitTimer, "wait-timer", "S1")
	d.start(wfWaitSignal, "wait-signal", "S1")
	d.signal(wfWaitSignal, "other", obj(`"buffered"`))
	d.start(wfWaitInternal, "wait-internal", "S1")
	d.start(wfAnyCombination, "any-combination", "S1")
	d.start(wfFailingWait, "failing-waituntil", "S1", func(r *iwfapi.WorkflowStartRequest) {
		r.StateOptions = &iwfapi.WorkflowStateOptions{WaitUntilApiRetryPolicy: &iwfapi.RetryPolicy{InitialIntervalSeconds: ptr(int32(1)), MaximumIntervalSeconds: ptr(int32(1))}}
	})
	d.start(wfWithOptions, "with-options", "S1", func(r *iwfapi.WorkflowStartRequest) {
		r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
		r.WaitForCompletionStateIds = &[]string{"S2"}
	})

	// Closed runs.
	for _, id := range []string{wfEveryShape, wfFailedDecision, wfFailedAPI, wfTimeout, wfRetryChain, wfReset} {
		d.result(id, "")
	}
	for id, stop := range map[string]iwfapi.WorkflowStopType{wfCanceled: "CANCEL", wfTerminated: "TERMINATE"} {
		d.waitHistory(id, "WaitUntilCompleted", 1)
		if err := d.eng.StopWorkflow(d.ctx, iwfapi.WorkflowStopRequest{WorkflowId: id, StopType: ptr(stop), Reason: ptr("stopped by the scenario")}); err != nil {
			d.t.Fatalf("stop %s: %v", id, err)
		}
	}
	if _, err := d.eng.ResetWorkflow(d.ctx, iwfapi.WorkflowResetRequest{WorkflowId: wfReset, ResetType: iwfapi.WorkflowResetTypeStateId, StateId: ptr("S2")}); err != nil {
		d.t.Fatalf("reset: %v", err)
	}
	d.result(wfReset, "")

	// Runs in flight.
	for _, id := range []string{wfWaitTimer, wfWaitSignal, wfWaitInternal, wfAnyCombination} {
		d.waitHistory(id, "WaitUntilCompleted", 1)
	}
	d.signal(wfAnyCombination, "a", obj(`"a-before-upgrade"`))
	d.waitHistory(wfAnyCombination, "ExternalInput", 1)
	d.waitHistory(wfFailingWait, "WAIT_UNTILAttemptFailed", 2)
	d.waitHistory(wfWithOptions, "WaitUntilCompleted", 1)
}
