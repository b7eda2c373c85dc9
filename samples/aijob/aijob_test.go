package main

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/iwftest"
	"github.com/iwf-server/iwf-server/sdk-go/iwf"
)

// testModel fails its first `failures` calls.
type testModel struct {
	failures int32
	calls    atomic.Int32
}

func (m *testModel) Generate(_ context.Context, prompt string) (string, error) {
	if m.calls.Add(1) <= m.failures {
		return "", errors.New("overloaded")
	}
	return "draft for " + prompt, nil
}

func startJob(t *testing.T, model *testModel) *iwftest.Env {
	t.Helper()
	wf := NewAIJobWorkflow(model)
	registry, err := iwf.NewRegistry(wf)
	if err != nil {
		t.Fatal(err)
	}
	env := iwftest.New(t, registry, iwftest.WithFakeClock())
	if _, err := env.Client().StartWorkflow(t.Context(), wf, "job", 72*time.Hour, Job{Prompt: "a poem"}, nil); err != nil {
		t.Fatal(err)
	}
	return env
}

// progress reads the job's progress as an application would.
func progress(t *testing.T, env *iwftest.Env) Progress {
	t.Helper()
	attrs, err := env.Client().GetWorkflowDataAttributes(t.Context(), "job", "", ProgressAttribute)
	if err != nil {
		t.Fatal(err)
	}
	var p Progress
	if err := attrs[ProgressAttribute].Get(&p); err != nil {
		t.Fatal(err)
	}
	return p
}

func outcome(t *testing.T, env *iwftest.Env) Outcome {
	t.Helper()
	out, err := iwf.GetSimpleWorkflowResult[Outcome](t.Context(), env.Client(), "job", "")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRetriedThenApproved(t *testing.T) {
	t.Parallel()
	model := &testModel{failures: 2}
	env := startJob(t, model)

	env.WaitIdle() // the first call failed; the retry waits 2 s
	if p := progress(t, env); p.Stage != StageGenerating || model.calls.Load() != 1 {
		t.Fatalf("after the first call: %+v, %d calls", p, model.calls.Load())
	}
	env.Advance(2 * time.Second) // the second call fails; the next waits 4 s
	if p := progress(t, env); p.Stage != StageGenerating || model.calls.Load() != 2 {
		t.Fatalf("after the second call: %+v, %d calls", p, model.calls.Load())
	}
	env.Advance(4 * time.Second) // the third call succeeds
	want := Progress{Stage: StageReview, Attempts: 3, Draft: "draft for a poem"}
	if p := progress(t, env); p != want {
		t.Fatalf("after the third call: %+v, want %+v", p, want)
	}

	env.Advance(47 * time.Hour) // the reviewer takes their time, but not too long
	if err := env.Client().SignalWorkflow(t.Context(), "job", "", ApprovalChannel, Decision{Approved: true, Reviewer: "ann"}); err != nil {
		t.Fatal(err)
	}
	if got, want := outcome(t, env), (Outcome{Approved: true, Text: "draft for a poem", Reviewer: "ann"}); got != want {
		t.Fatalf("outcome %+v, want %+v", got, want)
	}
	if p := progress(t, env); p.Stage != StageApproved {
		t.Fatalf("final stage %q", p.Stage)
	}
}

func TestRejectedByReviewer(t *testing.T) {
	t.Parallel()
	env := startJob(t, &testModel{})
	env.WaitIdle()
	if err := env.Client().SignalWorkflow(t.Context(), "job", "", ApprovalChannel, Decision{Approved: false, Reviewer: "bob"}); err != nil {
		t.Fatal(err)
	}
	if got, want := outcome(t, env), (Outcome{Reviewer: "bob", Reason: "rejected by bob"}); got != want {
		t.Fatalf("outcome %+v, want %+v", got, want)
	}
}

func TestNoApprovalWithinTimeout(t *testing.T) {
	t.Parallel()
	env := startJob(t, &testModel{})

	env.Advance(ApprovalTimeout - time.Second)
	if p := progress(t, env); p.Stage != StageReview {
		t.Fatalf("a second before the timeout: stage %q, want %q", p.Stage, StageReview)
	}
	env.Advance(time.Second)
	if got, want := outcome(t, env), (Outcome{Reason: "no decision within 48h0m0s"}); got != want {
		t.Fatalf("outcome %+v, want %+v", got, want)
	}
	if p := progress(t, env); p.Stage != StageRejected {
		t.Fatalf("final stage %q, want %q", p.Stage, StageRejected)
	}
}
