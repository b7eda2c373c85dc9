package main

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/iwf-server/iwf-server/iwftest"
	"github.com/iwf-server/iwf-server/sdk-go/iwf"
)

// ledger records the charges.
type ledger struct {
	mu      sync.Mutex
	charges []int64
}

func (l *ledger) Charge(_ context.Context, _ string, period int, cents int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if period == len(l.charges)+1 { // a repeated charge is ignored
		l.charges = append(l.charges, cents)
	}
	return nil
}

func (l *ledger) Charges() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.charges)
}

func TestSubscription(t *testing.T) {
	t.Parallel()
	billing := &ledger{}
	wf := NewSubscriptionWorkflow(billing)
	registry, err := iwf.NewRegistry(wf)
	if err != nil {
		t.Fatal(err)
	}
	env := iwftest.New(t, registry, iwftest.WithFakeClock())
	ctx, client := t.Context(), env.Client()
	const id = "sub-ann"
	status := func() Status {
		t.Helper()
		s, err := iwf.InvokeRPC[Status](ctx, client, id, "", StatusRPC, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	if _, err := client.StartWorkflow(ctx, wf, id, 0, Subscription{Customer: "ann", Plan: "basic"}, nil); err != nil {
		t.Fatal(err)
	}
	env.WaitIdle() // the first period is charged at once
	if got, want := status(), (Status{Customer: "ann", Plan: "basic", Periods: 1, ChargedCents: 900, Active: true}); got != want {
		t.Fatalf("after the start: %+v, want %+v", got, want)
	}

	env.Advance(2 * Period) // two renewals
	if got := status(); got.Periods != 3 || got.ChargedCents != 3*900 {
		t.Fatalf("after two periods: %+v", got)
	}

	// Upgrade through the RPC; the next renewal charges the new price.
	if _, err := client.InvokeRPC(ctx, id, "", ChangePlanRPC, "pro", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := client.InvokeRPC(ctx, id, "", ChangePlanRPC, "platinum", nil); !iwf.IsRPCError(err) {
		t.Fatalf("unknown plan: %v, want an RPC error", err)
	}
	if got := status(); got.Plan != "pro" {
		t.Fatalf("plan %q after the change, want pro", got.Plan)
	}
	env.Advance(Period)

	if err := client.SignalWorkflow(ctx, id, "", CancelChannel, nil); err != nil {
		t.Fatal(err)
	}
	final, err := iwf.GetSimpleWorkflowResult[Status](ctx, client, id, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Status{Customer: "ann", Plan: "pro", Periods: 4, ChargedCents: 3*900 + 2900}); final != want {
		t.Fatalf("final status %+v, want %+v", final, want)
	}
	if got, want := billing.Charges(), []int64{900, 900, 900, 2900}; !slices.Equal(got, want) {
		t.Fatalf("charges %v, want %v", got, want)
	}
}
