package chaos

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/crashtest"
)

// The workflow kinds of the workload; a workflow's kind is the input of its
// start state S.
//
//	mixed: S waits for a 1 s durable timer and a signal on "sig"; its execute
//	       records the signal in attribute "sig" and fans out to three
//	       parallel threads P (skipWaitUntil) and a joining state J. Each P
//	       publishes "msg-<workflow>-<execution>" to internal channel "ic"
//	       and dead-ends; J waits for three messages on "ic" and completes
//	       the workflow with the sorted values. The client calls the RPC
//	       "bump" twice while the workflow runs (each writes "rpc-<id>").
//	reset: S waits for a timer and moves to W, which waits for a signal on
//	       "go". Once W-1 waits, the client resets the run to state W
//	       (STATE_ID) and then signals; W completes with the signal value.
//	stop:  as reset, but the client stops the waiting run (CANCEL).
//	retry: the workflow has a retry policy; S waits for a timer, and its
//	       execute fails the first run (force-fail) and completes the second.
//
// Every waitUntil answer increments "wu-<execution>" and every execute answer
// "exec-<execution>" (reading the value the request carried), so an answer
// applied twice leaves a counter at 2.
const (
	kindMixed = "mixed"
	kindReset = "reset"
	kindStop  = "stop"
	kindRetry = "retry"
)

var kinds = []string{kindMixed, kindReset, kindStop, kindRetry, kindMixed}

// registerWorkload registers the states and the RPC of the workload.
func registerWorkload(w *crashtest.Worker) *firstRuns {
	first := &firstRuns{runs: map[string]string{}}
	wu := func(req *iwfapi.WorkflowStateStartRequest) []iwfapi.KeyValue {
		jitter()
		return []iwfapi.KeyValue{crashtest.Incr(req.DataObjects, "wu-"+deref(req.Context.StateExecutionId))}
	}
	exec := func(req *iwfapi.WorkflowStateDecideRequest) []iwfapi.KeyValue {
		jitter()
		return []iwfapi.KeyValue{crashtest.Incr(req.DataObjects, "exec-"+deref(req.Context.StateExecutionId))}
	}
	timer := iwfapi.TimerCommand{CommandId: ptr("t"), DurationSeconds: ptr(int64(1))}
	w.State("S", crashtest.State{
		WaitUntil: func(req *iwfapi.WorkflowStateStartRequest) *iwfapi.WorkflowStateStartResponse {
			cmds := &iwfapi.CommandRequest{
				CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
				TimerCommands:      &[]iwfapi.TimerCommand{timer},
			}
			if dataOf(req.StateInput) == kindMixed {
				cmds.SignalCommands = &[]iwfapi.SignalCommand{{CommandId: ptr("s"), SignalChannelName: "sig"}}
			}
			return &iwfapi.WorkflowStateStartResponse{UpsertDataObjects: ptr(wu(req)), CommandRequest: cmds}
		},
		Execute: func(req *iwfapi.WorkflowStateDecideRequest) *iwfapi.WorkflowStateDecideResponse {
			ups := exec(req)
			switch dataOf(req.StateInput) {
			case kindMixed:
				for _, s := range deref(req.CommandResults.SignalResults) {
					ups = append(ups, iwfapi.KeyValue{Key: ptr("sig"), Value: s.SignalValue})
				}
				skip := &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
				return decide(ups,
					iwfapi.StateMovement{StateId: "P", StateOptions: skip},
					iwfapi.StateMovement{StateId: "P", StateOptions: skip},
					iwfapi.StateMovement{StateId: "P", StateOptions: skip},
					iwfapi.StateMovement{StateId: "J"})
			case kindRetry:
				if first.isFirst(req.Context.WorkflowId, req.Context.WorkflowRunId) {
					return decide(ups, iwfapi.StateMovement{StateId: engine.ForceFailingState, StateInput: crashtest.Object("first run fails")})
				}
				return decide(ups, iwfapi.StateMovement{StateId: engine.GracefulCompletingState, StateInput: crashtest.Object("retried")})
			default: // reset, stop
				return decide(ups, iwfapi.StateMovement{StateId: "W"})
			}
		},
	})
	w.State("P", crashtest.State{
		Execute: func(req *iwfapi.WorkflowStateDecideRequest) *iwfapi.WorkflowStateDecideResponse {
			resp := decide(exec(req), iwfapi.StateMovement{StateId: engine.DeadEndState})
			resp.PublishToInterStateChannel = &[]iwfapi.InterStateChannelPublishing{{
				ChannelName: "ic", Value: crashtest.Object(message(req.Context.WorkflowId, deref(req.Context.StateExecutionId))),
			}}
			return resp
		},
	})
	w.State("J", crashtest.State{
		WaitUntil: func(req *iwfapi.WorkflowStateStartRequest) *iwfapi.WorkflowStateStartResponse {
			var cmds []iwfapi.InterStateChannelCommand
			for i := range 3 {
				cmds = append(cmds, iwfapi.InterStateChannelCommand{CommandId: ptr(fmt.Sprintf("m%d", i)), ChannelName: "ic"})
			}
			return &iwfapi.WorkflowStateStartResponse{UpsertDataObjects: ptr(wu(req)), CommandRequest: &iwfapi.CommandRequest{
				CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted), InterStateChannelCommands: &cmds,
			}}
		},
		Execute: func(req *iwfapi.WorkflowStateDecideRequest) *iwfapi.WorkflowStateDecideResponse {
			var msgs []string
			for _, r := range deref(req.CommandResults.InterStateChannelResults) {
				msgs = append(msgs, dataOf(r.Value))
			}
			sort.Strings(msgs)
			return decide(exec(req), iwfapi.StateMovement{StateId: engine.GracefulCompletingState, StateInput: crashtest.Object(strings.Join(msgs, ","))})
		},
	})
	w.State("W", crashtest.State{
		WaitUntil: func(req *iwfapi.WorkflowStateStartRequest) *iwfapi.WorkflowStateStartResponse {
			return &iwfapi.WorkflowStateStartResponse{UpsertDataObjects: ptr(wu(req)), CommandRequest: &iwfapi.CommandRequest{
				CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
				SignalCommands:     &[]iwfapi.SignalCommand{{CommandId: ptr("g"), SignalChannelName: "go"}},
			}}
		},
		Execute: func(req *iwfapi.WorkflowStateDecideRequest) *iwfapi.WorkflowStateDecideResponse {
			var value *iwfapi.EncodedObject
			for _, s := range deref(req.CommandResults.SignalResults) {
				value = s.SignalValue
			}
			return decide(exec(req), iwfapi.StateMovement{StateId: engine.GracefulCompletingState, StateInput: value})
		},
	})
	w.RPCHandler("bump", func(req *iwfapi.WorkflowWorkerRpcRequest) *iwfapi.WorkflowWorkerRpcResponse {
		jitter()
		key := "rpc-" + dataOf(req.Input)
		return &iwfapi.WorkflowWorkerRpcResponse{
			UpsertDataAttributes: &[]iwfapi.KeyValue{crashtest.Incr(req.DataAttributes, key)},
			Output:               crashtest.Object(key),
		}
	})
	return first
}

// jitter makes a worker call take 5–40 ms, like a real worker's, so that
// kills strike calls in flight.
func jitter() { time.Sleep(time.Duration(5+rand.IntN(35)) * time.Millisecond) }

// message is the internal-channel message a P execution publishes.
func message(workflowID, executionID string) string {
	return "msg-" + workflowID + "-" + executionID
}

// firstRuns remembers the first run the worker saw of each workflow: the
// retry kind fails that run and completes the next.
type firstRuns struct {
	mu   sync.Mutex
	runs map[string]string
}

func (f *firstRuns) isFirst(workflowID, runID string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.runs[workflowID]; ok {
		return r == runID
	}
	f.runs[workflowID] = runID
	return true
}

func decide(upserts []iwfapi.KeyValue, moves ...iwfapi.StateMovement) *iwfapi.WorkflowStateDecideResponse {
	return &iwfapi.WorkflowStateDecideResponse{
		UpsertDataObjects: &upserts,
		StateDecision:     &iwfapi.StateDecision{NextStates: &moves},
	}
}

func dataOf(o *iwfapi.EncodedObject) string {
	if o == nil {
		return ""
	}
	return deref(o.Data)
}

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// opTimeout bounds one client operation, retries through faults included.
const opTimeout = 3 * time.Minute
