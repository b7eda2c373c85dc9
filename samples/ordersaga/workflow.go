package main

import (
	"context"
	"errors"

	"github.com/iwf-server/iwf-server/sdk-go/iwf"
)

// Order is the workflow's input.
type Order struct {
	ID          string
	Item        string
	Quantity    int
	AmountCents int64
	Address     string
}

// Outcome is the workflow's result.
type Outcome struct {
	// Status is "shipped", or "rolled back" when a step was rejected and
	// the steps before it were undone.
	Status     string
	FailedStep string // "reserve", "charge" or "ship" when rolled back
	Reason     string // why that step was rejected
	TrackingID string // when shipped
}

// ErrRejected marks a business rejection: out of stock, card declined,
// address not served. A step that is rejected will not succeed on retry,
// so the saga compensates. Any other error is treated as transient.
var ErrRejected = errors.New("rejected")

// The services the saga coordinates. Calls are keyed by order id, so
// repeating one (a retry after a timeout) does no harm.
type (
	Inventory interface {
		Reserve(ctx context.Context, o Order) error
		Release(ctx context.Context, o Order) error
	}
	Payments interface {
		Charge(ctx context.Context, o Order) error
		Refund(ctx context.Context, o Order) error
	}
	Shipping interface {
		Ship(ctx context.Context, o Order) (trackingID string, err error)
	}
)

// Services are the saga's dependencies.
type Services struct {
	Inventory Inventory
	Payments  Payments
	Shipping  Shipping
}

// NewOrderWorkflow returns the order saga: Reserve, Charge, Ship. When a
// step is rejected, compensating states undo the steps that succeeded, in
// reverse order: Refund undoes Charge, Release undoes Reserve.
//
//	Reserve ──▶ Charge ──▶ Ship ──▶ shipped
//	   │           │         │
//	   │           │         ▼
//	   │           │       Refund
//	   │           ▼         │
//	   │        Release ◀────┘
//	   ▼           │
//	rolled back ◀──┘
func NewOrderWorkflow(s Services) *iwf.Workflow {
	return &iwf.Workflow{
		Type:       "OrderSaga",
		StartState: Reserve{s},
		States:     []iwf.WorkflowState{Charge{s}, Ship{s}, Refund{s}, Release{s}},
	}
}

// rollback is the input of the compensating states: the order and what
// went wrong.
type rollback struct {
	Order      Order
	FailedStep string
	Reason     string
}

func (r rollback) outcome() Outcome {
	return Outcome{Status: "rolled back", FailedStep: r.FailedStep, Reason: r.Reason}
}

// Every step follows one rule. A rejection is an outcome, not an error:
// Execute decides to compensate. Any other error is returned: the server
// retries the step with backoff (by default forever, every 1 s doubling up
// to 100 s) until the service answers. The compensating states only ever
// return errors: an undo must eventually succeed.

// Reserve reserves the items.
type Reserve struct{ s Services }

func (Reserve) ID() string { return "Reserve" }

func (st Reserve) Execute(ctx iwf.Context, input iwf.Object, _ iwf.CommandResults, _ iwf.Persistence, _ iwf.Communication) (*iwf.StateDecision, error) {
	o, err := iwf.As[Order](input)
	if err != nil {
		return nil, err
	}
	if err := st.s.Inventory.Reserve(ctx, o); errors.Is(err, ErrRejected) {
		// Nothing was done yet, so there is nothing to undo.
		return iwf.GracefulCompleteWorkflow(rollback{o, "reserve", err.Error()}.outcome()), nil
	} else if err != nil {
		return nil, err
	}
	return iwf.SingleNextState(Charge{st.s}, o), nil
}

// Charge charges the payment.
type Charge struct{ s Services }

func (Charge) ID() string { return "Charge" }

func (st Charge) Execute(ctx iwf.Context, input iwf.Object, _ iwf.CommandResults, _ iwf.Persistence, _ iwf.Communication) (*iwf.StateDecision, error) {
	o, err := iwf.As[Order](input)
	if err != nil {
		return nil, err
	}
	if err := st.s.Payments.Charge(ctx, o); errors.Is(err, ErrRejected) {
		return iwf.SingleNextState(Release{st.s}, rollback{o, "charge", err.Error()}), nil
	} else if err != nil {
		return nil, err
	}
	return iwf.SingleNextState(Ship{st.s}, o), nil
}

// Ship hands the order to the carrier.
type Ship struct{ s Services }

func (Ship) ID() string { return "Ship" }

func (st Ship) Execute(ctx iwf.Context, input iwf.Object, _ iwf.CommandResults, _ iwf.Persistence, _ iwf.Communication) (*iwf.StateDecision, error) {
	o, err := iwf.As[Order](input)
	if err != nil {
		return nil, err
	}
	tracking, err := st.s.Shipping.Ship(ctx, o)
	if errors.Is(err, ErrRejected) {
		return iwf.SingleNextState(Refund{st.s}, rollback{o, "ship", err.Error()}), nil
	} else if err != nil {
		return nil, err
	}
	return iwf.GracefulCompleteWorkflow(Outcome{Status: "shipped", TrackingID: tracking}), nil
}

// Refund compensates Charge, then goes on to undo Reserve.
type Refund struct{ s Services }

func (Refund) ID() string { return "Refund" }

func (st Refund) Execute(ctx iwf.Context, input iwf.Object, _ iwf.CommandResults, _ iwf.Persistence, _ iwf.Communication) (*iwf.StateDecision, error) {
	rb, err := iwf.As[rollback](input)
	if err != nil {
		return nil, err
	}
	if err := st.s.Payments.Refund(ctx, rb.Order); err != nil {
		return nil, err
	}
	return iwf.SingleNextState(Release{st.s}, rb), nil
}

// Release compensates Reserve, the first step, so the rollback is done.
type Release struct{ s Services }

func (Release) ID() string { return "Release" }

func (st Release) Execute(ctx iwf.Context, input iwf.Object, _ iwf.CommandResults, _ iwf.Persistence, _ iwf.Communication) (*iwf.StateDecision, error) {
	rb, err := iwf.As[rollback](input)
	if err != nil {
		return nil, err
	}
	if err := st.s.Inventory.Release(ctx, rb.Order); err != nil {
		return nil, err
	}
	return iwf.GracefulCompleteWorkflow(rb.outcome()), nil
}
