package record

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// Seeds of FuzzDecodeRecord: stored documents as the engine writes them.
var (
	runSeeds = []string{
		`{"workerUrl":"http://w","start":{"workflowId":"a","iwfWorkflowType":"T","workflowTimeoutSeconds":0,"iwfWorkerUrl":"http://w","workflowStartOptions":{"workflowAlreadyStartedOptions":{"ignoreAlreadyStartedError":true,"requestId":"r"}}},"config":{"continueAsNewThreshold":100}}`,
		`{"v":1,"workerUrl":"http://127.0.0.1:8803","start":{"workflowId":"wf","iwfWorkflowType":"Basic","workflowTimeoutSeconds":60,"iwfWorkerUrl":"http://127.0.0.1:8803","startStateId":"S1","stateInput":{"encoding":"json","data":"1"},"stateOptions":{"skipWaitUntil":true,"executeApiRetryPolicy":{"maximumAttempts":3,"backoffCoefficient":1.5}},"workflowStartOptions":{"idReusePolicy":"ALLOW_IF_NO_RUNNING","cronSchedule":"* * * * *","retryPolicy":{"maximumAttempts":2},"searchAttributes":[{"key":"CustomIntField","valueType":"INT","integerValue":7}],"dataAttributes":[{"key":"k","value":{"encoding":"json","data":"\"v\""}}]},"waitForCompletionStateIds":["S2"]},"config":{"executingStateIdMode":"ENABLED_FOR_ALL"},"requestId":"r1","timeoutAt":1717243200000,"counters":{"S1":2},"graceful":true,"outputs":[{"completedStateId":"S1","completedStateExecutionId":"S1-1","completedStateOutput":{"data":"x"}}],"executing":{"S1":1},"executingWritten":["S1"],"locks":{"da:k":{"holder":"S1-2/execute","expires":5}},"pendingSkips":[{"workflowStateExecutionId":"S1-2","timerCommandIndex":0}],"retriedBy":"run-2","retryAttempt":1,"errorType":"STATE_API_FAIL_ERROR_TYPE","errorMessage":"boom","completions":{"id:S1-1":{"completedStateId":"S1","completedStateExecutionId":"S1-1"}}}`,
		`{"v":1,"workerUrl":"http://w","start":{"workflowId":"p","iwfWorkflowType":"T","workflowTimeoutSeconds":0,"iwfWorkerUrl":"http://w"},"config":{},"pause":{"by":"oncall","at":1717243200000,"reason":"worker down"}}`,
		`{"v":2}`,
		`{"counters":{}}`,
	}
	executionSeeds = []string{
		`{"done":[true,false],"options":{"skipStartApi":true}}`,
		`{"v":1,"input":{"encoding":"json","data":"{}"},"options":{"waitUntilApiTimeoutSeconds":5,"waitUntilApiFailurePolicy":"PROCEED_ON_FAILURE","executeApiFailureProceedStateOptions":{"skipWaitUntil":true},"dataAttributesLoadingPolicy":{"persistenceLoadingType":"LOAD_PARTIAL_WITH_EXCLUSIVE_LOCK","partialLoadingKeys":["a"],"lockingKeys":["a"]}},"waitForKey":"k","commands":{"commandWaitingType":"ANY_COMBINATION_COMPLETED","commandCombinations":[{"commandIds":["t","s"]}],"timerCommands":[{"commandId":"t","durationSeconds":10}],"signalCommands":[{"commandId":"s","signalChannelName":"sig","atLeast":1}],"interStateChannelCommands":[{"commandId":"c","channelName":"ch"}]},"fireAt":[1717243210000],"done":[true,false,false],"values":[null,{"data":"x"},null],"stateLocals":[{"key":"l","value":{"data":"1"}}],"batch":"S1-1","checkpoint":{"counters":{"S1":1},"outputs":0},"counted":true,"results":{"stateStartApiSucceeded":true,"timerResults":[{"commandId":"t","timerStatus":"FIRED"}],"signalResults":[{"commandId":"s","signalChannelName":"sig","signalRequestStatus":"RECEIVED","signalValue":{"data":"x"}}],"interStateChannelResults":[{"commandId":"c","channelName":"ch","requestStatus":"WAITING"}]}}`,
		`{"v":2}`,
	}
	inputSeeds = []string{
		`{"signal":{"signalChannelName":"sig","signalValue":{"encoding":"json","data":"1"}}}`,
		`{"publish":{"messages":[{"channelName":"ch","value":{"data":"x"}}]}}`,
		`{"setDataAttributes":{"objects":[{"key":"k","value":{"data":"v"}}]}}`,
		`{"setSearchAttributes":{"searchAttributes":[{"key":"CustomDoubleField","valueType":"DOUBLE","doubleValue":-0.5},{"key":"Tags","valueType":"KEYWORD_ARRAY","stringArrayValue":["a","b"]}]}}`,
		`{"skipTimer":{"workflowStateExecutionId":"S1-1","timerCommandId":"t"}}`,
		`{"configUpdate":{"workflowConfig":{"disableSystemSearchAttribute":true,"continueAsNewPageSizeInBytes":1024}}}`,
		`{"rpc":{"rpcName":"r","locking":true,"upsertDataAttributes":[{"key":"k"}],"publishToInterStateChannel":[{"channelName":"ch"}],"stateDecision":{"nextStates":[{"stateId":"S2","waitForKey":"w","stateOptions":{"searchAttributesLoadingPolicy":{"persistenceLoadingType":"LOAD_NONE"}}}],"conditionalClose":{"conditionalCloseType":"FORCE_COMPLETE_ON_SIGNAL_CHANNEL_EMPTY","channelName":"sig","closeInput":{"data":"bye"}}}}}`,
	}
)

// FuzzDecodeRecord decodes arbitrary bytes as a run record, an execution
// record and an external input (kind picks which). Invariants: no panic;
// an accepted document re-encodes with Encode and decodes again to a value
// that encodes to the same bytes (the stored form is a fixed point after
// one round: a second round changes nothing) and is deeply equal.
func FuzzDecodeRecord(f *testing.F) {
	for _, s := range runSeeds {
		f.Add(uint8(0), []byte(s))
	}
	for _, s := range executionSeeds {
		f.Add(uint8(1), []byte(s))
	}
	for _, s := range inputSeeds {
		f.Add(uint8(2), []byte(s))
	}
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		switch kind % 3 {
		case 0:
			roundTrip(t, data, DecodeRun)
		case 1:
			roundTrip(t, data, DecodeExecution)
		default:
			roundTrip(t, data, func(b []byte) (*Input, error) {
				var in Input
				if err := json.Unmarshal(b, &in); err != nil {
					return nil, err
				}
				return &in, nil
			})
		}
	})
}

// roundTrip checks that decode(Encode(decode(data))) is stable.
func roundTrip[T any](t *testing.T, data []byte, decode func([]byte) (*T, error)) {
	t.Helper()
	first, err := decode(data)
	if err != nil {
		if err.Error() == "" {
			t.Fatalf("%q: empty error", data)
		}
		return
	}
	b1 := Encode(first)
	second, err := decode(b1)
	if err != nil {
		t.Fatalf("%q: the re-encoded record %s does not decode: %v", data, b1, err)
	}
	b2 := Encode(second)
	if !bytes.Equal(b1, b2) {
		t.Fatalf("%q: encoding is not stable:\n first %s\nsecond %s", data, b1, b2)
	}
	third, err := decode(b2)
	if err != nil {
		t.Fatalf("%q: %s does not decode: %v", data, b2, err)
	}
	if !reflect.DeepEqual(second, third) {
		t.Fatalf("%q: decoding %s twice gives different values:\n%#v\n%#v", data, b2, second, third)
	}
}
