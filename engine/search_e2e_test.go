package engine_test

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// search runs one search request and fails the test on an error.
func (h *harness) search(query string, pageSize int32, token string) iwfapi.WorkflowSearchResponse {
	h.t.Helper()
	resp, err := h.eng.SearchWorkflows(context.Background(), iwfapi.WorkflowSearchRequest{Query: query, PageSize: &pageSize, NextPageToken: &token})
	if err != nil {
		h.t.Fatalf("search %q: %v", query, err)
	}
	if resp.NextPageToken == nil || resp.WorkflowExecutions == nil {
		h.t.Fatalf("search %q: the response must carry nextPageToken and workflowExecutions: %s", query, mustJSON(resp))
	}
	return resp
}

// searchIDs returns the workflow ids a query finds, all pages, sorted.
func (h *harness) searchIDs(query string) []string {
	h.t.Helper()
	ids := []string{}
	token := ""
	for {
		resp := h.search(query, 1000, token)
		for _, e := range *resp.WorkflowExecutions {
			ids = append(ids, e.WorkflowId)
		}
		if token = *resp.NextPageToken; token == "" {
			break
		}
	}
	sort.Strings(ids)
	return ids
}

// parkState waits for the signal "go" and then completes the workflow.
func parkState() stateHandlers {
	return stateHandlers{
		WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
			return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
				CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
				SignalCommands:     &[]iwfapi.SignalCommand{{SignalChannelName: "go"}},
			}}, 200
		},
		Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			return decide(next(engine.GracefulCompletingState, nil)), 200
		},
	}
}

func sa(key string, vt iwfapi.SearchAttributeValueType, set func(*iwfapi.SearchAttribute)) iwfapi.SearchAttribute {
	a := iwfapi.SearchAttribute{Key: ptr(key), ValueType: ptr(vt)}
	set(&a)
	return a
}

// TestSearchPersistence follows iWF's persistence test: five runs of one
// type with typed search attributes, searched with page size 2 and with a
// query per type.
func TestSearchPersistence(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		h.worker.state("Park", parkState())
		const dt = "2024-01-02T03:04:05+08:00"
		for i := 1; i <= 5; i++ {
			attrs := []iwfapi.SearchAttribute{
				sa("CustomKeywordField", iwfapi.SearchAttributeValueTypeKeyword, func(a *iwfapi.SearchAttribute) { a.StringValue = ptr(fmt.Sprintf("key-%d", i)) }),
				sa("CustomIntField", iwfapi.SearchAttributeValueTypeInt, func(a *iwfapi.SearchAttribute) { a.IntegerValue = ptr(int64(i)) }),
				sa("CustomDoubleField", iwfapi.SearchAttributeValueTypeDouble, func(a *iwfapi.SearchAttribute) { a.DoubleValue = ptr(0.01 * float64(i)) }),
				sa("CustomBoolField", iwfapi.SearchAttributeValueTypeBool, func(a *iwfapi.SearchAttribute) { a.BoolValue = ptr(i%2 == 1) }),
				sa("CustomDatetimeField", iwfapi.SearchAttributeValueTypeDatetime, func(a *iwfapi.SearchAttribute) { a.StringValue = ptr(dt) }),
				sa("CustomStringField", iwfapi.SearchAttributeValueTypeText, func(a *iwfapi.SearchAttribute) { a.StringValue = ptr("My name is Quanzheng Long") }),
				sa("CustomKeywordArrayField", iwfapi.SearchAttributeValueTypeKeywordArray, func(a *iwfapi.SearchAttribute) {
					a.StringArrayValue = &[]string{"common", fmt.Sprintf("tag-%d", i)}
				}),
			}
			// Start times are stored in milliseconds: each run starts in a
			// later one, so that the order by start time has no ties.
			for prev := time.Now().UnixMilli(); time.Now().UnixMilli() == prev; {
				runtime.Gosched()
			}
			h.start(fmt.Sprintf("wf-p-%d", i), "Park", nil, func(r *iwfapi.WorkflowStartRequest) {
				r.IwfWorkflowType = "PersistenceWorkflow"
				r.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{SearchAttributes: &attrs}
			})
		}
		h.start("wf-other", "Park", nil) // another type, no custom attributes
		all := []string{"wf-p-1", "wf-p-2", "wf-p-3", "wf-p-4", "wf-p-5"}
		everything := append([]string{"wf-other"}, all...)

		// Page size 2 over 5 runs: 2, 2, 1, each run once, the last token "".
		var sizes []int
		var seen []string
		token := ""
		for page := 0; page < 10; page++ {
			resp := h.search("IwfWorkflowType='PersistenceWorkflow'", 2, token)
			sizes = append(sizes, len(*resp.WorkflowExecutions))
			for _, e := range *resp.WorkflowExecutions {
				seen = append(seen, e.WorkflowId)
			}
			if token = *resp.NextPageToken; token == "" {
				break
			}
		}
		sort.Strings(seen)
		if mustJSON(sizes) != "[2,2,1]" || mustJSON(seen) != mustJSON(all) {
			t.Fatalf("pages of 2: sizes %v, runs %v", sizes, seen)
		}

		cases := []struct {
			query string
			want  []string
		}{
			{"IwfWorkflowType='PersistenceWorkflow'", all},
			{"WorkflowType='PersistenceWorkflow'", all},
			{"CustomStringField='Quanzheng'", all},
			{"CustomStringField='quanzheng long'", all},
			{"CustomStringField='Quan'", nil},
			{"CustomDoubleField='0.01'", []string{"wf-p-1"}},
			{"CustomDoubleField > 0.025", []string{"wf-p-3", "wf-p-4", "wf-p-5"}},
			{"CustomBoolField='true'", []string{"wf-p-1", "wf-p-3", "wf-p-5"}},
			{"CustomBoolField=false", []string{"wf-p-2", "wf-p-4"}},
			{"CustomKeywordArrayField='tag-2'", []string{"wf-p-2"}},
			{"CustomKeywordArrayField='common'", all},
			{"CustomKeywordArrayField IN ('tag-1', 'tag-5')", []string{"wf-p-1", "wf-p-5"}},
			{"CustomKeywordArrayField != 'tag-1'", []string{"wf-p-2", "wf-p-3", "wf-p-4", "wf-p-5"}},
			{"CustomDatetimeField='" + dt + "'", all},
			{"CustomDatetimeField='2024-01-01T19:04:05Z'", all}, // the same instant
			{"CustomDatetimeField > '2024-01-02T03:04:05Z'", nil},
			{"CustomIntField BETWEEN 2 AND 4 AND CustomKeywordField != 'key-3'", []string{"wf-p-2", "wf-p-4"}},
			{"CustomIntField >= '4' OR CustomKeywordField STARTS_WITH 'key-1'", []string{"wf-p-1", "wf-p-4", "wf-p-5"}},
			{"NOT (CustomIntField < 5)", []string{"wf-p-5"}},
			{"CustomIntField IS NULL", []string{"wf-other"}},
			{"WorkflowId = 'wf-p-3'", []string{"wf-p-3"}},
			{"ExecutionStatus = 'Running'", everything},
			{"ExecutionStatus = 'Completed'", nil},
			{"CloseTime IS NULL AND StartTime > '1h'", everything},
			{"", everything},
			// Double-quoted strings, as in Temporal's list filter.
			{`CustomKeywordField = "key-1"`, []string{"wf-p-1"}},
			{`CustomKeywordField IN ("key-1", 'nope')`, []string{"wf-p-1"}},
			{`CustomKeywordField = "key-1"" OR ""1""=""1"`, nil},
			// Injection attempts: a literal is a value, never SQL.
			{"CustomKeywordField = 'x'' OR ''1''=''1'", nil},
			{"CustomKeywordField = 'key-1'' --'", nil},
		}
		for _, c := range cases {
			if c.want == nil {
				c.want = []string{}
			}
			if got := h.searchIDs(c.query); mustJSON(got) != mustJSON(c.want) {
				t.Errorf("%s: found %v, want %v", c.query, got, c.want)
			}
		}

		// Closing runs shows in ExecutionStatus and CloseTime, and the
		// default order puts open runs first.
		for _, id := range []string{"wf-p-2", "wf-p-4"} {
			if err := h.eng.SignalWorkflow(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: id, SignalChannelName: "go"}); err != nil {
				t.Fatal(err)
			}
			h.result(id)
		}
		if got := h.searchIDs("ExecutionStatus='Completed' AND CloseTime > '1h'"); mustJSON(got) != `["wf-p-2","wf-p-4"]` {
			t.Fatalf("completed runs: %v", got)
		}
		resp := h.search("IwfWorkflowType='PersistenceWorkflow'", 10, "")
		var order []string
		for _, e := range *resp.WorkflowExecutions {
			order = append(order, e.WorkflowId)
		}
		// Open runs by start time descending, then closed runs.
		if mustJSON(order[:3]) != `["wf-p-5","wf-p-3","wf-p-1"]` || len(order) != 5 {
			t.Fatalf("default order: %v", order)
		}
		resp = h.search("IwfWorkflowType='PersistenceWorkflow' ORDER BY CustomIntField DESC", 10, "")
		order = nil
		for _, e := range *resp.WorkflowExecutions {
			order = append(order, e.WorkflowId)
		}
		if mustJSON(order) != `["wf-p-5","wf-p-4","wf-p-3","wf-p-2","wf-p-1"]` {
			t.Fatalf("ORDER BY CustomIntField DESC: %v", order)
		}

		// searchattributes/set is searchable.
		if err := h.eng.SetSearchAttributes(ctx, iwfapi.WorkflowSetSearchAttributesRequest{WorkflowId: "wf-p-1", SearchAttributes: &[]iwfapi.SearchAttribute{
			sa("CustomKeywordField", iwfapi.SearchAttributeValueTypeKeyword, func(a *iwfapi.SearchAttribute) { a.StringValue = ptr("updated") }),
		}}); err != nil {
			t.Fatal(err)
		}
		h.eventually("the new value is searchable", func() bool { return mustJSON(h.searchIDs("CustomKeywordField='updated'")) == `["wf-p-1"]` })

		// Errors are 400s.
		for _, q := range []string{
			"CustomKeywordField='x' OR '1'='1'", // unescaped quote: a syntax error
			"NoSuchField='x'",
			"CustomIntField='abc'",
			"CustomBoolField > 'true'",
			"CustomStringField STARTS_WITH 'My'",
			"ExecutionStatus='Sleeping'",
			"CustomIntField = 1 ORDER BY CustomStringField",
		} {
			_, err := h.eng.SearchWorkflows(ctx, iwfapi.WorkflowSearchRequest{Query: q})
			if engine.CodeOf(err) != engine.CodeInvalidArgument {
				t.Errorf("%s: %v, want an invalid_argument error", q, err)
			}
		}
		// A token of another query, or a forged one, is a 400 too.
		first := h.search("IwfWorkflowType='PersistenceWorkflow'", 2, "")
		for _, req := range []iwfapi.WorkflowSearchRequest{
			{Query: "WorkflowType='PersistenceWorkflow'", NextPageToken: first.NextPageToken},
			{Query: "IwfWorkflowType='PersistenceWorkflow'", NextPageToken: ptr("forged")},
		} {
			if _, err := h.eng.SearchWorkflows(ctx, req); engine.CodeOf(err) != engine.CodeInvalidArgument {
				t.Errorf("token %q for %q: %v, want an invalid_argument error", *req.NextPageToken, req.Query, err)
			}
		}
	})
}

// TestSearchExecutingStateIDs: with executingStateIdMode ENABLED_FOR_ALL a
// search on IwfExecutingStateIds finds a run while its skip-waitUntil state
// S2 runs; with the default mode it does not.
func TestSearchExecutingStateIDs(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		release := make(chan struct{})
		h.worker.state("S1", stateHandlers{
			WaitUntil: parkState().WaitUntil,
			Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				return decide(next("S2", nil, skipWaitUntil)), 200
			},
		})
		h.worker.state("S2", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			<-release
			return decide(next(engine.GracefulCompletingState, nil)), 200
		}})
		h.start("wf-default", "S1", nil)
		h.start("wf-all", "S1", nil, func(r *iwfapi.WorkflowStartRequest) {
			r.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{WorkflowConfigOverride: &iwfapi.WorkflowConfig{ExecutingStateIdMode: ptr(iwfapi.ExecutingStateIdModeEnabledForAll)}}
		})
		h.eventually("S1 listed for both", func() bool {
			return mustJSON(h.searchIDs("IwfExecutingStateIds='S1'")) == `["wf-all","wf-default"]`
		})
		for _, id := range []string{"wf-default", "wf-all"} {
			if err := h.eng.SignalWorkflow(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: id, SignalChannelName: "go"}); err != nil {
				t.Fatal(err)
			}
		}
		h.eventually("S2 running in both", func() bool { return h.worker.count("S2.execute") == 2 })
		h.eventually("S2 listed for ENABLED_FOR_ALL only", func() bool {
			return mustJSON(h.searchIDs("IwfExecutingStateIds='S2'")) == `["wf-all"]`
		})
		if got := h.searchIDs("IwfExecutingStateIds='S1'"); len(got) != 0 {
			t.Fatalf("S1 still listed for %v", got)
		}
		if got := h.searchIDs("IwfExecutingStateIds IS NULL"); mustJSON(got) != `["wf-default"]` {
			t.Fatalf("runs with no executing state listed: %v", got)
		}
		close(release)
		h.result("wf-all")
		h.result("wf-default")
		if got := h.searchIDs("IwfExecutingStateIds='S2'"); len(got) != 0 {
			t.Fatalf("closed run still listed: %v", got)
		}
	})
}
