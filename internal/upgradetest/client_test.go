package upgradetest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// longPoll is how long a test waits for a workflow to close: generous, so
// that a loaded machine does not fail the test, and far below go test's
// own timeout.
const longPoll = 30 * time.Second

// httpClient bounds every API call, long polls included.
var httpClient = &http.Client{Timeout: 2 * longPoll}

// client calls the server's REST API as an SDK would, with plain JSON over
// HTTP. Its methods fail the test on anything unexpected, so they must be
// called from the test's goroutine.
type client struct {
	t   testing.TB
	url string
}

// call posts in to path and decodes a 200 answer into out (if not nil). It
// returns the status and the raw body.
func (c *client) call(path string, in, out any) (int, []byte) {
	c.t.Helper()
	body, err := json.Marshal(in)
	if err != nil {
		c.t.Fatalf("%s: encode request: %v", path, err)
	}
	resp, err := httpClient.Post(c.url+path, "application/json", bytes.NewReader(body))
	if err != nil {
		c.t.Fatalf("%s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s: read answer: %v", path, err)
	}
	if resp.StatusCode == http.StatusOK && out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			c.t.Fatalf("%s: decode answer %s: %v", path, raw, err)
		}
	}
	return resp.StatusCode, raw
}

// must is call that fails the test unless the answer is 200.
func (c *client) must(path string, in, out any) {
	c.t.Helper()
	if status, raw := c.call(path, in, out); status != http.StatusOK {
		c.t.Fatalf("%s %s: status %d: %s", path, mustJSON(in), status, raw)
	}
}

func (c *client) start(req iwfapi.WorkflowStartRequest) string {
	c.t.Helper()
	var resp iwfapi.WorkflowStartResponse
	c.must("/api/v1/workflow/start", req, &resp)
	return deref(resp.WorkflowRunId)
}

func (c *client) signal(workflowID, channel, value string) {
	c.t.Helper()
	c.must("/api/v1/workflow/signal", iwfapi.WorkflowSignalRequest{WorkflowId: workflowID, SignalChannelName: channel, SignalValue: obj(value)}, nil)
}

// get describes a run ("" for the current one) with its results.
func (c *client) get(workflowID, runID string) iwfapi.WorkflowGetResponse {
	c.t.Helper()
	var resp iwfapi.WorkflowGetResponse
	c.must("/api/v1/workflow/get", iwfapi.WorkflowGetRequest{WorkflowId: workflowID, WorkflowRunId: optional(runID), NeedsResults: ptr(true)}, &resp)
	return resp
}

// await waits until a run ("" for the current one, following workflow
// retries) has closed and describes it. Long polls that time out are
// repeated until longPoll has passed.
func (c *client) await(workflowID, runID string) iwfapi.WorkflowGetResponse {
	c.t.Helper()
	deadline := time.Now().Add(longPoll)
	for {
		var resp iwfapi.WorkflowGetResponse
		status, raw := c.call("/api/v1/workflow/getWithWait", iwfapi.WorkflowGetRequest{
			WorkflowId: workflowID, WorkflowRunId: optional(runID), NeedsResults: ptr(true), WaitTimeSeconds: ptr(int32(10)),
		}, &resp)
		switch {
		case status == http.StatusOK:
			return resp
		case status == 420 && time.Now().Before(deadline):
			continue
		}
		c.t.Fatalf("getWithWait %s: status %d: %s", workflowID, status, raw)
	}
}

func (c *client) dataAttributes(workflowID, runID string) map[string]string {
	c.t.Helper()
	var resp iwfapi.WorkflowGetDataObjectsResponse
	c.must("/api/v1/workflow/dataobjects/get", iwfapi.WorkflowGetDataObjectsRequest{WorkflowId: workflowID, WorkflowRunId: optional(runID)}, &resp)
	return keyValues(deref(resp.Objects))
}

// searchAttributes reads the named search attributes of a run; types maps
// each key to its type.
func (c *client) searchAttributes(workflowID, runID string, types map[string]iwfapi.SearchAttributeValueType) map[string]iwfapi.SearchAttribute {
	c.t.Helper()
	var keys []iwfapi.SearchAttributeKeyAndType
	for k, vt := range types {
		keys = append(keys, iwfapi.SearchAttributeKeyAndType{Key: ptr(k), ValueType: ptr(vt)})
	}
	var resp iwfapi.WorkflowGetSearchAttributesResponse
	c.must("/api/v1/workflow/searchattributes/get", iwfapi.WorkflowGetSearchAttributesRequest{WorkflowId: workflowID, WorkflowRunId: optional(runID), Keys: &keys}, &resp)
	out := map[string]iwfapi.SearchAttribute{}
	for _, sa := range deref(resp.SearchAttributes) {
		out[deref(sa.Key)] = sa
	}
	return out
}

// history returns every history event of a run ("" for the current one).
func (c *client) history(workflowID, runID string) []iwfapi.WorkflowHistoryEvent {
	c.t.Helper()
	var all []iwfapi.WorkflowHistoryEvent
	var after int64
	for {
		var resp iwfapi.WorkflowHistoryResponse
		c.must("/api/v1/workflow/history", iwfapi.WorkflowHistoryRequest{WorkflowId: workflowID, WorkflowRunId: optional(runID), AfterEventId: ptr(after), PageSize: ptr(int32(100))}, &resp)
		all = append(all, resp.Events...)
		if !deref(resp.HasMore) || len(resp.Events) == 0 {
			return all
		}
		after = resp.Events[len(resp.Events)-1].EventId
	}
}

// search returns the workflow id and run id of every run a query matches,
// across all pages (small ones, so that paging is exercised too).
func (c *client) search(query string) []iwfapi.WorkflowSearchResponseEntry {
	c.t.Helper()
	var all []iwfapi.WorkflowSearchResponseEntry
	token := ""
	for {
		var resp iwfapi.WorkflowSearchResponse
		c.must("/api/v1/workflow/search", iwfapi.WorkflowSearchRequest{Query: query, PageSize: ptr(int32(7)), NextPageToken: optional(token)}, &resp)
		all = append(all, deref(resp.WorkflowExecutions)...)
		token = deref(resp.NextPageToken)
		if token == "" {
			return all
		}
	}
}

// runsOf returns the run ids of a workflow id, oldest first.
func (c *client) runsOf(workflowID string) []string {
	c.t.Helper()
	var ids []string
	for _, e := range c.search("WorkflowId='" + workflowID + "' ORDER BY StartTime ASC") {
		ids = append(ids, e.WorkflowRunId)
	}
	return ids
}

// waitHistory waits until the history of a run ("" for the current one)
// satisfies ok, re-reading it every few milliseconds for at most longPoll.
// Only the generator uses it: the upgrade tests wait on getWithWait and on
// the worker's records.
func (c *client) waitHistory(workflowID, runID string, what string, ok func([]iwfapi.WorkflowHistoryEvent) bool) []iwfapi.WorkflowHistoryEvent {
	c.t.Helper()
	deadline := time.Now().Add(longPoll)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		events := c.history(workflowID, runID)
		if ok(events) {
			return events
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: %s did not happen within %s; history: %s", workflowID, what, longPoll, mustJSON(events))
		}
		<-tick.C
	}
}

// countEvents counts the events of a type, of one execution when
// executionID is not empty.
func countEvents(events []iwfapi.WorkflowHistoryEvent, typ, executionID string) int {
	n := 0
	for _, ev := range events {
		if ev.EventType == typ && (executionID == "" || deref(ev.StateExecutionId) == executionID) {
			n++
		}
	}
	return n
}

// hasEvent returns a waitHistory condition: n events of a type and execution.
func hasEvent(typ, executionID string, n int) func([]iwfapi.WorkflowHistoryEvent) bool {
	return func(events []iwfapi.WorkflowHistoryEvent) bool { return countEvents(events, typ, executionID) >= n }
}

// eventTypes counts a history's events by type.
func eventTypes(events []iwfapi.WorkflowHistoryEvent) map[string]int {
	out := map[string]int{}
	for _, ev := range events {
		out[ev.EventType]++
	}
	return out
}

// keyValues turns key-value pairs into a map of their decoded values.
func keyValues(kvs []iwfapi.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		out[deref(kv.Key)] = str(kv.Value)
	}
	return out
}

// output is one state completion output, decoded, for comparisons.
type output struct {
	StateID, ExecutionID, Value string
}

// outputs decodes a run's results, sorted by execution id when sorted is
// set (parallel states complete in any order).
func outputs(results *[]iwfapi.StateCompletionOutput, sorted bool) []output {
	var out []output
	for _, r := range deref(results) {
		out = append(out, output{r.CompletedStateId, r.CompletedStateExecutionId, str(r.CompletedStateOutput)})
	}
	if sorted {
		slices.SortFunc(out, func(a, b output) int { return strings.Compare(a.ExecutionID, b.ExecutionID) })
	}
	return out
}

// obj encodes a string as the JSON EncodedObject an SDK would send.
func obj(s string) *iwfapi.EncodedObject {
	return &iwfapi.EncodedObject{Encoding: ptr("json"), Data: ptr(mustJSON(s))}
}

// str decodes an object written by obj; "" for none, and the raw data for
// anything else.
func str(o *iwfapi.EncodedObject) string {
	if o == nil || o.Data == nil {
		return ""
	}
	var s string
	if err := json.Unmarshal([]byte(*o.Data), &s); err != nil {
		return *o.Data
	}
	return s
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// optional is nil for "" and a pointer to s otherwise.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
