// Command ordersaga is the order saga sample: reserve inventory, charge
// the payment, ship; when a step is rejected, compensating states undo the
// steps that succeeded, in reverse order.
//
// Start the server (make run in the repository root), then:
//
//	go run ./samples/ordersaga
//
// It serves the worker on :8803, runs three orders through the server at
// :8801 (one ships, one has its card declined, one cannot be shipped) and
// prints what the services did and how each order ended.
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
	wf := NewOrderWorkflow(Services{Inventory: shop{}, Payments: shop{}, Shipping: shop{}})
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

	run := time.Now().UnixNano()
	orders := []Order{
		{ID: fmt.Sprintf("order-%d-1", run), Item: "book", Quantity: 2, AmountCents: 3000, Address: "1 Main St"},
		{ID: fmt.Sprintf("order-%d-2", run), Item: "piano", Quantity: 1, AmountCents: 900000, Address: "1 Main St"},
		{ID: fmt.Sprintf("order-%d-3", run), Item: "lamp", Quantity: 1, AmountCents: 4500, Address: "Moon Base"},
	}
	for _, o := range orders {
		fmt.Printf("\n%s: %d x %s for $%.2f to %s\n", o.ID, o.Quantity, o.Item, float64(o.AmountCents)/100, o.Address)
		// The order id is the workflow id: starting the same order twice
		// fails with an "already started" error instead of charging twice.
		if _, err := client.StartWorkflow(ctx, wf, o.ID, time.Hour, o, nil); err != nil {
			log.Fatal(err)
		}
		out, err := iwf.GetSimpleWorkflowResult[Outcome](ctx, client, o.ID, "")
		if err != nil {
			log.Fatal(err)
		}
		if out.Status == "shipped" {
			fmt.Printf("  => shipped, tracking %s\n", out.TrackingID)
		} else {
			fmt.Printf("  => %s: %s failed (%s)\n", out.Status, out.FailedStep, out.Reason)
		}
	}
}

// shop is a stand-in for the three services: it prints what it does,
// declines charges over $1000 and only ships to streets.
type shop struct{}

func (shop) Reserve(_ context.Context, o Order) error {
	fmt.Printf("  inventory: reserved %d x %s\n", o.Quantity, o.Item)
	return nil
}

func (shop) Release(_ context.Context, o Order) error {
	fmt.Printf("  inventory: released %d x %s\n", o.Quantity, o.Item)
	return nil
}

func (shop) Charge(_ context.Context, o Order) error {
	if o.AmountCents > 100000 {
		fmt.Println("  payments: card declined")
		return fmt.Errorf("card declined: %w", ErrRejected)
	}
	fmt.Printf("  payments: charged $%.2f\n", float64(o.AmountCents)/100)
	return nil
}

func (shop) Refund(_ context.Context, o Order) error {
	fmt.Printf("  payments: refunded $%.2f\n", float64(o.AmountCents)/100)
	return nil
}

func (shop) Ship(_ context.Context, o Order) (string, error) {
	if o.Address == "Moon Base" {
		fmt.Println("  shipping: address not served")
		return "", fmt.Errorf("no delivery to %s: %w", o.Address, ErrRejected)
	}
	fmt.Println("  shipping: handed to the carrier")
	return "TRK-" + o.ID, nil
}
