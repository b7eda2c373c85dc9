package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/iwf-server/iwf-server/sdk-go/iwf"
)

// Period is the billing period. A durable timer has a fixed length, so
// "monthly" is 30 days here.
const Period = 30 * 24 * time.Hour

// Plans are the plans and their prices per period, in cents.
var Plans = map[string]int64{"basic": 900, "pro": 2900}

// CancelChannel is the signal channel that cancels the subscription.
const CancelChannel = "cancel"

// The RPC names.
const (
	StatusRPC     = "status"
	ChangePlanRPC = "changePlan"
)

// Subscription is the workflow's input.
type Subscription struct {
	Customer string
	Plan     string
}

// Status is what the status RPC returns, and the workflow's result.
type Status struct {
	Customer     string
	Plan         string // the plan of the next charge
	Periods      int    // periods charged
	ChargedCents int64  // in total
	Active       bool
}

// Billing charges customers.
type Billing interface {
	Charge(ctx context.Context, customer string, period int, cents int64) error
}

// The data attributes: the subscription's durable state, which the states
// and the RPCs read and write.
const (
	attrCustomer = "customer"
	attrPlan     = "plan"
	attrPeriods  = "periods"
	attrCharged  = "charged"
)

// NewSubscriptionWorkflow returns the subscription workflow: it charges
// each period, then waits for the next one on a durable timer, until it is
// cancelled by a signal. Clients read its status and change its plan with
// RPCs.
//
//	Subscribe ──▶ ChargePeriod ──▶ AwaitRenewal ──(cancel signal)──▶ Status{Active: false}
//	                   ▲               │
//	                   └──(30 days)────┘
//
// A decision names the next state by its ID only (ChargePeriod{} below);
// the worker runs the instances registered here, such as ChargePeriod{b}.
func NewSubscriptionWorkflow(b Billing) *iwf.Workflow {
	return &iwf.Workflow{
		Type:           "Subscription",
		StartState:     Subscribe{},
		States:         []iwf.WorkflowState{ChargePeriod{b}, AwaitRenewal{}},
		SignalChannels: []string{CancelChannel},
		DataAttributes: []string{attrCustomer, attrPlan, attrPeriods, attrCharged},
		RPCs: map[string]iwf.RPC{
			StatusRPC:     status,
			ChangePlanRPC: changePlan,
		},
	}
}

// readStatus reads the status from the data attributes.
func readStatus(p iwf.Persistence) (Status, error) {
	var s Status
	for key, ptr := range map[string]any{attrCustomer: &s.Customer, attrPlan: &s.Plan, attrPeriods: &s.Periods, attrCharged: &s.ChargedCents} {
		if err := p.GetDataAttribute(key, ptr); err != nil {
			return s, err
		}
	}
	return s, nil
}

// Subscribe records the subscription.
type Subscribe struct{}

func (Subscribe) ID() string { return "Subscribe" }

func (Subscribe) Execute(ctx iwf.Context, input iwf.Object, _ iwf.CommandResults, p iwf.Persistence, _ iwf.Communication) (*iwf.StateDecision, error) {
	sub, err := iwf.As[Subscription](input)
	if err != nil {
		return nil, err
	}
	if _, ok := Plans[sub.Plan]; !ok {
		return iwf.ForceFailWorkflow("unknown plan " + sub.Plan), nil
	}
	p.SetDataAttribute(attrCustomer, sub.Customer)
	p.SetDataAttribute(attrPlan, sub.Plan)
	return iwf.SingleNextState(ChargePeriod{}, nil), nil
}

// ChargePeriod charges the current plan for one period.
type ChargePeriod struct{ b Billing }

func (ChargePeriod) ID() string { return "ChargePeriod" }

func (st ChargePeriod) Execute(ctx iwf.Context, _ iwf.Object, _ iwf.CommandResults, p iwf.Persistence, _ iwf.Communication) (*iwf.StateDecision, error) {
	s, err := readStatus(p)
	if err != nil {
		return nil, err
	}
	price := Plans[s.Plan]
	// A failed charge is retried by the server; the period number lets
	// the billing service ignore a repeated charge.
	if err := st.b.Charge(ctx, s.Customer, s.Periods+1, price); err != nil {
		return nil, err
	}
	p.SetDataAttribute(attrPeriods, s.Periods+1)
	p.SetDataAttribute(attrCharged, s.ChargedCents+price)
	return iwf.SingleNextState(AwaitRenewal{}, nil), nil
}

// AwaitRenewal waits for the next period, or a cancellation.
type AwaitRenewal struct{}

func (AwaitRenewal) ID() string { return "AwaitRenewal" }

// WaitUntil starts a durable timer: it lives in the server's database, so
// the workflow renews even if the server and the worker restart during
// the month.
func (AwaitRenewal) WaitUntil(ctx iwf.Context, _ iwf.Object, _ iwf.Persistence, _ iwf.Communication) (*iwf.CommandRequest, error) {
	return iwf.AnyCommandCompleted(
		iwf.TimerCommand("renewal", Period),
		iwf.SignalCommand("cancel", CancelChannel),
	), nil
}

func (AwaitRenewal) Execute(ctx iwf.Context, _ iwf.Object, results iwf.CommandResults, p iwf.Persistence, _ iwf.Communication) (*iwf.StateDecision, error) {
	if cancel, _ := results.SignalByChannel(CancelChannel); cancel.Received() {
		s, err := readStatus(p)
		if err != nil {
			return nil, err
		}
		return iwf.GracefulCompleteWorkflow(s), nil // Active is false
	}
	return iwf.SingleNextState(ChargePeriod{}, nil), nil
}

// status is the status RPC. An RPC runs on the worker with the workflow's
// data attributes, like a state, but answers the caller synchronously.
func status(ctx iwf.Context, _ iwf.Object, p iwf.Persistence, _ iwf.Communication) (any, error) {
	s, err := readStatus(p)
	s.Active = true // an RPC reaches running workflows only
	return s, err
}

// changePlan is the changePlan RPC: its input is the new plan, which the
// next charge uses. Its write is applied atomically with its answer; an
// error reaches the caller (iwf.IsRPCError) and writes nothing.
func changePlan(ctx iwf.Context, input iwf.Object, p iwf.Persistence, _ iwf.Communication) (any, error) {
	plan, err := iwf.As[string](input)
	if err != nil {
		return nil, err
	}
	if _, ok := Plans[plan]; !ok {
		return nil, &iwf.WorkerError{StatusCode: http.StatusBadRequest, ErrorType: "UnknownPlan", Detail: fmt.Sprintf("no plan %q", plan)}
	}
	p.SetDataAttribute(attrPlan, plan)
	return nil, nil
}
