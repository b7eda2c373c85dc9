package engine_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

func TestWorkflowRetryPolicyRestartsFailedRun(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		var calls atomic.Int32
		h.worker.state("S1", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			if calls.Add(1) < 3 {
				return decide(next(engine.ForceFailingState, nil)), 200
			}
			return decide(next(engine.GracefulCompletingState, req.StateInput)), 200
		}})
		first := h.start("wf-retry", "S1", obj("same input"), func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
			r.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{
				RetryPolicy:    &iwfapi.WorkflowRetryPolicy{InitialIntervalSeconds: ptr(int32(1)), BackoffCoefficient: ptr(float32(1)), MaximumAttempts: ptr(int32(5))},
				DataAttributes: &[]iwfapi.KeyValue{{Key: ptr("init"), Value: obj("1")}},
			}
		})
		got := h.result("wf-retry")
		if got.WorkflowStatus != iwfapi.WorkflowStatusCompleted || got.WorkflowRunId == first || *deref(got.Results)[0].CompletedStateOutput.Data != "same input" {
			t.Fatalf("result %s (first run %s)", mustJSON(got), first)
		}
		if n := calls.Load(); n != 3 {
			t.Fatalf("execute called %d times, want 3", n)
		}
		old, err := h.eng.GetWorkflow(context.Background(), iwfapi.WorkflowGetRequest{WorkflowId: "wf-retry", WorkflowRunId: ptr(first)})
		if err != nil || old.WorkflowStatus != iwfapi.WorkflowStatusFailed {
			t.Fatalf("first run %s %v", old.WorkflowStatus, err)
		}
		das, err := h.eng.GetDataAttributes(context.Background(), iwfapi.WorkflowGetDataObjectsRequest{WorkflowId: "wf-retry"})
		if err != nil || len(deref(das.Objects)) != 1 {
			t.Fatalf("retried run lacks its initial data attributes: %s %v", mustJSON(das), err)
		}
	})
}

func TestWorkflowRetryStopsAtMaximumAttempts(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		var calls atomic.Int32
		h.worker.state("S1", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			calls.Add(1)
			return decide(next(engine.ForceFailingState, nil)), 200
		}})
		h.start("wf-retry-max", "S1", nil, func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
			r.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{RetryPolicy: &iwfapi.WorkflowRetryPolicy{InitialIntervalSeconds: ptr(int32(1)), MaximumAttempts: ptr(int32(2))}}
		})
		got := h.result("wf-retry-max")
		if got.WorkflowStatus != iwfapi.WorkflowStatusFailed || calls.Load() != 2 {
			t.Fatalf("status %s after %d attempts, want FAILED after 2", got.WorkflowStatus, calls.Load())
		}
	})
}

func TestCronScheduleStartsRunsInSequence(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		var runs atomic.Int32
		h.worker.state("S1", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			runs.Add(1)
			return decide(next(engine.GracefulCompletingState, nil)), 200
		}})
		if _, err := h.eng.StartWorkflow(ctx, iwfapi.WorkflowStartRequest{WorkflowId: "wf-cron", IwfWorkflowType: "T", IwfWorkerUrl: h.worker.srv.URL,
			StartStateId: ptr("S1"), StateOptions: &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)},
			WorkflowStartOptions: &iwfapi.WorkflowStartOptions{CronSchedule: ptr("not a schedule")}}); engine.CodeOf(err) != engine.CodeInvalidArgument {
			t.Fatalf("bad cron: %v", err)
		}
		// Once a year: the first run waits for its first tick, weeks away.
		first := h.start("wf-cron", "S1", nil, func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
			r.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{CronSchedule: ptr("0 0 1 1 *")}
		})
		if s := h.status("wf-cron"); s != iwfapi.WorkflowStatusRunning || runs.Load() != 0 {
			t.Fatalf("cron run started before its time: %s, %d", s, runs.Load())
		}
		if err := h.eng.StopWorkflow(ctx, iwfapi.WorkflowStopRequest{WorkflowId: "wf-cron", StopType: ptr(iwfapi.WorkflowStopTypeTerminate)}); err != nil {
			t.Fatal(err)
		}
		got, err := h.eng.GetWorkflow(ctx, iwfapi.WorkflowGetRequest{WorkflowId: "wf-cron"})
		if err != nil || got.WorkflowRunId != first || got.WorkflowStatus != iwfapi.WorkflowStatusTerminated {
			t.Fatalf("terminating a cron workflow should end its chain: %s %v", mustJSON(got), err)
		}
	})
}

func TestExecutingStateIDsSystemSearchAttribute(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		release := make(chan struct{})
		h.worker.state("Wait", stateHandlers{
			WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
				return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
					CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
					SignalCommands:     &[]iwfapi.SignalCommand{{SignalChannelName: "go"}},
				}}, 200
			},
			Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				return decide(next("Skip", nil, skipWaitUntil)), 200
			},
		})
		h.worker.state("Skip", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			<-release
			return decide(next(engine.GracefulCompletingState, nil)), 200
		}})
		read := func(id string) []string {
			resp, err := h.eng.GetSearchAttributes(ctx, iwfapi.WorkflowGetSearchAttributesRequest{WorkflowId: id, Keys: &[]iwfapi.SearchAttributeKeyAndType{{Key: ptr(engine.SystemSAExecutingStateIDs), ValueType: ptr(iwfapi.SearchAttributeValueTypeKeywordArray)}}})
			if err != nil {
				t.Fatal(err)
			}
			for _, sa := range deref(resp.SearchAttributes) {
				return deref(sa.StringArrayValue)
			}
			return nil
		}
		// Default mode: only states with waitUntil count.
		h.start("wf-exec-default", "Wait", nil)
		h.eventually("Wait listed", func() bool { return mustJSON(read("wf-exec-default")) == `["Wait"]` })
		h.eng.SignalWorkflow(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: "wf-exec-default", SignalChannelName: "go"})
		h.eventually("Skip running", func() bool { return h.worker.count("Skip.execute") == 1 })
		if got := read("wf-exec-default"); len(got) != 0 {
			t.Fatalf("default mode lists %v while only a skip-waitUntil state runs", got)
		}
		// ENABLED_FOR_ALL: the skip-waitUntil state counts too.
		h.start("wf-exec-all", "Wait", nil, func(r *iwfapi.WorkflowStartRequest) {
			r.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{WorkflowConfigOverride: &iwfapi.WorkflowConfig{ExecutingStateIdMode: ptr(iwfapi.ExecutingStateIdModeEnabledForAll)}}
		})
		h.eventually("Wait listed", func() bool { return mustJSON(read("wf-exec-all")) == `["Wait"]` })
		h.eng.SignalWorkflow(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: "wf-exec-all", SignalChannelName: "go"})
		h.eventually("Skip listed", func() bool { return mustJSON(read("wf-exec-all")) == `["Skip"]` })
		close(release)
		h.result("wf-exec-all")
		if got := read("wf-exec-all"); len(got) != 0 {
			t.Fatalf("closed run still lists %v", got)
		}
	})
}
