package upgradetest

import (
	"slices"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// attributesFlow is a workflow with data and search attributes (all seven
// types), written at the start, by a state with custom options and by an
// RPC; it waits in a state with custom options and state locals, and both
// states publish completions for waitForStateCompletion.
func attributesFlow() flow {
	return flow{
		id: "upg-attributes",
		start: iwfapi.WorkflowStartRequest{
			StartStateId: ptr("setup"),
			StateOptions: &iwfapi.WorkflowStateOptions{
				SkipWaitUntil:            ptr(true),
				ExecuteApiTimeoutSeconds: ptr(int32(15)),
				ExecuteApiRetryPolicy: &iwfapi.RetryPolicy{
					InitialIntervalSeconds: ptr(int32(2)), BackoffCoefficient: ptr(float32(1.5)),
					MaximumIntervalSeconds: ptr(int32(10)), MaximumAttempts: ptr(int32(4)),
				},
			},
			WaitForCompletionStateIds: &[]string{"setup", "hold"},
			WorkflowStartOptions: &iwfapi.WorkflowStartOptions{
				DataAttributes: kvs("origin", "attributes"),
				SearchAttributes: &[]iwfapi.SearchAttribute{
					keyword("Customer", "acme"),
					{Key: ptr("Priority"), ValueType: ptr(iwfapi.SearchAttributeValueTypeInt), IntegerValue: ptr(int64(42))},
				},
				WorkflowConfigOverride: &iwfapi.WorkflowConfig{ExecutingStateIdMode: ptr(iwfapi.ExecutingStateIdModeEnabledForAll)},
			},
		},
		drive: func(s *stack) {
			waitWaiting(s, "upg-attributes", "hold-1")
			mustRPC(s, "upg-attributes", "write", "written")
		},
		check: checkAttributes,
		finish: func(s *stack) []string {
			run := running(s, "upg-attributes")
			s.api.signal("upg-attributes", "release", "go")
			closedAs(s.t, "upg-attributes", s.api.await("upg-attributes", run), iwfapi.WorkflowStatusCompleted, "", "", false,
				output{"hold", "hold-1", "released:local-1:go"})
			calls(s, "upg-attributes", run, "execute hold-1")
			// The stored options of hold-1 chose what execute loaded.
			c := s.worker.callsOf(run)[0]
			equal(s.t, "upg-attributes state locals of hold-1", c.StateLocals, map[string]string{"note": "local-1"})
			equal(s.t, "upg-attributes data attributes of hold-1", c.DataObjects, map[string]string{"profile": "gold-member"})
			keys := slices.Sorted(slices.Values(c.SearchKeys))
			equal(s.t, "upg-attributes search attributes of hold-1", keys, []string{"Customer", "Tags"})
			sas := s.api.searchAttributes("upg-attributes", run, map[string]iwfapi.SearchAttributeValueType{
				"Stage": iwfapi.SearchAttributeValueTypeKeyword, "IwfExecutingStateIds": iwfapi.SearchAttributeValueTypeKeywordArray,
			})
			equal(s.t, "upg-attributes Stage", deref(sas["Stage"].StringValue), "done")
			equal(s.t, "upg-attributes executing states", len(deref(sas["IwfExecutingStateIds"].StringArrayValue)), 0)
			stateCompletion(s, "upg-attributes", "hold-1", "hold", "hold-key")
			return []string{run}
		},
	}
}

// attributeTypes are the search attributes of upg-attributes and their
// types.
var attributeTypes = map[string]iwfapi.SearchAttributeValueType{
	"Customer":             iwfapi.SearchAttributeValueTypeKeyword,
	"Priority":             iwfapi.SearchAttributeValueTypeInt,
	"Notes":                iwfapi.SearchAttributeValueTypeText,
	"Since":                iwfapi.SearchAttributeValueTypeDatetime,
	"Score":                iwfapi.SearchAttributeValueTypeDouble,
	"Vip":                  iwfapi.SearchAttributeValueTypeBool,
	"Tags":                 iwfapi.SearchAttributeValueTypeKeywordArray,
	"RpcTag":               iwfapi.SearchAttributeValueTypeKeyword,
	"IwfExecutingStateIds": iwfapi.SearchAttributeValueTypeKeywordArray,
}

func checkAttributes(s *stack) {
	run := running(s, "upg-attributes")
	sas := s.api.searchAttributes("upg-attributes", "", attributeTypes)
	type value struct {
		String  string
		Int     int64
		Double  float64
		Bool    bool
		Strings []string
	}
	got := map[string]value{}
	for k, sa := range sas {
		got[k] = value{deref(sa.StringValue), deref(sa.IntegerValue), deref(sa.DoubleValue), deref(sa.BoolValue), deref(sa.StringArrayValue)}
	}
	equal(s.t, "upg-attributes search attributes", got, map[string]value{
		"Customer":             {String: "acme"},
		"Priority":             {Int: 42},
		"Notes":                {String: "The quick brown fox"},
		"Since":                {String: "2024-01-01T19:04:05Z"},
		"Score":                {Double: 1.5},
		"Vip":                  {Bool: true},
		"Tags":                 {Strings: []string{"gold", "early"}},
		"RpcTag":               {String: "rpc-v1"},
		"IwfExecutingStateIds": {Strings: []string{"hold"}},
	})
	stateCompletion(s, "upg-attributes", "setup-1", "setup", "")
	// Every type is indexed: a search on all of them finds the run.
	found := s.api.search("Customer='acme' AND Priority=42 AND Notes='quick fox' AND Since='2024-01-01T19:04:05Z' " +
		"AND Score>1.4 AND Vip=true AND Tags='early' AND RpcTag='rpc-v1' AND IwfExecutingStateIds='hold'")
	equal(s.t, "upg-attributes search", found, []iwfapi.WorkflowSearchResponseEntry{{WorkflowId: "upg-attributes", WorkflowRunId: run}})
}
