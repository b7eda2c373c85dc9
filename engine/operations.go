package engine

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine/internal/record"
)

// InvokeRPC calls the worker's RPC handler with the run's attributes and
// channel sizes, then applies the answer's writes, publishes and new states
// atomically before answering (POST /api/v1/workflow/rpc).
func (e *Engine) InvokeRPC(ctx context.Context, req iwfapi.WorkflowRpcRequest) (iwfapi.WorkflowRpcResponse, error) {
	holder := ""
	daPolicy, saPolicy := mapPtr(req.DataAttributesLoadingPolicy, loadingIn), mapPtr(req.SearchAttributesLoadingPolicy, loadingIn)
	if keys := lockKeys(daPolicy, saPolicy); len(keys) > 0 {
		holder = "rpc:" + uuid.NewString()
		expires := e.cfg.Clock.Now().Add(e.waitBudget(deref(req.TimeoutSeconds)) + e.cfg.LeaseDuration)
		err := e.mutateRun(ctx, req.WorkflowId, deref(req.WorkflowRunId), func(r *runTxn) error {
			if !tryLock(r.rd, keys, holder, unixMs(expires), unixMs(r.now)) {
				return Errorf(CodeLocked, "requested data or search attributes are being locked by other operations")
			}
			return nil
		})
		if err != nil {
			return iwfapi.WorkflowRpcResponse{}, err
		}
	}
	resp, err := e.invokeRPC(ctx, req, daPolicy, saPolicy, holder)
	if err != nil && holder != "" {
		// Release the locks; the run may have closed meanwhile.
		_ = e.mutateRun(context.WithoutCancel(ctx), req.WorkflowId, deref(req.WorkflowRunId), func(r *runTxn) error {
			unlock(r.rd, holder)
			return nil
		})
	}
	return resp, err
}

// rpcTarget is the run an RPC calls the worker for.
type rpcTarget struct {
	run *Run
	rd  *record.Run
}

// rpcRequest reads, in one snapshot, the run an RPC names and what its
// worker call is sent: the loaded attributes and the channel sizes.
func (e *Engine) rpcRequest(ctx context.Context, req iwfapi.WorkflowRpcRequest, daPolicy, saPolicy *record.LoadingPolicy) (rpcTarget, *iwfapi.WorkflowWorkerRpcRequest, error) {
	var target rpcTarget
	var wreq *iwfapi.WorkflowWorkerRpcRequest
	err := e.storeView(ctx, func(ctx context.Context, tx ReadTx) error {
		run, rd, err := readRun(ctx, tx, req.WorkflowId, deref(req.WorkflowRunId))
		if err != nil {
			return err
		}
		id := run.RunID
		das, err := loadDataAttributes(ctx, tx, id, daPolicy)
		if err != nil {
			return err
		}
		sas, err := loadSearchAttributes(ctx, tx, id, saPolicy)
		if err != nil {
			return err
		}
		signals, err := channelInfos(ctx, tx, id, ChannelSignal)
		if err != nil {
			return err
		}
		internals, err := channelInfos(ctx, tx, id, ChannelInternal)
		if err != nil {
			return err
		}
		target = rpcTarget{run: run, rd: rd}
		wreq = &iwfapi.WorkflowWorkerRpcRequest{
			Context:              iwfapi.Context{WorkflowId: run.WorkflowID, WorkflowRunId: run.RunID, WorkflowStartedTimestamp: run.StartedAt.Unix()},
			WorkflowType:         run.WorkflowType,
			RpcName:              req.RpcName,
			Input:                req.Input,
			DataAttributes:       nonEmpty(das),
			SearchAttributes:     nonEmpty(sas),
			SignalChannelInfos:   &signals,
			InternalChannelInfos: &internals,
		}
		return nil
	})
	return target, wreq, err
}

// invokeRPC calls the worker and applies the answer; holder names the RPC's
// locks ("" for a non-locking RPC), released with the answer.
func (e *Engine) invokeRPC(ctx context.Context, req iwfapi.WorkflowRpcRequest, daPolicy, saPolicy *record.LoadingPolicy, holder string) (iwfapi.WorkflowRpcResponse, error) {
	target, wreq, err := e.rpcRequest(ctx, req, daPolicy, saPolicy)
	if err != nil {
		return iwfapi.WorkflowRpcResponse{}, err
	}
	// A paused run's worker is not called, an RPC's no more than a
	// state's: the caller learns it is paused (CodePaused).
	if p := e.runPauseOf(target.run.WorkflowType, target.rd); p != nil && target.run.Status == RunRunning {
		return iwfapi.WorkflowRpcResponse{}, pausedError(target.run, p)
	}
	if e.cfg.CheckWorkerURL != nil {
		if err := e.cfg.CheckWorkerURL(ctx, target.rd.WorkerURL); err != nil {
			return iwfapi.WorkflowRpcResponse{}, Errorf(CodeInvalidArgument, "%v", err)
		}
	}
	// The worker sees payloads inline: the attributes' and an input that
	// the client sent as a reference.
	if err := e.resolveRPCInput(ctx, target.run, wreq); err != nil {
		return iwfapi.WorkflowRpcResponse{}, err
	}
	callCtx, cancel := context.WithTimeout(ctx, e.waitBudget(deref(req.TimeoutSeconds)))
	defer cancel()
	begin := time.Now()
	callCtx, span := e.startRPCCall(callCtx, target.run, req.RpcName)
	resp, err := e.worker.RPC(callCtx, target.rd.WorkerURL, wreq)
	endSpan(span, err)
	e.recordCall("rpc", begin, err)
	if err != nil {
		return iwfapi.WorkflowRpcResponse{}, rpcWorkerError(err)
	}
	if d := resp.StateDecision; d != nil {
		closing := d.ConditionalClose != nil
		for _, m := range slice(d.NextStates) {
			closing = closing || isReserved(m.StateId)
		}
		if closing {
			return iwfapi.WorkflowRpcResponse{}, &Error{Code: CodeWorkerAPIError, Message: "closing workflow in RPC is not supported yet", Worker: &WorkerErrorInfo{}}
		}
	}
	// The output goes back to the client as it is, not stored: a
	// reference in it is loaded, as in every answer.
	if err := e.inline(ctx, true, target.run.WorkflowID, target.run.RunID, resp.Output); err != nil {
		return iwfapi.WorkflowRpcResponse{}, err
	}
	mutates := len(slice(resp.UpsertDataAttributes)) > 0 || len(slice(resp.UpsertSearchAttributes)) > 0 ||
		len(slice(resp.PublishToInterStateChannel)) > 0 || (resp.StateDecision != nil && len(slice(resp.StateDecision.NextStates)) > 0)
	if !mutates && holder == "" {
		return iwfapi.WorkflowRpcResponse{Output: resp.Output}, nil
	}
	mutation := &record.RPCMutation{
		Name: req.RpcName, Locking: holder != "", UpsertSearchAttributes: mapSlice(resp.UpsertSearchAttributes, searchAttributeIn),
		UpsertDataAttributes: mapSlice(resp.UpsertDataAttributes, kvIn), Publish: mapSlice(resp.PublishToInterStateChannel, publishIn),
		Decision: mapPtr(resp.StateDecision, decisionIn),
	}
	off, err := e.offload(ctx, target.run.WorkflowID, target.run.RunID, mutation)
	if err != nil {
		return iwfapi.WorkflowRpcResponse{}, err
	}
	err = e.mutateRun(ctx, target.run.WorkflowID, target.run.RunID, func(r *runTxn) error {
		// Locks expire, for a node that dies holding them. An RPC that
		// outlived its locks while another locking call took them over
		// answered from values that call may have changed since: its
		// writes are refused, not applied (a lost update otherwise).
		if holder != "" && mutates && !holdsAll(r.rd, lockKeys(daPolicy, saPolicy), holder) {
			return Errorf(CodeLocked, "the RPC's locks expired and were taken by another operation before its answer could be applied; nothing was applied")
		}
		unlock(r.rd, holder)
		if !mutates {
			return nil
		}
		if err := r.applyInput(record.Input{RPC: mutation}, false); err != nil {
			return err
		}
		return r.keepPayloads(off, r.run.RunID)
	})
	if err != nil {
		return iwfapi.WorkflowRpcResponse{}, err
	}
	return iwfapi.WorkflowRpcResponse{Output: resp.Output}, nil
}

// resolveRPCInput prepares an RPC's worker request: the client's input is
// handled as every payload that arrives (a reference is loaded, the
// reference fields dropped; one streamed from the request body is loaded
// by inline), and the stored attributes are loaded.
func (e *Engine) resolveRPCInput(ctx context.Context, run *Run, wreq *iwfapi.WorkflowWorkerRpcRequest) error {
	if !e.payloadsOn() {
		return nil
	}
	if wreq.Input != nil {
		in := *wreq.Input // the client's request is left as it is
		wreq.Input = &in
		if err := eachObject(func(o objectFields) error {
			_, err := e.resolveSent(ctx, o, run.WorkflowID, run.RunID)
			return err
		}, wreq.Input); err != nil {
			return err
		}
	}
	return e.inline(ctx, false, run.WorkflowID, run.RunID, wreq)
}

func isLocking(p *record.LoadingPolicy) bool {
	if p == nil || p.PersistenceLoadingType == nil {
		return false
	}
	t := *p.PersistenceLoadingType
	return t == record.LoadPartialWithExclusiveLock || t == record.LoadAllWithPartialLock
}

func channelInfos(ctx context.Context, tx ReadTx, runID string, kind ChannelKind) (map[string]iwfapi.ChannelInfo, error) {
	counts, err := tx.MessageCounts(ctx, runID, kind)
	if err != nil {
		return nil, err
	}
	out := make(map[string]iwfapi.ChannelInfo, len(counts))
	for ch, n := range counts {
		out[ch] = iwfapi.ChannelInfo{Size: ptr(int32(n))}
	}
	return out, nil
}

// rpcWorkerError builds the 420 answer for a failed RPC worker call.
func rpcWorkerError(err error) error {
	info := &WorkerErrorInfo{}
	var ce *WorkerCallError
	if !errors.As(err, &ce) || ce.Status == 0 {
		return &Error{Code: CodeWorkerAPIError, Message: err.Error(), Worker: info, Err: err}
	}
	info.Status = ce.Status
	if ce.Status == 200 {
		return &Error{Code: CodeWorkerAPIError, Message: "invalid worker response: " + truncate(string(ce.Body), 500), Worker: info}
	}
	var body iwfapi.WorkerErrorResponse
	if jerr := json.Unmarshal(ce.Body, &body); jerr != nil {
		return &Error{Code: CodeWorkerAPIError, Message: "unable to decode worker response body to WorkerErrorResponse: body" + string(ce.Body), Worker: info}
	}
	info.ErrorType, info.Detail = deref(body.ErrorType), deref(body.Detail)
	return &Error{Code: CodeWorkerAPIError, Message: fmt.Sprintf("worker API error, status:%d, errorType:%s", ce.Status, info.ErrorType), Worker: info}
}

// SkipTimer completes a pending timer command of a state execution now; a
// skipped timer is reported FIRED (POST /api/v1/workflow/timer/skip).
func (e *Engine) SkipTimer(ctx context.Context, req iwfapi.WorkflowSkipTimerRequest) error {
	if deref(req.TimerCommandId) == "" && req.TimerCommandIndex == nil {
		return Errorf(CodeInvalidArgument, "invalid request - must provide either a timerCommandId or index")
	}
	return e.applyExternal(ctx, req.WorkflowId, deref(req.WorkflowRunId), record.Input{SkipTimer: ptr(skipTimerIn(req))})
}

// UpdateConfig overwrites the run's workflow config field by field
// (POST /api/v1/workflow/config/update). As in iWF, optimizeTimer is not
// updated.
func (e *Engine) UpdateConfig(ctx context.Context, req iwfapi.WorkflowConfigUpdateRequest) error {
	return e.applyExternal(ctx, req.WorkflowId, deref(req.WorkflowRunId), record.Input{Config: &record.ConfigInput{WorkflowConfig: configIn(req.WorkflowConfig)}})
}

// WaitForStateCompletion waits until a watched state execution's execute
// call succeeded and returns its real completion record
// (POST /api/v1/workflow/waitForStateCompletion).
func (e *Engine) WaitForStateCompletion(ctx context.Context, req iwfapi.WorkflowWaitForStateCompletionRequest) (iwfapi.WorkflowWaitForStateCompletionResponse, error) {
	var key string
	switch {
	case deref(req.WaitForKey) != "":
		if deref(req.StateId) == "" {
			return iwfapi.WorkflowWaitForStateCompletionResponse{}, Errorf(CodeInvalidArgument, "stateId is required with waitForKey")
		}
		key = "key:" + *req.StateId + ":" + *req.WaitForKey
	case deref(req.StateExecutionId) != "":
		key = "id:" + *req.StateExecutionId
	default:
		return iwfapi.WorkflowWaitForStateCompletionResponse{}, Errorf(CodeInvalidArgument, "either stateExecutionId or stateId with waitForKey is required")
	}
	if req.WorkflowId == "" {
		return iwfapi.WorkflowWaitForStateCompletionResponse{}, errNoWorkflowID()
	}
	deadline := time.NewTimer(e.waitBudget(deref(req.WaitTimeSeconds)))
	defer deadline.Stop()
	w, unsubscribe := e.waits.subscribe(workflowKey(req.WorkflowId))
	defer unsubscribe()
	for {
		var found *iwfapi.StateCompletionOutput
		err := e.storeView(ctx, func(ctx context.Context, tx ReadTx) error {
			id, err := resolveRun(ctx, tx, req.WorkflowId, "")
			if CodeOf(err) == CodeWorkflowNotExists {
				return nil // an unknown workflow just times out, as in iWF
			}
			if err != nil {
				return err
			}
			run, err := tx.RunGet(ctx, id)
			if err != nil {
				return err
			}
			rd, err := decodeRun(run)
			if err != nil {
				return err
			}
			if c, ok := rd.Completions[key]; ok {
				found = ptr(outputOut(c))
			}
			return nil
		})
		if err != nil {
			return iwfapi.WorkflowWaitForStateCompletionResponse{}, err
		}
		if found != nil {
			err := e.inline(ctx, true, req.WorkflowId, "", found)
			return iwfapi.WorkflowWaitForStateCompletionResponse{StateCompletionOutput: found}, err
		}
		recheck := time.NewTimer(e.cfg.LongPollRecheck)
		select {
		case <-w.C:
		case <-recheck.C:
		case <-deadline.C:
			recheck.Stop()
			return iwfapi.WorkflowWaitForStateCompletionResponse{}, Errorf(CodeLongPollTimeout, "waiting has exceeded timeout limit, please retry")
		case <-ctx.Done():
			recheck.Stop()
			return iwfapi.WorkflowWaitForStateCompletionResponse{}, ctx.Err()
		}
		recheck.Stop()
	}
}

// dumpDocument is the JSON snapshot that internal/dump pages through.
type dumpDocument struct {
	WorkflowID       string                         `json:"workflowId"`
	RunID            string                         `json:"workflowRunId"`
	Status           RunStatus                      `json:"status"`
	Counters         map[string]int                 `json:"stateExecutionCounters"`
	Executions       []dumpExecution                `json:"stateExecutions"`
	Outputs          []iwfapi.StateCompletionOutput `json:"stateOutputs,omitempty"`
	SignalsReceived  map[string]iwfapi.ChannelInfo  `json:"signalChannels"`
	InternalChannels map[string]iwfapi.ChannelInfo  `json:"internalChannels"`
	DataAttributes   []iwfapi.KeyValue              `json:"dataAttributes,omitempty"`
	SearchAttributes []json.RawMessage              `json:"searchAttributes,omitempty"`
	Config           iwfapi.WorkflowConfig          `json:"config"`
	History          []dumpEvent                    `json:"history"`
}

type dumpExecution struct {
	ExecutionID string          `json:"stateExecutionId"`
	StateID     string          `json:"stateId"`
	Status      ExecutionStatus `json:"status"`
	Data        json.RawMessage `json:"data"`
}

type dumpEvent struct {
	ID          int64           `json:"id"`
	At          time.Time       `json:"at"`
	Type        string          `json:"type"`
	ExecutionID string          `json:"stateExecutionId,omitempty"`
	Data        json.RawMessage `json:"data,omitempty"`
}

// DumpWorkflow pages through a JSON snapshot of a run: its executions,
// buffers, attributes and history (POST /api/v1/workflow/internal/dump).
func (e *Engine) DumpWorkflow(ctx context.Context, req iwfapi.WorkflowDumpRequest) (iwfapi.WorkflowDumpResponse, error) {
	var doc dumpDocument
	err := e.storeView(ctx, func(ctx context.Context, tx ReadTx) error {
		run, rd, err := readRun(ctx, tx, req.WorkflowId, req.WorkflowRunId)
		if err != nil {
			return err
		}
		id := run.RunID
		doc = dumpDocument{WorkflowID: run.WorkflowID, RunID: run.RunID, Status: run.Status, Counters: rd.Counters, Outputs: slice(mapSlice(&rd.Outputs, outputOut)), Config: configOut(rd.Config)}
		execs, err := tx.ExecutionList(ctx, id)
		if err != nil {
			return err
		}
		for _, x := range execs {
			doc.Executions = append(doc.Executions, dumpExecution{ExecutionID: x.ExecutionID, StateID: x.StateID, Status: x.Status, Data: x.Data})
		}
		if doc.SignalsReceived, err = channelInfos(ctx, tx, id, ChannelSignal); err != nil {
			return err
		}
		if doc.InternalChannels, err = channelInfos(ctx, tx, id, ChannelInternal); err != nil {
			return err
		}
		das, err := tx.DataAttributeGet(ctx, id, nil)
		if err != nil {
			return err
		}
		doc.DataAttributes = fromStoreDataAttributes(das)
		sas, err := tx.SearchAttributeGet(ctx, id, nil)
		if err != nil {
			return err
		}
		for _, a := range sas {
			doc.SearchAttributes = append(doc.SearchAttributes, a.Raw)
		}
		events, err := tx.HistoryList(ctx, id, 0, 0)
		if err != nil {
			return err
		}
		for _, ev := range events {
			doc.History = append(doc.History, dumpEvent{ID: ev.ID, At: ev.At, Type: ev.Type, ExecutionID: ev.ExecutionID, Data: ev.Data})
		}
		return nil
	})
	if err != nil {
		return iwfapi.WorkflowDumpResponse{}, err
	}
	if err := e.inlineDump(ctx, &doc); err != nil {
		return iwfapi.WorkflowDumpResponse{}, err
	}
	data := encode(doc)
	pageSize := int(req.PageSizeInBytes)
	if pageSize <= 0 {
		pageSize = 1 << 20
	}
	total := (len(data) + pageSize - 1) / pageSize
	if int(req.PageNum) < 0 || int(req.PageNum) >= total {
		return iwfapi.WorkflowDumpResponse{}, Errorf(CodeInvalidArgument, "pageNum %d is out of range: the dump has %d pages", req.PageNum, total)
	}
	start := int(req.PageNum) * pageSize
	end := min(start+pageSize, len(data))
	sum := md5.Sum(data)
	return iwfapi.WorkflowDumpResponse{JsonData: string(data[start:end]), TotalPages: int32(total), Checksum: hex.EncodeToString(sum[:])}, nil
}

// inlineDump loads the external objects a dump refers to: in the
// results and attributes, and in the stored records of the executions and
// the history.
func (e *Engine) inlineDump(ctx context.Context, doc *dumpDocument) error {
	if !e.payloadsOn() {
		return nil
	}
	if err := e.inline(ctx, true, doc.WorkflowID, doc.RunID, doc.Outputs, doc.DataAttributes); err != nil {
		return err
	}
	for i := range doc.Executions {
		x := &doc.Executions[i]
		data, err := e.inlineRaw(ctx, true, doc.WorkflowID, doc.RunID, x.Data)
		if err != nil {
			return err
		}
		x.Data = data
	}
	for i := range doc.History {
		ev := &doc.History[i]
		data, err := e.inlineRaw(ctx, true, doc.WorkflowID, doc.RunID, ev.Data)
		if err != nil {
			return err
		}
		ev.Data = data
	}
	return nil
}

// HistoryEventOut is a stored history event as the API shows it.
func HistoryEventOut(ev *HistoryEvent) iwfapi.WorkflowHistoryEvent {
	out := iwfapi.WorkflowHistoryEvent{EventId: ev.ID, TimestampMs: ev.At.UnixMilli(), EventType: ev.Type}
	if ev.ExecutionID != "" {
		out.StateExecutionId = ptr(ev.ExecutionID)
	}
	if len(ev.Data) > 0 {
		var data map[string]any
		if json.Unmarshal(ev.Data, &data) == nil {
			out.Data = &data
		}
	}
	return out
}

// WorkflowHistory returns one page of a run's history, oldest first
// (POST /api/v1/workflow/history, an extension of this server).
func (e *Engine) WorkflowHistory(ctx context.Context, req iwfapi.WorkflowHistoryRequest) (iwfapi.WorkflowHistoryResponse, error) {
	size := pageSize(req.PageSize, MaxPageSize)
	var resp iwfapi.WorkflowHistoryResponse
	err := e.storeView(ctx, func(ctx context.Context, tx ReadTx) error {
		id, err := resolveRun(ctx, tx, req.WorkflowId, deref(req.WorkflowRunId))
		if err != nil {
			return err
		}
		events, err := tx.HistoryList(ctx, id, deref(req.AfterEventId), size+1)
		if err != nil {
			return err
		}
		resp.WorkflowRunId = id
		resp.HasMore = ptr(len(events) > size)
		if len(events) > size {
			events = events[:size]
		}
		resp.Events = make([]iwfapi.WorkflowHistoryEvent, 0, len(events))
		for _, ev := range events {
			resp.Events = append(resp.Events, HistoryEventOut(ev))
		}
		return nil
	})
	if err == nil {
		err = e.inlineEvents(ctx, true, req.WorkflowId, resp.WorkflowRunId, resp.Events)
	}
	return resp, err
}

// inlineEvents loads the external objects that history events, as the API
// shows them, refer to.
func (e *Engine) inlineEvents(ctx context.Context, keepRef bool, workflowID, runID string, events []iwfapi.WorkflowHistoryEvent) error {
	if !e.payloadsOn() {
		return nil
	}
	for _, ev := range events {
		if ev.Data == nil {
			continue
		}
		if err := e.inlineJSON(ctx, keepRef, workflowID, runID, *ev.Data); err != nil {
			return err
		}
	}
	return nil
}
