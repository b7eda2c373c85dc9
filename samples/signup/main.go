// Command signup is the sign-up sample: after emailing a verification
// link, a workflow waits for a "verified" signal or a 24-hour reminder
// timer, whichever comes first, and gives up after three reminders.
//
// Start the server (make run in the repository root), then:
//
//	go run ./samples/signup
//
// It serves the worker on :8803 and starts a sign-up on the server at
// :8801. Two seconds later it sends the "verified" signal, as the web
// application would when the user clicks the link, and prints the result.
// (The reminder path takes days in real time; the test runs it on a fake
// clock.)
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
	wf := NewSignUpWorkflow(printMailer{})
	registry, err := iwf.NewRegistry(wf)
	if err != nil {
		log.Fatal(err)
	}
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

	email := fmt.Sprintf("ann+%d@example.com", time.Now().UnixNano())
	workflowID := "signup-" + email
	// No workflow timeout (0): the workflow ends by itself, after at most
	// four reminder intervals.
	if _, err := client.StartWorkflow(ctx, wf, workflowID, 0, email, nil); err != nil {
		log.Fatal(err)
	}
	fmt.Println("started", workflowID)

	time.Sleep(2 * time.Second) // the user reads the email and clicks the link
	fmt.Println("user clicked the link: signalling", VerifiedChannel)
	if err := client.SignalWorkflow(ctx, workflowID, "", VerifiedChannel, nil); err != nil {
		log.Fatal(err)
	}

	res, err := iwf.GetSimpleWorkflowResult[Result](ctx, client, workflowID, "")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("result: verified=%v after %d reminders\n", res.Verified, res.Reminders)
}

// printMailer prints the emails instead of sending them.
type printMailer struct{}

func (printMailer) Send(_ context.Context, to, subject string) error {
	fmt.Printf("mail to %s: %s\n", to, subject)
	return nil
}
