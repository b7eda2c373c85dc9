package iwf

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/iwf-server/iwf-server/sdk-go/internal/wire"
)

// Workflow defines a workflow type: its states and everything its code may
// touch. The server runs it by calling the worker (NewWorkerService) for
// each state; the client (NewClient) starts it by Type.
//
//	var OrderWorkflow = &iwf.Workflow{
//		Type:           "OrderWorkflow",
//		StartState:     &WaitPayment{},
//		States:         []iwf.WorkflowState{&Ship{}},
//		SignalChannels: []string{"payment"},
//		DataAttributes: []string{"paidAt"},
//	}
//
// The channel names and attribute keys are a schema the SDK enforces: a
// state that waits on, publishes to or writes something undeclared fails
// its API call. A name ending in "*" declares a prefix: "order-*" allows
// "order-1", "order-2" and so on.
type Workflow struct {
	// Type is the workflow type (iwfWorkflowType on the wire); required and
	// unique within a Registry.
	Type string
	// StartState is the first state. Nil starts the workflow with no state:
	// it then waits until an RPC moves it to one.
	StartState WorkflowState
	// States lists the other states. Listing StartState again is allowed.
	States []WorkflowState
	// SignalChannels are the channels clients signal (Client.SignalWorkflow)
	// and states wait on (SignalCommand).
	SignalChannels []string
	// InternalChannels are the channels states and RPCs publish to and
	// states wait on (InternalChannelCommand).
	InternalChannels []string
	// DataAttributes are the keys of the workflow's data attributes.
	DataAttributes []string
	// SearchAttributes are the search attributes the workflow writes, with
	// their types. Their keys must also be known to the server.
	SearchAttributes []SearchAttributeDef
	// RPCs are the workflow's RPC methods by name (Client.InvokeRPC).
	RPCs map[string]RPC
}

// WorkflowState is one state of a workflow. Execute is required; a state
// may also implement StateWithWaitUntil and StateWithOptions.
//
// Execute runs once the state's commands (see StateWithWaitUntil) are
// complete, or at once when the state has no WaitUntil, and decides what
// happens next. It receives the state's input, the command results, the
// workflow's persistence and its communication. A returned error fails the
// attempt (the server retries it per the state's options); so does a panic.
type WorkflowState interface {
	// ID names the state uniquely within its workflow. It must not start
	// with "_SYS_".
	ID() string
	Execute(ctx Context, input Object, results CommandResults, persistence Persistence, communication Communication) (*StateDecision, error)
}

// StateWithWaitUntil is a WorkflowState with a WaitUntil step. WaitUntil
// runs first and returns the commands (timers, channel waits) that must
// complete before Execute runs; a nil *CommandRequest means none. State
// locals set here are readable in Execute.
//
// States without WaitUntil are started with skipWaitUntil automatically.
type StateWithWaitUntil interface {
	WorkflowState
	WaitUntil(ctx Context, input Object, persistence Persistence, communication Communication) (*CommandRequest, error)
}

// StateWithOptions is a WorkflowState with non-default StateOptions. Options
// is called once, when the workflow is registered (NewRegistry) or started
// (Client.StartWorkflow).
type StateWithOptions interface {
	WorkflowState
	Options() *StateOptions
}

// RPC is a workflow's RPC method. It runs on the worker when a client calls
// Client.InvokeRPC, reads and writes the workflow's persistence, publishes
// to internal channels and may move the workflow to new states
// (Communication.TriggerStateMovements). Its output is returned to the
// caller; a returned error reaches the caller as an *APIError (IsRPCError)
// carrying the worker's status, error type and detail.
type RPC func(ctx Context, input Object, persistence Persistence, communication Communication) (output any, err error)

// Context is the context of a state API or RPC call: a context.Context
// (cancelled when the server gives up on the call) with the workflow's
// identity.
type Context interface {
	context.Context
	// WorkflowID is the workflow's id.
	WorkflowID() string
	// WorkflowRunID is the id of the current run.
	WorkflowRunID() string
	// WorkflowStartedAt is when the run started (second precision).
	WorkflowStartedAt() time.Time
	// StateExecutionID identifies this state execution, e.g. "Ship-1";
	// empty in an RPC.
	StateExecutionID() string
	// Attempt is 1 for the first attempt of this API call and grows with
	// each retry; 0 in an RPC.
	Attempt() int
	// FirstAttemptAt is when the first attempt of this API call was
	// scheduled; zero in an RPC.
	FirstAttemptAt() time.Time
}

type callContext struct {
	context.Context
	w wire.Context
}

func (c *callContext) WorkflowID() string    { return c.w.WorkflowId }
func (c *callContext) WorkflowRunID() string { return c.w.WorkflowRunId }
func (c *callContext) WorkflowStartedAt() time.Time {
	return time.Unix(c.w.WorkflowStartedTimestamp, 0)
}
func (c *callContext) StateExecutionID() string { return deref(c.w.StateExecutionId) }
func (c *callContext) Attempt() int             { return int(deref(c.w.Attempt)) }
func (c *callContext) FirstAttemptAt() time.Time {
	if c.w.FirstAttemptTimestamp == nil {
		return time.Time{}
	}
	return time.Unix(*c.w.FirstAttemptTimestamp, 0)
}

// StateExecutionID returns the id of the n-th execution (from 1) of a state
// within a run, e.g. StateExecutionID("Ship", 1) is "Ship-1". Use it with
// Client.SkipTimerByID and Client.WaitForStateExecutionCompletion.
func StateExecutionID(stateID string, n int) string { return fmt.Sprintf("%s-%d", stateID, n) }

// Registry holds the workflows a worker serves. It is immutable and safe
// for concurrent use.
type Registry struct {
	workflows map[string]*compiledWorkflow
}

// NewRegistry validates the workflows and returns a registry of them; later
// changes to the Workflow values do not affect it. It
// reports the first problem: a missing type, a duplicate type or state id,
// a state id starting with "_SYS_", an unknown ExecuteFailureProceedStateID,
// an invalid search attribute type, an unnamed or nil RPC.
func NewRegistry(workflows ...*Workflow) (*Registry, error) {
	r := &Registry{workflows: map[string]*compiledWorkflow{}}
	for _, wf := range workflows {
		cw, err := compileWorkflow(wf)
		if err != nil {
			return nil, err
		}
		if _, dup := r.workflows[cw.typ]; dup {
			return nil, fmt.Errorf("iwf: workflow type %q registered twice", cw.typ)
		}
		r.workflows[cw.typ] = cw
	}
	return r, nil
}

// WorkflowTypes lists the registered workflow types, sorted.
func (r *Registry) WorkflowTypes() []string {
	if r == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(r.workflows))
}

func (r *Registry) lookup(workflowType string) *compiledWorkflow {
	if r == nil {
		return nil
	}
	return r.workflows[workflowType]
}

// compiledWorkflow is a validated Workflow with its lookups and the wire
// options of each state.
type compiledWorkflow struct {
	typ              string
	states           map[string]*compiledState
	signalChannels   nameSet
	internalChannels nameSet
	dataAttributes   nameSet
	searchAttributes map[string]SearchAttributeType
	rpcs             map[string]RPC
}

type compiledState struct {
	state     WorkflowState
	waitUntil StateWithWaitUntil // nil: skip WaitUntil
	options   *StateOptions
	wire      *wire.WorkflowStateOptions // what a movement to this state carries; nil if nothing
}

func compileWorkflow(wf *Workflow) (*compiledWorkflow, error) {
	if wf == nil {
		return nil, fmt.Errorf("iwf: nil workflow")
	}
	if wf.Type == "" {
		return nil, fmt.Errorf("iwf: workflow has no Type")
	}
	cw := &compiledWorkflow{
		typ:              wf.Type,
		states:           map[string]*compiledState{},
		signalChannels:   newNameSet(wf.SignalChannels),
		internalChannels: newNameSet(wf.InternalChannels),
		dataAttributes:   newNameSet(wf.DataAttributes),
		searchAttributes: map[string]SearchAttributeType{},
		rpcs:             maps.Clone(wf.RPCs),
	}
	all := wf.States
	if wf.StartState != nil {
		all = append([]WorkflowState{wf.StartState}, wf.States...)
	}
	for _, s := range all {
		if s == nil {
			return nil, fmt.Errorf("iwf: workflow %q: nil state", wf.Type)
		}
		id := s.ID()
		switch {
		case id == "":
			return nil, fmt.Errorf("iwf: workflow %q: state %T has an empty ID", wf.Type, s)
		case strings.HasPrefix(id, reservedStatePrefix):
			return nil, fmt.Errorf("iwf: workflow %q: state id %q uses the reserved prefix %s", wf.Type, id, reservedStatePrefix)
		}
		if prev, dup := cw.states[id]; dup {
			if sameState(prev.state, s) {
				continue // StartState listed again in States
			}
			return nil, fmt.Errorf("iwf: workflow %q: two states with id %q", wf.Type, id)
		}
		cs := &compiledState{state: s}
		cs.waitUntil, _ = s.(StateWithWaitUntil)
		if so, ok := s.(StateWithOptions); ok {
			cs.options = so.Options()
		}
		cw.states[id] = cs
	}
	for id, cs := range cw.states {
		o := cs.options
		if o == nil || o.ExecuteFailurePolicy != ProceedToConfiguredState {
			continue
		}
		if o.ExecuteFailureProceedStateID == "" {
			return nil, fmt.Errorf("iwf: workflow %q: state %q uses ProceedToConfiguredState without ExecuteFailureProceedStateID", wf.Type, id)
		}
		if cw.states[o.ExecuteFailureProceedStateID] == nil {
			return nil, fmt.Errorf("iwf: workflow %q: state %q proceeds to unknown state %q", wf.Type, id, o.ExecuteFailureProceedStateID)
		}
	}
	for id, cs := range cw.states {
		if w := cw.wireOptions(id, map[string]bool{}); *w != (wire.WorkflowStateOptions{}) {
			cs.wire = w
		}
	}
	for _, sa := range wf.SearchAttributes {
		if sa.Key == "" || !sa.Type.valid() {
			return nil, fmt.Errorf("iwf: workflow %q: invalid search attribute %q of type %q", wf.Type, sa.Key, sa.Type)
		}
		cw.searchAttributes[sa.Key] = sa.Type
	}
	for name, fn := range wf.RPCs {
		if name == "" || fn == nil {
			return nil, fmt.Errorf("iwf: workflow %q: RPC %q must have a name and a function", wf.Type, name)
		}
	}
	return cw, nil
}

// wireOptions builds the wire options of a state, including the options of
// the state it proceeds to on execute failure (recursively; a cycle is cut
// where it closes).
func (cw *compiledWorkflow) wireOptions(id string, visiting map[string]bool) *wire.WorkflowStateOptions {
	cs := cw.states[id]
	w := cs.options.toWire()
	if cs.waitUntil == nil {
		w.SkipWaitUntil = ptr(true)
	}
	visiting[id] = true
	defer delete(visiting, id)
	if o := cs.options; o != nil && o.ExecuteFailurePolicy == ProceedToConfiguredState {
		if next := o.ExecuteFailureProceedStateID; !visiting[next] {
			if nested := cw.wireOptions(next, visiting); *nested != (wire.WorkflowStateOptions{}) {
				w.ExecuteApiFailureProceedStateOptions = nested
			}
		}
	}
	return w
}

// sameState reports whether two states are the same value, without
// panicking on values of incomparable types.
func sameState(a, b WorkflowState) bool {
	ta := reflect.TypeOf(a)
	return ta == reflect.TypeOf(b) && ta.Comparable() && a == b
}

// nameSet matches names against declared names and prefixes ("x*").
type nameSet struct {
	exact    map[string]bool
	prefixes []string
}

func newNameSet(names []string) nameSet {
	s := nameSet{exact: map[string]bool{}}
	for _, n := range names {
		if p, ok := strings.CutSuffix(n, "*"); ok {
			s.prefixes = append(s.prefixes, p)
		} else {
			s.exact[n] = true
		}
	}
	return s
}

func (s nameSet) has(name string) bool {
	if s.exact[name] {
		return true
	}
	for _, p := range s.prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
