package upgradetest

import "github.com/iwf-server/iwf-server/api/iwfapi"

// events counts history events by type.
type events = map[string]int

// stored is what the data holds for one run, besides what each flow's
// check reads.
type stored struct {
	history events            // the number of history events of each type
	data    map[string]string // the data attributes (nil for none)
}

// runsOfFlows lists, by workflow id, the runs the data holds, oldest first.
var runsOfFlows = map[string][]stored{
	"upg-completed": {{
		events{"WorkflowStarted": 1, "StateExecutionStarted": 3, "ExecuteCompleted": 3, "WorkflowClosed": 1},
		map[string]string{"origin": "completed", "result-a": "done-a", "result-b": "done-b"},
	}},
	"upg-force-failed": {{history: events{"WorkflowStarted": 1, "StateExecutionStarted": 1, "ExecuteCompleted": 1, "WorkflowClosed": 1}}},
	"upg-api-failed":   {{history: events{"WorkflowStarted": 1, "StateExecutionStarted": 1, "WAIT_UNTILAttemptFailed": 2, "WorkflowClosed": 1}}},
	"upg-canceled": {{
		events{"WorkflowStarted": 1, "StateExecutionStarted": 1, "WaitUntilCompleted": 1, "ExternalInput": 3, "WorkflowClosed": 1},
		map[string]string{"ext-da": "set-by-api"},
	}},
	"upg-terminated":  {{history: parkedAndClosed}},
	"upg-stop-failed": {{history: parkedAndClosed}},
	"upg-timeout":     {{history: parkedAndClosed}},
	"upg-retry-chain": {
		{history: events{"WorkflowStarted": 1, "StateExecutionStarted": 2, "ExecuteCompleted": 2, "WaitUntilCompleted": 1,
			"ExternalInput": 1, "CommandsCompleted": 1, "WorkflowClosed": 1, "RetriedAsNewRun": 1}},
		{history: events{"WorkflowStarted": 1, "StateExecutionStarted": 2, "ExecuteCompleted": 1, "WaitUntilCompleted": 1}},
	},
	"upg-reset": {
		{history: events{"WorkflowStarted": 1, "StateExecutionStarted": 2, "ExecuteCompleted": 2, "WaitUntilCompleted": 1,
			"ExternalInput": 1, "CommandsCompleted": 1, "WorkflowClosed": 1, "Reset": 1}},
		{history: waiting},
	},
	"upg-stubborn": {{
		events{"WorkflowStarted": 1, "StateExecutionStarted": 1, "WAIT_UNTILAttemptFailed": 3},
		map[string]string{"locked-key": "v0"},
	}},
	"upg-obstinate": {{history: events{"WorkflowStarted": 1, "StateExecutionStarted": 1, "EXECUTEAttemptFailed": 3}}},
	"upg-timer":     {{history: waiting}},
	"upg-nap":       {{history: waiting}},
	"upg-signal":    {{history: events{"WorkflowStarted": 1, "StateExecutionStarted": 1, "WaitUntilCompleted": 1, "ExternalInput": 1}}},
	"upg-internal": {{history: events{"WorkflowStarted": 1, "StateExecutionStarted": 1, "WaitUntilCompleted": 1, "ExternalInput": 1,
		"InternalMessagesPublished": 1}}},
	"upg-combo": {{history: events{"WorkflowStarted": 1, "StateExecutionStarted": 1, "WaitUntilCompleted": 1, "ExternalInput": 1}}},
	"upg-attributes": {{
		events{"WorkflowStarted": 1, "StateExecutionStarted": 2, "ExecuteCompleted": 1, "WaitUntilCompleted": 1, "ExternalInput": 1},
		map[string]string{"origin": "attributes", "profile": "gold-member", "rpc-da": "from-rpc-v1"},
	}},
	"upg-idle":     {{history: events{"WorkflowStarted": 1}}},
	"upg-graceful": {{history: events{"WorkflowStarted": 1, "StateExecutionStarted": 3, "ExecuteCompleted": 2, "WaitUntilCompleted": 1}}},
}

var (
	// waiting is a run whose only state waits for its commands.
	waiting = events{"WorkflowStarted": 1, "StateExecutionStarted": 1, "WaitUntilCompleted": 1}
	// parkedAndClosed is a run closed while its only state waited.
	parkedAndClosed = events{"WorkflowStarted": 1, "StateExecutionStarted": 1, "WaitUntilCompleted": 1, "WorkflowClosed": 1}
)

// checkRuns checks every run of a workflow against runsOfFlows: its
// history, its data attributes and its workflow type.
func checkRuns(s *stack, workflowID string) {
	s.t.Helper()
	want, ok := runsOfFlows[workflowID]
	if !ok {
		s.t.Fatalf("%s is missing in runsOfFlows", workflowID)
	}
	runs := s.api.runsOf(workflowID)
	equal(s.t, workflowID+" number of runs", len(runs), len(want))
	for i, run := range runs {
		what := workflowID + " run " + run
		equal(s.t, what+" history event types", eventTypes(s.api.history(workflowID, run)), want[i].history)
		data := want[i].data
		if data == nil {
			data = map[string]string{}
		}
		equal(s.t, what+" data attributes", s.api.dataAttributes(workflowID, run), data)
		sas := s.api.searchAttributes(workflowID, run, map[string]iwfapi.SearchAttributeValueType{"IwfWorkflowType": iwfapi.SearchAttributeValueTypeKeyword})
		equal(s.t, what+" IwfWorkflowType", deref(sas["IwfWorkflowType"].StringValue), workflowType)
	}
}
