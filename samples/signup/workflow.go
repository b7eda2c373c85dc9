package main

import (
	"context"
	"time"

	"github.com/iwf-server/iwf-server/sdk-go/iwf"
)

// ReminderInterval is how long the workflow waits for the verification
// before it sends a reminder; MaxReminders is how many it sends before it
// gives up.
const (
	ReminderInterval = 24 * time.Hour
	MaxReminders     = 3
)

// VerifiedChannel is the signal channel on which the application reports
// that the user clicked the link in the email.
const VerifiedChannel = "verified"

// Result is the workflow's result.
type Result struct {
	Email     string
	Verified  bool // false: the workflow gave up
	Reminders int  // reminders sent
}

// Mailer sends emails.
type Mailer interface {
	Send(ctx context.Context, to, subject string) error
}

// NewSignUpWorkflow returns the sign-up workflow. Its input is the user's
// email address; it emails a verification link, then waits for the
// "verified" signal OR the reminder timer, whichever comes first:
//
//	SendVerification ──▶ AwaitVerification ──(verified)──▶ Result{Verified: true}
//	                        ▲          │
//	                        └─(24 h: remind)
//	                                   └──(24 h, 3 reminders sent)──▶ Result{Verified: false}
func NewSignUpWorkflow(m Mailer) *iwf.Workflow {
	return &iwf.Workflow{
		Type:           "SignUp",
		StartState:     SendVerification{m},
		States:         []iwf.WorkflowState{AwaitVerification{m}},
		SignalChannels: []string{VerifiedChannel},
	}
}

// pending is the input of AwaitVerification: the state of the sign-up is
// carried from one execution to the next.
type pending struct {
	Email     string
	Reminders int
}

// SendVerification emails the link.
type SendVerification struct{ m Mailer }

func (SendVerification) ID() string { return "SendVerification" }

func (st SendVerification) Execute(ctx iwf.Context, input iwf.Object, _ iwf.CommandResults, _ iwf.Persistence, _ iwf.Communication) (*iwf.StateDecision, error) {
	email, err := iwf.As[string](input)
	if err != nil {
		return nil, err
	}
	if err := st.m.Send(ctx, email, "Please verify your email address"); err != nil {
		return nil, err // retried by the server
	}
	return iwf.SingleNextState(AwaitVerification{st.m}, pending{Email: email}), nil
}

// AwaitVerification waits for whichever comes first.
type AwaitVerification struct{ m Mailer }

func (AwaitVerification) ID() string { return "AwaitVerification" }

// WaitUntil asks for two commands and completes when ANY of them has: a
// message on the signal channel, or the durable timer. The server keeps
// both; a signal sent while nobody waits is buffered for the next wait.
func (AwaitVerification) WaitUntil(ctx iwf.Context, input iwf.Object, _ iwf.Persistence, _ iwf.Communication) (*iwf.CommandRequest, error) {
	return iwf.AnyCommandCompleted(
		iwf.SignalCommand("verified", VerifiedChannel),
		iwf.TimerCommand("reminder", ReminderInterval),
	), nil
}

// Execute looks at which command completed.
func (st AwaitVerification) Execute(ctx iwf.Context, input iwf.Object, results iwf.CommandResults, _ iwf.Persistence, _ iwf.Communication) (*iwf.StateDecision, error) {
	p, err := iwf.As[pending](input)
	if err != nil {
		return nil, err
	}
	if signal, _ := results.SignalByChannel(VerifiedChannel); signal.Received() {
		return iwf.GracefulCompleteWorkflow(Result{Email: p.Email, Verified: true, Reminders: p.Reminders}), nil
	}
	// The timer fired.
	if p.Reminders == MaxReminders {
		return iwf.GracefulCompleteWorkflow(Result{Email: p.Email, Reminders: p.Reminders}), nil
	}
	if err := st.m.Send(ctx, p.Email, "Reminder: please verify your email address"); err != nil {
		return nil, err
	}
	p.Reminders++
	// Loop: a new execution of the same state, with a new timer.
	return iwf.SingleNextState(AwaitVerification{st.m}, p), nil
}
