package main

import (
	"time"

	"github.com/iwf-server/iwf-server/sdk-go/iwf"
)

// AskName waits for a message on the "name" signal channel, for at most
// ten minutes.
type AskName struct{}

// ID names the state.
func (AskName) ID() string { return "AskName" }

// WaitUntil waits for the name, or gives up after ten minutes.
func (AskName) WaitUntil(ctx iwf.Context, input iwf.Object, p iwf.Persistence, c iwf.Communication) (*iwf.CommandRequest, error) {
	return iwf.AnyCommandCompleted(
		iwf.SignalCommand("got-name", "name"),
		iwf.TimerCommand("give-up", 10*time.Minute),
	), nil
}

// Execute keeps the name and moves on to Greet, or fails the workflow when
// nobody sent one.
func (AskName) Execute(ctx iwf.Context, input iwf.Object, results iwf.CommandResults, p iwf.Persistence, c iwf.Communication) (*iwf.StateDecision, error) {
	signal, _ := results.SignalByChannel("name")
	if !signal.Received() {
		return iwf.ForceFailWorkflow("nobody told me their name"), nil
	}
	var name string
	if err := signal.Value.Get(&name); err != nil {
		return nil, err
	}
	p.SetDataAttribute("name", name)
	return iwf.SingleNextState(Greet{}, name), nil
}

// Greet has no WaitUntil, so it executes as soon as the workflow reaches it.
type Greet struct{}

// ID names the state.
func (Greet) ID() string { return "Greet" }

// Execute completes the workflow with the greeting.
func (Greet) Execute(ctx iwf.Context, input iwf.Object, results iwf.CommandResults, p iwf.Persistence, c iwf.Communication) (*iwf.StateDecision, error) {
	name, err := iwf.As[string](input)
	if err != nil {
		return nil, err
	}
	return iwf.GracefulCompleteWorkflow("Hello, " + name + "!"), nil
}

// HelloWorkflow asks for a name by signal and greets it.
var HelloWorkflow = &iwf.Workflow{
	Type:           "HelloWorkflow",
	StartState:     AskName{},
	States:         []iwf.WorkflowState{Greet{}},
	SignalChannels: []string{"name"},
	DataAttributes: []string{"name"},
}
