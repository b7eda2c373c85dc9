// Command hello is the worker of the README's "Try it": it serves
// HelloWorkflow (the SDK tutorial's workflow) on :8803 and waits. Start
// workflows and signal them from the outside — with the iwf command line,
// curl or the web console:
//
//	make run                     # the server on :8801
//	go run ./samples/hello       # this worker on :8803
//	go run ./cmd/iwf workflow start --id hello-1 --type HelloWorkflow \
//	    --worker-url http://localhost:8803 --start-state AskName
//	go run ./cmd/iwf workflow signal --id hello-1 --channel name --value '"World"'
//	go run ./cmd/iwf workflow get --id hello-1 --wait
package main

import (
	"flag"
	"log"
	"net/http"

	"github.com/iwf-server/iwf-server/sdk-go/iwf"
)

func main() {
	addr := flag.String("addr", ":8803", "where the worker listens")
	flag.Parse()
	log.SetFlags(0)
	registry, err := iwf.NewRegistry(HelloWorkflow)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("HelloWorkflow worker listening on %s", *addr)
	log.Fatal(http.ListenAndServe(*addr, iwf.NewWorkerService(registry, nil)))
}
