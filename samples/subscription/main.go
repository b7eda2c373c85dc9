// Command subscription is the subscription billing sample: a workflow
// charges a customer every period on a durable timer until a signal
// cancels it; clients read its status and change its plan with RPCs.
//
// Start the server (make run in the repository root), then:
//
//	go run ./samples/subscription
//
// It serves the worker on :8803, starts a subscription on the server at
// :8801, reads its status, upgrades the plan, cancels it and prints its
// final status. (A period lasts 30 days in real time; the test runs
// several on a fake clock.)
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
	wf := NewSubscriptionWorkflow(printBilling{})
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

	workflowID := fmt.Sprintf("subscription-%d", time.Now().UnixNano())
	firstCharge := iwf.StateExecutionID("ChargePeriod", 1) // "ChargePeriod-1"
	if _, err := client.StartWorkflow(ctx, wf, workflowID, 0, Subscription{Customer: "ann", Plan: "basic"},
		&iwf.StartOptions{WaitForCompletionStateExecutionIDs: []string{firstCharge}}); err != nil {
		log.Fatal(err)
	}
	fmt.Println("started", workflowID)
	if _, err := client.WaitForStateExecutionCompletion(ctx, workflowID, firstCharge); err != nil {
		log.Fatal(err)
	}

	show := func() {
		s, err := iwf.InvokeRPC[Status](ctx, client, workflowID, "", StatusRPC, nil, nil)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("status: plan %s, %d period(s) charged, $%.2f in total\n", s.Plan, s.Periods, float64(s.ChargedCents)/100)
	}
	show()
	if _, err := client.InvokeRPC(ctx, workflowID, "", ChangePlanRPC, "pro", nil); err != nil {
		log.Fatal(err)
	}
	fmt.Println("changed the plan to pro (from the next period)")
	show()
	if _, err := client.InvokeRPC(ctx, workflowID, "", ChangePlanRPC, "platinum", nil); iwf.IsRPCError(err) {
		fmt.Println("changing to platinum fails:", err)
	}

	if err := client.SignalWorkflow(ctx, workflowID, "", CancelChannel, nil); err != nil {
		log.Fatal(err)
	}
	final, err := iwf.GetSimpleWorkflowResult[Status](ctx, client, workflowID, "")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("cancelled: %d period(s) charged, $%.2f in total\n", final.Periods, float64(final.ChargedCents)/100)
}

// printBilling prints the charges instead of making them.
type printBilling struct{}

func (printBilling) Charge(_ context.Context, customer string, period int, cents int64) error {
	fmt.Printf("billing: charged %s $%.2f for period %d\n", customer, float64(cents)/100, period)
	return nil
}
