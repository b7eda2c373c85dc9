package iwf_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/iwf-server/iwf-server/sdk-go/iwf"
)

// Order is the input of OrderWorkflow.
type Order struct {
	ID    string
	Items int
}

// WaitPayment waits for a message on the "payment" signal channel, for at
// most a day.
type WaitPayment struct{}

func (WaitPayment) ID() string { return "WaitPayment" }

func (WaitPayment) WaitUntil(ctx iwf.Context, input iwf.Object, p iwf.Persistence, c iwf.Communication) (*iwf.CommandRequest, error) {
	return iwf.AnyCommandCompleted(
		iwf.SignalCommand("paid", "payment"),
		iwf.TimerCommand("expire", 24*time.Hour),
	), nil
}

func (WaitPayment) Execute(ctx iwf.Context, input iwf.Object, results iwf.CommandResults, p iwf.Persistence, c iwf.Communication) (*iwf.StateDecision, error) {
	if results.TimerStatus("expire") == iwf.TimerFired {
		return iwf.ForceFailWorkflow("payment expired"), nil
	}
	payment, _ := results.SignalByChannel("payment")
	var amount int
	if err := payment.Value.Get(&amount); err != nil {
		return nil, err
	}
	p.SetDataAttribute("paid", amount)
	return iwf.SingleNextState(Ship{}, input), nil // pass the order on
}

// Ship has no WaitUntil: it executes as soon as it is reached.
type Ship struct{}

func (Ship) ID() string { return "Ship" }

func (Ship) Execute(ctx iwf.Context, input iwf.Object, results iwf.CommandResults, p iwf.Persistence, c iwf.Communication) (*iwf.StateDecision, error) {
	order, err := iwf.As[Order](input)
	if err != nil {
		return nil, err
	}
	return iwf.GracefulCompleteWorkflow(fmt.Sprintf("shipped %d items of %s", order.Items, order.ID)), nil
}

// OrderWorkflow declares its states, the channel it waits on, the data
// attribute it writes and an RPC.
var OrderWorkflow = &iwf.Workflow{
	Type:           "OrderWorkflow",
	StartState:     WaitPayment{},
	States:         []iwf.WorkflowState{Ship{}},
	SignalChannels: []string{"payment"},
	DataAttributes: []string{"paid"},
	RPCs: map[string]iwf.RPC{
		"paid": func(ctx iwf.Context, input iwf.Object, p iwf.Persistence, c iwf.Communication) (any, error) {
			var paid int
			err := p.GetDataAttribute("paid", &paid)
			return paid, err
		},
	},
}

// Define a workflow and register it.
func ExampleWorkflow() {
	registry, err := iwf.NewRegistry(OrderWorkflow)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(registry.WorkflowTypes())
	// Output: [OrderWorkflow]
}

// Serve the worker API. In a program this is
//
//	log.Fatal(http.ListenAndServe(":8803", worker))
//
// here the server's call to execute the Ship state is simulated.
func ExampleNewWorkerService() {
	registry, err := iwf.NewRegistry(OrderWorkflow)
	if err != nil {
		log.Fatal(err)
	}
	worker := iwf.NewWorkerService(registry, nil)

	request := `{"context":{"workflowId":"order-42","workflowRunId":"run-1","workflowStartedTimestamp":1700000000,
	  "stateExecutionId":"Ship-1","firstAttemptTimestamp":1700000005,"attempt":1},
	  "workflowType":"OrderWorkflow","workflowStateId":"Ship",
	  "stateInput":{"encoding":"json","data":"{\"ID\":\"order-42\",\"Items\":3}"}}`
	rec := httptest.NewRecorder()
	worker.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, iwf.ExecutePath, strings.NewReader(request)))
	fmt.Println(rec.Code, rec.Body.String())
	// Output: 200 {"stateDecision":{"nextStates":[{"stateId":"_SYS_GRACEFUL_COMPLETING_WORKFLOW","stateInput":{"data":"\"shipped 3 items of order-42\"","encoding":"json"}}]}}
}

// Start a workflow, signal it and wait for its result. This needs a running
// server (`make run` in the iwf-server repository) and the worker of
// ExampleNewWorkerService listening on :8803.
func ExampleClient_StartWorkflow() {
	ctx := context.Background()
	client, err := iwf.NewClient(iwf.DefaultServerURL, &iwf.ClientOptions{WorkerURL: "http://localhost:8803"})
	if err != nil {
		log.Fatal(err)
	}
	order := Order{ID: "order-42", Items: 3}
	_, err = client.StartWorkflow(ctx, OrderWorkflow, order.ID, time.Hour, order, &iwf.StartOptions{
		IDReusePolicy: iwf.IDReuseAllowDuplicateFailedOnly,
	})
	if iwf.IsWorkflowAlreadyStartedError(err) {
		log.Printf("%s is already running", order.ID)
	} else if err != nil {
		log.Fatal(err)
	}
	if err := client.SignalWorkflow(ctx, order.ID, "", "payment", 30); err != nil {
		log.Fatal(err)
	}

	waitCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	result, err := iwf.GetSimpleWorkflowResult[string](waitCtx, client, order.ID, "")
	if err != nil {
		log.Fatal(err) // a *iwf.WorkflowAbnormalExitError if it failed
	}
	paid, err := iwf.InvokeRPC[int](ctx, client, order.ID, "", "paid", nil, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(result, "after paying", paid)
}
