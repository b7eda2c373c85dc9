package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
)

// testHistoryOutline checks HistoryOutline (every event, in order, with
// the data of the selected ones only, paged as HistoryList pages) and
// HistoryGet (the events asked for of one run, in id order, with their
// data).
func testHistoryOutline(t *testing.T, s engine.Store) {
	events := []*engine.HistoryEvent{
		{RunID: "r1", At: at(time.Second), Type: "WorkflowStarted", Data: []byte(`{"input":"big"}`)},
		{RunID: "r1", At: at(2 * time.Second), Type: "StateExecutionStarted", ExecutionID: "S-1", Data: []byte(`{"stateId":"S"}`)},
		{RunID: "r2", At: at(0), Type: "StateExecutionStarted", ExecutionID: "S-1", Data: []byte(`{"stateId":"T"}`)},
		{RunID: "r1", At: at(3 * time.Second), Type: "ExecuteCompleted", ExecutionID: "S-1", Data: []byte(`{"decision":{"nextStates":[{"stateId":"S"}]}}`)},
		{RunID: "r1", At: at(4 * time.Second), Type: "ExecuteCompleted", ExecutionID: "S-2", Data: []byte(`{"decision":{"nextStates":[{"stateId":"_SYS_DEAD_END"}]}}`)},
		{RunID: "r1", At: at(5 * time.Second), Type: "SignalReceived", Data: []byte(`{"value":"payload"}`)},
		{RunID: "r1", At: at(6 * time.Second), Type: "WorkflowClosed", Data: []byte(`{"status":"COMPLETED"}`)},
	}
	update(t, s, func(ctx context.Context, tx engine.Tx) error { return tx.HistoryAppend(ctx, events) })
	var r1 []*engine.HistoryEvent
	for _, e := range events {
		if e.RunID == "r1" {
			c := *e
			c.At = ms(c.At)
			r1 = append(r1, &c)
		}
	}
	sel := engine.OutlineData{Types: []string{"StateExecutionStarted", "WorkflowClosed"}, MarkedType: "ExecuteCompleted", Marker: `"stateId":"_SYS_`}
	outline := func(after int64, limit int, o engine.OutlineData) []*engine.HistoryEvent {
		t.Helper()
		var out []*engine.HistoryEvent
		view(t, s, func(ctx context.Context, tx engine.ReadTx) (err error) {
			out, err = tx.HistoryOutline(ctx, "r1", after, limit, o)
			return err
		})
		return out
	}
	// want is r1 with the data of the events at the indexes listed only.
	want := func(from, to int, withData ...int) []*engine.HistoryEvent {
		var out []*engine.HistoryEvent
		for i := from; i < to; i++ {
			c := *r1[i]
			c.Data = nil
			for _, j := range withData {
				if i == j {
					c.Data = r1[i].Data
				}
			}
			out = append(out, &c)
		}
		return out
	}
	equal(t, "HistoryOutline all", outline(0, 0, sel), want(0, 6, 1, 3, 5))
	equal(t, "HistoryOutline limit 2", outline(0, 2, sel), want(0, 2, 1))
	equal(t, "HistoryOutline after the second, limit 3", outline(r1[1].ID, 3, sel), want(2, 5, 3))
	equal(t, "HistoryOutline without a selection", outline(0, 0, engine.OutlineData{}), want(0, 6))
	equal(t, "HistoryOutline with a marker only", outline(0, 0, engine.OutlineData{MarkedType: "ExecuteCompleted", Marker: `"stateId":"S"`}), want(0, 6, 2))
	if got := outline(r1[5].ID, 0, sel); len(got) != 0 {
		t.Fatalf("HistoryOutline after the last = %v", show(got))
	}

	get := func(run string, ids ...int64) []*engine.HistoryEvent {
		t.Helper()
		var out []*engine.HistoryEvent
		view(t, s, func(ctx context.Context, tx engine.ReadTx) (err error) {
			out, err = tx.HistoryGet(ctx, run, ids)
			return err
		})
		return out
	}
	equal(t, "HistoryGet in id order", get("r1", r1[5].ID, r1[0].ID, r1[4].ID), []*engine.HistoryEvent{r1[0], r1[4], r1[5]})
	if got := get("r1", events[2].ID, r1[5].ID+1000); len(got) != 0 {
		t.Fatalf("HistoryGet of another run's event and an unknown id = %v", show(got))
	}
	if got := get("r1"); len(got) != 0 {
		t.Fatalf("HistoryGet of no ids = %v", show(got))
	}
}
