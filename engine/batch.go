package engine

// Batch operations (POST /api/v1/batch/*, an extension of this server):
// one operation applied to every run a search matched when the batch
// started.
//
// Start evaluates the query once, page by page, and stores the matching
// runs as the batch's items in transactions of batchChunk items while the
// batch is starting; then it is running. A runner in every engine claims a
// running batch with a lease (Store: Tx.BatchClaim), so that one node works
// a batch at a time, and applies the operation to each pending item at the
// batch's rate. The item is marked done in the transaction that applies
// the operation to its run (the then of mutateRunThen and resetWorkflow):
// either both commit or neither does, so a crash never applies it twice
// nor skips it, and Tx.BatchItemFinish refuses an item that is no longer
// pending, so two nodes that both believe they hold the lease cannot apply
// it twice either. An operation the engine refuses (the run is closed,
// deleted, has no such timer) changes nothing; the item is then marked
// failed with the reason, in a transaction of its own.
//
// The batch API takes and answers the engine's types (batchtypes.go); a
// batch row stores its operation and batchOptions, the engine's JSON. The
// operations are applied through the single-run paths (stopWorkflow,
// resetWorkflow), which take their requests in the wire's shape.
//
// A SIGNAL batch's value, with external storage on, is offloaded once,
// when the batch starts, like every payload the engine keeps (payloads.go):
// the row holds its reference, and the object is recorded as kept by the
// batch (PayloadKeep, under the owner BatchPayloadOwner(id), in the
// transaction that inserts the row). Each run the batch signals gets a
// record of its own for that object (PayloadLink) in the transaction that
// stores the signal and marks its item done: one object for the whole
// batch, not one per run, and no read or write of the store per run. The
// batch's record is the claim that lets those links take: while it is
// kept, PayloadLink finds the object, and BatchItemFinish, in the same
// transaction, fails unless the batch is running. When the batch closes
// (completed or cancelled, however: by its runner, by CancelBatch, by a
// claim that gives up an abandoned start), a trigger of the store's schema
// marks the batch's record unreferenced in the closing statement: batch
// rows are never deleted, and a closed batch never signals again. The
// object then lives as long as the runs that refer to it, and the payload
// sweep deletes it after the last of them is deleted (or at once when no
// run was signalled). The closed batch's row keeps a reference that may
// name a deleted object; nothing reads it (no answer shows a batch's
// value).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine/internal/record"
	"github.com/iwf-server/iwf-server/search"
)

const (
	// DefaultBatchRPS is the rate of a batch that names none: runs per
	// second.
	DefaultBatchRPS = 50
	// MinBatchRPS and MaxBatchRPS bound a batch's rate: from one run every
	// 100 seconds to 10,000 runs a second.
	MinBatchRPS = 0.01
	MaxBatchRPS = 10000
	// DefaultMaxBatchRuns bounds the runs one batch may match
	// (Config.MaxBatchRuns); a start whose query matches more is a 400.
	DefaultMaxBatchRuns = 200000
	// batchChunk is how many items one transaction stores at start, and
	// the page size of the query's evaluation.
	batchChunk = 1000
	// batchRunnerChunk is how many pending items the runner reads at a time.
	batchRunnerChunk = 100

	// MaxBatchReasonBytes bounds a batch's reason. The other texts a batch
	// stores are bounded too: its query by search.MaxQueryLength, the names
	// of its operation (channel, state, execution and timer ids) by
	// MaxNameBytes; its signal value is a payload, bounded as a signal's is
	// (by the request body's limit; with external storage, a value over
	// the threshold is kept as a reference), and no list shows it.
	MaxBatchReasonBytes = 1024
	// MaxBatchListPage is the most batches one batch/list page returns
	// (and its default); maxBatchListBytes ends a page earlier, with a
	// page token, once its batches' JSON reaches about 1 MiB.
	MaxBatchListPage  = 100
	maxBatchListBytes = 1 << 20
	// batchListChunk is how many batches ListBatches reads at a time.
	batchListChunk = 25
	// maxBatchFailureBytes bounds the stored reason of a failed item.
	maxBatchFailureBytes = 1024
)

// batchOptions is the stored JSON of a batch's operation parameters (the
// options column). Its shape is frozen: rows written by every release
// decode into it (testdata/batch_rows_v1.json).
type batchOptions struct {
	V         int                 `json:"v"`
	Signal    *record.SignalInput `json:"signal,omitempty"`
	Reset     *batchReset         `json:"reset,omitempty"`
	SkipTimer *record.SkipTimer   `json:"skipTimer,omitempty"`
	WorkerURL string              `json:"workerUrl,omitempty"`
	// SignalKept says that the signal's value refers to an external
	// object the batch keeps (BatchPayloadOwner): each run links it.
	// Without it, a reference in the value (a row stored before batches
	// kept their values, from a client that sent one) is loaded and
	// written anew for each run, as a reference sent by a client is.
	SignalKept bool `json:"signalKept,omitempty"`
}

// BatchPayloadOwner is the owner id under which batch batchID keeps its
// external objects in the store's records (Tx.PayloadKeep's runID): its
// SIGNAL value. The stores' schemas name this form ('batch:' || batch_id)
// in the trigger that marks those records unreferenced when the batch
// closes; run ids never take it.
func BatchPayloadOwner(batchID string) string { return "batch:" + batchID }

// batchReset is the reset a batch applies to each run.
type batchReset struct {
	ResetType         string  `json:"resetType"`
	HistoryEventID    *int32  `json:"historyEventId,omitempty"`
	HistoryEventTime  *string `json:"historyEventTime,omitempty"`
	StateID           *string `json:"stateId,omitempty"`
	StateExecutionID  *string `json:"stateExecutionId,omitempty"`
	SkipSignalReapply *bool   `json:"skipSignalReapply,omitempty"`
	SkipUpdateReapply *bool   `json:"skipUpdateReapply,omitempty"`
}

// errBatchItemGone rolls back an operation whose item is no longer pending
// or whose batch is no longer running.
var errBatchItemGone = errors.New("batch item no longer pending, or batch not running")

// batchOptionsIn checks a start request's operation and its parameters:
// each operation has what applying it to a run needs, so that a batch is
// refused when it starts rather than failed on every run.
func batchOptionsIn(req BatchRequest) (batchOptions, error) {
	opts := batchOptions{V: 1}
	switch req.Operation {
	case BatchOpTerminate, BatchOpCancel, BatchOpFail:
	case BatchOpSignal:
		ch := req.SignalChannel
		if ch == "" {
			return opts, Errorf(CodeInvalidArgument, "operation SIGNAL needs signalChannelName")
		}
		if err := CheckName("signalChannelName", ch); err != nil {
			return opts, err
		}
		if strings.HasPrefix(ch, reservedChannelPrefix) {
			return opts, Errorf(CodeInvalidArgument, "signal channel names starting with %s are reserved", reservedChannelPrefix)
		}
		opts.Signal = &record.SignalInput{SignalChannelName: ch, SignalValue: mapPtr(req.SignalValue, encodedValueIn)}
	case BatchOpReset:
		r := req.Reset
		if r == nil || !iwfapi.WorkflowResetType(r.ResetType).Valid() {
			return opts, Errorf(CodeInvalidArgument, "operation RESET needs reset.resetType (one of BEGINNING, HISTORY_EVENT_ID, HISTORY_EVENT_TIME, STATE_ID, STATE_EXECUTION_ID)")
		}
		if err := checkResetPoint("reset.", iwfapi.WorkflowResetType(r.ResetType), r.HistoryEventID, r.HistoryEventTime, r.StateID, r.StateExecutionID); err != nil {
			return opts, err
		}
		opts.Reset = &batchReset{ResetType: r.ResetType, HistoryEventID: r.HistoryEventID, HistoryEventTime: r.HistoryEventTime,
			StateID: r.StateID, StateExecutionID: r.StateExecutionID, SkipSignalReapply: r.SkipSignalReapply, SkipUpdateReapply: r.SkipUpdateReapply}
	case BatchOpSkipTimer:
		st := req.SkipTimer
		if st == nil || st.StateExecutionID == "" || (deref(st.TimerCommandID) == "" && st.TimerCommandIndex == nil) {
			return opts, Errorf(CodeInvalidArgument, "operation SKIP_TIMER needs skipTimer.workflowStateExecutionId and a timerCommandId or timerCommandIndex")
		}
		if err := CheckName("skipTimer.workflowStateExecutionId", st.StateExecutionID); err != nil {
			return opts, err
		}
		if err := CheckName("skipTimer.timerCommandId", deref(st.TimerCommandID)); err != nil {
			return opts, err
		}
		if deref(st.TimerCommandID) == "" && *st.TimerCommandIndex < 0 {
			return opts, Errorf(CodeInvalidArgument, "skipTimer.timerCommandIndex must not be negative, got %d", *st.TimerCommandIndex)
		}
		opts.SkipTimer = &record.SkipTimer{WorkflowStateExecutionID: st.StateExecutionID, TimerCommandID: st.TimerCommandID, TimerCommandIndex: st.TimerCommandIndex}
	case BatchOpPause, BatchOpResume:
	case BatchOpSetWorkerURL:
		if strings.TrimSpace(req.WorkerURL) == "" {
			return opts, Errorf(CodeInvalidArgument, "operation SET_WORKER_URL needs workerUrl")
		}
		opts.WorkerURL = req.WorkerURL
	default:
		return opts, Errorf(CodeInvalidArgument, "unknown operation %q: one of TERMINATE, CANCEL, FAIL, SIGNAL, RESET, SKIP_TIMER, PAUSE, RESUME, SET_WORKER_URL", req.Operation)
	}
	return opts, nil
}

// batchStartIn checks a start request as far as it can without the
// store: the query's syntax, the operation and its parameters, and the
// rate, which it returns with the options (the default rate for none).
func batchStartIn(req BatchRequest) (batchOptions, float64, error) {
	if strings.TrimSpace(req.Query) == "" {
		return batchOptions{}, 0, Errorf(CodeInvalidArgument, "query is required: a batch over every run must say so, e.g. ExecutionStatus = 'Running'")
	}
	if _, err := search.Parse(req.Query); err != nil {
		return batchOptions{}, 0, searchError(err)
	}
	opts, err := batchOptionsIn(req)
	if err != nil {
		return opts, 0, err
	}
	if err := checkText("reason", req.Reason, MaxBatchReasonBytes); err != nil {
		return opts, 0, err
	}
	rps := req.RPS
	if rps == 0 {
		rps = DefaultBatchRPS
	}
	if !(rps >= MinBatchRPS && rps <= MaxBatchRPS) { // NaN too
		return opts, 0, Errorf(CodeInvalidArgument, "rps must be from %v (one run every %s) to %d runs per second, or absent or 0 for the default, %d; got %v",
			MinBatchRPS, batchInterval(MinBatchRPS), MaxBatchRPS, DefaultBatchRPS, rps)
	}
	return opts, rps, nil
}

// checkText refuses a free text a batch stores (its reason) that is longer
// than max bytes, is not valid UTF-8 or holds U+0000, which the stores
// cannot keep as text.
func checkText(field, s string, max int) error {
	if len(s) > max {
		return Errorf(CodeInvalidArgument, "%s is %d bytes long; the limit is %d", field, len(s), max)
	}
	if !utf8.ValidString(s) {
		return Errorf(CodeInvalidArgument, "%s is not valid UTF-8", field)
	}
	return checkNoNUL(field, s)
}

// clip shortens s to at most max bytes, on a character boundary, marking
// the cut with "…".
func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// CheckBatchStart refuses a batch start request StartBatch would refuse
// before it evaluates the query, with the same error: an invalid query,
// an unknown operation or one that lacks its parameters (a reset without
// the point its type names, a signal without its channel, a timer skip
// without its timer, a re-route without a worker URL), a rate out of
// bounds. The console calls it before its confirmation page; StartBatch
// makes the same checks, and checks a re-route's URL against the worker
// URL policy too.
func CheckBatchStart(req BatchRequest) error {
	_, _, err := batchStartIn(req)
	return err
}

// StartBatch starts a batch operation (POST /api/v1/batch/start): it
// evaluates the query, stores the matching runs and returns the batch's
// id; the runners apply the operation afterwards.
func (e *Engine) StartBatch(ctx context.Context, req BatchRequest) (BatchStarted, error) {
	var resp BatchStarted
	opts, rps, err := batchStartIn(req)
	if err != nil {
		return resp, err
	}
	if opts.WorkerURL != "" {
		// The new URL is vetted as a start's is, by the engine, before
		// anything is stored; each run's re-route checks it again.
		if err := e.checkWorkerURL(ctx, opts.WorkerURL); err != nil {
			return resp, err
		}
	}
	runs, err := e.batchMatches(ctx, req.Query)
	if err != nil {
		return resp, err
	}
	// The signal's value goes to the external store once, for the batch,
	// after the query (a refused query writes nothing); a reference sent
	// in is loaded and written anew, as for a signal.
	var off *offloaded
	if opts.Signal != nil {
		if off, err = e.offload(ctx, "", "", opts.Signal); err != nil {
			return resp, err
		}
		opts.SignalKept = off != nil && len(off.paths) > 0
	}
	now := e.cfg.Clock.Now()
	b := &Batch{ID: uuid.NewString(), Query: req.Query, Operation: string(req.Operation), Options: encode(opts),
		Reason: req.Reason, RPS: rps, State: BatchStarting, CreatedBy: ActorOf(ctx), CreatedAt: now, UpdatedAt: now,
		LeaseOwner: e.cfg.NodeID, LeaseExpiresAt: now.Add(e.cfg.LeaseDuration)}
	if err := e.storeBatch(ctx, b, runs, off); err != nil {
		return resp, err
	}
	e.nudgeBatches()
	return BatchStarted{ID: b.ID, Matched: int64(len(runs))}, nil
}

// batchMatches evaluates a batch's query, page by page in the search's
// order, and returns the matching runs; more than MaxBatchRuns is a 400.
func (e *Engine) batchMatches(ctx context.Context, query string) ([]search.Run, error) {
	pq, err := search.Parse(query)
	if err != nil {
		return nil, searchError(err)
	}
	select {
	case e.searching <- struct{}{}:
		defer func() { <-e.searching }()
	case <-ctx.Done():
		return nil, &Error{Code: CodeDeadlineExceeded, Err: ctx.Err(), Message: "the request ran out of time waiting for a search slot"}
	}
	var runs []search.Run
	cursor := ""
	for {
		var page *search.Page
		err := e.storeView(ctx, func(ctx context.Context, tx ReadTx) error {
			q, err := search.Compile(ctx, pq, attributeResolver{declared: e.cfg.SearchAttributeTypes, store: tx}, e.cfg.Clock.Now())
			if err != nil {
				return searchError(err)
			}
			q.Limit, q.Cursor = batchChunk, cursor
			page, err = tx.RunSearch(ctx, q)
			return err
		})
		if err != nil {
			return nil, err
		}
		runs = append(runs, page.Runs...)
		if len(runs) > e.cfg.MaxBatchRuns {
			return nil, Errorf(CodeInvalidArgument, "the query matches more than %d runs, the most one batch may process (--max-batch-runs): narrow it, e.g. by WorkflowType or StartTime", e.cfg.MaxBatchRuns)
		}
		if page.Cursor == "" {
			return runs, nil
		}
		cursor = page.Cursor
	}
}

// storeBatch stores a starting batch and its items, batchChunk per
// transaction, renewing the creator's lease with each, then makes it
// running (completed when nothing matched). The batch keeps the objects
// off wrote (its signal's value) from the transaction that inserts it.
// When a step fails the batch is cancelled with the reason, as far as the
// store allows.
func (e *Engine) storeBatch(ctx context.Context, b *Batch, runs []search.Run, off *offloaded) error {
	items := make([]*BatchItem, len(runs))
	for i, r := range runs {
		items[i] = &BatchItem{Seq: int64(i + 1), WorkflowID: r.WorkflowID, RunID: r.RunID}
	}
	chunk := func(i int) []*BatchItem { return items[i:min(i+batchChunk, len(items))] }
	err := e.storeUpdate(ctx, func(ctx context.Context, tx Tx) error {
		if err := tx.BatchInsert(ctx, b); err != nil {
			return err
		}
		if off != nil && len(off.paths) > 0 {
			if err := tx.PayloadKeep(ctx, BatchPayloadOwner(b.ID), off.paths); err != nil {
				return err
			}
		}
		return tx.BatchItemInsert(ctx, b.ID, chunk(0))
	})
	if err != nil {
		return err
	}
	fail := func(err error) error {
		_ = e.storeUpdate(context.WithoutCancel(ctx), func(ctx context.Context, tx Tx) error {
			_, err := tx.BatchSetState(ctx, b.ID, []BatchState{BatchStarting}, BatchCancelled, "storing the matching runs failed", e.cfg.Clock.Now())
			return err
		})
		return err
	}
	for i := batchChunk; i < len(items); i += batchChunk {
		err := e.storeUpdate(ctx, func(ctx context.Context, tx Tx) error {
			if err := tx.BatchItemInsert(ctx, b.ID, chunk(i)); err != nil {
				return err
			}
			_, err := tx.BatchRenew(ctx, b.ID, e.cfg.NodeID, e.cfg.Clock.Now().Add(e.cfg.LeaseDuration))
			return err
		})
		if err != nil {
			return fail(err)
		}
	}
	to := BatchRunning
	if len(items) == 0 {
		to = BatchCompleted
	}
	err = e.storeUpdate(ctx, func(ctx context.Context, tx Tx) error {
		ok, err := tx.BatchSetState(ctx, b.ID, []BatchState{BatchStarting}, to, "", e.cfg.Clock.Now())
		if err == nil && !ok {
			return Errorf(CodeInvalidArgument, "batch %s was cancelled while it started", b.ID)
		}
		if err != nil || to != BatchRunning {
			return err
		}
		// Hand the lease to the runners: any node may now claim it.
		_, err = tx.BatchRelease(ctx, e.cfg.NodeID, b.ID)
		return err
	})
	if err != nil {
		return fail(err)
	}
	return nil
}

// DescribeBatch returns a batch and a page of its failed runs
// (POST /api/v1/batch/describe).
func (e *Engine) DescribeBatch(ctx context.Context, req BatchDescribeRequest) (BatchDescription, error) {
	var resp BatchDescription
	after, err := seqToken(req.FailuresPageToken, "failuresPageToken")
	if err != nil {
		return resp, err
	}
	size := batchPageSize(req.FailuresPageSize, 100)
	err = e.storeView(ctx, func(ctx context.Context, tx ReadTx) error {
		b, err := getBatch(ctx, tx, req.ID)
		if err != nil {
			return err
		}
		items, err := tx.BatchItemList(ctx, b.ID, BatchItemFailed, after, size+1)
		if err != nil {
			return err
		}
		resp.Batch = batchInfo(b)
		resp.Failures = make([]BatchFailure, 0, len(items))
		for i, it := range items {
			if i == size {
				resp.FailuresNextPageToken = strconv.FormatInt(items[i-1].Seq, 10)
				break
			}
			resp.Failures = append(resp.Failures, BatchFailure{WorkflowID: it.WorkflowID, RunID: it.RunID, Reason: it.Failure})
		}
		return nil
	})
	return resp, err
}

// ListBatches returns a page of batches, newest first (POST
// /api/v1/batch/list): at most MaxBatchListPage of them, and fewer when
// their JSON reaches maxBatchListBytes (always one at least), so that a
// page stays about 1 MiB whatever its batches hold. A reason stored
// before reasons were bounded is shown clipped to MaxBatchReasonBytes
// (describe shows it whole). The batches are read batchListChunk at a
// time, so that no more are held than the page needs.
func (e *Engine) ListBatches(ctx context.Context, req BatchListRequest) (BatchPage, error) {
	resp := BatchPage{Batches: []BatchInfo{}}
	before, err := seqToken(req.PageToken, "nextPageToken")
	if err != nil {
		return resp, err
	}
	size := min(batchPageSize(req.PageSize, MaxBatchListPage), MaxBatchListPage)
	err = e.storeView(ctx, func(ctx context.Context, tx ReadTx) error {
		resp = BatchPage{Batches: []BatchInfo{}}
		bytes, cursor, last := 0, before, int64(0)
		for {
			bs, err := tx.BatchList(ctx, cursor, batchListChunk)
			if err != nil {
				return err
			}
			for _, b := range bs {
				info := batchInfo(b)
				info.Reason = clip(info.Reason, MaxBatchReasonBytes)
				n := batchInfoSize(info)
				if len(resp.Batches) == size || (len(resp.Batches) > 0 && bytes+n > maxBatchListBytes) {
					resp.NextPageToken = strconv.FormatInt(last, 10)
					return nil
				}
				resp.Batches = append(resp.Batches, info)
				bytes, last = bytes+n, b.Seq
			}
			if len(bs) < batchListChunk {
				return nil
			}
			cursor = bs[len(bs)-1].Seq
		}
	})
	return resp, err
}

// batchInfoOverhead bounds the bytes of a batch's entry in a list
// answer's JSON besides its texts: the field names, the numbers and the
// punctuation (about 330 bytes in the API's JSON today).
const batchInfoOverhead = 512

// batchInfoSize is about the size of a batch's entry in a list answer's
// JSON, and not less: its texts as JSON strings, and batchInfoOverhead.
func batchInfoSize(info BatchInfo) int {
	n := batchInfoOverhead
	texts := []string{info.ID, info.Query, string(info.Operation), info.Reason, info.Message, info.CreatedBy, info.SignalChannel, info.WorkerURL}
	if r := info.Reset; r != nil {
		texts = append(texts, r.ResetType, deref(r.HistoryEventTime), deref(r.StateID), deref(r.StateExecutionID))
	}
	if st := info.SkipTimer; st != nil {
		texts = append(texts, st.StateExecutionID, deref(st.TimerCommandID))
	}
	for _, s := range texts {
		n += jsonStringSize(s)
	}
	return n
}

// jsonStringSize is the length of s as a JSON string, quotes and escapes
// included.
func jsonStringSize(s string) int {
	b, err := json.Marshal(s)
	if err != nil {
		return 6 * len(s) // never: the longest escape of a byte, \u00XX
	}
	return len(b)
}

// batchPageSize is a requested page size: def when none (0 or less), at
// most MaxPageSize.
func batchPageSize(n, def int) int {
	switch {
	case n <= 0:
		return def
	case n > MaxPageSize:
		return MaxPageSize
	}
	return n
}

// CancelBatch stops a starting or running batch (POST /api/v1/batch/cancel);
// runs it processed stay processed. A closed batch is returned as it is.
func (e *Engine) CancelBatch(ctx context.Context, id string) (BatchInfo, error) {
	var out BatchInfo
	msg := "cancelled"
	if a := ActorOf(ctx); a != "" {
		msg = "cancelled by " + a
	}
	err := e.storeUpdate(ctx, func(ctx context.Context, tx Tx) error {
		if _, err := getBatch(ctx, tx, id); err != nil {
			return err
		}
		if _, err := tx.BatchSetState(ctx, id, []BatchState{BatchStarting, BatchRunning}, BatchCancelled, msg, e.cfg.Clock.Now()); err != nil {
			return err
		}
		b, err := tx.BatchGet(ctx, id)
		if err != nil {
			return err
		}
		out = batchInfo(b)
		return nil
	})
	return out, err
}

// getBatch reads a batch; an unknown id is a 400.
func getBatch(ctx context.Context, tx ReadTx, id string) (*Batch, error) {
	if id == "" {
		return nil, Errorf(CodeInvalidArgument, "batchId is required")
	}
	b, err := tx.BatchGet(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, Errorf(CodeInvalidArgument, "batch %s does not exist", id)
	}
	return b, err
}

// seqToken decodes a page token: a Seq, "" for the first page.
func seqToken(token, name string) (int64, error) {
	if token == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(token, 10, 64)
	if err != nil || n <= 0 {
		return 0, Errorf(CodeInvalidArgument, "invalid %s", name)
	}
	return n, nil
}

// batchInfo is a stored batch and its progress. Options that do not decode
// show no parameters (the runner cancels such a batch).
func batchInfo(b *Batch) BatchInfo {
	out := BatchInfo{ID: b.ID, Query: b.Query, Operation: BatchOperation(b.Operation), Reason: b.Reason, RPS: b.RPS,
		State: b.State, Message: b.Message, Matched: b.Matched, Done: b.Done, Failed: b.Failed,
		Pending: b.Matched - b.Done - b.Failed, CreatedBy: b.CreatedBy, CreatedAt: b.CreatedAt, UpdatedAt: b.UpdatedAt, ClosedAt: b.ClosedAt}
	var opts batchOptions
	if json.Unmarshal(b.Options, &opts) == nil {
		if opts.Signal != nil {
			out.SignalChannel = opts.Signal.SignalChannelName
		}
		if r := opts.Reset; r != nil {
			out.Reset = &BatchReset{ResetType: r.ResetType, HistoryEventID: r.HistoryEventID,
				HistoryEventTime: r.HistoryEventTime, StateID: r.StateID, StateExecutionID: r.StateExecutionID,
				SkipSignalReapply: r.SkipSignalReapply, SkipUpdateReapply: r.SkipUpdateReapply}
		}
		if st := opts.SkipTimer; st != nil {
			out.SkipTimer = &BatchSkipTimer{StateExecutionID: st.WorkflowStateExecutionID, TimerCommandID: st.TimerCommandID, TimerCommandIndex: st.TimerCommandIndex}
		}
		out.WorkerURL = opts.WorkerURL
	}
	return out
}

// encodedValueIn is a value as the engine stores it.
func encodedValueIn(v EncodedValue) record.Value {
	return record.Value{Encoding: v.Encoding, Data: v.Data, ExtPath: v.ExtPath, ExtStoreID: v.ExtStoreID}
}

// nudgeBatches wakes this node's batch runner.
func (e *Engine) nudgeBatches() {
	select {
	case e.batchNudge <- struct{}{}:
	default:
	}
}

// batchRunner claims running batches, one at a time, and works them,
// until ctx ends. It looks for one every PollInterval, and at once when
// this node starts one.
func (e *Engine) batchRunner(ctx context.Context) {
	for ctx.Err() == nil {
		var b *Batch
		err := e.storeUpdate(ctx, func(ctx context.Context, tx Tx) error {
			var err error
			b, err = tx.BatchClaim(ctx, e.cfg.NodeID, e.cfg.Clock.Now(), e.cfg.LeaseDuration)
			return err
		})
		if err != nil && ctx.Err() == nil {
			e.log.Warn().Err(err).Msg("claiming a batch failed")
		}
		if b != nil {
			e.workBatch(ctx, b)
			continue
		}
		t := time.NewTimer(e.cfg.PollInterval)
		select {
		case <-ctx.Done():
		case <-e.batchNudge:
		case <-t.C:
		}
		t.Stop()
	}
}

// workBatch applies a claimed batch's operation to its pending items at
// its rate, until none is left (the batch completes), the batch is
// cancelled, the lease is lost or ctx ends (the lease is then released).
func (e *Engine) workBatch(ctx context.Context, b *Batch) {
	log := e.log.With().Str("batchId", b.ID).Logger()
	var opts batchOptions
	if err := json.Unmarshal(b.Options, &opts); err != nil {
		log.Error().Err(err).Msg("undecodable batch options: cancelling the batch")
		e.setBatchState(ctx, b.ID, BatchCancelled, "undecodable options: "+err.Error())
		return
	}
	defer func() {
		_ = e.storeUpdate(context.WithoutCancel(ctx), func(ctx context.Context, tx Tx) error {
			_, err := tx.BatchRelease(ctx, e.cfg.NodeID, b.ID)
			return err
		})
	}()
	log.Info().Int64("matched", b.Matched).Int64("done", b.Done).Int64("failed", b.Failed).Msg("working a batch")
	interval := batchInterval(b.RPS)
	next := time.Now()
	renewAt := time.Now().Add(e.cfg.LeaseDuration / 3)
	var after int64
	for ctx.Err() == nil {
		var items []*BatchItem
		var state BatchState
		err := e.storeView(ctx, func(ctx context.Context, tx ReadTx) error {
			cur, err := tx.BatchGet(ctx, b.ID)
			if err != nil {
				return err
			}
			state = cur.State
			items, err = tx.BatchItemList(ctx, b.ID, BatchItemPending, after, batchRunnerChunk)
			return err
		})
		if err != nil {
			if !e.batchPause(ctx, log, err) {
				return
			}
			continue
		}
		if state != BatchRunning {
			log.Info().Str("state", string(state)).Msg("batch no longer running")
			return
		}
		if len(items) == 0 {
			if after > 0 { // items skipped after a transient error: look again
				after = 0
				continue
			}
			e.setBatchState(ctx, b.ID, BatchCompleted, "")
			log.Info().Msg("batch completed")
			return
		}
		for _, it := range items {
			if !e.batchWait(ctx, b.ID, next) {
				return
			}
			next = maxTime(next.Add(interval), time.Now().Add(-time.Second))
			if time.Now().After(renewAt) {
				var ok bool
				err := e.storeUpdate(ctx, func(ctx context.Context, tx Tx) error {
					var err error
					ok, err = tx.BatchRenew(ctx, b.ID, e.cfg.NodeID, e.cfg.Clock.Now().Add(e.cfg.LeaseDuration))
					return err
				})
				if err == nil && !ok {
					log.Warn().Msg("lost the batch's lease to another node")
					return
				}
				renewAt = time.Now().Add(e.cfg.LeaseDuration / 3)
			}
			err := e.applyBatchItem(ctx, b, opts, it)
			switch {
			case errors.Is(err, errBatchItemGone):
				after = it.Seq // cancelled (checked with the next page) or done elsewhere
			case err != nil:
				if !e.batchPause(ctx, log, err) {
					return
				}
				// The item stays pending; it is taken again on the next pass.
			default:
				after = it.Seq
			}
			if errors.Is(err, errBatchItemGone) {
				break
			}
		}
	}
}

// batchInterval is the time between two runs of a batch at rps. The rate
// is taken within [MinBatchRPS, MaxBatchRPS] first (NaN as the slowest),
// so that no stored rate — one stored before rates were bounded too —
// makes the conversion to a Duration overflow: 1/1e-300 seconds is +Inf,
// which becomes a negative Duration, and every run would go at once.
func batchInterval(rps float64) time.Duration {
	switch {
	case math.IsNaN(rps) || rps < MinBatchRPS:
		rps = MinBatchRPS
	case rps > MaxBatchRPS:
		rps = MaxBatchRPS
	}
	return time.Duration(float64(time.Second) / rps)
}

// batchWait waits until the time of the batch's next run, looking every
// PollInterval whether the batch is still running; false when it is not
// or ctx ended.
func (e *Engine) batchWait(ctx context.Context, id string, until time.Time) bool {
	for {
		wait := time.Until(until)
		if wait <= 0 {
			return true
		}
		t := time.NewTimer(min(wait, e.cfg.PollInterval))
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		if time.Until(until) <= 0 {
			return true
		}
		var state BatchState
		err := e.storeView(ctx, func(ctx context.Context, tx ReadTx) error {
			b, err := tx.BatchGet(ctx, id)
			if err == nil {
				state = b.State
			}
			return err
		})
		if err == nil && state != BatchRunning {
			return false
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// batchPause waits a moment after a transient failure (the store is
// unavailable); false when ctx ended.
func (e *Engine) batchPause(ctx context.Context, log zerolog.Logger, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	log.Warn().Err(err).Msg("batch paused: the store failed; retrying")
	t := time.NewTimer(e.cfg.PollInterval)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// setBatchState closes a running batch.
func (e *Engine) setBatchState(ctx context.Context, id string, to BatchState, msg string) {
	err := e.storeUpdate(context.WithoutCancel(ctx), func(ctx context.Context, tx Tx) error {
		_, err := tx.BatchSetState(ctx, id, []BatchState{BatchRunning}, to, msg, e.cfg.Clock.Now())
		return err
	})
	if err != nil {
		e.log.Warn().Err(err).Str("batchId", id).Msg("closing a batch failed; the next claim retries")
	}
}

// transientBatchError reports whether an operation failed for a reason
// that says nothing about the run: the store or the request's time. The
// item then stays pending.
func transientBatchError(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return true
	}
	switch CodeOf(err) {
	case CodeUnavailable, CodeDeadlineExceeded:
		return true
	}
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// applyBatchItem applies the batch's operation to one item's run, as the
// batch's creator, marking the item done in the same transaction. When the
// engine refuses the operation, the item is marked failed with the reason.
// It returns errBatchItemGone when the item or batch moved on, and a
// transient error as it is (the item stays pending).
func (e *Engine) applyBatchItem(ctx context.Context, b *Batch, opts batchOptions, it *BatchItem) error {
	actx := WithActor(ctx, b.CreatedBy)
	then := func(t *txn) error {
		ok, err := t.tx.BatchItemFinish(t.ctx, b.ID, it.Seq, BatchItemDone, "", t.now)
		if err == nil && !ok {
			return errBatchItemGone
		}
		return err
	}
	var err error
	switch BatchOperation(b.Operation) {
	case BatchOpTerminate, BatchOpCancel, BatchOpFail:
		// The stop types are named as the batch operations.
		stop := iwfapi.WorkflowStopType(b.Operation)
		err = e.stopWorkflow(actx, iwfapi.WorkflowStopRequest{WorkflowId: it.WorkflowID, WorkflowRunId: ptr(it.RunID), StopType: &stop, Reason: nonEmptyPtr(b.Reason)}, then)
	case BatchOpSignal:
		if opts.SignalKept && e.payloadsOn() {
			err = e.applyBatchSignal(actx, it, opts.Signal, then)
		} else {
			err = e.applyExternalThen(actx, it.WorkflowID, it.RunID, record.Input{Signal: opts.Signal}, then)
		}
	case BatchOpSkipTimer:
		err = e.applyExternalThen(actx, it.WorkflowID, it.RunID, record.Input{SkipTimer: opts.SkipTimer}, then)
	case BatchOpPause:
		err = e.pauseRun(actx, it.WorkflowID, it.RunID, b.Reason, then)
	case BatchOpResume:
		err = e.resumeRun(actx, it.WorkflowID, it.RunID, then)
	case BatchOpSetWorkerURL:
		err = e.setWorkerURL(actx, it.WorkflowID, it.RunID, opts.WorkerURL, b.Reason, then)
	case BatchOpReset:
		r := opts.Reset
		_, err = e.resetWorkflow(actx, iwfapi.WorkflowResetRequest{WorkflowId: it.WorkflowID, WorkflowRunId: ptr(it.RunID),
			ResetType: iwfapi.WorkflowResetType(r.ResetType), HistoryEventId: r.HistoryEventID, HistoryEventTime: r.HistoryEventTime,
			StateId: r.StateID, StateExecutionId: r.StateExecutionID, SkipSignalReapply: r.SkipSignalReapply,
			SkipUpdateReapply: r.SkipUpdateReapply, Reason: nonEmptyPtr(b.Reason)}, then)
	default:
		err = Errorf(CodeInvalidArgument, "unknown operation %q", b.Operation)
	}
	if err == nil {
		e.metrics.batchItems.inc()
		return nil
	}
	if errors.Is(err, errBatchItemGone) || transientBatchError(ctx, err) {
		return err
	}
	reason := batchFailure(err)
	err = e.storeUpdate(ctx, func(ctx context.Context, tx Tx) error {
		ok, err := tx.BatchItemFinish(ctx, b.ID, it.Seq, BatchItemFailed, reason, e.cfg.Clock.Now())
		if err == nil && !ok {
			return errBatchItemGone
		}
		return err
	})
	if err == nil {
		e.metrics.batchItems.inc()
		e.metrics.batchItemsFailed.inc()
	}
	return err
}

// applyBatchSignal signals an item's run with a batch's value that refers
// to an external object the batch keeps: the run stores the reference as
// it is and gets a record of its own for the object (PayloadLink), in the
// transaction that then marks the item done. The link takes because the
// batch still keeps the object: its record is unreferenced only when the
// batch closes, and then the item's BatchItemFinish fails, in this same
// transaction, and nothing of it commits. The shared sig is not changed.
func (e *Engine) applyBatchSignal(ctx context.Context, it *BatchItem, sig *record.SignalInput, then func(t *txn) error) error {
	in := record.Input{Signal: sig, Actor: ActorOf(ctx)}
	var paths []string
	if v := sig.SignalValue; v != nil && v.ExtPath != nil && v.Data == nil {
		paths = []string{*v.ExtPath}
	}
	return e.mutateRunThen(ctx, it.WorkflowID, it.RunID, func(r *runTxn) error {
		if err := r.applyInput(in, false); err != nil {
			return err
		}
		return r.tx.PayloadLink(r.ctx, r.run.RunID, paths, r.now)
	}, then)
}

// batchFailure is the reason an item failed, as describe shows it,
// clipped to maxBatchFailureBytes.
func batchFailure(err error) string {
	return clip(batchFailureText(err), maxBatchFailureBytes)
}

func batchFailureText(err error) string {
	var ee *Error
	if errors.As(err, &ee) && ee.Code != CodeInternal {
		if ee.Code == CodeWorkflowNotExists && !strings.Contains(ee.Message, "closed") {
			return "the run no longer exists (deleted by retention?): " + ee.Message
		}
		return ee.Message
	}
	return fmt.Sprintf("internal error: %v", err)
}

func nonEmptyPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
