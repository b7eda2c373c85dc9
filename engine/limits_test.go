package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// keywordAttrs returns n KEYWORD search attributes named prefix0, prefix1, ...
func keywordAttrs(prefix string, n int) []iwfapi.SearchAttribute {
	out := make([]iwfapi.SearchAttribute, n)
	for i := range out {
		out[i] = sa(fmt.Sprintf("%s%d", prefix, i), iwfapi.SearchAttributeValueTypeKeyword, func(a *iwfapi.SearchAttribute) { a.StringValue = ptr("v") })
	}
	return out
}

// TestLimits: what a request can make the server store or return is
// bounded, each limit a 400 that names it, with nothing stored; a page
// size above the limit is lowered to it.
func TestLimits(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		h.worker.state("Park", parkState())
		invalid := func(what string, err error, want string) {
			t.Helper()
			if engine.CodeOf(err) != engine.CodeInvalidArgument || !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: %v; want invalid_argument mentioning %q", what, err, want)
			}
		}
		startWith := func(id string, attrs []iwfapi.SearchAttribute) error {
			_, err := h.eng.StartWorkflow(ctx, iwfapi.WorkflowStartRequest{
				WorkflowId: id, IwfWorkflowType: "TestWorkflow", IwfWorkerUrl: h.worker.srv.URL,
				WorkflowTimeoutSeconds: 60, StartStateId: ptr("Park"),
				WorkflowStartOptions: &iwfapi.WorkflowStartOptions{SearchAttributes: &attrs},
			})
			return err
		}

		// Keys per run: a start over the limit stores nothing.
		limit := engine.MaxSearchAttributesPerRun
		invalid("start with too many keys", startWith("wf-many", keywordAttrs("K", limit+1)), fmt.Sprintf("at most %d search attribute keys", limit))
		if _, err := h.eng.GetSearchAttributes(ctx, iwfapi.WorkflowGetSearchAttributesRequest{WorkflowId: "wf-many"}); engine.CodeOf(err) != engine.CodeWorkflowNotExists {
			t.Fatalf("a refused start left a workflow behind: %v", err)
		}
		// At the limit, then one more key through searchattributes/set: the
		// keys it already has count.
		if err := startWith("wf-full", keywordAttrs("K", limit)); err != nil {
			t.Fatalf("start at the limit: %v", err)
		}
		set := func(attrs []iwfapi.SearchAttribute) error {
			return h.eng.SetSearchAttributes(ctx, iwfapi.WorkflowSetSearchAttributesRequest{WorkflowId: "wf-full", SearchAttributes: &attrs})
		}
		invalid("set beyond the limit", set(keywordAttrs("More", 1)), fmt.Sprintf("would give it %d", limit+1))
		if err := set(keywordAttrs("K", limit)); err != nil {
			t.Fatalf("rewriting the run's own keys: %v", err)
		}
		got, err := h.eng.GetSearchAttributes(ctx, iwfapi.WorkflowGetSearchAttributesRequest{WorkflowId: "wf-full", Keys: &[]iwfapi.SearchAttributeKeyAndType{{Key: ptr("More0"), ValueType: ptr(iwfapi.SearchAttributeValueTypeKeyword)}}})
		if err != nil || len(deref(got.SearchAttributes)) != 0 {
			t.Fatalf("the refused set stored something: %s, %v", mustJSON(got), err)
		}

		// Words of a TEXT value and elements of a KEYWORD_ARRAY value.
		words := make([]string, engine.MaxTextWords+1)
		for i := range words {
			words[i] = fmt.Sprintf("w%d", i)
		}
		text := sa("CustomStringField", iwfapi.SearchAttributeValueTypeText, func(a *iwfapi.SearchAttribute) { a.StringValue = ptr(strings.Join(words, " ")) })
		invalid("TEXT words", startWith("wf-words", []iwfapi.SearchAttribute{text}), fmt.Sprintf("at most %d distinct words", engine.MaxTextWords))
		repeated := sa("CustomStringField", iwfapi.SearchAttributeValueTypeText, func(a *iwfapi.SearchAttribute) { a.StringValue = ptr(strings.Repeat("same ", 5000)) })
		if err := startWith("wf-repeated", []iwfapi.SearchAttribute{repeated}); err != nil {
			t.Fatalf("a TEXT value of one word repeated: %v", err)
		}
		elems := sa("CustomKeywordArrayField", iwfapi.SearchAttributeValueTypeKeywordArray, func(a *iwfapi.SearchAttribute) { a.StringArrayValue = &words })
		invalid("KEYWORD_ARRAY elements", startWith("wf-elems", []iwfapi.SearchAttribute{elems}), fmt.Sprintf("at most %d elements", engine.MaxKeywordArrayElements))

		// Page sizes above the limit are lowered to it.
		resp, err := h.eng.SearchWorkflows(ctx, iwfapi.WorkflowSearchRequest{Query: "", PageSize: ptr(int32(2147483647))})
		if err != nil || len(deref(resp.WorkflowExecutions)) != 2 {
			t.Fatalf("search with the largest pageSize: %s, %v", mustJSON(resp), err)
		}
	})
}
