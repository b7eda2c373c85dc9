package main

import (
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/iwftest"
	"github.com/iwf-server/iwf-server/sdk-go/iwf"
)

func start(t *testing.T) *iwftest.Env {
	t.Helper()
	registry, err := iwf.NewRegistry(HelloWorkflow)
	if err != nil {
		t.Fatal(err)
	}
	env := iwftest.New(t, registry, iwftest.WithFakeClock())
	if _, err := env.Client().StartWorkflow(t.Context(), HelloWorkflow, "hello-1", time.Hour, nil, nil); err != nil {
		t.Fatal(err)
	}
	env.WaitIdle()
	return env
}

// TestHello: a name by signal gives the greeting as the result.
func TestHello(t *testing.T) {
	env := start(t)
	if err := env.Client().SignalWorkflow(t.Context(), "hello-1", "", "name", "World"); err != nil {
		t.Fatal(err)
	}
	got, err := iwf.GetSimpleWorkflowResult[string](t.Context(), env.Client(), "hello-1", "")
	if err != nil || got != "Hello, World!" {
		t.Fatalf("result %q, %v", got, err)
	}
}

// TestHelloGivesUp: without a name for ten minutes the workflow fails.
func TestHelloGivesUp(t *testing.T) {
	env := start(t)
	env.Advance(10 * time.Minute)
	_, err := iwf.GetSimpleWorkflowResult[string](t.Context(), env.Client(), "hello-1", "")
	if err == nil {
		t.Fatal("the workflow did not fail")
	}
}
