package engine_test

import (
	"context"
	"testing"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/search"
)

// TestKeywordFamily: as in Temporal, an attribute declared KEYWORD takes a
// list and one declared KEYWORD_ARRAY a single value; both read back as
// written, and a search on either matches a single value and any element of
// a list.
func TestKeywordFamily(t *testing.T) {
	declare := func(c *engine.Config) {
		c.SearchAttributeTypes = map[string]search.ValueType{"CustomKeywordField": search.Keyword, "CustomKeywordArrayField": search.KeywordArray}
	}
	forEachStoreWith(t, declare, func(t *testing.T, h *harness) {
		ctx := context.Background()
		list := iwfapi.SearchAttribute{Key: ptr("CustomKeywordField"), ValueType: ptr(iwfapi.SearchAttributeValueTypeKeywordArray), StringArrayValue: &[]string{"red", "green"}}
		single := iwfapi.SearchAttribute{Key: ptr("CustomKeywordArrayField"), ValueType: ptr(iwfapi.SearchAttributeValueTypeKeyword), StringValue: ptr("blue")}
		h.worker.state("S1", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			resp := decide(next(engine.DeadEndState, nil))
			resp.UpsertSearchAttributes = &[]iwfapi.SearchAttribute{list, single}
			return resp, 200
		}})
		h.start("wf-kw", "S1", nil, func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
		})
		h.eventually("S1 executed", func() bool { return h.worker.count("S1.execute") == 1 })
		h.idle()
		if s := h.status("wf-kw"); s != iwfapi.WorkflowStatusRunning {
			t.Fatalf("the writes failed the workflow: %s", s)
		}
		got, err := h.eng.GetSearchAttributes(ctx, iwfapi.WorkflowGetSearchAttributesRequest{WorkflowId: "wf-kw", Keys: &[]iwfapi.SearchAttributeKeyAndType{
			{Key: ptr("CustomKeywordField"), ValueType: ptr(iwfapi.SearchAttributeValueTypeKeyword)},
			{Key: ptr("CustomKeywordArrayField"), ValueType: ptr(iwfapi.SearchAttributeValueTypeKeywordArray)},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if mustJSON(got.SearchAttributes) != mustJSON([]iwfapi.SearchAttribute{list, single}) {
			t.Fatalf("read back %s, want as written %s", mustJSON(got.SearchAttributes), mustJSON([]iwfapi.SearchAttribute{list, single}))
		}
		for query, want := range map[string]string{
			"CustomKeywordField = 'green'":                            `["wf-kw"]`,
			"CustomKeywordField IN ('yellow', 'red')":                 `["wf-kw"]`,
			"CustomKeywordField = 'blue'":                             `[]`,
			"CustomKeywordArrayField = 'blue'":                        `["wf-kw"]`,
			"CustomKeywordArrayField STARTS_WITH 'bl'":                `["wf-kw"]`,
			"CustomKeywordField != 'red'":                             `[]`,
			"CustomKeywordField != 'purple' AND WorkflowId = 'wf-kw'": `["wf-kw"]`,
		} {
			if got := mustJSON(h.searchIDs(query)); got != want {
				t.Errorf("%s: found %s, want %s", query, got, want)
			}
		}
	})
}
