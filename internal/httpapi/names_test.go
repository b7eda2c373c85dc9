package httpapi_test

import (
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/internal/httpapi"
)

// Names (ids, state ids, channel names, attribute keys) must be valid
// UTF-8 without U+0000 and at most 1,024 bytes: JSON decoding would
// otherwise turn bad bytes into U+FFFD and make two different ids one
// workflow, and PostgreSQL cannot keep U+0000 in text.
func TestNamesMustBeUTF8AndShort(t *testing.T) {
	s := newTestServer(t, httpapi.Options{})
	long := strings.Repeat("x", 1025)
	ok1024 := strings.Repeat("é", 512) // 1,024 bytes
	for _, tc := range []struct {
		name, path, body string
		status           int
		detail           string
	}{
		{"invalid UTF-8 id", signalPath, "{\"workflowId\":\"wf-\xff\",\"signalChannelName\":\"ch\"}", 400, "not valid UTF-8"},
		{"invalid UTF-8 elsewhere", signalPath, "{\"workflowId\":\"wf-1\",\"signalChannelName\":\"ch\",\"signalValue\":{\"data\":\"\xc3\"}}", 400, "not valid UTF-8"},
		{"lone high surrogate", signalPath, `{"workflowId":"wf-\ud800","signalChannelName":"ch"}`, 400, `unpaired UTF-16 surrogate \ud800`},
		{"lone low surrogate", signalPath, `{"workflowId":"wf-1","signalChannelName":"\udc01x"}`, 400, `unpaired UTF-16 surrogate \udc01`},
		{"high surrogate then other escape", signalPath, `{"workflowId":"wf-\ud800\u0041","signalChannelName":"ch"}`, 400, "unpaired"},
		{"surrogate pair", signalPath, `{"workflowId":"wf-\ud83d\ude00","signalChannelName":"ch"}`, 200, ""},
		{"escaped backslash before u", signalPath, `{"workflowId":"wf-\\ud800","signalChannelName":"ch"}`, 200, ""},
		{"long workflow id", signalPath, `{"workflowId":"` + long + `","signalChannelName":"ch"}`, 400, "workflowId is 1025 bytes long; the limit is 1024"},
		{"long channel", signalPath, `{"workflowId":"wf-1","signalChannelName":"` + long + `"}`, 400, "signalChannelName is 1025 bytes long"},
		{"1024 bytes", signalPath, `{"workflowId":"` + ok1024 + `","signalChannelName":"ch"}`, 200, ""},
		{"NUL in an id", signalPath, `{"workflowId":"wf-\u0000","signalChannelName":"ch"}`, 400, "workflowId holds the character U+0000"},
		{"NUL in a channel", signalPath, `{"workflowId":"wf-1","signalChannelName":"c\u0000h"}`, 400, "signalChannelName holds the character U+0000"},
		{"NUL in a value is fine", signalPath, `{"workflowId":"wf-1","signalChannelName":"ch","signalValue":{"data":"a\u0000b"}}`, 200, ""},
		{"long value is fine", signalPath, `{"workflowId":"wf-1","signalChannelName":"ch","signalValue":{"data":"` + long + `"}}`, 200, ""},
		{"long start state", startPath, `{"workflowId":"wf-1","iwfWorkflowType":"T","workflowTimeoutSeconds":10,"iwfWorkerUrl":"http://localhost:8803","startStateId":"` + long + `"}`, 400, "startStateId is 1025"},
		{"long attribute key in a list", "/api/v1/workflow/dataobjects/set", `{"workflowId":"wf-1","objects":[{"key":"a"},{"key":"` + long + `"}]}`, 400, "key is 1025 bytes"},
		{"NUL in a key to read", "/api/v1/workflow/dataobjects/get", `{"workflowId":"wf-1","keys":["a","k\u0000"]}`, 400, "keys holds the character U+0000"},
		{"long key to read", "/api/v1/workflow/dataobjects/get", `{"workflowId":"wf-1","keys":["` + long + `"]}`, 400, "keys is 1025 bytes"},
		{"NUL in a key an RPC loads", "/api/v1/workflow/rpc", `{"workflowId":"wf-1","rpcName":"r","timeoutSeconds":5,"dataAttributesLoadingPolicy":{"persistenceLoadingType":"LOAD_PARTIAL_WITHOUT_LOCKING","partialLoadingKeys":["k\u0000"]}}`, 400, "partialLoadingKeys holds the character U+0000"},
		{"NUL in a key an RPC locks", "/api/v1/workflow/rpc", `{"workflowId":"wf-1","rpcName":"r","timeoutSeconds":5,"searchAttributesLoadingPolicy":{"persistenceLoadingType":"LOAD_ALL_WITH_PARTIAL_LOCK","lockingKeys":["k\u0000"]}}`, 400, "lockingKeys holds the character U+0000"},
		{"long state id to wait on", startPath, `{"workflowId":"wf-1","iwfWorkflowType":"T","workflowTimeoutSeconds":10,"iwfWorkerUrl":"http://localhost:8803","workflowStartOptions":{"waitForCompletionStateIds":["` + long + `"]}}`, 400, "waitForCompletionStateIds is 1025 bytes"},
		{"NUL in a value list is fine", "/api/v1/workflow/dataobjects/set", `{"workflowId":"wf-1","objects":[{"key":"a","value":{"data":"x"}}],"other":["\u0000"]}`, 200, ""},
		{"long search attribute key", startPath, `{"workflowId":"wf-1","iwfWorkflowType":"T","workflowTimeoutSeconds":10,"iwfWorkerUrl":"http://localhost:8803","workflowStartOptions":{"searchAttributes":[{"key":"` + long + `","valueType":"KEYWORD","stringValue":"v"}]}}`, 400, "key is 1025 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := s.post(t, tc.path, tc.body)
			if resp.status != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.status, tc.status, resp.body)
			}
			if tc.detail != "" {
				if d, _ := resp.errorResponse(t)["detail"].(string); !strings.Contains(d, tc.detail) {
					t.Fatalf("detail %q does not contain %q", d, tc.detail)
				}
			}
		})
	}
}
