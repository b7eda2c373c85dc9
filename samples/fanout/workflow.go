package main

import (
	"strings"

	"github.com/iwf-server/iwf-server/sdk-go/iwf"
)

// Job is the workflow's input: the documents whose words to count.
type Job struct {
	Documents []string
}

// Summary is the workflow's result: the word count of each document, in
// the order of Job.Documents, and their total.
type Summary struct {
	Words []int
	Total int
}

// part is the input of one Count: a document and its place in the job.
type part struct {
	Index int
	Text  string
}

// counted is what a Count publishes on the results channel.
type counted struct {
	Index int
	Words int
}

// resultsChannel is the internal channel on which the Counts publish and
// the Collect waits. Internal channels belong to one workflow run: they
// are how its states talk to each other.
const resultsChannel = "results"

// FanOutWorkflow counts the words of N documents in N parallel states
// (fan-out), then adds them up in one state (fan-in).
var FanOutWorkflow = &iwf.Workflow{
	Type:             "FanOutWorkflow",
	StartState:       Split{},
	States:           []iwf.WorkflowState{Count{}, Collect{}},
	InternalChannels: []string{resultsChannel},
}

// Split fans out: one decision with N+1 state movements starts N Counts
// and one Collect, which the server runs in parallel.
type Split struct{}

func (Split) ID() string { return "Split" }

func (Split) Execute(ctx iwf.Context, input iwf.Object, _ iwf.CommandResults, _ iwf.Persistence, _ iwf.Communication) (*iwf.StateDecision, error) {
	job, err := iwf.As[Job](input)
	if err != nil {
		return nil, err
	}
	moves := []iwf.StateMovement{iwf.NextState(Collect{}, len(job.Documents))}
	for i, doc := range job.Documents {
		moves = append(moves, iwf.NextState(Count{}, part{Index: i, Text: doc}))
	}
	return iwf.MultiNextStates(moves...), nil
}

// Count is one branch of the fan-out: it counts the words of one document
// and publishes the count. Its thread then ends (DeadEnd); the workflow
// goes on with the other states.
type Count struct{}

func (Count) ID() string { return "Count" }

func (Count) Execute(ctx iwf.Context, input iwf.Object, _ iwf.CommandResults, _ iwf.Persistence, c iwf.Communication) (*iwf.StateDecision, error) {
	p, err := iwf.As[part](input)
	if err != nil {
		return nil, err
	}
	// The message is sent with Execute's answer and stored atomically
	// with it: if this attempt fails and is retried, nothing is published
	// twice.
	c.PublishToInternalChannel(resultsChannel, counted{Index: p.Index, Words: len(strings.Fields(p.Text))})
	return iwf.DeadEnd(), nil
}

// Collect is the fan-in: its WaitUntil asks for N messages on the results
// channel (N commands, all of which must complete), so its Execute runs
// once every Count has published, in whatever order they finished.
type Collect struct{}

func (Collect) ID() string { return "Collect" }

func (Collect) WaitUntil(ctx iwf.Context, input iwf.Object, _ iwf.Persistence, _ iwf.Communication) (*iwf.CommandRequest, error) {
	n, err := iwf.As[int](input)
	if err != nil {
		return nil, err
	}
	commands := make([]iwf.Command, n)
	for i := range commands {
		commands[i] = iwf.InternalChannelCommand("result", resultsChannel)
	}
	return iwf.AllCommandsCompleted(commands...), nil
}

func (Collect) Execute(ctx iwf.Context, input iwf.Object, results iwf.CommandResults, _ iwf.Persistence, _ iwf.Communication) (*iwf.StateDecision, error) {
	n, err := iwf.As[int](input)
	if err != nil {
		return nil, err
	}
	sum := Summary{Words: make([]int, n)}
	for _, r := range results.InternalChannels {
		var c counted
		if err := r.Value.Get(&c); err != nil {
			return nil, err
		}
		sum.Words[c.Index] = c.Words
		sum.Total += c.Words
	}
	// Graceful completion waits for every other live state; the Counts
	// have all ended by now, so the workflow completes at once.
	return iwf.GracefulCompleteWorkflow(sum), nil
}
