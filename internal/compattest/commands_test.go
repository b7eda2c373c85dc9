package compattest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// executeResults returns the raw commandResults of the n-th execute call of
// a state.
func (e *env) executeResults(stateID string, n int) []byte {
	e.t.Helper()
	return []byte(field(e.t, e.w.body(e.t, stateID+".execute", n), "commandResults"))
}

// TestAnyCommandClose mirrors integ/any_command_close_test.go: ANY_COMPLETED
// over two signal commands, only the second channel is signalled.
func TestAnyCommandClose(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.w.state("S1", func(iwfapi.WorkflowStateStartRequest) reply {
			return commands(iwfapi.CommandRequest{
				SignalCommands: list(
					iwfapi.SignalCommand{CommandId: ptr("signal-cmd-id1"), SignalChannelName: "test-signal-name1"},
					iwfapi.SignalCommand{CommandId: ptr("signal-cmd-id2"), SignalChannelName: "test-signal-name2"},
				),
				CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAnyCompleted),
			})
		}, goTo("S2"))
		e.w.state("S2", noCommands, complete)
		wfID := e.id("any-command-close")
		req := e.startRequest(wfID, "any_command_close", "S1")
		runID := e.start(req)
		e.signal(wfID, "test-signal-name2", obj("test-data-1"))
		_, body := e.result(wfID)
		jsonEqual(t, "result", body, fmt.Sprintf(`{"workflowRunId":%q,"workflowStatus":"COMPLETED"}`, runID))
		e.w.expectCounts(t, map[string]int{"S1.waitUntil": 1, "S1.execute": 1, "S2.waitUntil": 1, "S2.execute": 1})
		jsonEqual(t, "S1 commandResults", e.executeResults("S1", 0), `{
			"signalResults":[
				{"commandId":"signal-cmd-id1","signalChannelName":"test-signal-name1","signalRequestStatus":"WAITING"},
				{"commandId":"signal-cmd-id2","signalChannelName":"test-signal-name2","signalRequestStatus":"RECEIVED","signalValue":{"encoding":"json","data":"test-data-1"}}],
			"stateStartApiSucceeded":true,"stateWaitUntilFailed":false}`)
		jsonEqual(t, "S2 commandResults", e.executeResults("S2", 0), `{"stateStartApiSucceeded":true,"stateWaitUntilFailed":false}`)
	})
}

// TestAnyCommandCombination mirrors integ/any_command_combination_test.go:
// ANY_COMBINATION_COMPLETED; the first waitUntil answers of both states are
// invalid (a timer without commandId; no combinations) and are retried;
// duplicate command ids count with multiplicity; a timer is skipped by id.
func TestAnyCommandCombination(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		const (
			timer1 = "test-timer-1"
			sig1   = "test-signal-name1"
			sig2   = "test-signal-name2"
			sig3   = "test-signal-name3"
		)
		yearLater := func() *int64 { return ptr(time.Now().Unix() + 86400*365) }
		validSignals := list(
			iwfapi.SignalCommand{CommandId: ptr(sig1), SignalChannelName: sig1},
			iwfapi.SignalCommand{CommandId: ptr(sig1), SignalChannelName: sig1},
			iwfapi.SignalCommand{CommandId: ptr(sig2), SignalChannelName: sig2},
			iwfapi.SignalCommand{CommandId: ptr(sig3), SignalChannelName: sig3},
		)
		anyCombination := ptr(iwfapi.DeciderTriggerTypeAnyCommandCombinationCompleted)
		e.w.state("S1", func(req iwfapi.WorkflowStateStartRequest) reply {
			if e.w.count("S1.waitUntil") == 1 {
				// Invalid: a timer without commandId, and no combinations.
				return commands(iwfapi.CommandRequest{
					SignalCommands: validSignals, DeciderTriggerType: anyCombination,
					TimerCommands: list(iwfapi.TimerCommand{FiringUnixTimestampSeconds: yearLater()}),
				})
			}
			if deref(req.Context.Attempt) != 2 {
				e.w.fail("S1 second waitUntil attempt = %d, want 2", deref(req.Context.Attempt))
			}
			return commands(iwfapi.CommandRequest{
				SignalCommands: validSignals, DeciderTriggerType: anyCombination,
				TimerCommands: list(iwfapi.TimerCommand{CommandId: ptr(timer1), FiringUnixTimestampSeconds: yearLater()}),
				CommandCombinations: list(
					iwfapi.CommandCombination{CommandIds: list(timer1, sig1, sig1)},
					iwfapi.CommandCombination{CommandIds: list(timer1, sig1, sig2)},
				),
			})
		}, goTo("S2"))
		e.w.state("S2", func(iwfapi.WorkflowStateStartRequest) reply {
			if e.w.count("S2.waitUntil") == 1 {
				// Invalid: a signal command without commandId.
				return commands(iwfapi.CommandRequest{
					SignalCommands: list(
						iwfapi.SignalCommand{SignalChannelName: sig1},
						iwfapi.SignalCommand{CommandId: ptr(sig2), SignalChannelName: sig2},
					),
					TimerCommands:      list(iwfapi.TimerCommand{CommandId: ptr(timer1), FiringUnixTimestampSeconds: yearLater()}),
					DeciderTriggerType: anyCombination,
				})
			}
			return commands(iwfapi.CommandRequest{
				SignalCommands: validSignals, DeciderTriggerType: anyCombination,
				TimerCommands: list(iwfapi.TimerCommand{CommandId: ptr(timer1), FiringUnixTimestampSeconds: yearLater()}),
				CommandCombinations: list(
					iwfapi.CommandCombination{CommandIds: list(sig2, sig1)},
					iwfapi.CommandCombination{CommandIds: list(timer1, sig1, sig2)},
				),
			})
		}, complete)

		wfID := e.id("any-command-combination")
		req := e.startRequest(wfID, "any_command_combination", "S1")
		e.start(req)
		value := obj("test-data-1")
		e.signal(wfID, sig1, value)
		e.signal(wfID, sig1, value)

		// Skip the timer by id once S1-1 waits for its commands.
		e.waiting(wfID, "S1-1")
		skip := e.skipTimer(iwfapi.WorkflowSkipTimerRequest{WorkflowId: wfID, WorkflowStateExecutionId: "S1-1", TimerCommandId: ptr(timer1)})
		expectError(t, "timer/skip", skip, 200, `{}`)

		// S2 waits (after its retried waitUntil); it receives sig1, sig3, sig2.
		e.waiting(wfID, "S2-1")
		e.signal(wfID, sig1, value)
		if s := e.status(wfID); s != iwfapi.WorkflowStatusRunning {
			t.Errorf("status after the first signal of S2: %s", s)
		}
		e.signal(wfID, sig3, value)
		e.signal(wfID, sig2, value)
		r, _ := e.result(wfID)
		if r.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			t.Errorf("status %s", r.WorkflowStatus)
		}
		e.w.expectCounts(t, map[string]int{"S1.waitUntil": 2, "S1.execute": 1, "S2.waitUntil": 2, "S2.execute": 1})
		const received = `"signalRequestStatus":"RECEIVED","signalValue":{"data":"test-data-1","encoding":"json"}`
		jsonEqual(t, "S1 commandResults", e.executeResults("S1", 0), `{"signalResults":[
			{"commandId":"test-signal-name1","signalChannelName":"test-signal-name1",`+received+`},
			{"commandId":"test-signal-name1","signalChannelName":"test-signal-name1",`+received+`},
			{"commandId":"test-signal-name2","signalChannelName":"test-signal-name2","signalRequestStatus":"WAITING"},
			{"commandId":"test-signal-name3","signalChannelName":"test-signal-name3","signalRequestStatus":"WAITING"}],
			"timerResults":[{"commandId":"test-timer-1","timerStatus":"FIRED"}],
			"stateStartApiSucceeded":true,"stateWaitUntilFailed":false}`)
		jsonEqual(t, "S2 commandResults", e.executeResults("S2", 0), `{"signalResults":[
			{"commandId":"test-signal-name1","signalChannelName":"test-signal-name1",`+received+`},
			{"commandId":"test-signal-name1","signalChannelName":"test-signal-name1","signalRequestStatus":"WAITING"},
			{"commandId":"test-signal-name2","signalChannelName":"test-signal-name2",`+received+`},
			{"commandId":"test-signal-name3","signalChannelName":"test-signal-name3",`+received+`}],
			"timerResults":[{"commandId":"test-timer-1","timerStatus":"SCHEDULED"}],
			"stateStartApiSucceeded":true,"stateWaitUntilFailed":false}`)
	})
}

// TestAnyTimerSignal mirrors integ/any_timer_signal_test.go: ANY_COMPLETED
// over a 1 s timer and a signal; the timer wins, the state loops to itself
// and the second execution gets the signal.
func TestAnyTimerSignal(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.w.state("S1", func(req iwfapi.WorkflowStateStartRequest) reply {
			cr := iwfapi.CommandRequest{
				SignalCommands:     list(iwfapi.SignalCommand{CommandId: ptr("signal-cmd-id"), SignalChannelName: "test-signal-name"}),
				CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAnyCompleted),
			}
			if deref(req.Context.StateExecutionId) == "S1-1" {
				cr.TimerCommands = list(iwfapi.TimerCommand{FiringUnixTimestampSeconds: ptr(time.Now().Unix() + 1)})
			}
			return commands(cr)
		}, func(req iwfapi.WorkflowStateDecideRequest) reply {
			if deref(req.Context.StateExecutionId) == "S1-1" {
				return decide(move("S1", nil))
			}
			return decide(move("S2", nil))
		})
		e.w.state("S2", noCommands, complete)
		wfID := e.id("any-timer-signal")
		req := e.startRequest(wfID, "any_timer_signal", "S1")
		e.start(req)
		e.eventually("S1-1 executed", func() bool { return e.w.count("S1.execute") == 1 })
		e.signal(wfID, "test-signal-name", obj("test-data-1"))
		r, _ := e.result(wfID)
		if r.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			t.Errorf("status %s", r.WorkflowStatus)
		}
		e.w.expectCounts(t, map[string]int{"S1.waitUntil": 2, "S1.execute": 2, "S2.waitUntil": 1, "S2.execute": 1})
		jsonEqual(t, "S1-1 commandResults", e.executeResults("S1", 0), `{
			"signalResults":[{"commandId":"signal-cmd-id","signalChannelName":"test-signal-name","signalRequestStatus":"WAITING"}],
			"timerResults":[{"commandId":"","timerStatus":"FIRED"}],
			"stateStartApiSucceeded":true,"stateWaitUntilFailed":false}`)
		jsonEqual(t, "S1-2 commandResults", e.executeResults("S1", 1), `{
			"signalResults":[{"commandId":"signal-cmd-id","signalChannelName":"test-signal-name","signalRequestStatus":"RECEIVED",
				"signalValue":{"encoding":"json","data":"test-data-1"}}],
			"stateStartApiSucceeded":true,"stateWaitUntilFailed":false}`)
	})
}

// TestCommandThreadCompletion mirrors integ/command_thread_completion_test.go:
// ALL_COMPLETED over a timer, a signal and an internal message the state
// publishes itself; a message published by execute is consumed by the next
// state; and ANY_COMPLETED does not wait for a long timer once a signal came.
func TestCommandThreadCompletion(t *testing.T) {
	t.Run("all three kinds", func(t *testing.T) {
		forEachStore(t, func(t *testing.T, e *env) {
			channelValue := obj("channel-data")
			e.w.state("S1", func(iwfapi.WorkflowStateStartRequest) reply {
				return ok(iwfapi.WorkflowStateStartResponse{
					CommandRequest: &iwfapi.CommandRequest{
						DeciderTriggerType:        ptr(iwfapi.DeciderTriggerTypeAllCommandCompleted),
						TimerCommands:             list(iwfapi.TimerCommand{CommandId: ptr("test-timer"), FiringUnixTimestampSeconds: ptr(time.Now().Add(time.Second).Unix())}),
						SignalCommands:            list(iwfapi.SignalCommand{CommandId: ptr("test-signal-cmd"), SignalChannelName: "test-signal"}),
						InterStateChannelCommands: list(iwfapi.InterStateChannelCommand{CommandId: ptr("test-channel-cmd"), ChannelName: "test-channel"}),
					},
					PublishToInterStateChannel: list(iwfapi.InterStateChannelPublishing{ChannelName: "test-channel", Value: channelValue}),
				})
			}, func(iwfapi.WorkflowStateDecideRequest) reply {
				return ok(iwfapi.WorkflowStateDecideResponse{
					StateDecision:              &iwfapi.StateDecision{NextStates: list(move("S2", nil), move("S3", nil))},
					PublishToInterStateChannel: list(iwfapi.InterStateChannelPublishing{ChannelName: "test-channel2", Value: channelValue}),
				})
			})
			e.w.state("S2", func(iwfapi.WorkflowStateStartRequest) reply {
				return commands(iwfapi.CommandRequest{
					DeciderTriggerType:        ptr(iwfapi.DeciderTriggerTypeAllCommandCompleted),
					InterStateChannelCommands: list(iwfapi.InterStateChannelCommand{CommandId: ptr("s2-channel-cmd"), ChannelName: "test-channel2"}),
				})
			}, func(iwfapi.WorkflowStateDecideRequest) reply { return decide(move(deadEnd, nil)) })
			e.w.state("S3", func(iwfapi.WorkflowStateStartRequest) reply {
				return commands(iwfapi.CommandRequest{
					DeciderTriggerType: ptr(iwfapi.DeciderTriggerTypeAllCommandCompleted),
					TimerCommands:      list(iwfapi.TimerCommand{CommandId: ptr("s3-timer-cmd"), FiringUnixTimestampSeconds: ptr(time.Now().Add(time.Second).Unix())}),
				})
			}, complete)
			wfID := e.id("command-thread-completion")
			runID := e.start(e.startRequest(wfID, "command_thread_completion", "S1"))
			e.waiting(wfID, "S1-1")
			e.signal(wfID, "test-signal", obj("signal-data"))
			_, body := e.result(wfID)
			jsonEqual(t, "result", body, fmt.Sprintf(`{"workflowRunId":%q,"workflowStatus":"COMPLETED"}`, runID))
			e.w.expectCounts(t, map[string]int{"S1.waitUntil": 1, "S1.execute": 1, "S2.waitUntil": 1, "S2.execute": 1, "S3.waitUntil": 1, "S3.execute": 1})
			jsonEqual(t, "S1 commandResults", e.executeResults("S1", 0), `{
				"timerResults":[{"commandId":"test-timer","timerStatus":"FIRED"}],
				"signalResults":[{"commandId":"test-signal-cmd","signalChannelName":"test-signal","signalRequestStatus":"RECEIVED","signalValue":{"encoding":"json","data":"signal-data"}}],
				"interStateChannelResults":[{"commandId":"test-channel-cmd","channelName":"test-channel","requestStatus":"RECEIVED","value":{"encoding":"json","data":"channel-data"}}],
				"stateStartApiSucceeded":true,"stateWaitUntilFailed":false}`)
			jsonEqual(t, "S2 commandResults", e.executeResults("S2", 0), `{
				"interStateChannelResults":[{"commandId":"s2-channel-cmd","channelName":"test-channel2","requestStatus":"RECEIVED","value":{"encoding":"json","data":"channel-data"}}],
				"stateStartApiSucceeded":true,"stateWaitUntilFailed":false}`)
			jsonEqual(t, "S3 commandResults", e.executeResults("S3", 0), `{
				"timerResults":[{"commandId":"s3-timer-cmd","timerStatus":"FIRED"}],
				"stateStartApiSucceeded":true,"stateWaitUntilFailed":false}`)
		})
	})
	t.Run("any completes without the long timer", func(t *testing.T) {
		forEachStore(t, func(t *testing.T, e *env) {
			e.w.state("StateAnyCmd", func(iwfapi.WorkflowStateStartRequest) reply {
				return commands(iwfapi.CommandRequest{
					DeciderTriggerType: ptr(iwfapi.DeciderTriggerTypeAnyCommandCompleted),
					TimerCommands:      list(iwfapi.TimerCommand{CommandId: ptr("any-cmd-timer"), FiringUnixTimestampSeconds: ptr(time.Now().Add(20 * time.Second).Unix())}),
					SignalCommands:     list(iwfapi.SignalCommand{CommandId: ptr("any-cmd-signal-cmd"), SignalChannelName: "any-cmd-signal"}),
				})
			}, goTo("S3"))
			e.w.state("S3", func(iwfapi.WorkflowStateStartRequest) reply {
				return commands(iwfapi.CommandRequest{
					DeciderTriggerType: ptr(iwfapi.DeciderTriggerTypeAllCommandCompleted),
					TimerCommands:      list(iwfapi.TimerCommand{CommandId: ptr("s3-timer-cmd"), DurationSeconds: ptr(int64(1))}),
				})
			}, complete)
			wfID := e.id("any-cmd")
			e.start(e.startRequest(wfID, "command_thread_completion", "StateAnyCmd"))
			e.waiting(wfID, "StateAnyCmd-1")
			e.signal(wfID, "any-cmd-signal", obj("signal-data"))
			resp, err := e.api.GetWorkflowWithWaitWithResponse(e.ctx(), iwfapi.WorkflowGetRequest{WorkflowId: wfID, WaitTimeSeconds: ptr(int32(20))})
			if err != nil || resp.StatusCode() != 200 || resp.JSON200.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
				t.Fatalf("getWithWait: %v %d %s", err, statusOf(resp), bodyOf(resp))
			}
			// The 20 s timer is reported SCHEDULED below: ANY_COMPLETED did
			// not wait for it.
			e.w.expectCounts(t, map[string]int{"StateAnyCmd.waitUntil": 1, "StateAnyCmd.execute": 1, "S3.waitUntil": 1, "S3.execute": 1})
			jsonEqual(t, "StateAnyCmd commandResults", e.executeResults("StateAnyCmd", 0), `{
				"timerResults":[{"commandId":"any-cmd-timer","timerStatus":"SCHEDULED"}],
				"signalResults":[{"commandId":"any-cmd-signal-cmd","signalChannelName":"any-cmd-signal","signalRequestStatus":"RECEIVED","signalValue":{"encoding":"json","data":"signal-data"}}],
				"stateStartApiSucceeded":true,"stateWaitUntilFailed":false}`)
		})
	})
}

// TestConditionalClose mirrors integ/conditional_close_test.go: a state loops
// on itself until its channel is empty, then force-completes with the close
// input. Messages come from value-less RPC publishes (internal channel) or
// signals; the third execution publishes one more message in its own
// execute response, which the condition must see. Instead of iWF's sleep,
// the first execute waits until the test has sent all three messages.
func TestConditionalClose(t *testing.T) {
	for _, useSignal := range []bool{false, true} {
		name := "internal channel"
		if useSignal {
			name = "signal channel"
		}
		t.Run(name, func(t *testing.T) {
			forEachStore(t, func(t *testing.T, e *env) {
				const channel = "test-channel-name"
				closeInput := obj("test-data")
				allSent := newGate()
				e.w.rpc("publish_internal_channel", func(iwfapi.WorkflowWorkerRpcRequest) reply {
					return ok(iwfapi.WorkflowWorkerRpcResponse{PublishToInterStateChannel: list(iwfapi.InterStateChannelPublishing{ChannelName: channel})})
				})
				e.w.state("S1", func(iwfapi.WorkflowStateStartRequest) reply {
					cr := iwfapi.CommandRequest{CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAnyCompleted)}
					if useSignal {
						cr.SignalCommands = list(iwfapi.SignalCommand{SignalChannelName: channel})
					} else {
						cr.InterStateChannelCommands = list(iwfapi.InterStateChannelCommand{ChannelName: channel})
					}
					return commands(cr)
				}, func(req iwfapi.WorkflowStateDecideRequest) reply {
					var publish *[]iwfapi.InterStateChannelPublishing
					switch deref(req.Context.StateExecutionId) {
					case "S1-1":
						e.w.await(allSent)
					case "S1-3":
						publish = list(iwfapi.InterStateChannelPublishing{ChannelName: channel, Value: closeInput})
					}
					cc := &iwfapi.WorkflowConditionalClose{
						ConditionalCloseType: ptr(iwfapi.WorkflowConditionalCloseTypeForceCompleteOnInternalChannelEmpty),
						ChannelName:          ptr(channel), CloseInput: closeInput,
					}
					if useSignal {
						cc.ConditionalCloseType = ptr(iwfapi.WorkflowConditionalCloseTypeForceCompleteOnSignalChannelEmpty)
					}
					return ok(iwfapi.WorkflowStateDecideResponse{
						PublishToInterStateChannel: publish,
						StateDecision:              &iwfapi.StateDecision{NextStates: list(move("S1", req.StateInput)), ConditionalClose: cc},
					})
				})
				wfID := e.id("conditional-close")
				req := e.startRequest(wfID, "conditional_close", "S1")
				runID := e.start(req)
				for i := 0; i < 3; i++ {
					if useSignal {
						e.signal(wfID, channel, nil)
					} else {
						e.rpcOK(iwfapi.WorkflowRpcRequest{WorkflowId: wfID, RpcName: "publish_internal_channel"})
					}
				}
				allSent.open()
				_, body := e.result(wfID)
				last, want := "S1-4", map[string]int{"S1.waitUntil": 4, "S1.execute": 4, "publish_internal_channel.rpc": 3}
				if useSignal {
					last, want = "S1-3", map[string]int{"S1.waitUntil": 3, "S1.execute": 3}
				}
				jsonEqual(t, "result", body, fmt.Sprintf(`{"workflowRunId":%q,"workflowStatus":"COMPLETED",
					"results":[{"completedStateId":"S1","completedStateExecutionId":%q,"completedStateOutput":{"encoding":"json","data":"test-data"}}]}`, runID, last))
				e.w.expectCounts(t, want)
			})
		})
	}
}

// TestConditionalCloseUnsupported extends integ/conditional_close_test.go:
// the declared but unsupported GRACEFUL_COMPLETE_ON_ALL_CHANNELS_EMPTY fails
// the workflow as invalid user code.
func TestConditionalCloseUnsupported(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.w.state("S1", noCommands, func(iwfapi.WorkflowStateDecideRequest) reply {
			return ok(iwfapi.WorkflowStateDecideResponse{StateDecision: &iwfapi.StateDecision{
				NextStates: list(move("S1", nil)),
				ConditionalClose: &iwfapi.WorkflowConditionalClose{
					ConditionalCloseType: ptr(iwfapi.WorkflowConditionalCloseTypeGracefulCompleteOnAllChannelsEmpty),
				},
			}})
		})
		wfID := e.id("conditional-close-unsupported")
		runID := e.start(e.startRequest(wfID, "conditional_close", "S1"))
		_, body := e.result(wfID)
		jsonEqual(t, "result", body, fmt.Sprintf(`{"workflowRunId":%q,"workflowStatus":"FAILED","errorType":"INVALID_USER_WORKFLOW_CODE_ERROR_TYPE",
			"errorMessage":"invalid state decisions. Unsupported ConditionalCloseType GRACEFUL_COMPLETE_ON_ALL_CHANNELS_EMPTY"}`, runID))
	})
}

// TestInternalChannel mirrors integ/internalchannel_test.go: parallel states
// talk through internal channels (one publishing from waitUntil, then from
// execute before dead-ending); closing without output leaves no results.
func TestInternalChannel(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		val1, val2 := obj("test-value1"), obj("test-value2")
		waitFor := func(cmd, channel string) waitUntilFunc {
			return func(iwfapi.WorkflowStateStartRequest) reply {
				return commands(iwfapi.CommandRequest{
					DeciderTriggerType:        ptr(iwfapi.DeciderTriggerTypeAllCommandCompleted),
					InterStateChannelCommands: list(iwfapi.InterStateChannelCommand{CommandId: ptr(cmd), ChannelName: channel}),
				})
			}
		}
		e.w.state("S1", noCommands, func(iwfapi.WorkflowStateDecideRequest) reply { return decide(move("S21", nil), move("S22", nil)) })
		e.w.state("S21", waitFor("cmd-1", "channel1"), goTo("S31"))
		e.w.state("S22", func(iwfapi.WorkflowStateStartRequest) reply {
			e.w.sleep(200 * time.Millisecond)
			return ok(iwfapi.WorkflowStateStartResponse{
				CommandRequest:             &iwfapi.CommandRequest{DeciderTriggerType: ptr(iwfapi.DeciderTriggerTypeAllCommandCompleted)},
				PublishToInterStateChannel: list(iwfapi.InterStateChannelPublishing{ChannelName: "channel1", Value: val1}),
			})
		}, func(iwfapi.WorkflowStateDecideRequest) reply {
			e.w.sleep(200 * time.Millisecond)
			return ok(iwfapi.WorkflowStateDecideResponse{
				StateDecision:              &iwfapi.StateDecision{NextStates: list(move(deadEnd, nil))},
				PublishToInterStateChannel: list(iwfapi.InterStateChannelPublishing{ChannelName: "channel2", Value: val2}),
			})
		})
		e.w.state("S31", waitFor("cmd-2", "channel2"), complete)
		wfID := e.id("interstate")
		req := e.startRequest(wfID, "interstate", "S1")
		runID := e.start(req)
		_, body := e.result(wfID)
		jsonEqual(t, "result", body, fmt.Sprintf(`{"workflowRunId":%q,"workflowStatus":"COMPLETED"}`, runID))
		e.w.expectCounts(t, map[string]int{"S1.waitUntil": 1, "S1.execute": 1, "S21.waitUntil": 1, "S21.execute": 1,
			"S22.waitUntil": 1, "S22.execute": 1, "S31.waitUntil": 1, "S31.execute": 1})
		jsonEqual(t, "S21 commandResults", e.executeResults("S21", 0), `{"interStateChannelResults":[
			{"commandId":"cmd-1","channelName":"channel1","requestStatus":"RECEIVED","value":{"encoding":"json","data":"test-value1"}}],
			"stateStartApiSucceeded":true,"stateWaitUntilFailed":false}`)
		jsonEqual(t, "S31 commandResults", e.executeResults("S31", 0), `{"interStateChannelResults":[
			{"commandId":"cmd-2","channelName":"channel2","requestStatus":"RECEIVED","value":{"encoding":"json","data":"test-value2"}}],
			"stateStartApiSucceeded":true,"stateWaitUntilFailed":false}`)
	})
}

// TestParallel mirrors integ/parallel_test.go: a fan-out tree of eight
// states; five leaves complete gracefully with an output each, one earlier
// than the others, and the run completes only after all of them.
func TestParallel(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		output := func(stateID string) *iwfapi.EncodedObject { return obj("from " + stateID) }
		fanOut := func(delay time.Duration, next ...string) executeFunc {
			return func(iwfapi.WorkflowStateDecideRequest) reply {
				e.w.sleep(delay)
				moves := make([]iwfapi.StateMovement, 0, len(next))
				for _, s := range next {
					moves = append(moves, move(s, nil))
				}
				return decide(moves...)
			}
		}
		leaf := func(delay time.Duration) executeFunc {
			return func(req iwfapi.WorkflowStateDecideRequest) reply {
				e.w.sleep(delay)
				return decide(move(gracefulComplete, output(req.WorkflowStateId)))
			}
		}
		e.w.state("S1", noCommands, fanOut(100*time.Millisecond, "S11", "S12", "S13"))
		e.w.state("S11", noCommands, fanOut(200*time.Millisecond, "S111", "S112"))
		e.w.state("S12", noCommands, fanOut(200*time.Millisecond, "S121", "S122"))
		e.w.state("S13", noCommands, leaf(100*time.Millisecond))
		for _, s := range []string{"S111", "S112", "S121", "S122"} {
			e.w.state(s, noCommands, leaf(0))
		}
		wfID := e.id("parallel")
		e.start(e.startRequest(wfID, "parallel", "S1"))
		r, _ := e.result(wfID)
		if r.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			t.Fatalf("status %s", r.WorkflowStatus)
		}
		want := map[string]string{}
		for _, s := range []string{"S13", "S111", "S112", "S121", "S122"} {
			want[s+"-1"] = "from " + s
		}
		got := map[string]string{}
		for _, o := range slice(r.Results) {
			if o.CompletedStateExecutionId != o.CompletedStateId+"-1" || o.CompletedStateOutput == nil {
				t.Errorf("result %s", mustJSON(o))
				continue
			}
			got[o.CompletedStateExecutionId] = deref(o.CompletedStateOutput.Data)
		}
		if len(slice(r.Results)) != 5 || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("results %s, want one output from each of %v", mustJSON(r.Results), want)
		}
		counts := map[string]int{}
		for _, s := range []string{"S1", "S11", "S12", "S13", "S111", "S112", "S121", "S122"} {
			counts[s+".waitUntil"], counts[s+".execute"] = 1, 1
		}
		e.w.expectCounts(t, counts)
	})
}

// TestTimer mirrors integ/timer_test.go with a 3 s first timer: three
// duration timers with ALL_COMPLETED, the second skipped by id and the third
// by index; a BEGINNING reset applies both skips again, so the new run also
// waits only for the first timer.
func TestTimer(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.w.state("S1", func(iwfapi.WorkflowStateStartRequest) reply {
			return commands(iwfapi.CommandRequest{
				DeciderTriggerType: ptr(iwfapi.DeciderTriggerTypeAllCommandCompleted),
				TimerCommands: list(
					iwfapi.TimerCommand{CommandId: ptr("timer-cmd-id"), DurationSeconds: ptr(int64(3))},
					iwfapi.TimerCommand{CommandId: ptr("timer-cmd-id-2"), DurationSeconds: ptr(int64(86400))},
					iwfapi.TimerCommand{CommandId: ptr("timer-cmd-id-3"), DurationSeconds: ptr(int64(86400 * 365))},
				),
			})
		}, goTo("S2"))
		e.w.state("S2", noCommands, complete)
		wfID := e.id("timer")
		req := e.startRequest(wfID, "timer", "S1")
		first := e.start(req)
		started := time.Now()

		skip := func(what string, r iwfapi.WorkflowSkipTimerRequest, status int, body string) {
			t.Helper()
			r.WorkflowId = wfID
			expectError(t, what, e.skipTimer(r), status, body)
		}
		const missing = `{"detail":"invalid request - requested timer command doesn't exist","subStatus":"UNCATEGORIZED_SUB_STATUS"}`
		skip("skip naming no timer", iwfapi.WorkflowSkipTimerRequest{WorkflowStateExecutionId: "S1-1"}, 400,
			`{"detail":"invalid request - must provide either a timerCommandId or index","subStatus":"UNCATEGORIZED_SUB_STATUS"}`)
		e.waiting(wfID, "S1-1")
		skip("skip by id", iwfapi.WorkflowSkipTimerRequest{WorkflowStateExecutionId: "S1-1", TimerCommandId: ptr("timer-cmd-id-2")}, 200, `{}`)
		skip("skip by index", iwfapi.WorkflowSkipTimerRequest{WorkflowStateExecutionId: "S1-1", TimerCommandIndex: ptr(int32(2))}, 200, `{}`)
		skip("skip by index of a skipped timer", iwfapi.WorkflowSkipTimerRequest{WorkflowStateExecutionId: "S1-1", TimerCommandIndex: ptr(int32(2))}, 400, missing)
		skip("skip by id of a skipped timer", iwfapi.WorkflowSkipTimerRequest{WorkflowStateExecutionId: "S1-1", TimerCommandId: ptr("timer-cmd-id-2")}, 200, `{}`)
		skip("skip of an unknown id", iwfapi.WorkflowSkipTimerRequest{WorkflowStateExecutionId: "S1-1", TimerCommandId: ptr("nope")}, 400, missing)
		skip("skip in an unknown execution", iwfapi.WorkflowSkipTimerRequest{WorkflowStateExecutionId: "S1-9", TimerCommandIndex: ptr(int32(0))}, 400, missing)
		if s := e.status(wfID); s != iwfapi.WorkflowStatusRunning {
			t.Errorf("status before the first timer fired: %s", s)
		}

		r, _ := e.result(wfID)
		// No upper bound: on a loaded machine a timer may fire late; it may
		// never fire early.
		if took := time.Since(started); r.WorkflowStatus != iwfapi.WorkflowStatusCompleted || took < 2*time.Second {
			t.Errorf("completed as %s after %v, want COMPLETED after at least 2 s", r.WorkflowStatus, took)
		}
		e.w.expectCounts(t, map[string]int{"S1.waitUntil": 1, "S1.execute": 1, "S2.waitUntil": 1, "S2.execute": 1})
		allFired := `{"timerResults":[{"commandId":"timer-cmd-id","timerStatus":"FIRED"},{"commandId":"timer-cmd-id-2","timerStatus":"FIRED"},
			{"commandId":"timer-cmd-id-3","timerStatus":"FIRED"}],"stateStartApiSucceeded":true,"stateWaitUntilFailed":false}`
		jsonEqual(t, "S1 commandResults", e.executeResults("S1", 0), allFired)

		// Reset to the beginning: the skips are applied again.
		resetAt := time.Now()
		second := e.reset(iwfapi.WorkflowResetRequest{WorkflowId: wfID, ResetType: iwfapi.WorkflowResetTypeBeginning})
		if second == first {
			t.Fatalf("reset kept the run id")
		}
		r, _ = e.result(wfID)
		if took := time.Since(resetAt); r.WorkflowStatus != iwfapi.WorkflowStatusCompleted || r.WorkflowRunId != second || took < 2*time.Second {
			t.Errorf("reset run %s completed as %s after %v, want %s COMPLETED after at least 2 s", r.WorkflowRunId, r.WorkflowStatus, took, second)
		}
		jsonEqual(t, "S1 commandResults after reset", e.executeResults("S1", 1), allFired)
	})
}

// TestDeadEnd mirrors integ/deadend_test.go: a workflow without start state
// receives RPC writes, then RPC-started skip-waitUntil states that dead-end;
// the run stays RUNNING until it is stopped. (The continue-as-new assertion
// of iWF does not apply: the run id never changes here.)
func TestDeadEnd(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		checkContext := func(req iwfapi.WorkflowWorkerRpcRequest) bool {
			return req.Context.WorkflowId != "" && req.Context.WorkflowRunId != "" && req.WorkflowType == "deadend"
		}
		e.w.rpc("RPCWriteData", func(req iwfapi.WorkflowWorkerRpcRequest) reply {
			if !checkContext(req) {
				return e.w.reject("bad RPC context %s", mustJSON(req.Context))
			}
			return ok(iwfapi.WorkflowWorkerRpcResponse{UpsertDataAttributes: list(iwfapi.KeyValue{
				Key: ptr("any key"), Value: &iwfapi.EncodedObject{Encoding: ptr("encoding"), Data: ptr("data")},
			})})
		})
		e.w.rpc("test-RPCTriggerState", func(req iwfapi.WorkflowWorkerRpcRequest) reply {
			if !checkContext(req) {
				return e.w.reject("bad RPC context %s", mustJSON(req.Context))
			}
			return ok(iwfapi.WorkflowWorkerRpcResponse{StateDecision: &iwfapi.StateDecision{NextStates: list(
				moveWith("S1", nil, iwfapi.WorkflowStateOptions{SkipStartApi: ptr(true)}),
			)}})
		})
		e.w.state("S1", nil, func(iwfapi.WorkflowStateDecideRequest) reply { return decide(move(deadEnd, nil)) })
		wfID := e.id("deadend")
		req := e.startRequest(wfID, "deadend", "")
		req.WorkflowTimeoutSeconds = 100
		runID := e.start(req)
		for i := 0; i < 3; i++ {
			e.rpcOK(iwfapi.WorkflowRpcRequest{WorkflowId: wfID, RpcName: "RPCWriteData"})
		}
		jsonEqualValue(t, "data attributes", e.dataAttributes(wfID, ""), `[{"key":"any key","value":{"encoding":"encoding","data":"data"}}]`)
		if r, _ := e.get(wfID, "", false); r.WorkflowRunId != runID || r.WorkflowStatus != iwfapi.WorkflowStatusRunning {
			t.Errorf("get: %s", mustJSON(r))
		}
		for i := 0; i < 3; i++ {
			e.rpcOK(iwfapi.WorkflowRpcRequest{WorkflowId: wfID, RpcName: "test-RPCTriggerState"})
		}
		e.eventually("three dead ends", func() bool { return e.w.count("S1.execute") == 3 })
		time.Sleep(300 * time.Millisecond)
		if s := e.status(wfID); s != iwfapi.WorkflowStatusRunning {
			t.Errorf("dead ends closed the run: %s", s)
		}
		e.stop(iwfapi.WorkflowStopRequest{WorkflowId: wfID})
		_, body := e.result(wfID)
		jsonEqual(t, "result", body, fmt.Sprintf(`{"workflowRunId":%q,"workflowStatus":"CANCELED"}`, runID))
		e.w.expectCounts(t, map[string]int{"S1.execute": 3, "RPCWriteData.rpc": 3, "test-RPCTriggerState.rpc": 3})
	})
}

// TestGreedyTimer mirrors the portable part of integ/greedy_timer_test.go
// (optimizeTimer; iWF's assertions count the Temporal timers physically
// scheduled, which has no counterpart here): states submitted by RPC each
// wait on duration timers, a timer is skipped by id, and the state whose
// short timer fires first force-completes the workflow.
func TestGreedyTimer(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		durations := func(input *iwfapi.EncodedObject) []int64 {
			var in struct{ Durations []int64 }
			if err := json.Unmarshal([]byte(deref(input.Data)), &in); err != nil {
				e.w.fail("input %s: %v", deref(input.Data), err)
			}
			return in.Durations
		}
		e.w.rpc("submit-durations", func(req iwfapi.WorkflowWorkerRpcRequest) reply {
			return ok(iwfapi.WorkflowWorkerRpcResponse{StateDecision: &iwfapi.StateDecision{NextStates: list(move("schedule", req.Input))}})
		})
		e.w.state("schedule", func(req iwfapi.WorkflowStateStartRequest) reply {
			var timers []iwfapi.TimerCommand
			for _, d := range durations(req.StateInput) {
				timers = append(timers, iwfapi.TimerCommand{CommandId: ptr(fmt.Sprintf("duration-%d", d)), DurationSeconds: ptr(d)})
			}
			return commands(iwfapi.CommandRequest{TimerCommands: &timers, DeciderTriggerType: ptr(iwfapi.DeciderTriggerTypeAllCommandCompleted)})
		}, func(req iwfapi.WorkflowStateDecideRequest) reply {
			return decide(move(forceComplete, obj(string(mustJSON(req.CommandResults.TimerResults)))))
		})
		input := func(d ...int64) *iwfapi.EncodedObject {
			return obj(string(mustJSON(map[string][]int64{"Durations": d})))
		}
		wfID := e.id("greedy-timer")
		req := e.startRequest(wfID, "greedy_timer", "schedule")
		req.StateInput = input(15, 30)
		req.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{WorkflowConfigOverride: &iwfapi.WorkflowConfig{OptimizeTimer: ptr(true)}}
		runID := e.start(req)
		e.waiting(wfID, "schedule-1")
		e.rpcOK(iwfapi.WorkflowRpcRequest{WorkflowId: wfID, RpcName: "submit-durations", Input: input(20), TimeoutSeconds: ptr(int32(30))})
		expectError(t, "timer/skip", e.skipTimer(iwfapi.WorkflowSkipTimerRequest{WorkflowId: wfID, WorkflowStateExecutionId: "schedule-1", TimerCommandId: ptr("duration-15")}), 200, `{}`)
		e.rpcOK(iwfapi.WorkflowRpcRequest{WorkflowId: wfID, RpcName: "submit-durations", Input: input(1), TimeoutSeconds: ptr(int32(30))})
		_, body := e.result(wfID)
		jsonEqual(t, "result", body, fmt.Sprintf(`{"workflowRunId":%q,"workflowStatus":"COMPLETED","results":[{"completedStateId":"schedule",
			"completedStateExecutionId":"schedule-3","completedStateOutput":{"encoding":"json","data":"[{\"commandId\":\"duration-1\",\"timerStatus\":\"FIRED\"}]"}}]}`, runID))
		e.w.expectCounts(t, map[string]int{"schedule.waitUntil": 3, "schedule.execute": 1, "submit-durations.rpc": 2})
	})
}
