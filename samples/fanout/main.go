// Command fanout is the fan-out/fan-in sample: a workflow counts the words
// of several documents in parallel states and adds the counts up in a
// collector that waits for all of them on an internal channel.
//
// Start the server (make run in the repository root), then:
//
//	go run ./samples/fanout
//
// It serves the worker on :8803, starts the workflow on the server at
// :8801 and prints the result.
package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/iwf-server/iwf-server/sdk-go/iwf"
)

func main() {
	log.SetFlags(0)
	registry, err := iwf.NewRegistry(FanOutWorkflow)
	if err != nil {
		log.Fatal(err)
	}
	// Listen before starting the workflow: the server calls the worker at once.
	ln, err := net.Listen("tcp", ":8803")
	if err != nil {
		log.Fatal(err)
	}
	go func() { log.Fatal(http.Serve(ln, iwf.NewWorkerService(registry, nil))) }()

	client, err := iwf.NewClient(iwf.DefaultServerURL, &iwf.ClientOptions{WorkerURL: iwf.DefaultWorkerURL})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	job := Job{Documents: []string{
		"A workflow is a state machine whose code lives in your process.",
		"The server keeps its durable state.",
		"States run in parallel when a decision moves to several of them.",
		"Internal channels carry messages between the states of one workflow.",
	}}
	workflowID := fmt.Sprintf("fanout-%d", time.Now().UnixNano())
	if _, err := client.StartWorkflow(ctx, FanOutWorkflow, workflowID, time.Hour, job, nil); err != nil {
		log.Fatal(err)
	}
	fmt.Println("started", workflowID, "with", len(job.Documents), "documents")

	sum, err := iwf.GetSimpleWorkflowResult[Summary](ctx, client, workflowID, "")
	if err != nil {
		log.Fatal(err)
	}
	for i, n := range sum.Words {
		fmt.Printf("document %d: %d words\n", i, n)
	}
	fmt.Println("total:", sum.Total)
}
