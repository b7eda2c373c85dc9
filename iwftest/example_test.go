package iwftest_test

import (
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/iwftest"
	"github.com/iwf-server/iwf-server/sdk-go/iwf"
)

// Reminder waits a day, then completes the workflow.
type Reminder struct{}

func (Reminder) ID() string { return "Reminder" }

func (Reminder) WaitUntil(ctx iwf.Context, input iwf.Object, p iwf.Persistence, c iwf.Communication) (*iwf.CommandRequest, error) {
	return iwf.AllCommandsCompleted(iwf.TimerCommand("day", 24*time.Hour)), nil
}

func (Reminder) Execute(ctx iwf.Context, input iwf.Object, r iwf.CommandResults, p iwf.Persistence, c iwf.Communication) (*iwf.StateDecision, error) {
	return iwf.GracefulCompleteWorkflow("time to call mum"), nil
}

var ReminderWorkflow = &iwf.Workflow{Type: "Reminder", StartState: Reminder{}}

// A test of a workflow that sleeps for a day. With the fake clock it
// completes as soon as the test advances the clock by a day.
//
// (Examples get no *testing.T, so this one is compiled but not run; the
// body is that of func TestReminder(t *testing.T). The same flow runs in
// this package's tests.)
func ExampleNew() {
	var t *testing.T // the test's t

	registry, err := iwf.NewRegistry(ReminderWorkflow)
	if err != nil {
		t.Fatal(err)
	}
	env := iwftest.New(t, registry, iwftest.WithFakeClock())
	ctx := t.Context()

	if _, err := env.Client().StartWorkflow(ctx, ReminderWorkflow, "reminder-1", 0, nil, nil); err != nil {
		t.Fatal(err)
	}
	env.Advance(24 * time.Hour) // the timer fires; Advance returns once the workflow has moved on

	msg, err := iwf.GetSimpleWorkflowResult[string](ctx, env.Client(), "reminder-1", "")
	if err != nil || msg != "time to call mum" {
		t.Fatalf("got %q, %v", msg, err)
	}
}

// WaitIdle lets a test look at a running workflow once it is waiting, here
// for a signal.
func ExampleEnv_WaitIdle() {
	var t *testing.T // the test's t

	registry, _ := iwf.NewRegistry(greetWorkflow)
	env := iwftest.New(t, registry)
	ctx := t.Context()

	_, _ = env.Client().StartWorkflow(ctx, greetWorkflow, "greet-1", time.Minute, nil, nil)
	env.WaitIdle() // Greet's WaitUntil has run; the workflow waits for the "name" signal
	info, _ := env.Client().DescribeWorkflow(ctx, "greet-1", "")
	if info.Status != iwf.StatusRunning {
		t.Fatalf("status %s", info.Status)
	}
	_ = env.Client().SignalWorkflow(ctx, "greet-1", "", "name", "Ann")
	if status, err := env.WaitForCompletion(ctx, "greet-1"); err != nil || status != iwf.StatusCompleted {
		t.Fatalf("status %s, %v", status, err)
	}
}
