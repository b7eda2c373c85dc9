package main

import (
	"context"
	"time"

	"github.com/iwf-server/iwf-server/sdk-go/iwf"
)

// ApprovalTimeout is how long a draft waits for a human decision before
// the job is rejected.
const ApprovalTimeout = 48 * time.Hour

// ApprovalChannel is the signal channel of the reviewer's decision.
const ApprovalChannel = "approval"

// ProgressAttribute is the data attribute holding the job's Progress,
// which applications read with Client.GetWorkflowDataAttributes while the
// job runs.
const ProgressAttribute = "progress"

// The stages of Progress.
const (
	StageGenerating = "generating"
	StageReview     = "awaiting review"
	StageApproved   = "approved"
	StageRejected   = "rejected"
)

// Job is the workflow's input.
type Job struct {
	Prompt string
}

// Progress is the job's progress as applications see it.
type Progress struct {
	Stage    string
	Attempts int    // model calls it took to get the draft
	Draft    string // once generated
}

// Decision is the value of the approval signal.
type Decision struct {
	Approved bool
	Reviewer string
}

// Outcome is the workflow's result.
type Outcome struct {
	Approved bool
	Text     string // the approved draft
	Reviewer string
	Reason   string // why it was rejected
}

// Model generates text. Real models time out and fail now and then.
type Model interface {
	Generate(ctx context.Context, prompt string) (string, error)
}

// NewAIJobWorkflow returns the AI job workflow: generate a draft with a
// flaky model (retried with backoff), then wait for a reviewer's decision
// for at most ApprovalTimeout.
//
//	Generate ──▶ AwaitReview ──(approval signal)──▶ Outcome{Approved: decision}
//	(retried)         └───────(48 h timer)────────▶ Outcome{Approved: false}
func NewAIJobWorkflow(m Model) *iwf.Workflow {
	return &iwf.Workflow{
		Type:           "AIJob",
		StartState:     Generate{m},
		States:         []iwf.WorkflowState{AwaitReview{}},
		SignalChannels: []string{ApprovalChannel},
		DataAttributes: []string{ProgressAttribute},
	}
}

// Generate calls the model.
type Generate struct{ m Model }

func (Generate) ID() string { return "Generate" }

// Options sets how the server retries Execute when it fails: after 2 s,
// then 4 s, 8 s, ... at most 60 s apart, at most 6 attempts. When they are
// used up the workflow fails (a StateOptions.ExecuteFailurePolicy could
// move it to a fallback state instead). Each attempt may take 2 minutes.
func (Generate) Options() *iwf.StateOptions {
	return &iwf.StateOptions{
		ExecuteTimeout: 2 * time.Minute,
		ExecuteRetryPolicy: &iwf.RetryPolicy{
			InitialInterval:    2 * time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
			MaximumAttempts:    6,
		},
	}
}

// WaitUntil waits for nothing (a nil CommandRequest); it runs once, before
// the Execute attempts, and records the stage. A failed Execute attempt
// writes nothing, so this is the place for "started generating".
func (Generate) WaitUntil(ctx iwf.Context, _ iwf.Object, p iwf.Persistence, _ iwf.Communication) (*iwf.CommandRequest, error) {
	p.SetDataAttribute(ProgressAttribute, Progress{Stage: StageGenerating})
	return nil, nil
}

func (st Generate) Execute(ctx iwf.Context, input iwf.Object, _ iwf.CommandResults, p iwf.Persistence, _ iwf.Communication) (*iwf.StateDecision, error) {
	job, err := iwf.As[Job](input)
	if err != nil {
		return nil, err
	}
	draft, err := st.m.Generate(ctx, job.Prompt)
	if err != nil {
		return nil, err // the server retries per Options
	}
	p.SetDataAttribute(ProgressAttribute, Progress{Stage: StageReview, Attempts: ctx.Attempt(), Draft: draft})
	return iwf.SingleNextState(AwaitReview{}, draft), nil
}

// AwaitReview waits for the reviewer, or gives up.
type AwaitReview struct{}

func (AwaitReview) ID() string { return "AwaitReview" }

func (AwaitReview) WaitUntil(ctx iwf.Context, _ iwf.Object, _ iwf.Persistence, _ iwf.Communication) (*iwf.CommandRequest, error) {
	return iwf.AnyCommandCompleted(
		iwf.SignalCommand("decision", ApprovalChannel),
		iwf.TimerCommand("timeout", ApprovalTimeout),
	), nil
}

func (AwaitReview) Execute(ctx iwf.Context, input iwf.Object, results iwf.CommandResults, p iwf.Persistence, _ iwf.Communication) (*iwf.StateDecision, error) {
	draft, err := iwf.As[string](input)
	if err != nil {
		return nil, err
	}
	var progress Progress
	if err := p.GetDataAttribute(ProgressAttribute, &progress); err != nil {
		return nil, err
	}
	out := Outcome{Reason: "no decision within " + ApprovalTimeout.String()}
	if signal, _ := results.SignalByChannel(ApprovalChannel); signal.Received() {
		var d Decision
		if err := signal.Value.Get(&d); err != nil {
			return nil, err
		}
		out = Outcome{Approved: d.Approved, Reviewer: d.Reviewer}
		if d.Approved {
			out.Text = draft
		} else {
			out.Reason = "rejected by " + d.Reviewer
		}
	}
	progress.Stage = StageRejected
	if out.Approved {
		progress.Stage = StageApproved
	}
	p.SetDataAttribute(ProgressAttribute, progress)
	return iwf.GracefulCompleteWorkflow(out), nil
}
