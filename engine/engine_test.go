package engine_test

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

func TestTwoStatesComplete(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		var sawContext atomic.Bool
		h.worker.state("S1", stateHandlers{
			WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
				c := req.Context
				if deref(c.Attempt) >= 1 && deref(c.FirstAttemptTimestamp) > 0 && deref(c.StateExecutionId) == "S1-1" && c.WorkflowStartedTimestamp > 0 {
					sawContext.Store(true)
				}
				return iwfapi.WorkflowStateStartResponse{UpsertDataObjects: &[]iwfapi.KeyValue{{Key: ptr("k"), Value: obj("v1")}}}, 200
			},
			Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				cr := req.CommandResults
				if cr == nil || !deref(cr.StateStartApiSucceeded) || cr.TimerResults != nil {
					return iwfapi.WorkflowStateDecideResponse{}, 400
				}
				return decide(next("S2", req.StateInput)), 200
			},
		})
		h.worker.state("S2", stateHandlers{
			Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				if len(deref(req.DataObjects)) != 1 {
					return iwfapi.WorkflowStateDecideResponse{}, 400
				}
				return decide(next(engine.GracefulCompletingState, req.StateInput)), 200
			},
		})
		runID := h.start("wf-two", "S1", obj(`"hello"`))
		got := h.result("wf-two")
		want := iwfapi.WorkflowGetResponse{
			WorkflowRunId: runID, WorkflowStatus: iwfapi.WorkflowStatusCompleted,
			Results: &[]iwfapi.StateCompletionOutput{{CompletedStateId: "S2", CompletedStateExecutionId: "S2-1", CompletedStateOutput: obj(`"hello"`)}},
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("result = %s, want %s", mustJSON(got), mustJSON(want))
		}
		if !sawContext.Load() {
			t.Error("waitUntil did not receive a complete context")
		}
		for key, n := range map[string]int{"S1.waitUntil": 1, "S1.execute": 1, "S2.waitUntil": 1, "S2.execute": 1} {
			if got := h.worker.count(key); got != n {
				t.Errorf("%s called %d times, want %d", key, got, n)
			}
		}
		// The worker calls S2's waitUntil too (no skip option), and the data
		// attribute written by S1 is readable after completion.
		das, err := h.eng.GetDataAttributes(context.Background(), iwfapi.WorkflowGetDataObjectsRequest{WorkflowId: "wf-two"})
		if err != nil || len(deref(das.Objects)) != 1 || *deref(das.Objects)[0].Value.Data != "v1" {
			t.Fatalf("data attributes = %s, %v", mustJSON(das), err)
		}
	})
}

func TestSignalWaitAnyWithTimer(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		h.worker.state("S1", stateHandlers{
			WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
				return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
					CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAnyCompleted),
					TimerCommands:      &[]iwfapi.TimerCommand{{CommandId: ptr("expire"), DurationSeconds: ptr(int64(3600))}},
					SignalCommands:     &[]iwfapi.SignalCommand{{CommandId: ptr("paid"), SignalChannelName: "payment"}, {CommandId: ptr("other"), SignalChannelName: "other"}},
				}}, 200
			},
			Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				return decide(next(engine.ForceCompletingState, obj(mustJSON(req.CommandResults)))), 200
			},
		})
		h.start("wf-signal", "S1", nil)
		h.eventually("S1 waiting", func() bool { return h.worker.count("S1.waitUntil") == 1 })
		if err := h.eng.SignalWorkflow(context.Background(), iwfapi.WorkflowSignalRequest{WorkflowId: "wf-signal", SignalChannelName: "payment", SignalValue: obj(`"payment"`)}); err != nil {
			t.Fatal(err)
		}
		got := h.result("wf-signal")
		out := *deref(got.Results)[0].CompletedStateOutput.Data
		want := mustJSON(iwfapi.CommandResults{
			StateStartApiSucceeded: ptr(true), StateWaitUntilFailed: ptr(false),
			TimerResults:  &[]iwfapi.TimerResult{{CommandId: "expire", TimerStatus: iwfapi.TimerStatusScheduled}},
			SignalResults: &[]iwfapi.SignalResult{{CommandId: "paid", SignalChannelName: "payment", SignalRequestStatus: iwfapi.ChannelRequestStatusReceived, SignalValue: obj(`"payment"`)}, {CommandId: "other", SignalChannelName: "other", SignalRequestStatus: iwfapi.ChannelRequestStatusWaiting}},
		})
		if out != want {
			t.Fatalf("command results = %s\nwant %s", out, want)
		}
	})
}

func TestSignalBeforeWaitIsBufferedAndConsumedInOrder(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		release := make(chan struct{})
		h.worker.state("S1", stateHandlers{
			WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
				<-release
				cmds := []iwfapi.SignalCommand{}
				for _, id := range []string{"a", "b", "c"} {
					cmds = append(cmds, iwfapi.SignalCommand{CommandId: ptr(id), SignalChannelName: "ch"})
				}
				return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted), SignalCommands: &cmds}}, 200
			},
			Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				var vals []string
				for _, r := range deref(req.CommandResults.SignalResults) {
					vals = append(vals, *r.SignalValue.Data)
				}
				return decide(next(engine.GracefulCompletingState, obj(strings.Join(vals, ",")))), 200
			},
		})
		h.start("wf-buffer", "S1", nil)
		for _, v := range []string{"0", "1", "2", "3"} {
			if err := h.eng.SignalWorkflow(context.Background(), iwfapi.WorkflowSignalRequest{WorkflowId: "wf-buffer", SignalChannelName: "ch", SignalValue: obj(v)}); err != nil {
				t.Fatal(err)
			}
		}
		close(release)
		got := h.result("wf-buffer")
		if out := *deref(got.Results)[0].CompletedStateOutput.Data; out != "0,1,2" {
			t.Fatalf("consumed %q, want 0,1,2", out)
		}
		// The fourth signal stays buffered after completion.
		dump, err := h.eng.DumpWorkflow(context.Background(), iwfapi.WorkflowDumpRequest{WorkflowId: "wf-buffer", WorkflowRunId: got.WorkflowRunId, PageNum: 0})
		if err != nil || !strings.Contains(dump.JsonData, `"signalChannels":{"ch":{"size":1}}`) {
			t.Fatalf("dump = %v, %v", dump.JsonData, err)
		}
	})
}

func TestDurableTimerFires(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		var waitedFrom atomic.Int64
		h.worker.state("S1", stateHandlers{
			WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
				waitedFrom.Store(time.Now().UnixMilli())
				return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
					CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
					TimerCommands:      &[]iwfapi.TimerCommand{{CommandId: ptr("t"), DurationSeconds: ptr(int64(1))}},
				}}, 200
			},
			Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				elapsed := time.Now().UnixMilli() - waitedFrom.Load()
				return decide(next(engine.GracefulCompletingState, obj(mustJSON(elapsed)))), 200
			},
		})
		h.start("wf-timer", "S1", nil)
		got := h.result("wf-timer")
		if got.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			t.Fatalf("status %s", got.WorkflowStatus)
		}
		var elapsed int64
		mustUnmarshal(t, *deref(got.Results)[0].CompletedStateOutput.Data, &elapsed)
		// Never early; how late depends on the machine's load (make bench
		// measures lateness).
		if elapsed < 1000 {
			t.Fatalf("timer fired after %d ms, before its 1 s", elapsed)
		}
	})
}

// TestFiredTimerLeavesNoTimerTask checks that an execution that moves on
// when a timer fires keeps no timer task: with one timer its task is the
// one taken, with two the other one is deleted (the transaction that fires
// the only timer skips that DELETE).
func TestFiredTimerLeavesNoTimerTask(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		for i, tc := range []struct {
			id     string
			timers []iwfapi.TimerCommand
		}{
			{"wf-one-timer", []iwfapi.TimerCommand{{DurationSeconds: ptr(int64(1))}}},
			{"wf-two-timers", []iwfapi.TimerCommand{{DurationSeconds: ptr(int64(1))}, {DurationSeconds: ptr(int64(3600))}}},
		} {
			h.worker.state("S1", stateHandlers{
				WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
					return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
						CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAnyCompleted),
						TimerCommands:      &tc.timers,
					}}, 200
				},
				Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
					return decide(next("S2", nil)), 200
				},
			})
			// S2 keeps the run open, so that closing it deletes nothing.
			h.worker.state("S2", stateHandlers{
				WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
					return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
						CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
						SignalCommands:     &[]iwfapi.SignalCommand{{SignalChannelName: "never"}},
					}}, 200
				},
			})
			runID := h.start(tc.id, "S1", nil)
			h.eventually(tc.id+": S2 waiting", func() bool { return h.worker.count("S2.waitUntil") == i+1 })
			h.idle()
			var timers []*engine.Task
			if err := h.store.View(context.Background(), func(ctx context.Context, tx engine.ReadTx) error {
				tasks, err := tx.TaskList(ctx, runID)
				for _, tk := range tasks {
					if tk.Kind == engine.TaskTimer {
						timers = append(timers, tk)
					}
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if len(timers) != 0 {
				t.Fatalf("%s: %d timer tasks left after S1 moved on: %s", tc.id, len(timers), mustJSON(timers))
			}
		}
	})
}

func TestParallelThreadsGracefulCompleteCollectsAllOutputs(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		h.worker.state("Root", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			return decide(next("Leaf", obj("1"), skipWaitUntil), next("Leaf", obj("2"), skipWaitUntil), next("Slow", nil), next("Leaf", obj("3"), skipWaitUntil)), 200
		}})
		h.worker.state("Leaf", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			return decide(next(engine.GracefulCompletingState, req.StateInput)), 200
		}})
		h.worker.state("Slow", stateHandlers{
			WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
				return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
					CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
					TimerCommands:      &[]iwfapi.TimerCommand{{DurationSeconds: ptr(int64(1))}},
				}}, 200
			},
			Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				return decide(next(engine.DeadEndState, nil)), 200
			},
		})
		h.start("wf-par", "Root", nil, func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
		})
		got := h.result("wf-par")
		if got.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			t.Fatalf("status %s", got.WorkflowStatus)
		}
		ids := map[string]string{}
		for _, r := range deref(got.Results) {
			ids[r.CompletedStateExecutionId] = *r.CompletedStateOutput.Data
		}
		if want := map[string]string{"Leaf-1": "1", "Leaf-2": "2", "Leaf-3": "3"}; !reflect.DeepEqual(ids, want) {
			t.Fatalf("outputs %v, want %v", ids, want)
		}
		if h.worker.count("Slow.execute") != 1 {
			t.Fatal("graceful completion did not wait for the slow thread")
		}
	})
}

func TestInternalChannelBetweenParallelStates(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		h.worker.state("Start", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			return decide(next("Consumer", nil), next("Producer", nil)), 200
		}})
		h.worker.state("Consumer", stateHandlers{
			WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
				return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
					CommandWaitingType:        ptr(iwfapi.CommandWaitingTypeAllCompleted),
					InterStateChannelCommands: &[]iwfapi.InterStateChannelCommand{{CommandId: ptr("in"), ChannelName: "jobs"}},
				}}, 200
			},
			Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				r := deref(req.CommandResults.InterStateChannelResults)[0]
				return decide(next(engine.GracefulCompletingState, r.Value)), 200
			},
		})
		h.worker.state("Producer", stateHandlers{
			WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
				return iwfapi.WorkflowStateStartResponse{PublishToInterStateChannel: &[]iwfapi.InterStateChannelPublishing{{ChannelName: "jobs", Value: obj(`"job-1"`)}}}, 200
			},
			Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				return decide(next(engine.DeadEndState, nil)), 200
			},
		})
		h.start("wf-internal", "Start", nil, func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
		})
		got := h.result("wf-internal")
		if got.WorkflowStatus != iwfapi.WorkflowStatusCompleted || *deref(got.Results)[0].CompletedStateOutput.Data != `"job-1"` {
			t.Fatalf("result %s", mustJSON(got))
		}
	})
}

func TestDeadEndKeepsRunningUntilStopped(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		h.worker.state("S1", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			return decide(next(engine.DeadEndState, nil)), 200
		}})
		h.start("wf-dead", "S1", nil)
		h.eventually("S1 executed", func() bool { return h.worker.count("S1.execute") == 1 })
		h.idle() // a wrongful completion would have happened by now
		if s := h.status("wf-dead"); s != iwfapi.WorkflowStatusRunning {
			t.Fatalf("status %s after dead end, want RUNNING", s)
		}
		err := h.eng.StopWorkflow(context.Background(), iwfapi.WorkflowStopRequest{WorkflowId: "wf-dead", StopType: ptr(iwfapi.WorkflowStopTypeFail), Reason: ptr("fail reason")})
		if err != nil {
			t.Fatal(err)
		}
		got := h.result("wf-dead")
		if got.WorkflowStatus != iwfapi.WorkflowStatusFailed || string(deref(got.ErrorType)) != "CLIENT_API_FAILING_WORKFLOW_ERROR_TYPE" || deref(got.ErrorMessage) != "fail reason" || got.Results != nil {
			t.Fatalf("result %s", mustJSON(got))
		}
		if err := h.eng.SignalWorkflow(context.Background(), iwfapi.WorkflowSignalRequest{WorkflowId: "wf-dead", SignalChannelName: "x"}); engine.CodeOf(err) != engine.CodeWorkflowNotExists {
			t.Fatalf("signal to a closed run: %v", err)
		}
	})
}

func TestStateAPIFailureRetriesThenFails(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		h.worker.state("S1", stateHandlers{WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
			return iwfapi.WorkflowStateStartResponse{}, 503
		}})
		h.start("wf-fail", "S1", nil, func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = &iwfapi.WorkflowStateOptions{WaitUntilApiRetryPolicy: &iwfapi.RetryPolicy{InitialIntervalSeconds: ptr(int32(1)), MaximumAttempts: ptr(int32(2))}}
		})
		got := h.result("wf-fail")
		if got.WorkflowStatus != iwfapi.WorkflowStatusFailed || string(deref(got.ErrorType)) != "STATE_API_FAIL_ERROR_TYPE" || !strings.HasPrefix(deref(got.ErrorMessage), "statusCode: 503") {
			t.Fatalf("result %s", mustJSON(got))
		}
		if n := h.worker.count("S1.waitUntil"); n != 2 {
			t.Fatalf("waitUntil called %d times, want 2", n)
		}
	})
}

func TestWaitUntilFailureProceedsToExecute(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		h.worker.state("S1", stateHandlers{
			WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
				return iwfapi.WorkflowStateStartResponse{}, 400
			},
			Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				if got := mustJSON(req.CommandResults); got != `{"stateStartApiSucceeded":false,"stateWaitUntilFailed":true}` {
					return iwfapi.WorkflowStateDecideResponse{}, 400
				}
				return decide(next(engine.GracefulCompletingState, nil)), 200
			},
		})
		h.start("wf-proceed", "S1", nil, func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = &iwfapi.WorkflowStateOptions{
				WaitUntilApiFailurePolicy: ptr(iwfapi.WaitUntilApiFailurePolicyProceedOnFailure),
				WaitUntilApiRetryPolicy:   &iwfapi.RetryPolicy{MaximumAttempts: ptr(int32(1))},
			}
		})
		got := h.result("wf-proceed")
		if got.WorkflowStatus != iwfapi.WorkflowStatusCompleted || got.Results != nil {
			t.Fatalf("result %s", mustJSON(got))
		}
	})
}

func TestExecuteFailureProceedsToConfiguredState(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		h.worker.state("S1", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			return iwfapi.WorkflowStateDecideResponse{}, 500
		}})
		h.worker.state("Recover", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			return decide(next(engine.ForceCompletingState, req.StateInput)), 200
		}})
		h.start("wf-recover", "S1", obj("in"), func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = &iwfapi.WorkflowStateOptions{
				SkipWaitUntil:                        ptr(true),
				ExecuteApiRetryPolicy:                &iwfapi.RetryPolicy{MaximumAttempts: ptr(int32(1))},
				ExecuteApiFailurePolicy:              ptr(iwfapi.ExecuteApiFailurePolicyProceedToConfiguredState),
				ExecuteApiFailureProceedStateId:      ptr("Recover"),
				ExecuteApiFailureProceedStateOptions: &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)},
			}
		})
		got := h.result("wf-recover")
		if got.WorkflowStatus != iwfapi.WorkflowStatusCompleted || mustJSON(got.Results) != `[{"completedStateExecutionId":"Recover-1","completedStateId":"Recover","completedStateOutput":{"data":"in","encoding":"json"}}]` {
			t.Fatalf("result %s", mustJSON(got))
		}
	})
}

func TestForceFailAndInvalidDecisions(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		h.worker.state("Fail", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			return decide(next(engine.ForceFailingState, obj("why"))), 200
		}})
		h.worker.state("Bad", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			return decide(next(engine.GracefulCompletingState, nil), next("Fail", nil)), 200
		}})
		opts := func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
		}
		runID := h.start("wf-forcefail", "Fail", nil, opts)
		got := h.result("wf-forcefail")
		want := `{"errorType":"STATE_DECISION_FAILING_WORKFLOW_ERROR_TYPE","results":[{"completedStateExecutionId":"Fail-1","completedStateId":"Fail","completedStateOutput":{"data":"why","encoding":"json"}}],"workflowRunId":"` + runID + `","workflowStatus":"FAILED"}`
		if mustJSON(got) != want {
			t.Fatalf("result %s\nwant   %s", mustJSON(got), want)
		}
		h.start("wf-bad", "Bad", nil, opts)
		got = h.result("wf-bad")
		if string(deref(got.ErrorType)) != "INVALID_USER_WORKFLOW_CODE_ERROR_TYPE" || got.Results != nil {
			t.Fatalf("result %s", mustJSON(got))
		}
	})
}

func TestWorkflowTimeout(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		h.worker.state("S1", stateHandlers{WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
			return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
				CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
				SignalCommands:     &[]iwfapi.SignalCommand{{SignalChannelName: "never"}},
			}}, 200
		}})
		runID := h.start("wf-timeout", "S1", nil, func(r *iwfapi.WorkflowStartRequest) { r.WorkflowTimeoutSeconds = 1 })
		got := h.result("wf-timeout")
		if want := (iwfapi.WorkflowGetResponse{WorkflowRunId: runID, WorkflowStatus: iwfapi.WorkflowStatusTimeout}); !reflect.DeepEqual(got, want) {
			t.Fatalf("result %s", mustJSON(got))
		}
	})
}

func TestIDReusePolicies(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		h.worker.state("S1", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			return decide(next(engine.DeadEndState, nil)), 200
		}})
		first := h.start("wf-reuse", "S1", nil)
		// Running: a second start is rejected by default...
		req := iwfapi.WorkflowStartRequest{WorkflowId: "wf-reuse", IwfWorkflowType: "TestWorkflow", IwfWorkerUrl: h.worker.srv.URL, StartStateId: ptr("S1")}
		if _, err := h.eng.StartWorkflow(ctx, req); engine.CodeOf(err) != engine.CodeAlreadyStarted {
			t.Fatalf("second start: %v", err)
		}
		// ...unless ignored, which returns the running run.
		ignore := req
		ignore.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{WorkflowAlreadyStartedOptions: &iwfapi.WorkflowAlreadyStartedOptions{IgnoreAlreadyStartedError: true}}
		if resp, err := h.eng.StartWorkflow(ctx, ignore); err != nil || *resp.WorkflowRunId != first {
			t.Fatalf("ignored start: %v %v", resp.WorkflowRunId, err)
		}
		// TERMINATE_IF_RUNNING (legacy ALLOW_TERMINATE_IF_RUNNING) replaces it.
		term := req
		term.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{IdReusePolicy: ptr(iwfapi.IDReusePolicyAllowTerminateIfRunning)}
		resp, err := h.eng.StartWorkflow(ctx, term)
		if err != nil || *resp.WorkflowRunId == first {
			t.Fatalf("terminate-if-running start: %v", err)
		}
		old, err := h.eng.GetWorkflow(ctx, iwfapi.WorkflowGetRequest{WorkflowId: "wf-reuse", WorkflowRunId: ptr(first)})
		if err != nil || old.WorkflowStatus != iwfapi.WorkflowStatusTerminated {
			t.Fatalf("old run: %s %v", old.WorkflowStatus, err)
		}
		if err := h.eng.StopWorkflow(ctx, iwfapi.WorkflowStopRequest{WorkflowId: "wf-reuse"}); err != nil {
			t.Fatal(err)
		}
		// REJECT_DUPLICATE rejects even after close.
		rej := req
		rej.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{WorkflowIDReusePolicy: ptr(iwfapi.WorkflowIDReusePolicyRejectDuplicate)}
		if _, err := h.eng.StartWorkflow(ctx, rej); engine.CodeOf(err) != engine.CodeAlreadyStarted {
			t.Fatalf("reject duplicate: %v", err)
		}
		// The default allows a new run after close.
		if _, err := h.eng.StartWorkflow(ctx, req); err != nil {
			t.Fatalf("restart after close: %v", err)
		}
	})
}

func TestGetWithWaitTimesOutWhileRunning(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		runID := h.start("wf-idle", "", nil)
		_, err := h.eng.GetWorkflowWithWait(context.Background(), iwfapi.WorkflowGetRequest{WorkflowId: "wf-idle", WaitTimeSeconds: ptr(int32(1))})
		if engine.CodeOf(err) != engine.CodeLongPollTimeout {
			t.Fatalf("getWithWait: %v", err)
		}
		if _, err := h.eng.GetWorkflow(context.Background(), iwfapi.WorkflowGetRequest{WorkflowId: "no-such"}); engine.CodeOf(err) != engine.CodeWorkflowNotExists {
			t.Fatalf("get unknown: %v", err)
		}
		if _, err := h.eng.GetWorkflow(context.Background(), iwfapi.WorkflowGetRequest{WorkflowId: ""}); engine.CodeOf(err) != engine.CodeWorkflowNotExists {
			t.Fatalf("get empty id: %v", err)
		}
		// A run id is found only under its own workflow id.
		if got, err := h.eng.GetWorkflow(context.Background(), iwfapi.WorkflowGetRequest{WorkflowId: "wf-idle", WorkflowRunId: &runID}); err != nil || got.WorkflowRunId != runID {
			t.Fatalf("get by run id: %s, %v", mustJSON(got), err)
		}
		for _, req := range []iwfapi.WorkflowGetRequest{{WorkflowId: "no-such", WorkflowRunId: &runID}, {WorkflowId: "wf-idle", WorkflowRunId: ptr("no-such-run")}} {
			if _, err := h.eng.GetWorkflow(context.Background(), req); engine.CodeOf(err) != engine.CodeWorkflowNotExists || !strings.Contains(err.Error(), "run") {
				t.Fatalf("get %s: %v", mustJSON(req), err)
			}
		}
	})
}

func TestConditionalCloseOnInternalChannel(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		// S1 loops on itself until the channel is empty; RPCs feed it.
		h.worker.state("S1", stateHandlers{
			WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
				return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
					CommandWaitingType:        ptr(iwfapi.CommandWaitingTypeAllCompleted),
					InterStateChannelCommands: &[]iwfapi.InterStateChannelCommand{{ChannelName: "q"}},
				}}, 200
			},
			Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				moves := []iwfapi.StateMovement{{StateId: "S1"}}
				return iwfapi.WorkflowStateDecideResponse{StateDecision: &iwfapi.StateDecision{
					NextStates: &moves,
					ConditionalClose: &iwfapi.WorkflowConditionalClose{
						ConditionalCloseType: ptr(iwfapi.WorkflowConditionalCloseTypeForceCompleteOnInternalChannelEmpty),
						ChannelName:          ptr("q"), CloseInput: obj("closed"),
					},
				}}, 200
			},
		})
		h.start("wf-cc", "S1", nil)
		if err := h.eng.PublishToInternalChannel(context.Background(), iwfapi.PublishToInternalChannelRequest{WorkflowId: "wf-cc", Messages: &[]iwfapi.InterStateChannelPublishing{{ChannelName: "q"}, {ChannelName: "q"}}}); err != nil {
			t.Fatal(err)
		}
		got := h.result("wf-cc")
		if mustJSON(got.Results) != `[{"completedStateExecutionId":"S1-2","completedStateId":"S1","completedStateOutput":{"data":"closed","encoding":"json"}}]` {
			t.Fatalf("results %s", mustJSON(got.Results))
		}
	})
}

func TestRPCStartsStatesAndWrites(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		h.worker.rpc("add", func(req iwfapi.WorkflowWorkerRpcRequest) (iwfapi.WorkflowWorkerRpcResponse, int) {
			moves := []iwfapi.StateMovement{{StateId: "S2", StateInput: req.Input, StateOptions: &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}}}
			return iwfapi.WorkflowWorkerRpcResponse{
				Output:               obj(mustJSON(len(deref(req.SignalChannelInfos)))),
				UpsertDataAttributes: &[]iwfapi.KeyValue{{Key: ptr("rpc"), Value: obj("yes")}},
				StateDecision:        &iwfapi.StateDecision{NextStates: &moves},
			}, 200
		})
		h.worker.rpc("broken", func(req iwfapi.WorkflowWorkerRpcRequest) (iwfapi.WorkflowWorkerRpcResponse, int) {
			return iwfapi.WorkflowWorkerRpcResponse{}, 502
		})
		h.worker.state("S2", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			return decide(next(engine.GracefulCompletingState, req.StateInput)), 200
		}})
		h.start("wf-rpc", "", nil)
		resp, err := h.eng.InvokeRPC(context.Background(), iwfapi.WorkflowRpcRequest{WorkflowId: "wf-rpc", RpcName: "add", Input: obj("x")})
		if err != nil || *resp.Output.Data != "0" {
			t.Fatalf("rpc: %v %v", resp, err)
		}
		got := h.result("wf-rpc")
		if got.WorkflowStatus != iwfapi.WorkflowStatusCompleted || *deref(got.Results)[0].CompletedStateOutput.Data != "x" {
			t.Fatalf("result %s", mustJSON(got))
		}
		_, err = h.eng.InvokeRPC(context.Background(), iwfapi.WorkflowRpcRequest{WorkflowId: "wf-rpc", RpcName: "broken"})
		var ee *engine.Error
		if !errorsAs(err, &ee) || ee.Code != engine.CodeWorkerAPIError || ee.Worker.Status != 502 {
			t.Fatalf("broken rpc: %v", err)
		}
	})
}

func TestHistoryRecordsTheRunFromTheStart(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		h.worker.state("S1", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			return decide(next(engine.GracefulCompletingState, nil)), 200
		}})
		h.start("wf-history", "S1", nil)
		h.result("wf-history")
		var types []string
		var after int64
		for {
			page, err := h.eng.WorkflowHistory(context.Background(), iwfapi.WorkflowHistoryRequest{WorkflowId: "wf-history", AfterEventId: ptr(after), PageSize: ptr(int32(2))})
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range page.Events {
				if ev.EventId <= after {
					t.Fatalf("event ids not increasing: %d after %d", ev.EventId, after)
				}
				after = ev.EventId
				types = append(types, ev.EventType)
			}
			if !deref(page.HasMore) {
				break
			}
		}
		want := []string{"WorkflowStarted", "StateExecutionStarted", "WaitUntilCompleted", "CommandsCompleted", "ExecuteCompleted", "WorkflowClosed"}
		if !reflect.DeepEqual(types, want) {
			t.Fatalf("history %v, want %v", types, want)
		}
	})
}

func TestMetricsCountWorkflowsAndWorkerCalls(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		h.worker.state("S1", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			return decide(next(engine.GracefulCompletingState, nil)), 200
		}})
		h.start("wf-metrics", "S1", nil)
		h.result("wf-metrics")
		// The close is readable as soon as it commits, a moment before the
		// goroutine that committed it counts it.
		metrics := h.idleMetrics()
		for _, line := range []string{
			"iwf_workflows_started_total 1\n",
			`iwf_workflows_closed_total{status="COMPLETED"} 1` + "\n",
			`iwf_worker_calls_total{api="waitUntil",outcome="ok"} 1` + "\n",
			`iwf_worker_calls_total{api="execute",outcome="ok"} 1` + "\n",
			`iwf_worker_call_seconds_count{api="execute"} 1` + "\n",
			"# TYPE iwf_tasks_in_memory gauge\n",
		} {
			if !strings.Contains(metrics, line) {
				t.Errorf("metrics lack %q:\n%s", line, metrics)
			}
		}
	})
}

// viewCounter counts the read transactions of a store. It hides the
// store's optional interfaces (engine.RunReader among them), so that every
// read of the engine is a View.
type viewCounter struct {
	engine.Store
	views atomic.Int64
}

func (s *viewCounter) View(ctx context.Context, fn func(ctx context.Context, tx engine.ReadTx) error) error {
	s.views.Add(1)
	return s.Store.View(ctx, fn)
}

// TestGetWithWaitReadsOnceBeforeWaiting: a getWithWait on a running
// workflow that does not change waits (it subscribes before it looks, so it
// needs no second look to catch a close committed in between) and times
// out. On another node it reads the run once before waiting; on the node
// whose commit started the run, it knows the run open from that commit and
// reads nothing.
func TestGetWithWaitReadsOnceBeforeWaiting(t *testing.T) {
	forEachStoreOpen(t, func(t *testing.T, st engine.Store) {
		vc := &viewCounter{Store: st}
		recheck := func(c *engine.Config) { c.LongPollRecheck = time.Hour }
		h := newHarness(t, vc, recheck)
		other := newHarnessOn(t, vc, h.worker, recheck)
		h.start("wf-still", "", nil)
		for _, c := range []struct {
			node  string
			eng   *engine.Engine
			reads int64
		}{{"the node that started it", h.eng, 0}, {"another node", other.eng, 1}} {
			before := vc.views.Load()
			_, err := c.eng.GetWorkflowWithWait(context.Background(), iwfapi.WorkflowGetRequest{WorkflowId: "wf-still", WaitTimeSeconds: ptr(int32(1))})
			if engine.CodeOf(err) != engine.CodeLongPollTimeout {
				t.Fatalf("getWithWait on %s: %v", c.node, err)
			}
			if n := vc.views.Load() - before; n != c.reads {
				t.Errorf("getWithWait on %s read the store %d times, want %d", c.node, n, c.reads)
			}
		}
	})
}

// runReadCounter counts the reads of a run as a get or a getWithWait makes
// them: it is an engine.RunReader over any store, reading through View.
type runReadCounter struct {
	engine.Store
	reads atomic.Int64
}

func (s *runReadCounter) ReadRun(ctx context.Context, workflowID, runID string) (*engine.Run, error) {
	s.reads.Add(1)
	var run *engine.Run
	err := s.Store.View(ctx, func(ctx context.Context, tx engine.ReadTx) error {
		id := runID
		if id == "" {
			cur, err := tx.WorkflowGetCurrentRun(ctx, workflowID)
			if err != nil {
				return err
			}
			if cur == "" {
				return engine.ErrNotFound
			}
			id = cur
		}
		var err error
		run, err = tx.RunGet(ctx, id)
		return err
	})
	return run, err
}

// TestGetWithWaitAnswersFromTheClosingCommit: a getWithWait that waits for
// a run this process started and then closes knows it open from the start's
// commit, sleeps through the commits that leave the run open (S1's answer)
// and answers from the run as the closing commit wrote it, results
// included, without reading the run at all; a getWithWait that starts
// after the close reads it once.
func TestGetWithWaitAnswersFromTheClosingCommit(t *testing.T) {
	forEachStoreOpen(t, func(t *testing.T, st engine.Store) {
		rc := &runReadCounter{Store: st}
		h := newHarness(t, rc, func(c *engine.Config) { c.LongPollRecheck = time.Hour })
		entered1, release1 := make(chan struct{}), make(chan struct{})
		entered2, release2 := make(chan struct{}), make(chan struct{})
		// A failed check must not leave the worker's handlers blocked: the
		// engine's shutdown would wait for them.
		var once1, once2 sync.Once
		t.Cleanup(func() { once1.Do(func() { close(release1) }); once2.Do(func() { close(release2) }) })
		skip := &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
		h.worker.state("S1", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			close(entered1)
			<-release1
			return decide(iwfapi.StateMovement{StateId: "S2", StateOptions: skip}), 200
		}})
		h.worker.state("S2", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			close(entered2)
			<-release2
			return decide(next(engine.GracefulCompletingState, obj(`"done"`))), 200
		}})
		h.start("wf-local-close", "S1", nil, func(r *iwfapi.WorkflowStartRequest) { r.StateOptions = skip })
		<-entered1

		type answer struct {
			resp iwfapi.WorkflowGetResponse
			err  error
		}
		got := make(chan answer, 1)
		go func() {
			resp, err := h.eng.GetWorkflowWithWait(context.Background(), iwfapi.WorkflowGetRequest{WorkflowId: "wf-local-close"})
			got <- answer{resp, err}
		}()
		h.eventually("the long poll to wait", func() bool { return gauge(t, h, "iwf_long_polls_waiting") == "1" })
		if n := rc.reads.Load(); n != 0 {
			t.Fatalf("getWithWait read the run %d times before waiting, want 0 (the start's commit left it open)", n)
		}
		once1.Do(func() { close(release1) })
		<-entered2 // S1's answer, which leaves the run open, has committed
		once2.Do(func() { close(release2) })
		a := <-got
		if a.err != nil {
			t.Fatalf("getWithWait: %v", a.err)
		}
		if a.resp.WorkflowStatus != iwfapi.WorkflowStatusCompleted || a.resp.Results == nil || len(*a.resp.Results) != 1 ||
			string(*(*a.resp.Results)[0].CompletedStateOutput.Data) != `"done"` {
			t.Fatalf("getWithWait answered %+v", a.resp)
		}
		if n := rc.reads.Load(); n != 0 {
			t.Errorf("getWithWait read the run %d times, want 0 (woken by the close only, which was handed over)", n)
		}
		// A later call has nothing to wait for and reads the run once; it
		// answers as the handed-over run did.
		later := h.result("wf-local-close")
		if n := rc.reads.Load(); n != 1 {
			t.Errorf("a getWithWait after the close read the run %d times in all, want 1", n)
		}
		if later.WorkflowStatus != a.resp.WorkflowStatus || later.WorkflowRunId != a.resp.WorkflowRunId ||
			string(*(*later.Results)[0].CompletedStateOutput.Data) != `"done"` {
			t.Errorf("a later getWithWait answered %+v, the handed-over run %+v", later, a.resp)
		}
	})
}
