package iwf

import (
	"fmt"

	"github.com/iwf-server/iwf-server/sdk-go/internal/wire"
)

// reservedStatePrefix starts the ids of the server's pseudo-states that
// close a workflow or end a thread.
const reservedStatePrefix = "_SYS_"

// The reserved state ids (wire values).
const (
	gracefulCompletingWorkflowStateID = "_SYS_GRACEFUL_COMPLETING_WORKFLOW"
	forceCompletingWorkflowStateID    = "_SYS_FORCE_COMPLETING_WORKFLOW"
	forceFailingWorkflowStateID       = "_SYS_FORCE_FAILING_WORKFLOW"
	deadEndStateID                    = "_SYS_DEAD_END"
)

// StateMovement moves the workflow to a state of the same workflow, with an
// input. The state's options (and skipWaitUntil for a state without
// WaitUntil) are filled in from the workflow definition.
type StateMovement struct {
	// StateID is the ID of the next state.
	StateID string
	// Input is the next state's input; nil for none.
	Input any
	// WaitForKey, if set, is the key under which the execution's
	// completion is published for Client.WaitForStateCompletionWithKey
	// (the state must be listed in StartOptions.WaitForCompletionStateIDs).
	WaitForKey string

	reserved bool
}

// NextState returns a movement to state with input (nil for none).
func NextState(state WorkflowState, input any) StateMovement {
	if state == nil {
		return StateMovement{Input: input} // rejected when the decision is encoded
	}
	return StateMovement{StateID: state.ID(), Input: input}
}

// StateDecision is what Execute returns: where the workflow goes next.
// Build one with SingleNextState, MultiNextStates, GracefulCompleteWorkflow,
// ForceCompleteWorkflow, ForceFailWorkflow, DeadEnd or one of the
// conditional closes.
type StateDecision struct {
	movements []StateMovement
	close     *conditionalClose
}

type conditionalClose struct {
	closeType wire.WorkflowConditionalCloseType
	channel   string
	output    any
}

// SingleNextState moves to one state with an input (nil for none).
func SingleNextState(state WorkflowState, input any) *StateDecision {
	return &StateDecision{movements: []StateMovement{NextState(state, input)}}
}

// MultiNextStates moves to several states at once; they run in parallel.
func MultiNextStates(movements ...StateMovement) *StateDecision {
	return &StateDecision{movements: movements}
}

// GracefulCompleteWorkflow completes the workflow once every other running
// state has finished. A non-nil output becomes one of the workflow's
// results.
func GracefulCompleteWorkflow(output any) *StateDecision {
	return reservedDecision(gracefulCompletingWorkflowStateID, output)
}

// ForceCompleteWorkflow completes the workflow now, abandoning other running
// states. A non-nil output becomes one of the workflow's results.
func ForceCompleteWorkflow(output any) *StateDecision {
	return reservedDecision(forceCompletingWorkflowStateID, output)
}

// ForceFailWorkflow fails the workflow now. A non-nil output becomes one of
// its results, which the client sees in WorkflowAbnormalExitError.Results.
func ForceFailWorkflow(output any) *StateDecision {
	return reservedDecision(forceFailingWorkflowStateID, output)
}

// DeadEnd ends this thread of the workflow without completing it; the
// workflow keeps running (other states, RPCs, signals).
func DeadEnd() *StateDecision { return reservedDecision(deadEndStateID, nil) }

func reservedDecision(id string, output any) *StateDecision {
	return &StateDecision{movements: []StateMovement{{StateID: id, Input: output, reserved: true}}}
}

// ForceCompleteIfInternalChannelEmptyOrElse completes the workflow with
// output if the internal channel has no message left (counting messages
// published by this very Execute); otherwise it moves to the orElse states,
// typically back to this state to consume the next message. orElse must
// not be empty.
func ForceCompleteIfInternalChannelEmptyOrElse(channel string, output any, orElse ...StateMovement) *StateDecision {
	return &StateDecision{movements: orElse, close: &conditionalClose{
		closeType: wire.WorkflowConditionalCloseTypeForceCompleteOnInternalChannelEmpty, channel: channel, output: output}}
}

// ForceCompleteIfSignalChannelEmptyOrElse is
// ForceCompleteIfInternalChannelEmptyOrElse for a signal channel.
func ForceCompleteIfSignalChannelEmptyOrElse(channel string, output any, orElse ...StateMovement) *StateDecision {
	return &StateDecision{movements: orElse, close: &conditionalClose{
		closeType: wire.WorkflowConditionalCloseTypeForceCompleteOnSignalChannelEmpty, channel: channel, output: output}}
}

// toWire validates the decision against the workflow and converts it.
func (d *StateDecision) toWire(cw *compiledWorkflow, enc ObjectEncoder) (*wire.StateDecision, error) {
	if d == nil || len(d.movements) == 0 {
		if d != nil && d.close != nil {
			return nil, fmt.Errorf("iwf: a conditional close needs at least one orElse state")
		}
		return nil, fmt.Errorf("iwf: empty state decision; return iwf.DeadEnd() to end this thread")
	}
	w := &wire.StateDecision{}
	if c := d.close; c != nil {
		declared := cw.internalChannels
		if c.closeType == wire.WorkflowConditionalCloseTypeForceCompleteOnSignalChannelEmpty {
			declared = cw.signalChannels
		}
		if !declared.has(c.channel) {
			return nil, fmt.Errorf("iwf: conditional close on channel %q, which workflow %q does not declare", c.channel, cw.typ)
		}
		out, err := encodeValue(enc, c.output)
		if err != nil {
			return nil, err
		}
		w.ConditionalClose = &wire.WorkflowConditionalClose{ConditionalCloseType: ptr(c.closeType), ChannelName: ptr(c.channel), CloseInput: out}
	}
	moves, err := cw.movementsToWire(d.movements, enc)
	if err != nil {
		return nil, err
	}
	if len(moves) > 1 || d.close != nil {
		for _, m := range d.movements {
			if m.reserved {
				return nil, fmt.Errorf("iwf: closing the workflow or a dead end cannot be combined with other states")
			}
		}
	}
	w.NextStates = &moves
	return w, nil
}

func (cw *compiledWorkflow) movementsToWire(ms []StateMovement, enc ObjectEncoder) ([]wire.StateMovement, error) {
	out := make([]wire.StateMovement, 0, len(ms))
	for _, m := range ms {
		input, err := encodeValue(enc, m.Input)
		if err != nil {
			return nil, err
		}
		w := wire.StateMovement{StateId: m.StateID, StateInput: input, WaitForKey: optString(m.WaitForKey)}
		if !m.reserved {
			cs := cw.states[m.StateID]
			if cs == nil {
				return nil, fmt.Errorf("iwf: next state %q is not a state of workflow %q", m.StateID, cw.typ)
			}
			w.StateOptions = cs.wire
		}
		out = append(out, w)
	}
	return out, nil
}
