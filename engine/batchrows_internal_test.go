package engine

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// batchRowsFixture is testdata/batch_rows_v1.json: batch rows as the
// release before the engine's own batch types stored them, with the start
// request that produced each (the API's JSON) and the batch as the API
// showed it. The field names of "request" and "info" are the API's and
// are read here with local types, so that this test does not follow a
// regenerated API: the rows are what must keep decoding.
type batchRowsFixture struct {
	Rows []struct {
		Seq         int64           `json:"seq"`
		ID          string          `json:"batchId"`
		Query       string          `json:"query"`
		Operation   string          `json:"operation"`
		Options     string          `json:"options"`
		Reason      string          `json:"reason"`
		RPS         float64         `json:"rps"`
		State       string          `json:"state"`
		Message     string          `json:"message"`
		Matched     int64           `json:"matched"`
		Done        int64           `json:"done"`
		Failed      int64           `json:"failed"`
		CreatedBy   string          `json:"createdBy"`
		CreatedAtMs int64           `json:"createdAtMs"`
		UpdatedAtMs int64           `json:"updatedAtMs"`
		ClosedAtMs  int64           `json:"closedAtMs"`
		Request     json.RawMessage `json:"request"`
		Info        json.RawMessage `json:"info"`
	} `json:"rows"`
}

// fixtureReset and fixtureSkipTimer are a batch's reset and timer as the
// fixture's JSON names them.
type fixtureReset struct {
	ResetType         string  `json:"resetType"`
	HistoryEventID    *int32  `json:"historyEventId"`
	HistoryEventTime  *string `json:"historyEventTime"`
	StateID           *string `json:"stateId"`
	StateExecutionID  *string `json:"stateExecutionId"`
	SkipSignalReapply *bool   `json:"skipSignalReapply"`
	SkipUpdateReapply *bool   `json:"skipUpdateReapply"`
}

type fixtureSkipTimer struct {
	StateExecutionID  string  `json:"workflowStateExecutionId"`
	TimerCommandID    *string `json:"timerCommandId"`
	TimerCommandIndex *int32  `json:"timerCommandIndex"`
}

func (r *fixtureReset) engine() *BatchReset {
	if r == nil {
		return nil
	}
	return &BatchReset{ResetType: r.ResetType, HistoryEventID: r.HistoryEventID, HistoryEventTime: r.HistoryEventTime, StateID: r.StateID,
		StateExecutionID: r.StateExecutionID, SkipSignalReapply: r.SkipSignalReapply, SkipUpdateReapply: r.SkipUpdateReapply}
}

func (st *fixtureSkipTimer) engine() *BatchSkipTimer {
	if st == nil {
		return nil
	}
	return &BatchSkipTimer{StateExecutionID: st.StateExecutionID, TimerCommandID: st.TimerCommandID, TimerCommandIndex: st.TimerCommandIndex}
}

// TestBatchRowsOfTheStoredFormat: rows the previous release stored still
// read as they did — the same operation, parameters and progress that
// the API showed — and the same requests today store the same bytes, so
// a row's shape owes nothing to the generated API types.
func TestBatchRowsOfTheStoredFormat(t *testing.T) {
	raw, err := os.ReadFile("testdata/batch_rows_v1.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx batchRowsFixture
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	if len(fx.Rows) < 14 {
		t.Fatalf("the fixture has %d rows", len(fx.Rows))
	}
	ops := map[BatchOperation]bool{}
	fromMs := func(ms int64) time.Time {
		if ms == 0 {
			return time.Time{}
		}
		return time.UnixMilli(ms).UTC()
	}
	for _, row := range fx.Rows {
		b := &Batch{Seq: row.Seq, ID: row.ID, Query: row.Query, Operation: row.Operation, Options: []byte(row.Options), Reason: row.Reason,
			RPS: row.RPS, State: BatchState(row.State), Message: row.Message, Matched: row.Matched, Done: row.Done, Failed: row.Failed,
			CreatedBy: row.CreatedBy, CreatedAt: fromMs(row.CreatedAtMs), UpdatedAt: fromMs(row.UpdatedAtMs), ClosedAt: fromMs(row.ClosedAtMs)}
		name := row.Operation + " " + row.Options

		// The runner reads the options.
		var opts batchOptions
		if err := json.Unmarshal(b.Options, &opts); err != nil {
			t.Fatalf("%s: the runner cannot read the options: %v", name, err)
		}

		// The batch as the API showed it.
		var shown struct {
			ID                string            `json:"batchId"`
			Query             string            `json:"query"`
			Operation         string            `json:"operation"`
			Reason            string            `json:"reason"`
			RPS               float64           `json:"rps"`
			State             string            `json:"state"`
			Message           string            `json:"message"`
			Matched           int64             `json:"matched"`
			Done              int64             `json:"done"`
			Failed            int64             `json:"failed"`
			Pending           int64             `json:"pending"`
			CreatedBy         string            `json:"createdBy"`
			CreatedMs         int64             `json:"createdTimestampMs"`
			UpdatedMs         int64             `json:"updatedTimestampMs"`
			ClosedMs          *int64            `json:"closedTimestampMs"`
			SignalChannelName string            `json:"signalChannelName"`
			Reset             *fixtureReset     `json:"reset"`
			SkipTimer         *fixtureSkipTimer `json:"skipTimer"`
		}
		if err := json.Unmarshal(row.Info, &shown); err != nil {
			t.Fatal(err)
		}
		want := BatchInfo{ID: shown.ID, Query: shown.Query, Operation: BatchOperation(shown.Operation), Reason: shown.Reason, RPS: shown.RPS,
			State: BatchState(strings.ToLower(shown.State)), Message: shown.Message, Matched: shown.Matched, Done: shown.Done, Failed: shown.Failed,
			Pending: shown.Pending, CreatedBy: shown.CreatedBy, CreatedAt: fromMs(shown.CreatedMs), UpdatedAt: fromMs(shown.UpdatedMs),
			SignalChannel: shown.SignalChannelName, Reset: shown.Reset.engine(), SkipTimer: shown.SkipTimer.engine()}
		if shown.ClosedMs != nil {
			want.ClosedAt = fromMs(*shown.ClosedMs)
		}
		if got := batchInfo(b); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: read as\n%+v\nthe API showed\n%+v", name, got, want)
		}
		// A list page's estimate of the entry is not below its size in
		// the API's answer.
		if n := batchInfoSize(batchInfo(b)); n < len(row.Info)+1 {
			t.Errorf("%s: an entry of %d bytes estimated at %d", name, len(row.Info)+1, n)
		}

		// The request that stored the row stores the same bytes today.
		var sent struct {
			Query             string  `json:"query"`
			Operation         string  `json:"operation"`
			Reason            string  `json:"reason"`
			RPS               float64 `json:"rps"`
			SignalChannelName string  `json:"signalChannelName"`
			SignalValue       *struct {
				Encoding   *string `json:"encoding"`
				Data       *string `json:"data"`
				ExtPath    *string `json:"extPath"`
				ExtStoreID *string `json:"extStoreId"`
			} `json:"signalValue"`
			Reset     *fixtureReset     `json:"reset"`
			SkipTimer *fixtureSkipTimer `json:"skipTimer"`
		}
		if err := json.Unmarshal(row.Request, &sent); err != nil {
			t.Fatal(err)
		}
		req := BatchRequest{Query: sent.Query, Operation: BatchOperation(sent.Operation), Reason: sent.Reason, RPS: sent.RPS,
			SignalChannel: sent.SignalChannelName, Reset: sent.Reset.engine(), SkipTimer: sent.SkipTimer.engine()}
		if v := sent.SignalValue; v != nil {
			req.SignalValue = &EncodedValue{Encoding: v.Encoding, Data: v.Data, ExtPath: v.ExtPath, ExtStoreID: v.ExtStoreID}
		}
		o, rps, err := batchStartIn(req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := string(encode(o)); got != row.Options || rps != row.RPS || string(req.Operation) != row.Operation {
			t.Errorf("%s: the request stores %s %s at %v today, the row %s %s at %v", name, req.Operation, got, rps, row.Operation, row.Options, row.RPS)
		}
		if !reflect.DeepEqual(o, opts) {
			t.Errorf("%s: options %+v today, %+v read from the row", name, o, opts)
		}
		ops[req.Operation] = true
	}
	for _, op := range []BatchOperation{BatchOpTerminate, BatchOpCancel, BatchOpFail, BatchOpSignal, BatchOpReset, BatchOpSkipTimer} {
		if !ops[op] {
			t.Errorf("the fixture has no %s row", op)
		}
	}
}
