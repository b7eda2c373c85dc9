package iwftest_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/iwftest"
	"github.com/iwf-server/iwf-server/sdk-go/iwf"
)

// Nap sleeps for the duration its input gives, in seconds, then completes
// the workflow with the time it woke up.
type Nap struct{}

func (Nap) ID() string { return "Nap" }

func (Nap) WaitUntil(ctx iwf.Context, input iwf.Object, p iwf.Persistence, c iwf.Communication) (*iwf.CommandRequest, error) {
	secs, err := iwf.As[int](input)
	if err != nil {
		return nil, err
	}
	return iwf.AllCommandsCompleted(iwf.TimerCommand("nap", time.Duration(secs)*time.Second)), nil
}

func (Nap) Execute(ctx iwf.Context, input iwf.Object, r iwf.CommandResults, p iwf.Persistence, c iwf.Communication) (*iwf.StateDecision, error) {
	return iwf.GracefulCompleteWorkflow("rested"), nil
}

var napWorkflow = &iwf.Workflow{Type: "Nap", StartState: Nap{}}

// Tick counts hourly ticks in the data attribute "ticks" until it has
// counted to its input.
type Tick struct{}

func (Tick) ID() string { return "Tick" }

func (Tick) WaitUntil(ctx iwf.Context, input iwf.Object, p iwf.Persistence, c iwf.Communication) (*iwf.CommandRequest, error) {
	return iwf.AllCommandsCompleted(iwf.TimerCommand("hour", time.Hour)), nil
}

func (Tick) Execute(ctx iwf.Context, input iwf.Object, r iwf.CommandResults, p iwf.Persistence, c iwf.Communication) (*iwf.StateDecision, error) {
	var ticks int
	if err := p.GetDataAttribute("ticks", &ticks); err != nil {
		return nil, err
	}
	ticks++
	p.SetDataAttribute("ticks", ticks)
	if limit, _ := iwf.As[int](input); ticks >= limit {
		return iwf.GracefulCompleteWorkflow(ticks), nil
	}
	return iwf.SingleNextState(Tick{}, input), nil
}

var tickWorkflow = &iwf.Workflow{Type: "Tick", StartState: Tick{}, DataAttributes: []string{"ticks"}}

// Greet waits for a name on the "name" signal channel.
type Greet struct{}

func (Greet) ID() string { return "Greet" }

func (Greet) WaitUntil(ctx iwf.Context, input iwf.Object, p iwf.Persistence, c iwf.Communication) (*iwf.CommandRequest, error) {
	return iwf.AllCommandsCompleted(iwf.SignalCommand("name", "name")), nil
}

func (Greet) Execute(ctx iwf.Context, input iwf.Object, r iwf.CommandResults, p iwf.Persistence, c iwf.Communication) (*iwf.StateDecision, error) {
	sig, _ := r.SignalByChannel("name")
	name, err := iwf.As[string](sig.Value)
	if err != nil {
		return nil, err
	}
	return iwf.GracefulCompleteWorkflow("Hello, " + name), nil
}

var greetWorkflow = &iwf.Workflow{Type: "Greet", StartState: Greet{}, SignalChannels: []string{"name"}}

// Flaky fails its first attempts (flakyFailures of them), retried every 10 s.
type Flaky struct{ attempts *atomic.Int32 }

func (Flaky) ID() string { return "Flaky" }

func (f Flaky) Options() *iwf.StateOptions {
	return &iwf.StateOptions{ExecuteRetryPolicy: &iwf.RetryPolicy{InitialInterval: 10 * time.Second, BackoffCoefficient: 1}}
}

const flakyFailures = 2

func (f Flaky) Execute(ctx iwf.Context, input iwf.Object, r iwf.CommandResults, p iwf.Persistence, c iwf.Communication) (*iwf.StateDecision, error) {
	if f.attempts.Add(1) <= flakyFailures {
		return nil, errors.New("not yet")
	}
	return iwf.GracefulCompleteWorkflow(ctx.Attempt()), nil
}

func newEnv(t *testing.T, opts []iwftest.Option, wfs ...*iwf.Workflow) *iwftest.Env {
	t.Helper()
	registry, err := iwf.NewRegistry(wfs...)
	if err != nil {
		t.Fatal(err)
	}
	return iwftest.New(t, registry, opts...)
}

func status(t *testing.T, env *iwftest.Env, workflowID string) iwf.WorkflowStatus {
	t.Helper()
	info, err := env.Client().DescribeWorkflow(t.Context(), workflowID, "")
	if err != nil {
		t.Fatal(err)
	}
	return info.Status
}

func TestAdvanceFiresADayLongTimerAtOnce(t *testing.T) {
	env := newEnv(t, []iwftest.Option{iwftest.WithFakeClock()}, napWorkflow)
	ctx := t.Context()
	begin := time.Now()
	if _, err := env.Client().StartWorkflow(ctx, napWorkflow, "nap", 0, 24*3600, nil); err != nil {
		t.Fatal(err)
	}
	env.Advance(24*time.Hour - time.Second)
	if got := status(t, env, "nap"); got != iwf.StatusRunning {
		t.Fatalf("a second before the timer: %s, want RUNNING", got)
	}
	env.Advance(time.Second)
	if got := status(t, env, "nap"); got != iwf.StatusCompleted {
		t.Fatalf("right after Advance reached the timer: %s, want COMPLETED", got)
	}
	out, err := iwf.GetSimpleWorkflowResult[string](ctx, env.Client(), "nap", "")
	if err != nil || out != "rested" {
		t.Fatalf("result %q, %v", out, err)
	}
	// A failure bound far above the milliseconds it takes, far below a day.
	if elapsed := time.Since(begin); elapsed > time.Minute {
		t.Errorf("a fake day took %s of real time", elapsed)
	}
}

func TestAdvanceStepsThroughChainedTimers(t *testing.T) {
	env := newEnv(t, []iwftest.Option{iwftest.WithFakeClock()}, tickWorkflow)
	ctx := t.Context()
	start := env.Now()
	if _, err := env.Client().StartWorkflow(ctx, tickWorkflow, "ticks", 0, 24, nil); err != nil {
		t.Fatal(err)
	}
	env.Advance(90 * time.Minute) // one tick, the second is due at 2 h
	attrs, err := env.Client().GetWorkflowDataAttributes(ctx, "ticks", "", "ticks")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := iwf.As[int](attrs["ticks"]); n != 1 {
		t.Fatalf("after 90 minutes: %d ticks, want 1", n)
	}
	env.Advance(22*time.Hour + 30*time.Minute) // up to 24 h: the 24th tick ends it
	n, err := iwf.GetSimpleWorkflowResult[int](ctx, env.Client(), "ticks", "")
	if err != nil || n != 24 {
		t.Fatalf("result %d, %v; want 24", n, err)
	}
	if got, want := env.Now(), start.Add(24*time.Hour); !got.Equal(want) {
		t.Fatalf("clock at %s, want %s", got, want)
	}
}

func TestAdvanceDrivesRetryBackoff(t *testing.T) {
	var attempts atomic.Int32
	flaky := &iwf.Workflow{Type: "Flaky", StartState: Flaky{&attempts}}
	env := newEnv(t, []iwftest.Option{iwftest.WithFakeClock()}, flaky)
	ctx := t.Context()
	if _, err := env.Client().StartWorkflow(ctx, flaky, "flaky", 0, nil, nil); err != nil {
		t.Fatal(err)
	}
	env.WaitIdle()
	if got := attempts.Load(); got != 1 {
		t.Fatalf("before any time passed: %d attempts, want 1 (the retry waits for its backoff)", got)
	}
	env.Advance(10 * time.Second)
	if got := attempts.Load(); got != 2 {
		t.Fatalf("after one backoff: %d attempts, want 2", got)
	}
	env.Advance(10 * time.Second)
	attempt, err := iwf.GetSimpleWorkflowResult[int](ctx, env.Client(), "flaky", "")
	if err != nil || attempt != 3 {
		t.Fatalf("completed by attempt %d, %v; want 3", attempt, err)
	}
}

func TestAdvancePastWorkflowTimeout(t *testing.T) {
	env := newEnv(t, []iwftest.Option{iwftest.WithFakeClock()}, greetWorkflow)
	ctx := t.Context()
	if _, err := env.Client().StartWorkflow(ctx, greetWorkflow, "greet", time.Hour, nil, nil); err != nil {
		t.Fatal(err)
	}
	env.Advance(2 * time.Hour)
	got, err := env.WaitForCompletion(ctx, "greet")
	if err != nil || got != iwf.StatusTimeout {
		t.Fatalf("status %s, %v; want TIMEOUT", got, err)
	}
}

func TestSignalWithRealClock(t *testing.T) {
	env := newEnv(t, nil, greetWorkflow)
	ctx := t.Context()
	if _, ok := env.Clock().(*iwftest.FakeClock); ok {
		t.Fatal("the real clock is the default")
	}
	if _, err := env.Client().StartWorkflow(ctx, greetWorkflow, "greet", time.Minute, nil, nil); err != nil {
		t.Fatal(err)
	}
	env.WaitIdle()
	if got := status(t, env, "greet"); got != iwf.StatusRunning {
		t.Fatalf("before the signal: %s", got)
	}
	if err := env.Client().SignalWorkflow(ctx, "greet", "", "name", "Ann"); err != nil {
		t.Fatal(err)
	}
	out, err := iwf.GetSimpleWorkflowResult[string](ctx, env.Client(), "greet", "")
	if err != nil || out != "Hello, Ann" {
		t.Fatalf("result %q, %v", out, err)
	}
}

func TestWaitForCompletionReportsHowItEnded(t *testing.T) {
	env := newEnv(t, nil, greetWorkflow)
	ctx := t.Context()
	if _, err := env.Client().StartWorkflow(ctx, greetWorkflow, "stopped", 0, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := env.Client().StopWorkflow(ctx, "stopped", "", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := env.WaitForCompletion(ctx, "stopped"); err != nil || got != iwf.StatusCanceled {
		t.Fatalf("status %s, %v; want CANCELED", got, err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := env.WaitForCompletion(waitCtx, "never-started"); !iwf.IsWorkflowNotExistsError(err) {
		t.Fatalf("unknown workflow: %v, want a not-exists error", err)
	}
}
