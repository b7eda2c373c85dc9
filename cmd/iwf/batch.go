package main

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

var batchCommands = map[string]command{
	"start":    {"apply an operation to every run a search query matches; prints the batch id", cmdBatchStart},
	"describe": {"show a batch's progress and the runs it failed on", cmdBatchDescribe},
	"list":     {"list the batches, newest first", cmdBatchList},
	"cancel":   {"stop a batch: runs already processed stay processed", cmdBatchCancel},
}

// batchOperations maps --operation to the API's operation.
var batchOperations = map[string]iwfapi.BatchOperation{
	"terminate": iwfapi.BatchOperationTerminate, "cancel": iwfapi.BatchOperationCancel, "fail": iwfapi.BatchOperationFail,
	"signal": iwfapi.BatchOperationSignal, "reset": iwfapi.BatchOperationReset, "skip-timer": iwfapi.BatchOperationSkipTimer,
	"pause": iwfapi.BatchOperationPause, "resume": iwfapi.BatchOperationResume, "set-worker-url": iwfapi.BatchOperationSetWorkerUrl,
}

func cmdBatchStart(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("batch start", "iwf batch start --query Q --operation terminate|cancel|fail|signal|reset|skip-timer|pause|resume|set-worker-url [operation flags] [--rps N] [--reason R]")
	query := fs.String("query", "", "the search query selecting the runs, as `iwf workflow list --query` takes it (required)")
	op := fs.String("operation", "", "terminate, cancel, fail, signal, reset, skip-timer, pause, resume or set-worker-url (required)")
	rps := fs.Float64("rps", 0, "runs processed per second at most, from 0.01 to 10000; 0 means the server's default, 50")
	reason := fs.String("reason", "", "why; the stop's reason (FAIL: the runs' error message), shown with the batch")
	channel := fs.String("channel", "", "signal: the signal channel's name")
	value := fs.String("value", "", "signal: the value to send, as JSON")
	resetType := fs.String("reset-type", "", "reset: BEGINNING, HISTORY_EVENT_ID, HISTORY_EVENT_TIME, STATE_ID or STATE_EXECUTION_ID")
	eventID := fs.Int("event-id", 0, "reset HISTORY_EVENT_ID: the history event id")
	eventTime := fs.String("event-time", "", "reset HISTORY_EVENT_TIME: the time, e.g. 2025-01-02T03:04:05Z")
	stateID := fs.String("state-id", "", "reset STATE_ID: the state whose first execution to reset to")
	stateExecID := fs.String("state-execution-id", "", "reset STATE_EXECUTION_ID, skip-timer: the state execution, e.g. S1-1")
	skipSignals := fs.Bool("skip-signal-reapply", false, "reset: do not deliver again the signals that came after the reset point")
	commandID := fs.String("timer-command-id", "", "skip-timer: the timer's command id")
	index := fs.Int("timer-index", -1, "skip-timer: the timer's zero-based position among the state's timers")
	workerURL := fs.String("worker-url", "", "set-worker-url: the worker URL the runs call from their next worker call on")
	if err := c.parseSub(fs, args, "query", "operation"); err != nil {
		return err
	}
	operation, ok := batchOperations[strings.ToLower(*op)]
	if !ok {
		return usagef("%s: --operation %q: want terminate, cancel, fail, signal, reset, skip-timer, pause, resume or set-worker-url", fs.Name(), *op)
	}
	// The server checks the request (each operation's parameters, the
	// rate, the limits) and answers what is missing; the command line
	// only builds it.
	req := iwfapi.BatchStartRequest{Query: *query, Operation: operation, Reason: optional(*reason)}
	if *rps != 0 {
		req.Rps = rps
	}
	switch operation {
	case iwfapi.BatchOperationSignal:
		obj, err := jsonObject("value", *value)
		if err != nil {
			return err
		}
		req.SignalChannelName, req.SignalValue = optional(*channel), obj
	case iwfapi.BatchOperationReset:
		r := &iwfapi.BatchResetOptions{ResetType: iwfapi.WorkflowResetType(strings.ToUpper(*resetType)), HistoryEventTime: optional(*eventTime),
			StateId: optional(*stateID), StateExecutionId: optional(*stateExecID)}
		if *eventID != 0 {
			if *eventID < math.MinInt32 || *eventID > math.MaxInt32 {
				return usagef("%s: --event-id %d is out of range", fs.Name(), *eventID)
			}
			r.HistoryEventId = ptr(int32(*eventID))
		}
		if *skipSignals {
			r.SkipSignalReapply = ptr(true)
		}
		req.Reset = r
	case iwfapi.BatchOperationSkipTimer:
		st := &iwfapi.BatchSkipTimerOptions{WorkflowStateExecutionId: *stateExecID, TimerCommandId: optional(*commandID)}
		if *commandID == "" && *index != -1 {
			if *index < math.MinInt32 || *index > math.MaxInt32 {
				return usagef("%s: --timer-index %d is out of range", fs.Name(), *index)
			}
			st.TimerCommandIndex = ptr(int32(*index))
		}
		req.SkipTimer = st
	case iwfapi.BatchOperationSetWorkerUrl:
		req.WorkerUrl = optional(*workerURL)
	}
	var resp iwfapi.BatchStartResponse
	if printed, err := c.call(ctx, "/api/v1/batch/start", req, &resp); printed || err != nil {
		return err
	}
	_, err := fmt.Fprintln(c.stdout, resp.BatchId)
	return err
}

func cmdBatchDescribe(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("batch describe", "iwf batch describe --id B [--json]")
	id := fs.String("id", "", "the batch id (required)")
	failures := fs.Int("failures", 20, "print at most this many failed runs (at most 1000)")
	if err := c.parseSub(fs, args, "id"); err != nil {
		return err
	}
	req := iwfapi.BatchDescribeRequest{BatchId: *id, FailuresPageSize: ptr(int32(min(max(*failures, 1), 1000)))}
	var resp iwfapi.BatchDescribeResponse
	if printed, err := c.call(ctx, "/api/v1/batch/describe", req, &resp); printed || err != nil {
		return err
	}
	b := resp.Batch
	var out kv
	out.add("Batch ID", b.BatchId)
	out.add("State", string(b.State))
	out.addIf("Message", deref(b.Message))
	out.add("Operation", batchOperationText(b))
	out.add("Query", b.Query)
	out.addIf("Reason", deref(b.Reason))
	out.add("Rate", strconv.FormatFloat(b.Rps, 'g', -1, 64)+" runs/s")
	out.add("Matched", strconv.FormatInt(b.Matched, 10))
	out.add("Done", strconv.FormatInt(b.Done, 10))
	out.add("Failed", strconv.FormatInt(b.Failed, 10))
	out.add("Pending", strconv.FormatInt(b.Pending, 10))
	out.add("Created by", b.CreatedBy)
	out.add("Created", formatMillis(&b.CreatedTimestampMs))
	out.addIf("Closed", formatMillis(b.ClosedTimestampMs))
	out.write(c.stdout)
	if len(resp.Failures) == 0 {
		return nil
	}
	fmt.Fprintln(c.stdout, "\nFailures:")
	t := newTable(c.stdout, "WORKFLOW ID", "RUN ID", "REASON")
	for _, f := range resp.Failures {
		t.row(f.WorkflowId, f.WorkflowRunId, f.Reason)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if resp.FailuresNextPageToken != nil {
		fmt.Fprintf(c.stdout, "(%d failures in all; --json --failures 1000 for more)\n", b.Failed)
	}
	return nil
}

// batchOperationText is a batch's operation with its main parameter.
func batchOperationText(b iwfapi.BatchInfo) string {
	s := strings.ToLower(string(b.Operation))
	switch {
	case b.SignalChannelName != nil:
		s += " (channel " + *b.SignalChannelName + ")"
	case b.Reset != nil:
		s += " (" + string(b.Reset.ResetType) + ")"
	case b.SkipTimer != nil:
		s += " (" + b.SkipTimer.WorkflowStateExecutionId + ")"
	case b.WorkerUrl != nil:
		s += " (" + *b.WorkerUrl + ")"
	}
	return strings.NewReplacer("skip_timer", "skip-timer", "set_worker_url", "set-worker-url").Replace(s)
}

func cmdBatchList(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("batch list", "iwf batch list [--limit N]")
	limit := fs.Int("limit", 100, "print at most this many batches (at most 1000)")
	if err := c.parseSub(fs, args); err != nil {
		return err
	}
	// The server answers pages of at most 100 batches, fewer when they are
	// large: follow its page tokens up to the limit.
	n := min(max(*limit, 1), 1000)
	var batches []iwfapi.BatchInfo
	token := ""
	for len(batches) < n {
		req := iwfapi.BatchListRequest{PageSize: ptr(int32(n - len(batches))), NextPageToken: optional(token)}
		var resp iwfapi.BatchListResponse
		if printed, err := c.call(ctx, "/api/v1/batch/list", req, &resp); printed || err != nil {
			return err
		}
		batches = append(batches, resp.Batches...)
		if token = deref(resp.NextPageToken); token == "" || len(resp.Batches) == 0 {
			break
		}
	}
	t := newTable(c.stdout, "BATCH ID", "STATE", "OPERATION", "MATCHED", "DONE", "FAILED", "CREATED BY", "CREATED")
	for _, b := range batches[:min(len(batches), n)] {
		t.row(b.BatchId, string(b.State), batchOperationText(b), strconv.FormatInt(b.Matched, 10), strconv.FormatInt(b.Done, 10),
			strconv.FormatInt(b.Failed, 10), b.CreatedBy, formatMillis(&b.CreatedTimestampMs))
	}
	return t.flush()
}

func cmdBatchCancel(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("batch cancel", "iwf batch cancel --id B")
	id := fs.String("id", "", "the batch id (required)")
	if err := c.parseSub(fs, args, "id"); err != nil {
		return err
	}
	var resp iwfapi.BatchInfo
	if printed, err := c.call(ctx, "/api/v1/batch/cancel", iwfapi.BatchCancelRequest{BatchId: *id}, &resp); printed || err != nil {
		return err
	}
	_, err := fmt.Fprintf(c.stdout, "batch %s is %s: %d done, %d failed, %d not processed\n", resp.BatchId, resp.State, resp.Done, resp.Failed, resp.Pending)
	return err
}
