package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/iwftest"
	"github.com/iwf-server/iwf-server/sdk-go/iwf"
)

// fakeShop implements the three services, records the calls and fails the
// calls listed in reject (with ErrRejected) or flaky (once, with a
// transient error).
type fakeShop struct {
	reject, flaky string

	mu    sync.Mutex
	calls []string
}

func (f *fakeShop) call(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, name)
	switch name {
	case f.reject:
		return fmt.Errorf("%s refused: %w", name, ErrRejected)
	case f.flaky:
		f.flaky = ""
		return errors.New("connection reset")
	}
	return nil
}

func (f *fakeShop) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeShop) Reserve(context.Context, Order) error { return f.call("reserve") }
func (f *fakeShop) Release(context.Context, Order) error { return f.call("release") }
func (f *fakeShop) Charge(context.Context, Order) error  { return f.call("charge") }
func (f *fakeShop) Refund(context.Context, Order) error  { return f.call("refund") }
func (f *fakeShop) Ship(_ context.Context, o Order) (string, error) {
	return "TRK-" + o.ID, f.call("ship")
}

func start(t *testing.T, shop *fakeShop, opts ...iwftest.Option) (*iwftest.Env, *iwf.Workflow) {
	t.Helper()
	wf := NewOrderWorkflow(Services{Inventory: shop, Payments: shop, Shipping: shop})
	registry, err := iwf.NewRegistry(wf)
	if err != nil {
		t.Fatal(err)
	}
	env := iwftest.New(t, registry, opts...)
	order := Order{ID: "o-1", Item: "book", Quantity: 1, AmountCents: 1500, Address: "1 Main St"}
	if _, err := env.Client().StartWorkflow(t.Context(), wf, order.ID, time.Hour, order, nil); err != nil {
		t.Fatal(err)
	}
	return env, wf
}

func TestOrderSaga(t *testing.T) {
	for _, tc := range []struct {
		rejectAt  string
		wantCalls []string
		want      Outcome
	}{
		{"", []string{"reserve", "charge", "ship"}, Outcome{Status: "shipped", TrackingID: "TRK-o-1"}},
		{"reserve", []string{"reserve"}, Outcome{Status: "rolled back", FailedStep: "reserve"}},
		{"charge", []string{"reserve", "charge", "release"}, Outcome{Status: "rolled back", FailedStep: "charge"}},
		{"ship", []string{"reserve", "charge", "ship", "refund", "release"}, Outcome{Status: "rolled back", FailedStep: "ship"}},
	} {
		t.Run("reject="+tc.rejectAt, func(t *testing.T) {
			t.Parallel()
			shop := &fakeShop{reject: tc.rejectAt}
			env, _ := start(t, shop)
			got, err := iwf.GetSimpleWorkflowResult[Outcome](t.Context(), env.Client(), "o-1", "")
			if err != nil {
				t.Fatal(err)
			}
			if tc.rejectAt != "" {
				tc.want.Reason = tc.rejectAt + " refused: rejected"
			}
			if got != tc.want {
				t.Errorf("outcome %+v, want %+v", got, tc.want)
			}
			if calls := shop.Calls(); !slices.Equal(calls, tc.wantCalls) {
				t.Errorf("calls %v, want %v", calls, tc.wantCalls)
			}
		})
	}
}

// A transient error is not a rejection: the server retries the step after
// its backoff (1 s by default) and the saga goes on; nothing is undone.
func TestTransientErrorIsRetriedNotCompensated(t *testing.T) {
	t.Parallel()
	shop := &fakeShop{flaky: "charge"}
	env, _ := start(t, shop, iwftest.WithFakeClock())

	env.WaitIdle()
	if calls := shop.Calls(); !slices.Equal(calls, []string{"reserve", "charge"}) {
		t.Fatalf("before the backoff: calls %v", calls)
	}
	env.Advance(time.Second)
	got, err := iwf.GetSimpleWorkflowResult[Outcome](t.Context(), env.Client(), "o-1", "")
	if err != nil || got.Status != "shipped" {
		t.Fatalf("outcome %+v, %v", got, err)
	}
	if calls := shop.Calls(); !slices.Equal(calls, []string{"reserve", "charge", "charge", "ship"}) {
		t.Fatalf("calls %v", calls)
	}
}
