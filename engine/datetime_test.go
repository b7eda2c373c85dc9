package engine_test

import (
	"context"
	"testing"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// TestDatetimeNanoseconds: a DATETIME search attribute keeps its
// nanoseconds, as on iWF: searchattributes/get answers it in UTC to the
// nanosecond, and searches compare and order at that precision.
func TestDatetimeNanoseconds(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		h.worker.state("Park", parkState())
		for id, v := range map[string]string{
			"wf-dt-544": "2024-11-09T16:00:01.731455544-08:00",
			"wf-dt-545": "2024-11-10T00:00:01.731455545Z",
			"wf-dt-ms":  "2024-11-10T00:00:01.731Z",
		} {
			attrs := []iwfapi.SearchAttribute{sa("CustomDatetimeField", iwfapi.SearchAttributeValueTypeDatetime, func(a *iwfapi.SearchAttribute) { a.StringValue = ptr(v) })}
			h.start(id, "Park", nil, func(r *iwfapi.WorkflowStartRequest) {
				r.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{SearchAttributes: &attrs}
			})
		}
		got, err := h.eng.GetSearchAttributes(ctx, iwfapi.WorkflowGetSearchAttributesRequest{WorkflowId: "wf-dt-544",
			Keys: &[]iwfapi.SearchAttributeKeyAndType{{Key: ptr("CustomDatetimeField"), ValueType: ptr(iwfapi.SearchAttributeValueTypeDatetime)}}})
		if err != nil || len(deref(got.SearchAttributes)) != 1 || deref((*got.SearchAttributes)[0].StringValue) != "2024-11-10T00:00:01.731455544Z" {
			t.Fatalf("searchattributes/get: %s, %v; want 2024-11-10T00:00:01.731455544Z", mustJSON(got), err)
		}
		for q, want := range map[string][]string{
			"CustomDatetimeField = '2024-11-10T00:00:01.731455544Z'":  {"wf-dt-544"},
			"CustomDatetimeField > '2024-11-10T00:00:01.731455544Z'":  {"wf-dt-545"},
			"CustomDatetimeField >= '2024-11-10T00:00:01.731455544Z'": {"wf-dt-544", "wf-dt-545"},
			"CustomDatetimeField < '2024-11-10T00:00:01.731455544Z'":  {"wf-dt-ms"},
			"CustomDatetimeField < '2024-11-10T00:00:01.731000001Z'":  {"wf-dt-ms"},
		} {
			if ids := h.searchIDs(q); mustJSON(ids) != mustJSON(want) {
				t.Errorf("%s: %v, want %v", q, ids, want)
			}
		}
		resp := h.search("CustomDatetimeField IS NOT NULL ORDER BY CustomDatetimeField DESC", 10, "")
		var order []string
		for _, e := range *resp.WorkflowExecutions {
			order = append(order, e.WorkflowId)
		}
		if want := []string{"wf-dt-545", "wf-dt-544", "wf-dt-ms"}; mustJSON(order) != mustJSON(want) {
			t.Errorf("descending order %v, want %v", order, want)
		}
		// Beyond what nanoseconds in 64 bits hold: refused, not wrapped.
		far := []iwfapi.SearchAttribute{sa("CustomDatetimeField", iwfapi.SearchAttributeValueTypeDatetime, func(a *iwfapi.SearchAttribute) { a.StringValue = ptr("3000-01-01T00:00:00Z") })}
		err = h.eng.SetSearchAttributes(ctx, iwfapi.WorkflowSetSearchAttributesRequest{WorkflowId: "wf-dt-ms", SearchAttributes: &far})
		if err == nil {
			t.Fatal("a DATETIME in the year 3000 was accepted")
		}
	})
}
