package httpapi

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// TestBatchWireMapping: for the batch rows of the engine's fixture (rows
// of the release before the engine had batch types of its own), the API
// answers the batch exactly as that release did, byte for byte, and a
// start request reaches the engine with every field.
func TestBatchWireMapping(t *testing.T) {
	raw, err := os.ReadFile("../../engine/testdata/batch_rows_v1.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		Rows []struct {
			Request json.RawMessage `json:"request"`
			Info    json.RawMessage `json:"info"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	for _, row := range fx.Rows {
		// The engine's reading of the row (as engine's fixture test
		// checks it), built here from what the API showed.
		var shown iwfapi.BatchInfo
		if err := json.Unmarshal(row.Info, &shown); err != nil {
			t.Fatal(err)
		}
		b := engine.BatchInfo{ID: shown.BatchId, Query: shown.Query, Operation: engine.BatchOperation(shown.Operation), Reason: deref(shown.Reason),
			RPS: shown.Rps, State: engine.BatchState(strings.ToLower(string(shown.State))), Message: deref(shown.Message), Matched: shown.Matched,
			Done: shown.Done, Failed: shown.Failed, Pending: shown.Pending, CreatedBy: shown.CreatedBy, CreatedAt: time.UnixMilli(shown.CreatedTimestampMs).UTC(),
			UpdatedAt: time.UnixMilli(shown.UpdatedTimestampMs).UTC(), SignalChannel: deref(shown.SignalChannelName)}
		if shown.ClosedTimestampMs != nil {
			b.ClosedAt = time.UnixMilli(*shown.ClosedTimestampMs).UTC()
		}
		if r := shown.Reset; r != nil {
			b.Reset = &engine.BatchReset{ResetType: string(r.ResetType), HistoryEventID: r.HistoryEventId, HistoryEventTime: r.HistoryEventTime,
				StateID: r.StateId, StateExecutionID: r.StateExecutionId, SkipSignalReapply: r.SkipSignalReapply, SkipUpdateReapply: r.SkipUpdateReapply}
		}
		if st := shown.SkipTimer; st != nil {
			b.SkipTimer = &engine.BatchSkipTimer{StateExecutionID: st.WorkflowStateExecutionId, TimerCommandID: st.TimerCommandId, TimerCommandIndex: st.TimerCommandIndex}
		}
		got, err := json.Marshal(batchInfoOut(b))
		if err != nil {
			t.Fatal(err)
		}
		// The fixture is indented, and its strings hold <, > and & as they
		// are: compacted and escaped as encoding/json writes them, it is
		// the answer's bytes.
		var compact, was bytes.Buffer
		if err := json.Compact(&compact, row.Info); err != nil {
			t.Fatal(err)
		}
		json.HTMLEscape(&was, compact.Bytes())
		if string(got) != was.String() {
			t.Errorf("the API shows\n%s\nthe previous release\n%s", got, was.String())
		}

		var sent iwfapi.BatchStartRequest
		if err := json.Unmarshal(row.Request, &sent); err != nil {
			t.Fatal(err)
		}
		req := batchRequestIn(sent)
		if err := engine.CheckBatchStart(req); err != nil {
			t.Errorf("%s: %v", row.Request, err)
		}
		want := engine.BatchRequest{Query: sent.Query, Operation: engine.BatchOperation(sent.Operation), Reason: deref(sent.Reason), RPS: deref(sent.Rps),
			SignalChannel: deref(sent.SignalChannelName), Reset: b.Reset, SkipTimer: b.SkipTimer}
		if v := sent.SignalValue; v != nil {
			want.SignalValue = &engine.EncodedValue{Encoding: v.Encoding, Data: v.Data, ExtPath: v.ExtPath, ExtStoreID: v.ExtStoreId}
		}
		if !reflect.DeepEqual(req, want) {
			t.Errorf("%s reaches the engine as %+v", row.Request, req)
		}
	}
	// A describe and a list answer.
	d := batchDescriptionOut(engine.BatchDescription{Batch: engine.BatchInfo{ID: "b"},
		Failures: []engine.BatchFailure{{WorkflowID: "w", RunID: "r", Reason: "closed"}}, FailuresNextPageToken: "7"})
	if d.Batch.BatchId != "b" || len(d.Failures) != 1 || d.Failures[0] != (iwfapi.BatchFailure{WorkflowId: "w", WorkflowRunId: "r", Reason: "closed"}) ||
		deref(d.FailuresNextPageToken) != "7" {
		t.Errorf("describe answer %+v", d)
	}
	if body, _ := json.Marshal(batchDescriptionOut(engine.BatchDescription{})); !strings.Contains(string(body), `"failures":[]`) {
		t.Errorf("describe answer without failures: %s", body)
	}
	if body, _ := json.Marshal(batchPageOut(engine.BatchPage{})); string(body) != `{"batches":[]}` {
		t.Errorf("empty list answer: %s", body)
	}
	if l := batchPageOut(engine.BatchPage{Batches: []engine.BatchInfo{{ID: "a"}, {ID: "b"}}, NextPageToken: "3"}); len(l.Batches) != 2 ||
		l.Batches[1].BatchId != "b" || deref(l.NextPageToken) != "3" {
		t.Errorf("list answer %+v", l)
	}
}
