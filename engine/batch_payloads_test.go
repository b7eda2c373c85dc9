package engine_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// TestExternalStorageBatchSignal: a SIGNAL batch's big value is written
// to the external store once, when the batch starts; the batch's row
// holds its reference, and every run the batch signals refers to that
// one object, with a record of its own, and receives the value inline.
// The object outlives the batch while a run refers to it (a run whose
// signal is still buffered reads it after the others are deleted) and
// goes after the last run is deleted by retention; a batch that signals
// no run leaves nothing once it closes.
func TestExternalStorageBatchSignal(t *testing.T) {
	forEachStoreWithPayloads(t, func(c *engine.Config) {
		c.Clock = &shiftClock{}
		c.Retention = time.Hour
		c.PayloadGrace = 24 * time.Hour // only the batch and its runs let objects go
	}, func(t *testing.T, h *harness, ps *testPayloads) {
		ctx := context.Background()
		clk := h.clock.(*shiftClock)
		value := "batch signal:" + strings.Repeat("0123456789abcdef", 200<<10/16) // 200 KiB
		var seen atomic.Int64
		h.worker.state("Wait", stateHandlers{
			WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
				return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
					CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
					SignalCommands:     &[]iwfapi.SignalCommand{{SignalChannelName: "go", CommandId: ptr("go")}},
				}}, 200
			},
			Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				var sig *iwfapi.EncodedObject
				if r := req.CommandResults; r != nil && len(deref(r.SignalResults)) == 1 {
					sig = deref(r.SignalResults)[0].SignalValue
				}
				inline(t, "the batch's signal", sig, value)
				seen.Add(1)
				return decide(next(engine.GracefulCompletingState, nil)), 200
			},
		})
		// A held run waits for "release" before it waits for "go": the
		// batch's signal stays buffered in it.
		h.worker.state("Hold", stateHandlers{
			WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
				return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
					CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
					SignalCommands:     &[]iwfapi.SignalCommand{{SignalChannelName: "release", CommandId: ptr("release")}},
				}}, 200
			},
			Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				return decide(next("Wait", nil)), 200
			},
		})
		ids := startTyped(h, "Batched", 4)
		noTimeout := func(r *iwfapi.WorkflowStartRequest) { r.IwfWorkflowType, r.WorkflowTimeoutSeconds = "Batched", 0 } // the clock jumps hours
		held := h.start("Batched-held", "Hold", nil, noTimeout)
		h.idle()

		// A batch that matches nothing closes at once: its object goes
		// with the next payload sweep.
		none, err := h.eng.StartBatch(ctx, engine.BatchRequest{Query: "IwfWorkflowType = 'Nobody'", Operation: engine.BatchOpSignal,
			SignalChannel: "go", SignalValue: &engine.EncodedValue{Encoding: ptr("json"), Data: ptr(value)}})
		if err != nil {
			t.Fatal(err)
		}
		if d := batchDone(h, none.ID); d.Batch.State != engine.BatchCompleted {
			t.Fatalf("the empty batch: %+v", d.Batch)
		}
		if st, err := h.eng.SweepPayloads(ctx); err != nil || st.Deleted != 1 {
			t.Fatalf("payload sweep after the empty batch: %+v %v; want its object deleted", st, err)
		}
		if objs := ps.objects(t); len(objs) != 0 {
			t.Fatalf("objects left: %v", objs)
		}

		resp, err := h.eng.StartBatch(ctx, engine.BatchRequest{Query: "IwfWorkflowType = 'Batched'", Operation: engine.BatchOpSignal,
			SignalChannel: "go", SignalValue: &engine.EncodedValue{Encoding: ptr("json"), Data: ptr(value)}, RPS: 1000})
		if err != nil {
			t.Fatal(err)
		}
		objs := ps.objects(t)
		if len(objs) != 1 {
			t.Fatalf("the batch wrote %v, want one object", objs)
		}
		path := objs[0]
		if d := batchDone(h, resp.ID); d.Batch.State != engine.BatchCompleted || d.Batch.Done != 5 {
			t.Fatalf("batch: %+v", d.Batch)
		}

		// The row holds the reference, not the value.
		var row *engine.Batch
		err = h.store.View(ctx, func(ctx context.Context, tx engine.ReadTx) error {
			var err error
			row, err = tx.BatchGet(ctx, resp.ID)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if opts := string(row.Options); len(opts) > 1024 || !strings.Contains(opts, `"extPath":"`+path+`"`) || !strings.Contains(opts, `"extStoreId":"local"`) {
			t.Fatalf("the batch's options (%d bytes): %.300s", len(row.Options), opts)
		}

		runs := map[string]string{held: "Batched-held"}
		for _, id := range ids {
			if got := h.result(id); got.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
				t.Fatalf("%s: %s", id, mustJSON(got))
			}
			g, err := h.eng.GetWorkflow(ctx, iwfapi.WorkflowGetRequest{WorkflowId: id})
			if err != nil {
				t.Fatal(err)
			}
			runs[g.WorkflowRunId] = id
		}
		if seen.Load() != 4 {
			t.Fatalf("%d executes saw the signal, want 4", seen.Load())
		}
		for runID, id := range runs {
			if got := payloadList(t, h, runID); len(got) != 1 || got[0].Path != path {
				t.Errorf("%s keeps %v, want the batch's object %s", id, got, path)
			}
			if b := storedBytes(t, h, runID); strings.Contains(b, value[:100]) || !strings.Contains(b, path) {
				t.Errorf("%s's rows hold the value, or no reference to %s", id, path)
			}
		}
		if got := payloadList(t, h, engine.BatchPayloadOwner(resp.ID)); len(got) != 0 {
			t.Errorf("the closed batch still keeps %v", got)
		}
		if st, err := h.eng.SweepPayloads(ctx); err != nil || st.Deleted != 0 {
			t.Fatalf("payload sweep while runs refer to the object: %+v %v", st, err)
		}

		// Retention deletes the completed runs; the held run keeps the
		// object, and its worker reads it.
		clk.offset.Store(int64(3 * time.Hour))
		sweepUntil(t, h, func() bool { return !exists(t, h, ids) })
		if st, err := h.eng.SweepPayloads(ctx); err != nil || st.Deleted != 0 || !ps.has(t, path) {
			t.Fatalf("payload sweep after the completed runs went: %+v %v; the object is still referred to", st, err)
		}
		if err := h.eng.SignalWorkflow(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: "Batched-held", SignalChannelName: "release"}); err != nil {
			t.Fatal(err)
		}
		if got := h.result("Batched-held"); got.WorkflowStatus != iwfapi.WorkflowStatusCompleted || seen.Load() != 5 {
			t.Fatalf("the held run: %s, %d executes saw the signal", mustJSON(got), seen.Load())
		}
		h.idle()

		// Retention deletes the last run; the object goes.
		clk.offset.Store(int64(6 * time.Hour))
		sweepUntil(t, h, func() bool { return !exists(t, h, []string{"Batched-held"}) })
		if st, err := h.eng.SweepPayloads(ctx); err != nil || st.Deleted != 1 || ps.has(t, path) {
			t.Fatalf("payload sweep after the last run went: %+v %v; want the object deleted", st, err)
		}
		if objs := ps.objects(t); len(objs) != 0 {
			t.Fatalf("objects left: %v", objs)
		}
	})
}

// sweepUntil runs retention sweeps until done holds.
func sweepUntil(t *testing.T, h *harness, done func() bool) {
	t.Helper()
	h.eventually("retention to delete the runs", func() bool {
		if _, err := h.eng.Sweep(context.Background()); err != nil {
			t.Fatal(err)
		}
		return done()
	})
}

// exists reports whether any of the workflow ids still has a run.
func exists(t *testing.T, h *harness, ids []string) bool {
	t.Helper()
	for _, id := range ids {
		_, err := h.eng.GetWorkflow(context.Background(), iwfapi.WorkflowGetRequest{WorkflowId: id})
		if err == nil {
			return true
		}
		if engine.CodeOf(err) != engine.CodeWorkflowNotExists {
			t.Fatal(fmt.Errorf("get %s: %w", id, err))
		}
	}
	return false
}
