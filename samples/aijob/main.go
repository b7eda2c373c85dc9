// Command aijob is the long AI job sample: a workflow calls a flaky model
// (the server retries it with backoff), shows its progress in a data
// attribute, then waits for a human approval signal for at most 48 hours.
//
// Start the server (make run in the repository root), then:
//
//	go run ./samples/aijob            # the reviewer approves
//	go run ./samples/aijob -approve=false
//
// It serves the worker on :8803 and starts the job on the server at
// :8801. The model fails twice, so the draft is ready after the 2 s and
// 4 s backoffs; meanwhile the program polls the progress as an application
// would. It then sends the reviewer's decision and prints the outcome.
// (The 48-hour timeout path is covered by the test, on a fake clock.)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/iwf-server/iwf-server/sdk-go/iwf"
)

func main() {
	approve := flag.Bool("approve", true, "the reviewer's decision")
	flag.Parse()
	log.SetFlags(0)

	wf := NewAIJobWorkflow(&flakyModel{failures: 2})
	registry, err := iwf.NewRegistry(wf)
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", ":8803")
	if err != nil {
		log.Fatal(err)
	}
	// The worker logs each failed attempt; expected here.
	go func() { log.Fatal(http.Serve(ln, iwf.NewWorkerService(registry, nil))) }()

	client, err := iwf.NewClient(iwf.DefaultServerURL, &iwf.ClientOptions{WorkerURL: iwf.DefaultWorkerURL})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	workflowID := fmt.Sprintf("aijob-%d", time.Now().UnixNano())
	job := Job{Prompt: "A haiku about durable timers"}
	if _, err := client.StartWorkflow(ctx, wf, workflowID, 72*time.Hour, job, nil); err != nil {
		log.Fatal(err)
	}
	fmt.Println("started", workflowID)

	// An application shows the progress by reading the data attribute.
	var progress Progress
	for progress.Stage != StageReview {
		time.Sleep(500 * time.Millisecond)
		attrs, err := client.GetWorkflowDataAttributes(ctx, workflowID, "", ProgressAttribute)
		if err != nil {
			log.Fatal(err)
		}
		var p Progress
		if err := attrs[ProgressAttribute].Get(&p); err != nil {
			log.Fatal(err)
		}
		if p != progress {
			fmt.Printf("progress: %s\n", p.Stage)
		}
		progress = p
	}
	fmt.Printf("draft after %d attempts:\n\n%s\n\n", progress.Attempts, progress.Draft)

	fmt.Println("reviewer decides: approved =", *approve)
	if err := client.SignalWorkflow(ctx, workflowID, "", ApprovalChannel, Decision{Approved: *approve, Reviewer: "ann"}); err != nil {
		log.Fatal(err)
	}
	out, err := iwf.GetSimpleWorkflowResult[Outcome](ctx, client, workflowID, "")
	if err != nil {
		log.Fatal(err)
	}
	if out.Approved {
		fmt.Println("outcome: approved by", out.Reviewer)
	} else {
		fmt.Println("outcome: not approved:", out.Reason)
	}
}

// flakyModel fails its first calls, like a model under load.
type flakyModel struct {
	failures int32
	calls    atomic.Int32
}

func (m *flakyModel) Generate(_ context.Context, prompt string) (string, error) {
	if n := m.calls.Add(1); n <= m.failures {
		fmt.Printf("model: call %d failed\n", n)
		return "", errors.New("model overloaded, try again")
	}
	return "Timers that persist —\nthe server forgets nothing,\nwakes you when it's time.", nil
}
