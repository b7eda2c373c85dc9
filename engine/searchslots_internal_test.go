package engine

import (
	"context"
	"testing"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// TestSearchWaitsForASlot: with every search slot taken, a search waits
// and ends with its context, as a deadline error, without touching the
// store; once a slot is free it runs.
func TestSearchWaitsForASlot(t *testing.T) {
	e := &Engine{searching: make(chan struct{}, 2)} // no store: a search that ran would panic
	e.searching <- struct{}{}
	e.searching <- struct{}{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := e.SearchWorkflows(ctx, iwfapi.WorkflowSearchRequest{Query: ""})
	if CodeOf(err) != CodeDeadlineExceeded {
		t.Fatalf("search with every slot taken: %v, want deadline_exceeded", err)
	}
	if len(e.searching) != 2 {
		t.Fatalf("%d slots taken after the refused search, want the 2 held", len(e.searching))
	}
}
