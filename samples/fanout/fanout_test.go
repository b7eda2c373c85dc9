package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/iwftest"
	"github.com/iwf-server/iwf-server/sdk-go/iwf"
)

func TestFanOutFanIn(t *testing.T) {
	t.Parallel()
	registry, err := iwf.NewRegistry(FanOutWorkflow)
	if err != nil {
		t.Fatal(err)
	}
	env := iwftest.New(t, registry)
	ctx := t.Context()

	// Ten documents of 1..10 words: ten Counts run at once.
	var job Job
	var want Summary
	for i := 1; i <= 10; i++ {
		job.Documents = append(job.Documents, strings.Repeat(fmt.Sprintf("w%d ", i), i))
		want.Words = append(want.Words, i)
		want.Total += i
	}
	if _, err := env.Client().StartWorkflow(ctx, FanOutWorkflow, "count-words", time.Minute, job, nil); err != nil {
		t.Fatal(err)
	}
	got, err := iwf.GetSimpleWorkflowResult[Summary](ctx, env.Client(), "count-words", "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Words, want.Words) || got.Total != want.Total {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}
