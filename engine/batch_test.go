package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/search"
)

// waitingWorkflow makes the harness's worker park every run in state
// "Wait" until a "go" signal, then complete.
func waitingWorkflow(h *harness) {
	h.worker.state("Wait", stateHandlers{
		WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
			return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
				CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
				SignalCommands:     &[]iwfapi.SignalCommand{{SignalChannelName: "go", CommandId: ptr("go")}},
			}}, 200
		},
		Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			return decide(next("_SYS_GRACEFUL_COMPLETING_WORKFLOW", nil)), 200
		},
	})
}

// startTyped starts n runs of a workflow type, parked in "Wait".
func startTyped(h *harness, typ string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", typ, i)
		h.start(ids[i], "Wait", nil, func(r *iwfapi.WorkflowStartRequest) { r.IwfWorkflowType = typ })
	}
	return ids
}

// batchDone waits until a batch is closed and returns its description.
func batchDone(h *harness, id string) engine.BatchDescription {
	h.t.Helper()
	var d engine.BatchDescription
	h.eventually("batch "+id+" to close", func() bool {
		var err error
		d, err = h.eng.DescribeBatch(context.Background(), engine.BatchDescribeRequest{ID: id, FailuresPageSize: 1000})
		if err != nil {
			h.t.Fatal(err)
		}
		return d.Batch.State == engine.BatchCompleted || d.Batch.State == engine.BatchCancelled
	})
	return d
}

// closedEvents returns the WorkflowClosed events of a run's history.
func closedEvents(h *harness, wf string) []iwfapi.WorkflowHistoryEvent {
	h.t.Helper()
	hist, err := h.eng.WorkflowHistory(context.Background(), iwfapi.WorkflowHistoryRequest{WorkflowId: wf, PageSize: ptr(int32(1000))})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []iwfapi.WorkflowHistoryEvent
	for _, ev := range hist.Events {
		if ev.EventType == "WorkflowClosed" {
			out = append(out, ev)
		}
	}
	return out
}

// TestBatchTerminate: a batch terminates each run its query matched,
// exactly once and as its creator; a run closed before the batch reached
// it is a failure with the reason; runs of other types are untouched.
func TestBatchTerminate(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		waitingWorkflow(h)
		targets := startTyped(h, "Doomed", 40)
		others := startTyped(h, "Spared", 3)
		h.idle()
		// One target closes on its own before the batch starts: it no longer
		// matches. Another is stopped after the match: a failure.
		if err := h.eng.StopWorkflow(ctx, iwfapi.WorkflowStopRequest{WorkflowId: targets[0]}); err != nil {
			t.Fatal(err)
		}
		query := "IwfWorkflowType = 'Doomed' AND ExecutionStatus = 'Running'"
		resp, err := h.eng.StartBatch(engine.WithActor(ctx, "oncall"), engine.BatchRequest{Query: query, Operation: engine.BatchOpTerminate, RPS: 2000.0, Reason: "bad deploy"})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Matched != 39 {
			t.Fatalf("matched %d, want 39", resp.Matched)
		}
		d := batchDone(h, resp.ID)
		b := d.Batch
		if b.State != engine.BatchCompleted || b.Matched != 39 || b.Done+b.Failed != 39 || b.Pending != 0 || b.CreatedBy != "oncall" || b.ClosedAt.IsZero() {
			t.Fatalf("batch = %+v", b)
		}
		if int64(len(d.Failures)) != b.Failed {
			t.Errorf("%d failures listed, %d counted", len(d.Failures), b.Failed)
		}
		for _, id := range targets {
			if s := h.status(id); s != iwfapi.WorkflowStatusTerminated && id != targets[0] {
				t.Errorf("%s is %s, want TERMINATED", id, s)
			}
			evs := closedEvents(h, id)
			if len(evs) != 1 {
				t.Fatalf("%s has %d WorkflowClosed events, want 1", id, len(evs))
			}
			if id != targets[0] && deref(evs[0].Data)["actor"] != "oncall" {
				t.Errorf("%s closed by %v, want oncall", id, deref(evs[0].Data)["actor"])
			}
		}
		for _, id := range others {
			if s := h.status(id); s != iwfapi.WorkflowStatusRunning {
				t.Errorf("%s of another type is %s", id, s)
			}
		}
		metrics := h.idleMetrics()
		if want := fmt.Sprintf("iwf_batch_items_processed_total %d", 39); !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
		list, err := h.eng.ListBatches(ctx, engine.BatchListRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Batches) != 1 || list.Batches[0].ID != resp.ID {
			t.Errorf("list = %+v", list)
		}
	})
}

// TestBatchFailuresHaveReasons: runs closed between the match and their
// turn are failed items with the reason; the others are done.
func TestBatchFailuresHaveReasons(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		waitingWorkflow(h)
		ids := startTyped(h, "Mixed", 6)
		startTyped(h, "Slow", 6)
		h.idle()
		// A slow batch: one run per 100 s, so nothing but the first is
		// processed before it is cancelled.
		resp, err := h.eng.StartBatch(ctx, engine.BatchRequest{Query: "IwfWorkflowType = 'Slow'", Operation: engine.BatchOpSignal,
			SignalChannel: "go", RPS: 0.01})
		if err != nil {
			t.Fatal(err)
		}
		// Cancel it: whatever it did, the rest stays pending.
		info, err := h.eng.CancelBatch(ctx, resp.ID)
		if err != nil {
			t.Fatal(err)
		}
		if info.State != engine.BatchCancelled || info.Done+info.Failed > 1 || info.Pending < 5 {
			t.Fatalf("cancelled batch = %+v", info)
		}
		d := batchDone(h, resp.ID)
		if d.Batch.Done+d.Batch.Failed > 1 {
			t.Fatalf("the cancelled batch went on: %+v", d.Batch)
		}
		for _, id := range ids[:3] {
			if err := h.eng.StopWorkflow(ctx, iwfapi.WorkflowStopRequest{WorkflowId: id}); err != nil {
				t.Fatal(err)
			}
		}
		// A second batch signals all six: three are closed.
		resp, err = h.eng.StartBatch(ctx, engine.BatchRequest{Query: "IwfWorkflowType = 'Mixed'", Operation: engine.BatchOpSignal,
			SignalChannel: "go", RPS: 1000.0})
		if err != nil {
			t.Fatal(err)
		}
		d = batchDone(h, resp.ID)
		if d.Batch.Matched != 6 || d.Batch.Done != 3 || d.Batch.Failed != 3 || len(d.Failures) != 3 {
			t.Fatalf("batch = %+v, failures %+v", d.Batch, d.Failures)
		}
		for _, f := range d.Failures {
			if !strings.Contains(f.Reason, "already closed") {
				t.Errorf("failure %+v: want a reason saying the run is closed", f)
			}
		}
		for _, id := range ids[3:] {
			if r := h.result(id); r.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
				t.Errorf("%s is %s after its signal", id, r.WorkflowStatus)
			}
		}
	})
}

// TestBatchStartRefuses: bad requests and a query matching more runs than
// the limit are 400s, and store nothing.
func TestBatchStartRefuses(t *testing.T) {
	forEachStoreWith(t, func(c *engine.Config) { c.MaxBatchRuns = 3 }, func(t *testing.T, h *harness) {
		ctx := context.Background()
		waitingWorkflow(h)
		startTyped(h, "Many", 4)
		h.idle()
		for name, req := range map[string]engine.BatchRequest{
			"no query":       {Operation: engine.BatchOpTerminate},
			"bad query":      {Query: "IwfWorkflowType = ", Operation: engine.BatchOpTerminate},
			"bad operation":  {Query: "IwfWorkflowType = 'Many'", Operation: "EXPLODE"},
			"signal no name": {Query: "IwfWorkflowType = 'Many'", Operation: engine.BatchOpSignal},
			"reset no type":  {Query: "IwfWorkflowType = 'Many'", Operation: engine.BatchOpReset},
			"skip no timer":  {Query: "IwfWorkflowType = 'Many'", Operation: engine.BatchOpSkipTimer, SkipTimer: &engine.BatchSkipTimer{StateExecutionID: "Wait-1"}},
			"negative rps":   {Query: "IwfWorkflowType = 'Many'", Operation: engine.BatchOpCancel, RPS: -1.0},
			// The rate cases match nothing: the rate alone is refused.
			"tiny rps":       {Query: "IwfWorkflowType = 'None'", Operation: engine.BatchOpCancel, RPS: 1e-300},
			"rps below 0.01": {Query: "IwfWorkflowType = 'None'", Operation: engine.BatchOpCancel, RPS: 0.0099},
			"rps above max":  {Query: "IwfWorkflowType = 'None'", Operation: engine.BatchOpCancel, RPS: 10000.5},
			"over the limit": {Query: "IwfWorkflowType = 'Many'", Operation: engine.BatchOpCancel},
		} {
			_, err := h.eng.StartBatch(ctx, req)
			if engine.CodeOf(err) != engine.CodeInvalidArgument {
				t.Errorf("%s: err = %v, want invalid argument", name, err)
			}
		}
		if _, err := h.eng.DescribeBatch(ctx, engine.BatchDescribeRequest{ID: "nope"}); engine.CodeOf(err) != engine.CodeInvalidArgument {
			t.Errorf("describe unknown: %v", err)
		}
		list, err := h.eng.ListBatches(ctx, engine.BatchListRequest{})
		if err != nil || len(list.Batches) != 0 {
			t.Fatalf("list = %+v, %v; want no batch stored", list, err)
		}
		// Within the limit, and matching nothing: completed at once.
		resp, err := h.eng.StartBatch(ctx, engine.BatchRequest{Query: "IwfWorkflowType = 'None'", Operation: engine.BatchOpCancel})
		if err != nil {
			t.Fatal(err)
		}
		if d := batchDone(h, resp.ID); d.Batch.State != engine.BatchCompleted || d.Batch.Matched != 0 {
			t.Fatalf("empty batch = %+v", d.Batch)
		}
	})
}

// TestBatchReset: a reset batch starts a new run of each workflow from
// the beginning, as its creator.
func TestBatchReset(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		waitingWorkflow(h)
		ids := startTyped(h, "Reset", 5)
		h.idle()
		resp, err := h.eng.StartBatch(engine.WithActor(ctx, "fixer"), engine.BatchRequest{Query: "IwfWorkflowType = 'Reset' AND ExecutionStatus = 'Running'",
			Operation: engine.BatchOpReset, Reset: &engine.BatchReset{ResetType: "BEGINNING"}, RPS: 1000.0})
		if err != nil {
			t.Fatal(err)
		}
		d := batchDone(h, resp.ID)
		if d.Batch.Done != 5 || d.Batch.Failed != 0 || d.Batch.Reset == nil {
			t.Fatalf("batch = %+v failures %+v", d.Batch, d.Failures)
		}
		for _, id := range ids {
			// The current run is the new one, running; it completes on a signal.
			if err := h.eng.SignalWorkflow(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: id, SignalChannelName: "go"}); err != nil {
				t.Fatal(err)
			}
			if r := h.result(id); r.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
				t.Errorf("%s's new run is %s", id, r.WorkflowStatus)
			}
		}
	})
}

// TestBatchStartNeedsOperationParameters: a batch whose operation lacks
// what it needs — a reset without the point its type names, a signal
// without a channel, a timer skip without its timer — is refused when it
// is started, with a message naming the field, and stores nothing; it is
// not accepted and then failed on every run. CheckBatchStart, which the
// console calls before its confirmation page, gives the same answer, and
// a direct reset missing its point is refused alike.
func TestBatchStartNeedsOperationParameters(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		waitingWorkflow(h)
		startTyped(h, "Params", 2)
		h.idle()
		q := "IwfWorkflowType = 'Params'"
		reset := func(rt string, mod func(*engine.BatchReset)) engine.BatchRequest {
			r := &engine.BatchReset{ResetType: rt}
			if mod != nil {
				mod(r)
			}
			return engine.BatchRequest{Query: q, Operation: engine.BatchOpReset, Reset: r}
		}
		cases := []struct {
			name string
			req  engine.BatchRequest
			want string // in the message
		}{
			{"STATE_ID without stateId", reset("STATE_ID", nil), "reset.stateId"},
			{"STATE_ID with an empty stateId", reset("STATE_ID", func(r *engine.BatchReset) { r.StateID = ptr("") }), "reset.stateId"},
			{"STATE_EXECUTION_ID without stateExecutionId", reset("STATE_EXECUTION_ID", nil), "reset.stateExecutionId"},
			{"HISTORY_EVENT_ID without historyEventId", reset("HISTORY_EVENT_ID", nil), "reset.historyEventId"},
			{"HISTORY_EVENT_ID 0", reset("HISTORY_EVENT_ID", func(r *engine.BatchReset) { r.HistoryEventID = ptr(int32(0)) }), "reset.historyEventId"},
			{"HISTORY_EVENT_TIME without historyEventTime", reset("HISTORY_EVENT_TIME", nil), "reset.historyEventTime"},
			{"HISTORY_EVENT_TIME unreadable", reset("HISTORY_EVENT_TIME", func(r *engine.BatchReset) { r.HistoryEventTime = ptr("yesterday") }), "reset.historyEventTime"},
			{"unknown reset type", reset("SOMEWHERE", nil), "reset.resetType"},
			{"reset without options", engine.BatchRequest{Query: q, Operation: engine.BatchOpReset}, "reset.resetType"},
			{"signal without channel", engine.BatchRequest{Query: q, Operation: engine.BatchOpSignal}, "signalChannelName"},
			{"signal to a reserved channel", engine.BatchRequest{Query: q, Operation: engine.BatchOpSignal, SignalChannel: "__IwfSystem_x"}, "reserved"},
			{"skip timer without options", engine.BatchRequest{Query: q, Operation: engine.BatchOpSkipTimer}, "skipTimer.workflowStateExecutionId"},
			{"skip timer without timer", engine.BatchRequest{Query: q, Operation: engine.BatchOpSkipTimer,
				SkipTimer: &engine.BatchSkipTimer{StateExecutionID: "Wait-1"}}, "timerCommandId"},
			{"skip timer with a negative index", engine.BatchRequest{Query: q, Operation: engine.BatchOpSkipTimer,
				SkipTimer: &engine.BatchSkipTimer{StateExecutionID: "Wait-1", TimerCommandIndex: ptr(int32(-1))}}, "timerCommandIndex"},
		}
		for _, c := range cases {
			_, err := h.eng.StartBatch(ctx, c.req)
			if engine.CodeOf(err) != engine.CodeInvalidArgument || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: StartBatch err = %v, want invalid argument naming %s", c.name, err, c.want)
			}
			if cerr := engine.CheckBatchStart(c.req); engine.CodeOf(cerr) != engine.CodeInvalidArgument || fmt.Sprint(cerr) != fmt.Sprint(err) {
				t.Errorf("%s: CheckBatchStart err = %v, StartBatch's %v", c.name, cerr, err)
			}
		}
		list, err := h.eng.ListBatches(ctx, engine.BatchListRequest{})
		if err != nil || len(list.Batches) != 0 {
			t.Fatalf("list = %+v, %v; want no batch stored", list, err)
		}
		// The direct reset refuses a missing point too, instead of taking
		// it for the beginning.
		_, err = h.eng.ResetWorkflow(ctx, iwfapi.WorkflowResetRequest{WorkflowId: "Params-0", ResetType: iwfapi.WorkflowResetTypeHistoryEventId})
		if engine.CodeOf(err) != engine.CodeInvalidArgument || !strings.Contains(err.Error(), "historyEventId") {
			t.Errorf("direct HISTORY_EVENT_ID reset without an id: %v", err)
		}
		// Each reset type with its point is accepted.
		for _, r := range []*engine.BatchReset{
			{ResetType: "BEGINNING"},
			{ResetType: "STATE_ID", StateID: ptr("Wait")},
			{ResetType: "STATE_EXECUTION_ID", StateExecutionID: ptr("Wait-1")},
			{ResetType: "HISTORY_EVENT_ID", HistoryEventID: ptr(int32(1))},
			{ResetType: "HISTORY_EVENT_TIME", HistoryEventTime: ptr("2026-01-02T03:04:05Z")},
			{ResetType: "HISTORY_EVENT_TIME", HistoryEventTime: ptr("15m")},
		} {
			if err := engine.CheckBatchStart(engine.BatchRequest{Query: q, Operation: engine.BatchOpReset, Reset: r}); err != nil {
				t.Errorf("reset %s: %v", r.ResetType, err)
			}
		}
	})
}

// TestBatchTextBounds: a batch's stored texts are bounded when it starts —
// the reason (MaxBatchReasonBytes, valid UTF-8, no NUL), the query
// (search.MaxQueryLength), the names of its operation (MaxNameBytes) —
// and an over-long one is a 400 that stores nothing.
func TestBatchTextBounds(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		q := "IwfWorkflowType = 'None'"
		for name, c := range map[string]struct {
			req  engine.BatchRequest
			want string
		}{
			"long reason": {engine.BatchRequest{Query: q, Operation: engine.BatchOpTerminate,
				Reason: strings.Repeat("r", engine.MaxBatchReasonBytes+1)}, "reason is 1025 bytes long; the limit is 1024"},
			"4 MB reason": {engine.BatchRequest{Query: q, Operation: engine.BatchOpTerminate,
				Reason: strings.Repeat("r", 4<<20)}, "the limit is 1024"},
			"NUL in reason":    {engine.BatchRequest{Query: q, Operation: engine.BatchOpTerminate, Reason: "a\x00b"}, "NUL"},
			"reason not UTF-8": {engine.BatchRequest{Query: q, Operation: engine.BatchOpTerminate, Reason: "a\xffb"}, "UTF-8"},
			"long query": {engine.BatchRequest{Query: "WorkflowId = '" + strings.Repeat("q", search.MaxQueryLength) + "'",
				Operation: engine.BatchOpTerminate}, "query"},
			"long channel": {engine.BatchRequest{Query: q, Operation: engine.BatchOpSignal,
				SignalChannel: strings.Repeat("c", engine.MaxNameBytes+1)}, "signalChannelName"},
			"long state id": {engine.BatchRequest{Query: q, Operation: engine.BatchOpReset,
				Reset: &engine.BatchReset{ResetType: "STATE_ID", StateID: ptr(strings.Repeat("s", engine.MaxNameBytes+1))}}, "reset.stateId"},
			"long event time": {engine.BatchRequest{Query: q, Operation: engine.BatchOpReset,
				Reset: &engine.BatchReset{ResetType: "HISTORY_EVENT_TIME", HistoryEventTime: ptr(strings.Repeat("9", 1<<20))}}, "reset.historyEventTime"},
			"long timer id": {engine.BatchRequest{Query: q, Operation: engine.BatchOpSkipTimer,
				SkipTimer: &engine.BatchSkipTimer{StateExecutionID: "S-1", TimerCommandID: ptr(strings.Repeat("t", engine.MaxNameBytes+1))}}, "skipTimer.timerCommandId"},
		} {
			_, err := h.eng.StartBatch(ctx, c.req)
			if engine.CodeOf(err) != engine.CodeInvalidArgument || !strings.Contains(err.Error(), c.want) || len(err.Error()) > 4096 {
				t.Errorf("%s: err = %.300v, want a short invalid argument naming %q", name, err, c.want)
			}
		}
		if list, err := h.eng.ListBatches(ctx, engine.BatchListRequest{}); err != nil || len(list.Batches) != 0 {
			t.Fatalf("list = %d batches, %v; want none stored", len(list.Batches), err)
		}
		if _, err := h.eng.StartBatch(ctx, engine.BatchRequest{Query: q, Operation: engine.BatchOpTerminate,
			Reason: strings.Repeat("é", engine.MaxBatchReasonBytes/2)}); err != nil {
			t.Fatalf("a reason of %d bytes: %v", engine.MaxBatchReasonBytes, err)
		}
	})
}

// TestBatchListBounded: a page of batch/list holds at most
// MaxBatchListPage batches, whatever pageSize asks, and ends early, with a
// page token, before its batches' JSON passes about 1 MiB; paging goes
// through every batch once, newest first.
func TestBatchListBounded(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		start := func(query, reason string) string {
			t.Helper()
			resp, err := h.eng.StartBatch(ctx, engine.BatchRequest{Query: query, Operation: engine.BatchOpCancel, Reason: reason})
			if err != nil {
				t.Fatal(err)
			}
			return resp.ID
		}
		var ids []string // oldest first
		for i := range engine.MaxBatchListPage + 1 {
			ids = append(ids, start("IwfWorkflowType = 'None'", fmt.Sprint("small ", i)))
		}
		page, err := h.eng.ListBatches(ctx, engine.BatchListRequest{PageSize: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Batches) != engine.MaxBatchListPage || page.NextPageToken == "" {
			t.Fatalf("a page of pageSize 1000 has %d batches (token %v), want %d and a token", len(page.Batches), page.NextPageToken != "", engine.MaxBatchListPage)
		}
		// Batches with the longest query and reason there may be: a page
		// of 100 of them would be about 1.7 MB.
		long := "WorkflowId = '" + strings.Repeat("w", search.MaxQueryLength-20) + "'"
		for range 70 {
			ids = append(ids, start(long, strings.Repeat("r", engine.MaxBatchReasonBytes)))
		}
		seen := map[string]bool{}
		var order []string
		token := ""
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatal("paging does not end")
			}
			page, err := h.eng.ListBatches(ctx, engine.BatchListRequest{PageSize: 1000, PageToken: token})
			if err != nil {
				t.Fatal(err)
			}
			body, _ := json.Marshal(page)
			if len(body) > 1<<20+32<<10 {
				t.Errorf("a page of %d batches is %d bytes", len(page.Batches), len(body))
			}
			if len(page.Batches) == 0 || len(page.Batches) > engine.MaxBatchListPage {
				t.Fatalf("a page of %d batches", len(page.Batches))
			}
			for _, b := range page.Batches {
				if seen[b.ID] {
					t.Fatalf("batch %s listed twice", b.ID)
				}
				seen[b.ID] = true
				order = append(order, b.ID)
			}
			if token = page.NextPageToken; token == "" {
				break
			}
		}
		if len(order) != len(ids) {
			t.Fatalf("paging listed %d batches, want %d", len(order), len(ids))
		}
		for i, id := range order {
			if id != ids[len(ids)-1-i] {
				t.Fatalf("batch %d of the list is %s, want %s (newest first)", i, id, ids[len(ids)-1-i])
			}
		}
	})
}
