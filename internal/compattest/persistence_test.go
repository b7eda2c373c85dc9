package compattest

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// search runs one /search request. It skips the calling (sub)test when this
// server answers 501: search may not be implemented yet.
func (e *env) search(t *testing.T, query string, pageSize int32, token string) iwfapi.WorkflowSearchResponse {
	t.Helper()
	resp, err := e.api.SearchWorkflowsWithResponse(e.ctx(), iwfapi.WorkflowSearchRequest{Query: query, PageSize: ptr(pageSize), NextPageToken: ptr(token)})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode() == 501 {
		t.Skipf("SKIPPED: POST /api/v1/workflow/search answers 501 (not implemented yet): %s", resp.Body)
	}
	if resp.StatusCode() != 200 || resp.JSON200 == nil {
		t.Fatalf("search %q: %d %s", query, resp.StatusCode(), resp.Body)
	}
	return *resp.JSON200
}

// searchCount pages through a query with page size 2 and checks iWF's
// pagination contract: full pages while more remain, and a page fetched
// with a last token is empty with an empty token.
func (e *env) searchCount(t *testing.T, query string, want int) {
	t.Helper()
	token, count := "", 0
	for pages := 0; pages < 100; pages++ {
		resp := e.search(t, query, 2, token)
		n := len(slice(resp.WorkflowExecutions))
		count += n
		next := deref(resp.NextPageToken)
		switch {
		case count < want:
			if n != 2 || next == "" {
				t.Errorf("search %q: a page of %d with token %q before reaching %d results", query, n, next, want)
				return
			}
			token = next
			continue
		case count == want && next != "":
			last := e.search(t, query, 2, next)
			if len(slice(last.WorkflowExecutions)) != 0 || deref(last.NextPageToken) != "" {
				t.Errorf("search %q: the page after the last has %d results, token %q", query, len(slice(last.WorkflowExecutions)), deref(last.NextPageToken))
			}
		case count > want:
			t.Errorf("search %q: %d results, want %d", query, count, want)
		}
		return
	}
}

// TestPersistence mirrors integ/persistence_test.go: initial DATETIME search
// attribute and data attribute, upserts from waitUntil and execute, partial
// loading (generic and legacy fields), state locals, reads of data and
// search attributes after completion, and /search with page size 2 over five
// runs (skipped while search answers 501).
func TestPersistence(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		const (
			daKey, daKey2 = "test-data-attribute", "test-data-attribute-2"
			localKey      = "test-state-local"
			kwKey, intKey = "CustomKeywordField", "CustomIntField"
			boolKey       = "CustomBoolField"
			dtKey         = "CustomDatetimeField"
		)
		val1, val2 := obj("test-data-attribute-value1"), obj("test-data-attribute-value2")
		local := obj("test-state-local-value")
		now := time.Now().Truncate(time.Second)
		nowStr := now.Format("2006-01-02T15:04:05-07:00")
		initialDA := kv("TestKey", &iwfapi.EncodedObject{Encoding: ptr("TestEncoding"), Data: ptr("TestValue")})
		datetimeSA := iwfapi.SearchAttribute{Key: ptr(dtKey), ValueType: ptr(iwfapi.SearchAttributeValueTypeDatetime), StringValue: ptr(nowStr)}

		notes := &recorder{} // what the worker saw, in call order
		note := func(format string, args ...any) { notes.add(fmt.Sprintf(format, args...) + ";") }
		count := func(sas []iwfapi.SearchAttribute, key string, match func(iwfapi.SearchAttribute) bool) int {
			n := 0
			for _, sa := range sas {
				if deref(sa.Key) == key && match(sa) {
					n++
				}
			}
			return n
		}
		isKeyword := func(v string) func(iwfapi.SearchAttribute) bool {
			return func(sa iwfapi.SearchAttribute) bool {
				return deref(sa.ValueType) == iwfapi.SearchAttributeValueTypeKeyword && deref(sa.StringValue) == v
			}
		}
		isInt := func(v int64) func(iwfapi.SearchAttribute) bool {
			return func(sa iwfapi.SearchAttribute) bool {
				return deref(sa.ValueType) == iwfapi.SearchAttributeValueTypeInt && deref(sa.IntegerValue) == v
			}
		}
		keys := func(das []iwfapi.KeyValue) string {
			var ks []string
			for _, d := range das {
				ks = append(ks, deref(d.Key)+"="+deref(d.Value.Data))
			}
			return strings.Join(ks, ",")
		}
		wfID := e.id("persistence")
		checkInitialSA := func(api string, c iwfapi.Context, sas []iwfapi.SearchAttribute) {
			// Workers get the search attributes as written (system ones
			// excluded); the runs of the search subtest write other values.
			for _, sa := range sas {
				if deref(sa.Key) == dtKey && deref(sa.ValueType) != iwfapi.SearchAttributeValueTypeDatetime ||
					deref(sa.Key) == dtKey && c.WorkflowId == wfID && string(mustJSON(sa)) != string(mustJSON(datetimeSA)) {
					e.w.fail("%s: datetime search attribute %s, want %s", api, mustJSON(sa), mustJSON(datetimeSA))
				}
				if strings.HasPrefix(deref(sa.Key), "Iwf") {
					e.w.fail("%s: system search attribute %s handed to the worker", api, mustJSON(sa))
				}
			}
		}
		e.w.state("S1", func(req iwfapi.WorkflowStateStartRequest) reply {
			checkInitialSA("S1.waitUntil", req.Context, slice(req.SearchAttributes))
			if req.Context.WorkflowId != wfID {
				return ok(iwfapi.WorkflowStateStartResponse{
					CommandRequest:         &iwfapi.CommandRequest{DeciderTriggerType: ptr(iwfapi.DeciderTriggerTypeAllCommandCompleted)},
					UpsertSearchAttributes: list(boolSA(boolKey, false)),
				})
			}
			note("S1.waitUntil DAs %s", keys(slice(req.DataObjects)))
			return ok(iwfapi.WorkflowStateStartResponse{
				CommandRequest:         &iwfapi.CommandRequest{DeciderTriggerType: ptr(iwfapi.DeciderTriggerTypeAllCommandCompleted)},
				UpsertDataObjects:      list(kv(daKey, val1), kv(daKey2, val1)),
				UpsertSearchAttributes: list(keywordSA(kwKey, "keyword-value1"), intSA(intKey, 1), boolSA(boolKey, false)),
				UpsertStateLocals:      list(kv(localKey, local)),
			})
		}, func(req iwfapi.WorkflowStateDecideRequest) reply {
			if req.Context.WorkflowId != wfID {
				return complete(req)
			}
			sas := slice(req.SearchAttributes)
			note("S1.execute kw %d int %d DAs %s locals %s", count(sas, kwKey, isKeyword("keyword-value1")), count(sas, intKey, isInt(1)),
				keys(slice(req.DataObjects)), mustJSON(req.StateLocals))
			return ok(iwfapi.WorkflowStateDecideResponse{
				StateDecision: &iwfapi.StateDecision{NextStates: list(moveWith("S2", nil, iwfapi.WorkflowStateOptions{
					SearchAttributesLoadingPolicy: partial(intKey, kwKey),
					DataAttributesLoadingPolicy:   partial(daKey),
				}))},
				UpsertDataObjects:      list(kv(daKey, val2)),
				UpsertSearchAttributes: list(keywordSA(kwKey, "keyword-value2"), intSA(intKey, 2)),
			})
		})
		e.w.state("S2", func(req iwfapi.WorkflowStateStartRequest) reply {
			sas := slice(req.SearchAttributes)
			note("S2.waitUntil kw %d int %d DAs %s", count(sas, kwKey, isKeyword("keyword-value2")), count(sas, intKey, isInt(2)), keys(slice(req.DataObjects)))
			return noCommands(req)
		}, func(req iwfapi.WorkflowStateDecideRequest) reply {
			sas := slice(req.SearchAttributes)
			note("S2.execute kw %d int %d DAs %s", count(sas, kwKey, isKeyword("keyword-value2")), count(sas, intKey, isInt(2)), keys(slice(req.DataObjects)))
			return decide(moveWith("S3", nil, iwfapi.WorkflowStateOptions{
				SearchAttributesLoadingPolicy: partial(intKey),
				DataObjectsLoadingPolicy:      partial(daKey, daKey2), // the legacy field
			}))
		})
		e.w.state("S3", func(req iwfapi.WorkflowStateStartRequest) reply {
			note("S3.waitUntil SAs %s DAs %s", mustJSON(req.SearchAttributes), keys(slice(req.DataObjects)))
			return noCommands(req)
		}, func(req iwfapi.WorkflowStateDecideRequest) reply {
			note("S3.execute SAs %s DAs %s", mustJSON(req.SearchAttributes), keys(slice(req.DataObjects)))
			return complete(req)
		})

		req := e.startRequest(wfID, "persistence", "S1")
		req.StateOptions = &iwfapi.WorkflowStateOptions{
			SearchAttributesLoadingPolicy: &iwfapi.PersistenceLoadingPolicy{PersistenceLoadingType: ptr(iwfapi.PersistenceLoadingTypeLoadAllWithoutLocking)},
			DataObjectsLoadingPolicy:      &iwfapi.PersistenceLoadingPolicy{PersistenceLoadingType: ptr(iwfapi.PersistenceLoadingTypeLoadAllWithoutLocking)},
		}
		req.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{
			SearchAttributes: list(datetimeSA), DataAttributes: list(initialDA), UseMemoForDataAttributes: ptr(false),
		}
		e.start(req)
		if got := e.dataAttributes(wfID, "", daKey, "TestKey"); len(got) == 0 || deref(got[0].Key) != "TestKey" {
			t.Errorf("initial data attribute not readable at once: %s", mustJSON(got))
		}
		r, _ := e.result(wfID)
		if r.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			t.Fatalf("status %s", r.WorkflowStatus)
		}
		e.w.expectCounts(t, map[string]int{"S1.waitUntil": 1, "S1.execute": 1, "S2.waitUntil": 1, "S2.execute": 1, "S3.waitUntil": 1, "S3.execute": 1})
		wantNotes := "S1.waitUntil DAs TestKey=TestValue;" +
			`S1.execute kw 1 int 1 DAs TestKey=TestValue,test-data-attribute=test-data-attribute-value1,test-data-attribute-2=test-data-attribute-value1 locals [{"key":"test-state-local","value":{"data":"test-state-local-value","encoding":"json"}}];` +
			"S2.waitUntil kw 1 int 1 DAs test-data-attribute=test-data-attribute-value2;" +
			"S2.execute kw 1 int 1 DAs test-data-attribute=test-data-attribute-value2;" +
			`S3.waitUntil SAs [{"integerValue":2,"key":"CustomIntField","valueType":"INT"}] DAs test-data-attribute=test-data-attribute-value2,test-data-attribute-2=test-data-attribute-value1;` +
			`S3.execute SAs [{"integerValue":2,"key":"CustomIntField","valueType":"INT"}] DAs test-data-attribute=test-data-attribute-value2,test-data-attribute-2=test-data-attribute-value1;`
		if got := notes.String(); got != wantNotes {
			t.Errorf("what the worker saw:\n got  %s\n want %s", got, wantNotes)
		}

		// Reads after completion; data attributes in ascending key order.
		jsonEqualValue(t, "data attributes by key", e.dataAttributes(wfID, "", daKey, "TestKey", "absent"), `[
			{"key":"TestKey","value":{"encoding":"TestEncoding","data":"TestValue"}},
			{"key":"test-data-attribute","value":{"encoding":"json","data":"test-data-attribute-value2"}}]`)
		jsonEqualValue(t, "all data attributes", e.dataAttributes(wfID, ""), `[
			{"key":"TestKey","value":{"encoding":"TestEncoding","data":"TestValue"}},
			{"key":"test-data-attribute","value":{"encoding":"json","data":"test-data-attribute-value2"}},
			{"key":"test-data-attribute-2","value":{"encoding":"json","data":"test-data-attribute-value1"}}]`)
		jsonEqualValue(t, "keyword search attribute", e.searchAttributes(wfID, r.WorkflowRunId, saKey(kwKey, iwfapi.SearchAttributeValueTypeKeyword)),
			`[{"key":"CustomKeywordField","valueType":"KEYWORD","stringValue":"keyword-value2"}]`)
		jsonEqualValue(t, "int search attribute", e.searchAttributes(wfID, r.WorkflowRunId, saKey(intKey, iwfapi.SearchAttributeValueTypeInt)),
			`[{"key":"CustomIntField","valueType":"INT","integerValue":2}]`)
		jsonEqualValue(t, "all search attributes", e.searchAttributes(wfID, "",
			saKey(dtKey, iwfapi.SearchAttributeValueTypeDatetime), saKey(kwKey, iwfapi.SearchAttributeValueTypeKeyword),
			saKey(intKey, iwfapi.SearchAttributeValueTypeInt), saKey(boolKey, iwfapi.SearchAttributeValueTypeBool),
			saKey("IwfWorkflowType", iwfapi.SearchAttributeValueTypeKeyword), saKey("CustomDoubleField", iwfapi.SearchAttributeValueTypeDouble)),
			fmt.Sprintf(`[
			{"key":"CustomDatetimeField","valueType":"DATETIME","stringValue":%q},
			{"key":"CustomKeywordField","valueType":"KEYWORD","stringValue":"keyword-value2"},
			{"key":"CustomIntField","valueType":"INT","integerValue":2},
			{"key":"CustomBoolField","valueType":"BOOL","boolValue":false},
			{"key":"IwfWorkflowType","valueType":"KEYWORD","stringValue":"persistence"}]`, now.UTC().Format(time.RFC3339Nano)))

		t.Run("search", func(t *testing.T) {
			e.search(t, "WorkflowId='"+wfID+"'", 2, "") // skips while search answers 501
			more := req
			base := wfID
			sas := []iwfapi.SearchAttribute{
				boolSA(boolKey, true),
				{Key: ptr(dtKey), ValueType: ptr(iwfapi.SearchAttributeValueTypeDatetime), StringValue: ptr(strconv.FormatInt(now.UnixNano(), 10))},
			}
			extra := [][]iwfapi.SearchAttribute{
				nil,
				{{Key: ptr("CustomDoubleField"), ValueType: ptr(iwfapi.SearchAttributeValueTypeDouble), DoubleValue: ptr(0.01)}},
				{{Key: ptr(kwKey), ValueType: ptr(iwfapi.SearchAttributeValueTypeKeywordArray), StringArrayValue: list("keyword1", "keyword2")}},
				{{Key: ptr("CustomStringField"), ValueType: ptr(iwfapi.SearchAttributeValueTypeText), StringValue: ptr("My name is Quanzheng Long")}},
			}
			for i, add := range extra {
				sas = append(sas, add...)
				opts := *req.WorkflowStartOptions
				opts.SearchAttributes = list(sas...)
				more.WorkflowStartOptions = &opts
				more.WorkflowId = fmt.Sprintf("%s-%d", base, i+1)
				e.start(more)
			}
			for i := range extra {
				if r, _ := e.result(fmt.Sprintf("%s-%d", base, i+1)); r.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
					t.Fatalf("run %d: %s", i+1, r.WorkflowStatus)
				}
			}
			e.searchCount(t, fmt.Sprintf("CustomDatetimeField='%s'", nowStr), 5)
			e.searchCount(t, fmt.Sprintf("CustomDatetimeField='%s' AND CustomStringField='%s'", nowStr, "Quanzheng"), 1)
			e.searchCount(t, fmt.Sprintf("CustomDatetimeField='%s' AND CustomDoubleField='%s'", nowStr, "0.01"), 3)
			// Every run's S1 set CustomBoolField to false.
			e.searchCount(t, fmt.Sprintf("CustomDatetimeField='%s' AND CustomBoolField='%s'", nowStr, "true"), 0)
		})
	})
}

// TestSetDataAttributes mirrors integ/set_data_attributes_test.go:
// dataobjects/set then dataobjects/get.
func TestSetDataAttributes(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.w.state("S1", waitForever, nil)
		wfID := e.id("set-data-attributes")
		req := e.startRequest(wfID, "signal", "S1")
		e.start(req)
		set := func(objects ...iwfapi.KeyValue) *iwfapi.SetWorkflowDataObjectsResponse {
			resp, err := e.api.SetWorkflowDataObjectsWithResponse(e.ctx(), iwfapi.WorkflowSetDataObjectsRequest{WorkflowId: wfID, Objects: &objects})
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}
		expectError(t, "dataobjects/set", set(kv("test-data-attribute", obj("test-data-attribute-value1")), kv("test-data-attribute-2", obj("test-data-attribute-value2"))), 200, `{}`)
		jsonEqualValue(t, "dataobjects/get", e.dataAttributes(wfID, "", "test-data-attribute", "test-data-attribute-2"), `[
			{"key":"test-data-attribute","value":{"encoding":"json","data":"test-data-attribute-value1"}},
			{"key":"test-data-attribute-2","value":{"encoding":"json","data":"test-data-attribute-value2"}}]`)
		// A key without value is stored as such; upserts replace the whole value.
		expectError(t, "dataobjects/set", set(kv("test-data-attribute", nil)), 200, `{}`)
		jsonEqualValue(t, "dataobjects/get", e.dataAttributes(wfID, "", "test-data-attribute"), `[{"key":"test-data-attribute"}]`)

		e.stop(iwfapi.WorkflowStopRequest{WorkflowId: wfID, StopType: ptr(iwfapi.WorkflowStopTypeTerminate)})
		late := set(kv("k", obj("v")))
		if late.StatusCode() != 400 || late.JSON400 == nil || deref(late.JSON400.SubStatus) != iwfapi.ErrorSubStatusWorkflowNotExists {
			t.Errorf("dataobjects/set on a closed run: %d %s", late.StatusCode(), late.Body)
		}
		if got := e.dataAttributes(wfID, ""); len(got) != 2 {
			t.Errorf("dataobjects/get on a closed run: %s", mustJSON(got))
		}
	})
}

// TestSetSearchAttributes mirrors integ/set_search_attributes_test.go:
// searchattributes/set of INT, KEYWORD and KEYWORD_ARRAY values, then
// searchattributes/get. Unlike iWF (200, silently not indexed), a missing or
// unknown valueType is rejected with 400.
func TestSetSearchAttributes(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.w.state("S1", waitForever, nil)
		wfID := e.id("set-search-attributes")
		req := e.startRequest(wfID, "signal", "S1")
		e.start(req)
		sas := []iwfapi.SearchAttribute{
			intSA("CustomIntField", 1),
			keywordSA("CustomKeywordField", "keyword-value1"),
			{Key: ptr("CustomKeywordArrayField"), ValueType: ptr(iwfapi.SearchAttributeValueTypeKeywordArray), StringArrayValue: list("keyword-value2", "keyword-value1")},
		}
		resp, err := e.api.SetWorkflowSearchAttributesWithResponse(e.ctx(), iwfapi.WorkflowSetSearchAttributesRequest{WorkflowId: wfID, SearchAttributes: &sas})
		if err != nil {
			t.Fatal(err)
		}
		expectError(t, "searchattributes/set", resp, 200, `{}`)
		jsonEqualValue(t, "searchattributes/get", e.searchAttributes(wfID, "",
			saKey("CustomIntField", iwfapi.SearchAttributeValueTypeInt), saKey("CustomKeywordField", iwfapi.SearchAttributeValueTypeKeyword),
			saKey("CustomKeywordArrayField", iwfapi.SearchAttributeValueTypeKeywordArray)), string(mustJSON(sas)))
		if got := e.searchAttributes(wfID, ""); len(got) != 0 {
			t.Errorf("searchattributes/get without keys returned %s", mustJSON(got))
		}
		if got := e.searchAttributes(wfID, "", []iwfapi.SearchAttributeKeyAndType{}...); len(got) != 0 {
			t.Errorf("searchattributes/get with an empty key list returned %s", mustJSON(got))
		}

		raw, err := e.api.SetWorkflowSearchAttributesWithBodyWithResponse(e.ctx(), "application/json",
			strings.NewReader(fmt.Sprintf(`{"workflowId":%q,"searchAttributes":[{"key":"CustomIntField","integerValue":5}]}`, wfID)))
		if err != nil {
			t.Fatal(err)
		}
		expectError(t, "searchattributes/set without valueType", raw, 400,
			`{"detail":"search attribute CustomIntField has no valueType","subStatus":"UNCATEGORIZED_SUB_STATUS"}`)
		raw, err = e.api.SetWorkflowSearchAttributesWithBodyWithResponse(e.ctx(), "application/json",
			strings.NewReader(fmt.Sprintf(`{"workflowId":%q,"searchAttributes":[{"key":"CustomIntField","valueType":"FLOAT","integerValue":5}]}`, wfID)))
		if err != nil {
			t.Fatal(err)
		}
		if raw.StatusCode() != 400 || !strings.Contains(field(t, raw.Body, "detail"), "invalid request schema") {
			t.Errorf("searchattributes/set with an unknown valueType: %d %s", raw.StatusCode(), raw.Body)
		}
		jsonEqualValue(t, "unchanged", e.searchAttributes(wfID, "", saKey("CustomIntField", iwfapi.SearchAttributeValueTypeInt)),
			`[{"key":"CustomIntField","valueType":"INT","integerValue":1}]`)
	})
}

// loadingCase is one state of the loading-precedence scenarios: its options
// and the keys its waitUntil and execute calls must receive.
type loadingCase struct {
	state              string
	opts               iwfapi.WorkflowStateOptions
	waitUntil, execute []string // nil: everything
}

// runLoadingScenario drives S1 (which upserts the attributes) and then each
// case's state in turn, checking the keys each API receives.
func runLoadingScenario(t *testing.T, e *env, search bool, upsert iwfapi.WorkflowStateDecideResponse, all []string, cases []loadingCase) {
	t.Helper()
	keysOf := func(sas []iwfapi.SearchAttribute, das []iwfapi.KeyValue) []string {
		ks := []string{}
		for _, sa := range sas {
			ks = append(ks, deref(sa.Key))
		}
		for _, da := range das {
			ks = append(ks, deref(da.Key))
		}
		sort.Strings(ks)
		return ks
	}
	check := func(where string, got, want []string) {
		if want == nil {
			want = all
		}
		want = append([]string{}, want...)
		sort.Strings(want)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			e.w.fail("%s loaded %v, want %v", where, got, want)
		}
	}
	nextOf := func(i int) reply {
		if i+1 < len(cases) {
			c := cases[i+1]
			return decide(moveWith(c.state, nil, c.opts))
		}
		return decide(move(gracefulComplete, nil))
	}
	e.w.state("S1", noCommands, func(iwfapi.WorkflowStateDecideRequest) reply {
		resp := upsert
		c := cases[0]
		resp.StateDecision = &iwfapi.StateDecision{NextStates: list(moveWith(c.state, nil, c.opts))}
		return ok(resp)
	})
	counts := map[string]int{"S1.waitUntil": 1, "S1.execute": 1}
	for i, c := range cases {
		i, c := i, c
		counts[c.state+".waitUntil"], counts[c.state+".execute"] = 1, 1
		e.w.state(c.state, func(req iwfapi.WorkflowStateStartRequest) reply {
			if search {
				check(c.state+".waitUntil", keysOf(slice(req.SearchAttributes), nil), c.waitUntil)
			} else {
				check(c.state+".waitUntil", keysOf(nil, slice(req.DataObjects)), c.waitUntil)
			}
			return noCommands(req)
		}, func(req iwfapi.WorkflowStateDecideRequest) reply {
			if search {
				check(c.state+".execute", keysOf(slice(req.SearchAttributes), nil), c.execute)
			} else {
				check(c.state+".execute", keysOf(nil, slice(req.DataObjects)), c.execute)
			}
			return nextOf(i)
		})
	}
	wfID := e.id("loading")
	req := e.startRequest(wfID, "state_options_attributes_loading", "S1")
	e.start(req)
	if r, _ := e.result(wfID); r.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
		t.Errorf("status %s", r.WorkflowStatus)
	}
	e.w.expectCounts(t, counts)
}

func loadingPolicy(lt iwfapi.PersistenceLoadingType, keys ...string) *iwfapi.PersistenceLoadingPolicy {
	p := &iwfapi.PersistenceLoadingPolicy{PersistenceLoadingType: ptr(lt)}
	if len(keys) > 0 {
		p.PartialLoadingKeys = &keys
	}
	return p
}

// TestWfStateOptionsDataAttributesLoading mirrors
// integ/wf_state_options_data_attributes_loading_test.go: per-API data
// attribute loading policies win over dataAttributesLoadingPolicy, which
// wins over the legacy dataObjectsLoadingPolicy (S6–S8 add the legacy cases).
func TestWfStateOptionsDataAttributesLoading(t *testing.T) {
	for _, lt := range []iwfapi.PersistenceLoadingType{iwfapi.PersistenceLoadingTypeLoadPartialWithoutLocking, iwfapi.PersistenceLoadingTypeLoadPartialWithExclusiveLock} {
		t.Run(string(lt), func(t *testing.T) {
			forEachStore(t, func(t *testing.T, e *env) {
				none := iwfapi.PersistenceLoadingTypeLoadNone
				upsert := iwfapi.WorkflowStateDecideResponse{UpsertDataObjects: list(
					kv("da_wait_until1", obj("test-data-attribute-wait-until")),
					kv("da_execute1", obj("test-data-attribute-execute")),
					kv("da_other_key", obj("random-value")),
				)}
				runLoadingScenario(t, e, false, upsert, []string{"da_execute1", "da_other_key", "da_wait_until1"}, []loadingCase{
					{"S2", iwfapi.WorkflowStateOptions{
						WaitUntilApiDataAttributesLoadingPolicy: loadingPolicy(lt, "da_wait_until1"),
						ExecuteApiDataAttributesLoadingPolicy:   loadingPolicy(none),
					}, []string{"da_wait_until1"}, []string{}},
					{"S3", iwfapi.WorkflowStateOptions{
						WaitUntilApiDataAttributesLoadingPolicy: loadingPolicy(none),
						ExecuteApiDataAttributesLoadingPolicy:   loadingPolicy(lt, "da_execute1"),
					}, []string{}, []string{"da_execute1"}},
					{"S4", iwfapi.WorkflowStateOptions{
						DataAttributesLoadingPolicy: loadingPolicy(lt, "da_other_key"),
					}, []string{"da_other_key"}, []string{"da_other_key"}},
					{"S5", iwfapi.WorkflowStateOptions{
						WaitUntilApiDataAttributesLoadingPolicy: loadingPolicy(lt, "da_wait_until1"),
						DataAttributesLoadingPolicy:             loadingPolicy(lt, "da_other_key"),
					}, []string{"da_wait_until1"}, []string{"da_other_key"}},
					{"S6", iwfapi.WorkflowStateOptions{
						DataObjectsLoadingPolicy: loadingPolicy(lt, "da_execute1"),
					}, []string{"da_execute1"}, []string{"da_execute1"}},
					{"S7", iwfapi.WorkflowStateOptions{
						DataAttributesLoadingPolicy: loadingPolicy(lt, "da_other_key"),
						DataObjectsLoadingPolicy:    loadingPolicy(lt, "da_execute1"),
					}, []string{"da_other_key"}, []string{"da_other_key"}},
					{"S8", iwfapi.WorkflowStateOptions{
						ExecuteApiDataAttributesLoadingPolicy: loadingPolicy(lt, "da_wait_until1"),
						DataObjectsLoadingPolicy:              loadingPolicy(lt, "da_execute1"),
					}, []string{"da_execute1"}, []string{"da_wait_until1"}},
				})
			})
		})
	}
}

// TestWfStateOptionsSearchAttributesLoading mirrors
// integ/wf_state_options_search_attributes_loading_test.go: per-API search
// attribute loading policies win over searchAttributesLoadingPolicy.
func TestWfStateOptionsSearchAttributesLoading(t *testing.T) {
	for _, lt := range []iwfapi.PersistenceLoadingType{iwfapi.PersistenceLoadingTypeLoadPartialWithoutLocking, iwfapi.PersistenceLoadingTypeLoadPartialWithExclusiveLock} {
		t.Run(string(lt), func(t *testing.T) {
			forEachStore(t, func(t *testing.T, e *env) {
				none := iwfapi.PersistenceLoadingTypeLoadNone
				upsert := iwfapi.WorkflowStateDecideResponse{UpsertSearchAttributes: list(
					iwfapi.SearchAttribute{Key: ptr("CustomKeywordField"), ValueType: ptr(iwfapi.SearchAttributeValueTypeKeywordArray), StringArrayValue: list("keyword1", "keyword2")},
					iwfapi.SearchAttribute{Key: ptr("CustomStringField"), ValueType: ptr(iwfapi.SearchAttributeValueTypeText), StringValue: ptr("I am a string")},
					boolSA("CustomBoolField", true),
				)}
				runLoadingScenario(t, e, true, upsert, []string{"CustomBoolField", "CustomKeywordField", "CustomStringField"}, []loadingCase{
					{"S2", iwfapi.WorkflowStateOptions{
						WaitUntilApiSearchAttributesLoadingPolicy: loadingPolicy(lt, "CustomKeywordField"),
						ExecuteApiSearchAttributesLoadingPolicy:   loadingPolicy(none),
					}, []string{"CustomKeywordField"}, []string{}},
					{"S3", iwfapi.WorkflowStateOptions{
						WaitUntilApiSearchAttributesLoadingPolicy: loadingPolicy(none),
						ExecuteApiSearchAttributesLoadingPolicy:   loadingPolicy(lt, "CustomStringField"),
					}, []string{}, []string{"CustomStringField"}},
					{"S4", iwfapi.WorkflowStateOptions{
						SearchAttributesLoadingPolicy: loadingPolicy(lt, "CustomBoolField"),
					}, []string{"CustomBoolField"}, []string{"CustomBoolField"}},
					{"S5", iwfapi.WorkflowStateOptions{
						WaitUntilApiSearchAttributesLoadingPolicy: loadingPolicy(lt, "CustomKeywordField"),
						SearchAttributesLoadingPolicy:             loadingPolicy(lt, "CustomBoolField"),
					}, []string{"CustomKeywordField"}, []string{"CustomBoolField"}},
					{"S6", iwfapi.WorkflowStateOptions{}, nil, nil},
				})
			})
		})
	}
}

// TestLargeDataAttributes mirrors integ/large_data_attributes_test.go as a
// size test: five data attributes of 1 MiB each, set through the API, with
// states that load none of them; an RPC then loads all 5 MiB. A request
// body above the server's limit (4 MiB) is refused with 413.
func TestLargeDataAttributes(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		loadNone := iwfapi.WorkflowStateOptions{DataAttributesLoadingPolicy: &iwfapi.PersistenceLoadingPolicy{PersistenceLoadingType: ptr(iwfapi.PersistenceLoadingTypeLoadNone)}}
		e.w.state("S1", func(iwfapi.WorkflowStateStartRequest) reply {
			return commands(iwfapi.CommandRequest{
				DeciderTriggerType: ptr(iwfapi.DeciderTriggerTypeAllCommandCompleted),
				SignalCommands: list(
					iwfapi.SignalCommand{SignalChannelName: "test-signal-name"}, iwfapi.SignalCommand{SignalChannelName: "test-signal-name"},
					iwfapi.SignalCommand{SignalChannelName: "test-signal-name"}, iwfapi.SignalCommand{SignalChannelName: "test-signal-name"},
				),
			})
		}, func(iwfapi.WorkflowStateDecideRequest) reply { return decide(moveWith("S2", nil, loadNone)) })
		e.w.state("S2", noCommands, complete)
		e.w.rpc("size", func(req iwfapi.WorkflowWorkerRpcRequest) reply {
			total := 0
			for _, d := range slice(req.DataAttributes) {
				total += len(deref(d.Value.Data))
			}
			return ok(iwfapi.WorkflowWorkerRpcResponse{Output: obj(fmt.Sprintf("%d/%d", len(slice(req.DataAttributes)), total))})
		})
		wfID := e.id("large-data-attributes")
		req := e.startRequest(wfID, "signal", "S1")
		req.WorkflowTimeoutSeconds = 86400
		req.StateOptions = &loadNone
		e.start(req)

		const size = 1 << 20
		big := obj(strings.Repeat("a", size))
		for i := 0; i < 5; i++ {
			resp, err := e.api.SetWorkflowDataObjectsWithResponse(e.ctx(), iwfapi.WorkflowSetDataObjectsRequest{
				WorkflowId: wfID, Objects: list(kv("large-data-attribute-"+strconv.Itoa(i), big)),
			})
			if err != nil || resp.StatusCode() != 200 {
				t.Fatalf("dataobjects/set %d: %v %d %s", i, err, statusOf(resp), bodyOf(resp))
			}
		}
		// Five at once exceed the request body limit.
		var five []iwfapi.KeyValue
		for i := 0; i < 5; i++ {
			five = append(five, kv("too-large-"+strconv.Itoa(i), big))
		}
		tooLarge, err := e.api.SetWorkflowDataObjectsWithResponse(e.ctx(), iwfapi.WorkflowSetDataObjectsRequest{WorkflowId: wfID, Objects: &five})
		if err != nil {
			t.Fatal(err)
		}
		expectError(t, "dataobjects/set above the body limit", tooLarge, 413, fmt.Sprintf(`{"detail":"request body too large: the limit is %d bytes"}`, maxBodyBytes))

		for i := 0; i < 4; i++ {
			e.signal(wfID, "test-signal-name", obj(fmt.Sprintf("test-data-%d", i)))
		}
		r, _ := e.result(wfID)
		if r.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			t.Fatalf("status %s", r.WorkflowStatus)
		}
		for _, key := range []string{"S1.waitUntil", "S1.execute", "S2.waitUntil", "S2.execute"} {
			b := e.w.body(t, key, 0)
			if field(t, b, "dataObjects") != "" || field(t, b, "DataObjects") != "" || len(b) > 64<<10 {
				t.Errorf("%s loaded data attributes with LOAD_NONE (%d bytes)", key, len(b))
			}
		}
		das := e.dataAttributes(wfID, "")
		if len(das) != 5 {
			t.Fatalf("%d data attributes, want 5", len(das))
		}
		for i, d := range das {
			if deref(d.Key) != "large-data-attribute-"+strconv.Itoa(i) || len(deref(d.Value.Data)) != size {
				t.Errorf("data attribute %d: %s of %d bytes", i, deref(d.Key), len(deref(d.Value.Data)))
			}
		}
		out := e.rpcOK(iwfapi.WorkflowRpcRequest{WorkflowId: wfID, RpcName: "size"})
		if got := deref(out.Output.Data); got != fmt.Sprintf("5/%d", 5*size) {
			t.Errorf("the RPC loaded %s (attributes/bytes), want 5/%d", got, 5*size)
		}
	})
}

// TestWaitUntilSearchAttributes mirrors
// integ/wait_until_search_attributes_test.go: the system search attribute
// IwfExecutingStateIds under each executingStateIdMode, while a state with
// waitUntil (S1) and then a skip-waitUntil state (S2) execute. iWF checks it
// through /search; the search subtests skip while search answers 501, and
// the same facts are checked through searchattributes/get.
func TestWaitUntilSearchAttributes(t *testing.T) {
	modes := []struct {
		name          string
		mode          *iwfapi.ExecutingStateIdMode
		inS1, inS2    string // expected value while S1 / S2 execute; "" = absent
		searchCountS2 int
	}{
		{"ENABLED_FOR_ALL", ptr(iwfapi.ExecutingStateIdModeEnabledForAll), `["S1"]`, `["S2"]`, 1},
		{"default", nil, `["S1"]`, `[]`, 0},
		{"ENABLED_FOR_STATES_WITH_WAIT_UNTIL", ptr(iwfapi.ExecutingStateIdModeEnabledForStatesWithWaitUntil), `["S1"]`, `[]`, 0},
		{"DISABLED", ptr(iwfapi.ExecutingStateIdModeDisabled), "", "", 0},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			forEachStore(t, func(t *testing.T, e *env) {
				inS1, inS2 := newGate(), newGate()
				s1Running, s2Running := newGate(), newGate()
				e.w.state("S1", noCommands, func(iwfapi.WorkflowStateDecideRequest) reply {
					s1Running.open()
					e.w.await(inS1)
					return decide(moveWith("S2", nil, iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}))
				})
				e.w.state("S2", nil, func(req iwfapi.WorkflowStateDecideRequest) reply {
					s2Running.open()
					e.w.await(inS2)
					return complete(req)
				})
				wfID := e.id("wait-until-search-attributes")
				req := e.startRequest(wfID, "wait_until_search_attributes", "S1")
				if m.mode != nil {
					req.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{WorkflowConfigOverride: &iwfapi.WorkflowConfig{ExecutingStateIdMode: m.mode}}
				}
				e.start(req)
				executing := func() string {
					got := e.searchAttributes(wfID, "", saKey("IwfExecutingStateIds", iwfapi.SearchAttributeValueTypeKeywordArray))
					if len(got) == 0 {
						return ""
					}
					return string(mustJSON(got[0].StringArrayValue))
				}
				e.passed(s1Running, "S1 executing")
				if got := executing(); got != m.inS1 {
					t.Errorf("IwfExecutingStateIds while S1 executes = %q, want %q", got, m.inS1)
				}
				inS1.open()
				e.passed(s2Running, "S2 executing")
				if got := executing(); got != m.inS2 {
					t.Errorf("IwfExecutingStateIds while S2 executes = %q, want %q", got, m.inS2)
				}
				t.Run("search", func(t *testing.T) {
					e.searchCount(t, fmt.Sprintf("WorkflowId='%s'", wfID), 1)
					e.searchCount(t, fmt.Sprintf("WorkflowId='%s' AND IwfExecutingStateIds='S2'", wfID), m.searchCountS2)
				})
				inS2.open()
				if r, _ := e.result(wfID); r.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
					t.Errorf("status %s", r.WorkflowStatus)
				}
				want := `[]`
				if m.inS1 == "" {
					want = ""
				}
				if got := executing(); got != want {
					t.Errorf("IwfExecutingStateIds after completion = %q, want %q", got, want)
				}
			})
		})
	}
}
