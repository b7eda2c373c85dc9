package upgradetest

import (
	"slices"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// flow is one workflow of the scenario.
type flow struct {
	id string
	// start is its start request (workerURL, workflowType and the id are
	// filled in by startRequest).
	start iwfapi.WorkflowStartRequest
	// drive takes the started workflow to the point at which the data
	// leaves it. Only the generator calls it.
	drive func(s *stack)
	// check asserts what the stored runs of the workflow show. It runs in
	// the generator before the engine stops, and in the upgrade tests before
	// anything changes, on the same data.
	check func(s *stack)
	// finish drives the workflow on after the upgrade, to its end, and
	// asserts the results and the worker calls. It returns the ids of the
	// runs whose calls it checked.
	finish func(s *stack) []string
}

// scenario lists the workflows in the order the generator starts them: the
// two whose worker keeps failing first, as their retries take the longest.
func scenario() []flow {
	return slices.Concat(failingFlows(), closedFlows(), waitingFlows())
}

// startRequest fills in what every start request of the scenario shares.
func startRequest(f flow) iwfapi.WorkflowStartRequest {
	req := f.start
	req.WorkflowId = f.id
	req.IwfWorkflowType = workflowType
	req.IwfWorkerUrl = workerURL
	return req
}

// failingStates are the states whose worker calls fail on purpose while
// the data is written.
var failingStates = []string{"stubborn", "obstinate"}

// generate runs the scenario on a new stack, up to the point the data
// captures, and checks it.
func generate(s *stack) {
	s.startEngine()
	flows := scenario()
	for _, f := range flows {
		s.api.start(startRequest(f))
	}
	for _, f := range flows {
		if f.drive != nil {
			f.drive(s)
		}
	}
	checkAll(s, flows)
}

// upgrade checks the stored data on a new stack before its engine starts
// working, then starts it, finishes every workflow that has something left
// to do, and checks that the worker received no call that a finish step
// did not account for.
func upgrade(s *stack) {
	flows := scenario()
	checkAll(s, flows)
	s.startEngine()
	checked := map[string]bool{}
	for _, f := range flows {
		if f.finish != nil {
			for _, id := range f.finish(s) {
				checked[id] = true
			}
		}
	}
	for _, c := range s.worker.all() {
		if !checked[c.RunID] {
			s.t.Errorf("unexpected worker call %s of %s run %s", c, c.WorkflowID, c.RunID)
		}
	}
	checkBatches(s)
}

// runCounts is how many runs of the scenario the data holds, by status.
var runCounts = map[string]int{
	"Running":    12,
	"Completed":  2, // upg-completed, upg-reset's first run
	"Failed":     4, // upg-force-failed, upg-api-failed, upg-stop-failed, upg-retry-chain's first run
	"Canceled":   1,
	"Terminated": 1,
	"TimedOut":   1,
}

// checkAll runs every flow's check and checks the runs by status.
func checkAll(s *stack, flows []flow) {
	s.t.Helper()
	total := 0
	for status, n := range runCounts {
		got := s.api.search("WorkflowId STARTS_WITH 'upg-' AND ExecutionStatus='" + status + "'")
		equal(s.t, "number of "+status+" runs", len(got), n)
		total += n
	}
	equal(s.t, "number of runs", len(s.api.search("WorkflowId STARTS_WITH 'upg-'")), total)
	for _, f := range flows {
		f.check(s)
		checkRuns(s, f.id)
	}
}
