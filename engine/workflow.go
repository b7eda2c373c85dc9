package engine

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine/internal/record"
)

// errNoWorkflowID is iWF's answer to an empty workflowId.
func errNoWorkflowID() error {
	return Errorf(CodeWorkflowNotExists, "WorkflowId is not set on request.")
}

// resolveRun returns the run a request names: runID when given, else the
// workflow's current run.
func resolveRun(ctx context.Context, tx ReadTx, workflowID, runID string) (string, error) {
	if workflowID == "" {
		return "", errNoWorkflowID()
	}
	if runID != "" {
		r, err := tx.RunGet(ctx, runID)
		if errors.Is(err, ErrNotFound) || (err == nil && r.WorkflowID != workflowID) {
			return "", errNoRun(workflowID, runID)
		}
		return runID, err
	}
	cur, err := tx.WorkflowGetCurrentRun(ctx, workflowID)
	if errors.Is(err, ErrNotFound) || (err == nil && cur == "") {
		return "", errNoRun(workflowID, "")
	}
	return cur, err
}

// readRun resolves a workflow's run (see resolveRun), reads it and decodes
// the engine's record of it.
func readRun(ctx context.Context, tx ReadTx, workflowID, runID string) (*Run, *record.Run, error) {
	id, err := resolveRun(ctx, tx, workflowID, runID)
	if err != nil {
		return nil, nil, err
	}
	run, err := tx.RunGet(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	rd, err := decodeRun(run)
	if err != nil {
		return nil, nil, err
	}
	return run, rd, nil
}

// mutateRun locks the named run, checks that it is running, calls fn and
// saves the run. Everything happens in one transaction.
func (e *Engine) mutateRun(ctx context.Context, workflowID, runID string, fn func(r *runTxn) error) error {
	return e.mutateRunThen(ctx, workflowID, runID, fn, nil)
}

// mutateRunThen is mutateRun with then, when not nil, called in the same
// transaction after the run is saved (a batch marks its item done there).
func (e *Engine) mutateRunThen(ctx context.Context, workflowID, runID string, fn func(r *runTxn) error, then func(t *txn) error) error {
	traceParent, traceState := e.traceContextOf(ctx)
	e.annotateRun(ctx, workflowID, runID)
	return e.update(ctx, func(t *txn) error {
		id, err := resolveRun(t.ctx, t.tx, workflowID, runID)
		if err != nil {
			return err
		}
		run, err := t.tx.RunLock(t.ctx, id)
		if err != nil {
			return err
		}
		if run.Status != RunRunning {
			return Errorf(CodeWorkflowNotExists, "workflow %s run %s is already closed (%s)", run.WorkflowID, run.RunID, run.Status)
		}
		rd, err := decodeRun(run)
		if err != nil {
			return err
		}
		r := t.forRun(run, rd)
		if err := fn(r); err != nil {
			return err
		}
		if rd.Trace == "" && traceParent != "" {
			// A run started without a trace context joins the trace of
			// the first input that brings one.
			rd.Trace, rd.TraceState = traceParent, traceState
		}
		if err := r.save(); err != nil {
			return err
		}
		if then != nil {
			return then(t)
		}
		return nil
	})
}

// admit applies backpressure to new workflows: while more due tasks wait
// for a goroutine than a quarter of the engine's concurrency, a start waits
// (at most MaxWait) so that work already under way — fired timers, states
// about to decide — is not buried under a burst of new workflows. (make
// bench W3 on SQLite: p99 timer lateness 2.3 s without it, 0.7 s with it.)
func (e *Engine) admit(ctx context.Context) error {
	limit := e.cfg.Concurrency / 4
	if e.disp.backlog() <= limit {
		return nil
	}
	deadline := e.cfg.Clock.NewTimer(e.cfg.MaxWait)
	defer deadline.Stop()
	return e.disp.waitBacklog(ctx, limit, deadline.C())
}

// workflowKey is the notifier key of a workflow id (run keys are UUIDs).
func workflowKey(workflowID string) string { return workflowKeyPrefix + workflowID }

// workflowKeyPrefix starts every workflowKey.
const workflowKeyPrefix = "workflow:"

// StartWorkflow starts a new run of a workflow id (POST /api/v1/workflow/start).
func (e *Engine) StartWorkflow(ctx context.Context, wireReq iwfapi.WorkflowStartRequest) (iwfapi.WorkflowStartResponse, error) {
	req := startIn(wireReq)
	if req.WorkflowID == "" {
		return iwfapi.WorkflowStartResponse{}, errNoWorkflowID()
	}
	if strings.TrimSpace(req.IwfWorkerURL) == "" {
		return iwfapi.WorkflowStartResponse{}, Errorf(CodeInvalidArgument, "iwfWorkerUrl must not be empty")
	}
	if err := e.checkWorkerURL(ctx, req.IwfWorkerURL); err != nil {
		return iwfapi.WorkflowStartResponse{}, err
	}
	if req.WorkflowTimeoutSeconds < 0 {
		return iwfapi.WorkflowStartResponse{}, Errorf(CodeInvalidArgument, "workflowTimeoutSeconds must not be negative")
	}
	opts := deref(req.StartOptions)
	sched, err := parseCron(deref(opts.CronSchedule))
	if err != nil {
		return iwfapi.WorkflowStartResponse{}, err
	}
	if d := deref(opts.WorkflowStartDelaySeconds); d < 0 {
		return iwfapi.WorkflowStartResponse{}, Errorf(CodeInvalidArgument, "workflowStartDelaySeconds must not be negative")
	}
	// Validate the initial attributes before anything is stored.
	if _, err := e.initialAttributes(opts, e.cfg.Clock.Now()); err != nil {
		return iwfapi.WorkflowStartResponse{}, err
	}
	policy, err := reusePolicy(opts)
	if err != nil {
		return iwfapi.WorkflowStartResponse{}, err
	}
	// Big payloads go to the external store before the start's
	// transaction, which keeps them for the new run.
	off, err := e.offload(ctx, req.WorkflowID, "", &req)
	if err != nil {
		return iwfapi.WorkflowStartResponse{}, err
	}
	if err := e.admit(ctx); err != nil {
		return iwfapi.WorkflowStartResponse{}, err
	}
	select {
	case e.starting <- struct{}{}:
	case <-ctx.Done():
		return iwfapi.WorkflowStartResponse{}, ctx.Err()
	}
	defer func() { <-e.starting }()
	var runID string
	traceParent, traceState := e.traceContextOf(ctx)
	// The first attempt expects the id to be new, when the store can check
	// that at its commit (WorkflowCreator); should it be taken, the start
	// runs again and locks the row.
	expectNew := true
	start := func(t *txn) error {
		runID = ""
		newRunID := newRunID()
		var (
			cur     string
			created bool
			err     error
		)
		if wc, ok := t.tx.(WorkflowCreator); ok && expectNew {
			expectNew = false
			if err := wc.WorkflowCreateExpecting(t.ctx, req.WorkflowID, newRunID); err != nil {
				return err
			}
			created = true
		} else if cur, created, err = t.tx.WorkflowLockOrCreate(t.ctx, req.WorkflowID, newRunID); err != nil {
			return err
		}
		if !created && cur != "" {
			if runID, err = t.checkReuse(req, cur, policy); err != nil || runID != "" {
				return err
			}
		}
		due := t.now.Add(time.Duration(deref(opts.WorkflowStartDelaySeconds)) * time.Second)
		if sched != nil {
			due = sched.Next(t.now)
		}
		// The timeout counts from the start request, as recommended for a
		// start delay; a cron run's from its scheduled time.
		timeoutFrom := t.now
		if sched != nil {
			timeoutFrom = due
		}
		r, err := t.createRun(req, runChain{due: due, timeoutAt: deadline(timeoutFrom, req.WorkflowTimeoutSeconds),
			runID: newRunID, currentSet: created, trace: traceParent, traceState: traceState}, true)
		if err != nil {
			return err
		}
		runID = r.run.RunID
		return t.keepPayloads(off, runID)
	}
	ctx = WithPriority(ctx, PriorityStart)
	err = e.update(ctx, start)
	if errors.Is(err, ErrUnexpected) {
		err = e.update(ctx, start)
	}
	if err != nil {
		return iwfapi.WorkflowStartResponse{}, err
	}
	e.annotateRun(ctx, req.WorkflowID, runID)
	return iwfapi.WorkflowStartResponse{WorkflowRunId: ptr(runID)}, nil
}

// checkReuse applies the id reuse policy to a start of a workflow id whose
// current run is cur. It terminates cur when the policy says so, returns
// cur's id when the start is answered with the running run
// (ignoreAlreadyStartedError), and an error when the start is refused.
func (t *txn) checkReuse(req record.Start, cur, policy string) (string, error) {
	prev, err := t.tx.RunLock(t.ctx, cur)
	if err != nil {
		return "", err
	}
	reject := false
	switch policy {
	case "ALLOW_DUPLICATE":
		reject = prev.Status == RunRunning
	case "ALLOW_DUPLICATE_FAILED_ONLY":
		reject = prev.Status == RunRunning || prev.Status == RunCompleted
	case "REJECT_DUPLICATE":
		reject = true
	case "TERMINATE_IF_RUNNING":
		if prev.Status == RunRunning {
			prd, err := decodeRun(prev)
			if err != nil {
				return "", err
			}
			r := t.forRun(prev, prd)
			if err := r.closeRun(RunTerminated, "", "terminated by a new run (TERMINATE_IF_RUNNING)"); err != nil {
				return "", err
			}
			if err := r.save(); err != nil {
				return "", err
			}
		}
	}
	if !reject {
		return "", nil
	}
	opts := deref(req.StartOptions)
	if started := opts.WorkflowAlreadyStartedOptions; started != nil && started.IgnoreAlreadyStartedError && prev.Status == RunRunning {
		prd, err := decodeRun(prev)
		if err != nil {
			return "", err
		}
		if want := deref(started.RequestID); want == "" || want == prd.RequestID {
			return prev.RunID, nil
		}
	}
	return "", Errorf(CodeAlreadyStarted, "workflow %s already has a run %s (%s) and the id reuse policy %s forbids another", req.WorkflowID, prev.RunID, prev.Status, policy)
}

// checkWorkerURL accepts only what the server can call as a worker: an
// absolute http or https URL with a host, and without user info, query or
// fragment (the server appends the API paths to it). Anything else would be
// retried forever, or could carry credentials or redirect the call.
// Config.CheckWorkerURL, when set, adds the operator's policy.
func (e *Engine) checkWorkerURL(ctx context.Context, s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "" {
		return Errorf(CodeInvalidArgument, "iwfWorkerUrl %q must be an absolute http:// or https:// URL with a host and without user info, query or fragment", s)
	}
	if e.cfg.CheckWorkerURL != nil {
		if err := e.cfg.CheckWorkerURL(ctx, s); err != nil {
			return Errorf(CodeInvalidArgument, "%v", err)
		}
	}
	return nil
}

// checkRunWorkerURL vets the worker URL of the run a reset or RPC
// addresses, before any change (Config.CheckWorkerURL).
func (e *Engine) checkRunWorkerURL(ctx context.Context, workflowID, runID string) error {
	if e.cfg.CheckWorkerURL == nil {
		return nil
	}
	var workerURL string
	err := e.storeView(ctx, func(ctx context.Context, tx ReadTx) error {
		_, rd, err := readRun(ctx, tx, workflowID, runID)
		if err != nil {
			return err
		}
		workerURL = rd.WorkerURL
		return nil
	})
	if err != nil {
		return err
	}
	if err := e.cfg.CheckWorkerURL(ctx, workerURL); err != nil {
		return Errorf(CodeInvalidArgument, "%v", err)
	}
	return nil
}

func reusePolicy(opts record.StartOptions) (string, error) {
	if opts.IDReusePolicy != nil {
		switch p := *opts.IDReusePolicy; p {
		case "ALLOW_IF_NO_RUNNING":
			return "ALLOW_DUPLICATE", nil
		case "ALLOW_IF_PREVIOUS_EXISTS_ABNORMALLY", "ALLOW_IF_PREVIOUS_EXITS_ABNORMALLY":
			return "ALLOW_DUPLICATE_FAILED_ONLY", nil
		case "DISALLOW_REUSE":
			return "REJECT_DUPLICATE", nil
		case "ALLOW_TERMINATE_IF_RUNNING":
			return "TERMINATE_IF_RUNNING", nil
		default:
			return "", Errorf(CodeInvalidArgument, "unknown idReusePolicy %q", p)
		}
	}
	if opts.WorkflowIDReusePolicy != nil {
		switch p := *opts.WorkflowIDReusePolicy; p {
		case "ALLOW_DUPLICATE", "ALLOW_DUPLICATE_FAILED_ONLY", "REJECT_DUPLICATE", "TERMINATE_IF_RUNNING":
			return p, nil
		default:
			return "", Errorf(CodeInvalidArgument, "unknown workflowIDReusePolicy %q", p)
		}
	}
	return "ALLOW_DUPLICATE", nil
}

// mergeConfig overlays the non-nil fields of override on base.
func mergeConfig(base record.Config, override *record.Config) record.Config {
	if override == nil {
		return base
	}
	o := *override
	if o.DisableSystemSearchAttribute != nil {
		base.DisableSystemSearchAttribute = o.DisableSystemSearchAttribute
	}
	if o.ExecutingStateIDMode != nil {
		base.ExecutingStateIDMode = o.ExecutingStateIDMode
	}
	if o.ContinueAsNewThreshold != nil {
		base.ContinueAsNewThreshold = o.ContinueAsNewThreshold
	}
	if o.ContinueAsNewPageSizeInBytes != nil {
		base.ContinueAsNewPageSizeInBytes = o.ContinueAsNewPageSizeInBytes
	}
	if o.OptimizeActivity != nil {
		base.OptimizeActivity = o.OptimizeActivity
	}
	if o.OptimizeTimer != nil {
		base.OptimizeTimer = o.OptimizeTimer
	}
	return base
}

// SignalWorkflow appends a message to a signal channel (POST /api/v1/workflow/signal).
func (e *Engine) SignalWorkflow(ctx context.Context, req iwfapi.WorkflowSignalRequest) error {
	if strings.HasPrefix(req.SignalChannelName, reservedChannelPrefix) {
		return Errorf(CodeInvalidArgument, "signal channel names starting with %s are reserved", reservedChannelPrefix)
	}
	return e.applyExternal(ctx, req.WorkflowId, deref(req.WorkflowRunId), record.Input{Signal: &record.SignalInput{SignalChannelName: req.SignalChannelName, SignalValue: mapPtr(req.SignalValue, valueIn)}})
}

// PublishToInternalChannel appends messages to internal channels
// (POST /api/v1/workflow/publishToInternalChannel).
func (e *Engine) PublishToInternalChannel(ctx context.Context, req iwfapi.PublishToInternalChannelRequest) error {
	return e.applyExternal(ctx, req.WorkflowId, deref(req.WorkflowRunId), record.Input{Publish: &record.PublishInput{Messages: mapSlice(req.Messages, publishIn)}})
}

// StopWorkflow cancels, terminates or fails a run (POST /api/v1/workflow/stop).
func (e *Engine) StopWorkflow(ctx context.Context, req iwfapi.WorkflowStopRequest) error {
	return e.stopWorkflow(ctx, req, nil)
}

// stopWorkflow is StopWorkflow with then called in its transaction (see
// mutateRunThen).
func (e *Engine) stopWorkflow(ctx context.Context, req iwfapi.WorkflowStopRequest, then func(t *txn) error) error {
	stopType := "CANCEL"
	if req.StopType != nil && *req.StopType != "" {
		stopType = string(*req.StopType)
	}
	var status RunStatus
	var errType string
	switch stopType {
	case "CANCEL":
		status = RunCanceled
	case "TERMINATE":
		status = RunTerminated
	case "FAIL":
		status, errType = RunFailed, errClientAPIFailing
	default:
		return Errorf(CodeInvalidArgument, "unsupported stopType %q", stopType)
	}
	msg := ""
	if status == RunFailed {
		msg = deref(req.Reason)
	}
	actor := ActorOf(ctx)
	return e.mutateRunThen(ctx, req.WorkflowId, deref(req.WorkflowRunId), func(r *runTxn) error {
		r.actor = actor
		return r.closeRun(status, errType, msg)
	}, then)
}

// GetWorkflow describes a run (POST /api/v1/workflow/get).
func (e *Engine) GetWorkflow(ctx context.Context, req iwfapi.WorkflowGetRequest) (iwfapi.WorkflowGetResponse, error) {
	resp, _, _, err := e.describe(ctx, req.WorkflowId, deref(req.WorkflowRunId), deref(req.NeedsResults))
	if err == nil {
		err = e.inline(ctx, true, req.WorkflowId, resp.WorkflowRunId, &resp)
	}
	return resp, err
}

// GetWorkflowWithWait waits for a run to close and describes it with its
// results (POST /api/v1/workflow/getWithWait).
//
// It subscribes to the changes of the workflow id before its first read:
// every run of the workflow announces its changes under that key too
// (runTxn.save), so a change committed after the subscription wakes the
// call, and one committed before it is seen by the read. When this
// process's own commits know the run open (notifier.knownOpen: the call
// follows a start or an answer of this process, and nothing has changed
// the workflow since), the call waits without that first read. The
// commits of this process wake the call only when they close a run of the
// workflow (subscribeCloses), and hand over the run as committed: when it
// is the run waited for, the call answers from it without another read. A
// change told by the change feed (another process's commit), or a
// re-check, costs one read.
//
// A mark is not a read: the change feed that keeps it is a hint, and a
// notice can be lost (a listener cut off between two notices it never
// saw). So a call that names no run and answered its first turn from a
// mark re-reads the workflow's current run, not the marked one, until a
// read has found which run it waits for: a stale mark then costs at most
// one re-check interval, never a run that is no longer the workflow's.
func (e *Engine) GetWorkflowWithWait(ctx context.Context, req iwfapi.WorkflowGetRequest) (iwfapi.WorkflowGetResponse, error) {
	resp, err := e.getWorkflowWithWait(ctx, req)
	if err == nil {
		err = e.inline(ctx, true, req.WorkflowId, resp.WorkflowRunId, &resp)
	}
	return resp, err
}

// getWorkflowWithWait is GetWorkflowWithWait without loading the results'
// external objects.
func (e *Engine) getWorkflowWithWait(ctx context.Context, req iwfapi.WorkflowGetRequest) (iwfapi.WorkflowGetResponse, error) {
	wait := e.waitBudget(deref(req.WaitTimeSeconds))
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	key := workflowKey(req.WorkflowId)
	w, unsubscribe := e.waits.subscribeCloses(key)
	defer unsubscribe()
	runID := deref(req.WorkflowRunId)
	follow := runID == "" // follow workflow retries when no run is named
	var closed *Run       // the run waited for, as the commit that closed it wrote it
	var waitFor string    // the run whose close, handed over by a commit, answers the call
	open := e.waits.knownOpen(key)
	if runID != "" && open != runID {
		open = ""
	}
	for {
		var (
			resp          iwfapi.WorkflowGetResponse
			id, retriedBy string
			err           error
			marked        bool
		)
		switch {
		case closed != nil:
			resp, id, retriedBy, err = getResponse(closed, true)
			closed = nil
		case open != "":
			resp, id = iwfapi.WorkflowGetResponse{WorkflowRunId: open, WorkflowStatus: iwfapi.WorkflowStatus(RunRunning)}, open
			open, marked = "", true
		default:
			resp, id, retriedBy, err = e.describe(ctx, req.WorkflowId, runID, true)
		}
		if err != nil {
			return resp, err
		}
		if follow && retriedBy != "" {
			runID = retriedBy
			continue
		}
		if resp.WorkflowStatus != iwfapi.WorkflowStatus(RunRunning) {
			return resp, nil
		}
		if !marked {
			runID = id
		}
		waitFor = id
		recheck := time.NewTimer(e.cfg.LongPollRecheck)
		select {
		case <-w.C:
			if r := e.waits.take(w); r != nil && r.RunID == waitFor {
				closed = r
			}
		case <-recheck.C:
		case <-deadline.C:
			recheck.Stop()
			return iwfapi.WorkflowGetResponse{}, Errorf(CodeLongPollTimeout, "workflow is still running, waiting has exceeded timeout limit, please retry")
		case <-ctx.Done():
			recheck.Stop()
			return iwfapi.WorkflowGetResponse{}, ctx.Err()
		}
		recheck.Stop()
	}
}

func (e *Engine) waitBudget(requestSeconds int32) time.Duration {
	wait := e.cfg.MaxWait
	if requestSeconds > 0 {
		if d := time.Duration(requestSeconds) * time.Second; d < wait {
			wait = d
		}
	}
	return wait
}

// describe reads a run for get and getWithWait. It also returns the run's
// id and the run that retries it, if any.
func (e *Engine) describe(ctx context.Context, workflowID, runID string, withResults bool) (iwfapi.WorkflowGetResponse, string, string, error) {
	run, err := e.readRunOnly(ctx, workflowID, runID)
	if err != nil {
		return iwfapi.WorkflowGetResponse{}, "", "", err
	}
	return getResponse(run, withResults)
}

// getResponse is describe for a run already read.
func getResponse(run *Run, withResults bool) (iwfapi.WorkflowGetResponse, string, string, error) {
	var resp iwfapi.WorkflowGetResponse
	resp.WorkflowRunId = run.RunID
	resp.WorkflowStatus = iwfapi.WorkflowStatus(run.Status)
	if run.Status == RunRunning {
		return resp, run.RunID, "", nil
	}
	rd, err := decodeRun(run)
	if err != nil {
		return resp, "", "", err
	}
	if !withResults {
		return resp, run.RunID, rd.RetriedBy, nil
	}
	switch {
	case run.Status == RunCompleted || (run.Status == RunFailed && rd.ErrorType == errStateDecisionFailing):
		if len(rd.Outputs) > 0 {
			resp.Results = mapSlice(&rd.Outputs, outputOut)
		}
	}
	if run.Status == RunFailed {
		if rd.ErrorType != "" {
			resp.ErrorType = ptr(iwfapi.WorkflowErrorType(rd.ErrorType))
		}
		if rd.ErrorMsg != "" {
			resp.ErrorMessage = ptr(rd.ErrorMsg)
		}
	}
	return resp, run.RunID, rd.RetriedBy, nil
}

// readRunOnly resolves and reads a run as resolveRun and RunGet do: in one
// statement when the store is a RunReader, else in a read transaction.
func (e *Engine) readRunOnly(ctx context.Context, workflowID, runID string) (*Run, error) {
	rr, ok := e.store.(RunReader)
	if !ok {
		var run *Run
		err := e.storeView(ctx, func(ctx context.Context, tx ReadTx) error {
			id, err := resolveRun(ctx, tx, workflowID, runID)
			if err != nil {
				return err
			}
			run, err = tx.RunGet(ctx, id)
			return err
		})
		return run, err
	}
	if workflowID == "" {
		return nil, errNoWorkflowID()
	}
	run, err := e.readRun(ctx, rr, workflowID, runID)
	switch {
	case errors.Is(err, ErrNotFound) || (err == nil && runID != "" && run.WorkflowID != workflowID):
		return nil, errNoRun(workflowID, runID)
	}
	return run, err
}

// errNoRun says that a workflow's run (its current run when runID is "")
// does not exist.
func errNoRun(workflowID, runID string) error {
	if runID != "" {
		return Errorf(CodeWorkflowNotExists, "workflow %s run %s does not exist", workflowID, runID)
	}
	return Errorf(CodeWorkflowNotExists, "workflow %s does not exist", workflowID)
}

// GetDataAttributes reads data attributes, also of closed runs
// (POST /api/v1/workflow/dataobjects/get).
func (e *Engine) GetDataAttributes(ctx context.Context, req iwfapi.WorkflowGetDataObjectsRequest) (iwfapi.WorkflowGetDataObjectsResponse, error) {
	var resp iwfapi.WorkflowGetDataObjectsResponse
	err := e.storeView(ctx, func(ctx context.Context, tx ReadTx) error {
		id, err := resolveRun(ctx, tx, req.WorkflowId, deref(req.WorkflowRunId))
		if err != nil {
			return err
		}
		keys := slice(req.Keys)
		if len(keys) == 0 {
			keys = nil
		}
		attrs, err := tx.DataAttributeGet(ctx, id, keys)
		if err != nil {
			return err
		}
		if kvs := fromStoreDataAttributes(attrs); len(kvs) > 0 {
			resp.Objects = &kvs
		}
		return nil
	})
	if err == nil {
		// As in iWF, the reference stays beside the data it names.
		err = e.inline(ctx, true, req.WorkflowId, deref(req.WorkflowRunId), &resp)
	}
	return resp, err
}

// SetDataAttributes upserts data attributes (POST /api/v1/workflow/dataobjects/set).
func (e *Engine) SetDataAttributes(ctx context.Context, req iwfapi.WorkflowSetDataObjectsRequest) error {
	return e.applyExternal(ctx, req.WorkflowId, deref(req.WorkflowRunId), record.Input{SetData: &record.SetDataInput{Objects: mapSlice(req.Objects, kvIn)}})
}

// GetSearchAttributes reads the requested search attributes, typed as the
// caller asks (POST /api/v1/workflow/searchattributes/get).
func (e *Engine) GetSearchAttributes(ctx context.Context, req iwfapi.WorkflowGetSearchAttributesRequest) (iwfapi.WorkflowGetSearchAttributesResponse, error) {
	var resp iwfapi.WorkflowGetSearchAttributesResponse
	err := e.storeView(ctx, func(ctx context.Context, tx ReadTx) error {
		id, err := resolveRun(ctx, tx, req.WorkflowId, deref(req.WorkflowRunId))
		if err != nil {
			return err
		}
		wanted := slice(req.Keys)
		if len(wanted) == 0 {
			return nil
		}
		keys := make([]string, 0, len(wanted))
		for _, k := range wanted {
			keys = append(keys, deref(k.Key))
		}
		attrs, err := tx.SearchAttributeGet(ctx, id, keys)
		if err != nil {
			return err
		}
		byKey := make(map[string]*SearchAttribute, len(attrs)+1)
		for _, a := range attrs {
			byKey[a.Key] = a
		}
		if slices.Contains(keys, SystemSAWorkflowType) {
			run, err := tx.RunGet(ctx, id)
			if err != nil {
				return err
			}
			byKey[SystemSAWorkflowType] = systemTypeAttribute(run.WorkflowType)
		}
		var out []iwfapi.SearchAttribute
		for _, k := range wanted {
			a, ok := byKey[deref(k.Key)]
			if !ok {
				continue
			}
			out = append(out, readSearchAttribute(a))
		}
		if len(out) > 0 {
			resp.SearchAttributes = &out
		}
		return nil
	})
	return resp, err
}

// SetSearchAttributes upserts search attributes (POST /api/v1/workflow/searchattributes/set).
func (e *Engine) SetSearchAttributes(ctx context.Context, req iwfapi.WorkflowSetSearchAttributesRequest) error {
	return e.applyExternal(ctx, req.WorkflowId, deref(req.WorkflowRunId), record.Input{SetSearch: &record.SetSearchInput{SearchAttributes: mapSlice(req.SearchAttributes, searchAttributeIn)}})
}

// TriggerContinueAsNew is accepted for compatibility: runs here never need
// continue-as-new, so it only checks that the run is running
// (POST /api/v1/workflow/triggerContinueAsNew).
func (e *Engine) TriggerContinueAsNew(ctx context.Context, req iwfapi.TriggerContinueAsNewRequest) error {
	return e.storeView(ctx, func(ctx context.Context, tx ReadTx) error {
		id, err := resolveRun(ctx, tx, req.WorkflowId, deref(req.WorkflowRunId))
		if err != nil {
			return err
		}
		run, err := tx.RunGet(ctx, id)
		if err != nil {
			return err
		}
		if run.Status != RunRunning {
			return Errorf(CodeWorkflowNotExists, "workflow %s run %s is already closed", run.WorkflowID, run.RunID)
		}
		return nil
	})
}

// deadline returns the workflow timeout's expiry (unix ms) for a run
// whose timeout counts from start; 0 when there is no timeout.
func deadline(start time.Time, timeoutSeconds int32) int64 {
	if timeoutSeconds <= 0 {
		return 0
	}
	return unixMs(start.Add(time.Duration(timeoutSeconds) * time.Second))
}

// runChain carries what a new run inherits from the request or the run it
// follows (workflow retry, cron).
type runChain struct {
	due          time.Time // when the start state becomes due
	timeoutAt    int64     // unix ms; 0 = no workflow timeout
	retryAttempt int       // 1 for the first run of a start request
	runID        string    // the new run's id; "" = a new one
	currentSet   bool      // the workflow row already points at runID
	// trace and traceState are the W3C trace context the run keeps (see
	// tracing.go); "" when tracing is off.
	trace, traceState string
	// pause, when set, is the pause of the run this one follows (a retry,
	// a cron run, a reset of a running run, pausedFrom): the new run is
	// paused too.
	pause      *record.Pause
	pausedFrom string
}

// initial are the attribute rows a new run starts with.
type initial struct {
	das []*Attribute
	sas []*SearchAttribute
}

// initialAttributes converts and validates a start request's initial data
// and search attributes.
func (e *Engine) initialAttributes(opts record.StartOptions, now time.Time) (initial, error) {
	das, err := toStoreDataAttributes(slice(opts.DataAttributes))
	if err != nil {
		return initial{}, err
	}
	sas, err := e.toStoreSearchAttributes(slice(opts.SearchAttributes), now)
	if err != nil {
		return initial{}, err
	}
	return initial{das, sas}, nil
}

// createRun inserts a run of a start request, points the workflow id at it
// and schedules its start state. With withAttributes the run gets the
// request's initial data and search attributes. The caller holds the
// workflow row lock.
func (t *txn) createRun(req record.Start, chain runChain, withAttributes bool) (*runTxn, error) {
	opts := deref(req.StartOptions)
	if chain.runID == "" {
		chain.runID = newRunID()
	}
	run := &Run{
		RunID:        chain.runID,
		WorkflowID:   req.WorkflowID,
		WorkflowType: req.IwfWorkflowType,
		Status:       RunRunning,
		StartedAt:    t.now,
	}
	if chain.retryAttempt == 0 {
		chain.retryAttempt = 1
	}
	rd := &record.Run{
		V:            record.FormatVersion,
		WorkerURL:    strings.TrimRight(req.IwfWorkerURL, "/"),
		Start:        req,
		Config:       mergeConfig(record.Config{ContinueAsNewThreshold: ptr(int32(100))}, opts.WorkflowConfigOverride),
		Counters:     map[string]int{},
		LiveCounted:  true,
		TimeoutAt:    chain.timeoutAt,
		RetryAttempt: chain.retryAttempt,
		Trace:        chain.trace,
		TraceState:   chain.traceState,
	}
	if started := opts.WorkflowAlreadyStartedOptions; started != nil {
		rd.RequestID = deref(started.RequestID)
	}
	r := t.forRun(run, rd)
	if !chain.currentSet {
		if err := t.tx.WorkflowSetCurrentRun(t.ctx, req.WorkflowID, run.RunID); err != nil {
			return nil, err
		}
	}
	if withAttributes {
		if err := r.writeInitialAttributes(opts); err != nil {
			return nil, err
		}
	}
	r.record(r.event("", "WorkflowStarted", map[string]any{
		"workflowType": req.IwfWorkflowType, "startStateId": deref(req.StartStateID), "retryAttempt": chain.retryAttempt,
	}))
	if chain.pause != nil {
		if err := r.carryPause(chain.pause, chain.pausedFrom); err != nil {
			return nil, err
		}
	}
	if rd.TimeoutAt > 0 {
		if err := t.insertTasks(t.newTask(run, "", TaskTimeout, time.UnixMilli(rd.TimeoutAt))); err != nil {
			return nil, err
		}
	}
	if deref(req.StartStateID) != "" {
		move := record.Movement{StateID: *req.StartStateID, StateInput: req.StateInput, StateOptions: req.StateOptions}
		if err := r.startStates([]record.Movement{move}, chain.due); err != nil {
			return nil, err
		}
	}
	// The run row is written once, last, with everything the start did.
	if err := r.executingStateIDs(); err != nil {
		return nil, err
	}
	run.Data = encode(rd)
	t.fx.runs = append(t.fx.runs, run.RunID, workflowKey(run.WorkflowID))
	t.fx.started++
	return r, t.tx.RunInsert(t.ctx, run)
}

// writeInitialAttributes stores a start request's initial data and search
// attributes on the new run.
func (r *runTxn) writeInitialAttributes(opts record.StartOptions) error {
	in, err := r.e.initialAttributes(opts, r.now)
	if err != nil {
		return err
	}
	if len(in.das) > 0 {
		if err := r.tx.DataAttributeUpsert(r.ctx, r.run.RunID, in.das); err != nil {
			return err
		}
	}
	// IwfWorkflowType is not stored as a search attribute row: it is the
	// run's workflow_type column, which searches and reads use directly.
	if len(in.sas) > 0 {
		return r.tx.SearchAttributeUpsert(r.ctx, r.run.RunID, in.sas)
	}
	return nil
}

// newRunID returns a new run id: a version-7 UUID, whose first 48 bits are
// the time of its creation in milliseconds. A store's rows keyed by run id
// then sit in the order the runs started: a run's inserts go to the end of
// each index instead of a random page, and a retention sweep, which
// deletes runs in close order (mostly start order), deletes neighbouring
// keys, a few pages per batch instead of a page per row.
func newRunID() string {
	return uuid.Must(uuid.NewV7()).String()
}
