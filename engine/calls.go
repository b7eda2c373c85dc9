package engine

// Worker calls of state executions: what a waitUntil or execute call is
// sent (read in a snapshot before the call), its timeout, and the call.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine/internal/record"
)

// defaultAPITimeout is the per-attempt timeout of waitUntil and execute.
const defaultAPITimeout = 30 * time.Second

// apiSnapshot is what a state API call needs, read before the call.
type apiSnapshot struct {
	run *Run
	rd  *record.Run
	x   *Execution
	xd  *record.Execution
	das []iwfapi.KeyValue
	sas []iwfapi.SearchAttribute
	// release gives back the limit permits of the call, if any, once the
	// worker answered.
	release func()
}

// callDone gives back the call's limit permits.
func (s *apiSnapshot) callDone() {
	if s.release != nil {
		s.release()
		s.release = nil
	}
}

// loadingPolicies returns the effective data and search attribute loading
// policies of one state API: per-API field > generic field > legacy field.
func loadingPolicies(o *record.StateOptions, waitUntil bool) (da, sa *record.LoadingPolicy) {
	if o == nil {
		return nil, nil
	}
	if waitUntil {
		da, sa = o.WaitUntilAPIDataAttributesLoadingPolicy, o.WaitUntilAPISearchAttributesLoadingPolicy
	} else {
		da, sa = o.ExecuteAPIDataAttributesLoadingPolicy, o.ExecuteAPISearchAttributesLoadingPolicy
	}
	if da == nil {
		da = o.DataAttributesLoadingPolicy
	}
	if da == nil {
		da = o.DataObjectsLoadingPolicy
	}
	if sa == nil {
		sa = o.SearchAttributesLoadingPolicy
	}
	return da, sa
}

// loadKeys returns the keys a policy loads: nil for all, an empty slice for
// none.
func loadKeys(p *record.LoadingPolicy) []string {
	if p == nil || p.PersistenceLoadingType == nil {
		return nil
	}
	switch *p.PersistenceLoadingType {
	case record.LoadNone:
		return []string{}
	case record.LoadPartialWithoutLocking:
		return append([]string{}, slice(p.PartialLoadingKeys)...)
	case record.LoadPartialWithExclusiveLock:
		return append(append([]string{}, slice(p.PartialLoadingKeys)...), slice(p.LockingKeys)...)
	}
	return nil
}

func loadDataAttributes(ctx context.Context, tx ReadTx, runID string, p *record.LoadingPolicy) ([]iwfapi.KeyValue, error) {
	keys := loadKeys(p)
	if keys != nil && len(keys) == 0 {
		return nil, nil
	}
	attrs, err := tx.DataAttributeGet(ctx, runID, keys)
	if err != nil {
		return nil, err
	}
	return fromStoreDataAttributes(attrs), nil
}

func loadSearchAttributes(ctx context.Context, tx ReadTx, runID string, p *record.LoadingPolicy) ([]iwfapi.SearchAttribute, error) {
	keys := loadKeys(p)
	if keys != nil && len(keys) == 0 {
		return nil, nil
	}
	attrs, err := tx.SearchAttributeGet(ctx, runID, keys)
	if err != nil {
		return nil, err
	}
	return searchAttributesOut(attrs)
}

// searchAttributesOut converts stored search attributes for a worker,
// leaving the system ones out.
func searchAttributesOut(attrs []*SearchAttribute) ([]iwfapi.SearchAttribute, error) {
	out := make([]iwfapi.SearchAttribute, 0, len(attrs))
	for _, a := range attrs {
		if isSystemSearchAttribute(a.Key) {
			continue
		}
		sa, err := decodeSearchAttribute(a)
		if err != nil {
			return nil, err
		}
		out = append(out, searchAttributeOut(sa))
	}
	return out, nil
}

// selectKeys keeps the items whose key a loading policy loads: all for a
// nil key list, those listed otherwise (the order is kept).
func selectKeys[T any](items []T, keys []string, key func(T) string) []T {
	if keys == nil {
		return items
	}
	want := make(map[string]bool, len(keys))
	for _, k := range keys {
		want[k] = true
	}
	var out []T
	for _, it := range items {
		if want[key(it)] {
			out = append(out, it)
		}
	}
	return out
}

// snapshot reads what a state API call of task needs. It returns nil when
// the run or execution has moved on.
func (e *Engine) snapshot(ctx context.Context, t *Task, want ExecutionStatus) (*apiSnapshot, error) {
	if in := t.prefetched; in != nil {
		// Read right after the commit that made the task due. Taken once:
		// a later attempt reads afresh. Should it not show the execution
		// in phase want, or a pause have been made since it was read,
		// read again rather than drop the task on it or miss the pause.
		t.prefetched = nil
		if t.prefetchEpoch == e.pauses.epoch.Load() {
			if s, err := snapshotOf(in, want); err != nil || s != nil {
				return s, err
			}
		}
	}
	if cr, ok := e.store.(CallReader); ok {
		return e.snapshotRead(ctx, cr, t, want)
	}
	var s *apiSnapshot
	err := e.storeView(ctx, func(ctx context.Context, tx ReadTx) error {
		s = nil
		run, err := tx.RunGet(ctx, t.RunID)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		x, err := tx.ExecutionGet(ctx, t.RunID, t.ExecutionID)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if run.Status != RunRunning || x.Status != want {
			return nil
		}
		rd, err := decodeRun(run)
		if err != nil {
			return err
		}
		xd, err := decodeExec(x)
		if err != nil {
			return err
		}
		daPolicy, saPolicy := loadingPolicies(xd.Options, want == ExecWaitUntil)
		das, err := loadDataAttributes(ctx, tx, run.RunID, daPolicy)
		if err != nil {
			return err
		}
		sas, err := loadSearchAttributes(ctx, tx, run.RunID, saPolicy)
		if err != nil {
			return err
		}
		s = &apiSnapshot{run: run, rd: rd, x: x, xd: xd, das: das, sas: sas}
		return nil
	})
	return s, err
}

// snapshotRead is snapshot through a store's CallReader: one read of the
// run, the execution and all attributes, filtered here by the loading
// policies.
func (e *Engine) snapshotRead(ctx context.Context, cr CallReader, t *Task, want ExecutionStatus) (*apiSnapshot, error) {
	in, err := e.readForCall(ctx, cr, t.RunID, t.ExecutionID)
	if err != nil {
		return nil, err
	}
	return snapshotOf(in, want)
}

// snapshotOf filters a CallRead by the execution's loading policies; nil
// when the run is not running or the execution not in phase want.
func snapshotOf(in *CallRead, want ExecutionStatus) (*apiSnapshot, error) {
	run, x := in.Run, in.Execution
	if run == nil || x == nil || run.Status != RunRunning || x.Status != want {
		return nil, nil
	}
	rd, err := decodeRun(run)
	if err != nil {
		return nil, err
	}
	xd, err := decodeExec(x)
	if err != nil {
		return nil, err
	}
	s := &apiSnapshot{run: run, rd: rd, x: x, xd: xd}
	daPolicy, saPolicy := loadingPolicies(xd.Options, want == ExecWaitUntil)
	if keys := loadKeys(daPolicy); keys == nil || len(keys) > 0 {
		s.das = fromStoreDataAttributes(selectKeys(in.DataAttributes, keys, func(a *Attribute) string { return a.Key }))
	}
	if keys := loadKeys(saPolicy); keys == nil || len(keys) > 0 {
		if s.sas, err = searchAttributesOut(selectKeys(in.SearchAttributes, keys, func(a *SearchAttribute) string { return a.Key })); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func nonEmpty[T any](s []T) *[]T {
	if len(s) == 0 {
		return nil
	}
	return &s
}

// apiTimeout returns the per-attempt timeout of one state API.
func apiTimeout(o *record.StateOptions, waitUntil bool) time.Duration {
	var secs int32
	if o != nil {
		if waitUntil {
			secs = deref(o.WaitUntilAPITimeoutSeconds)
			if o.StartAPITimeoutSeconds != nil {
				secs = *o.StartAPITimeoutSeconds
			}
		} else {
			secs = deref(o.ExecuteAPITimeoutSeconds)
			if o.DecideAPITimeoutSeconds != nil {
				secs = *o.DecideAPITimeoutSeconds
			}
		}
	}
	if secs <= 0 {
		return defaultAPITimeout
	}
	return time.Duration(secs) * time.Second
}

// callStateAPI makes one attempt of a waitUntil or execute call and records
// its outcome.
func (e *Engine) callStateAPI(ctx context.Context, t *Task) error {
	waitUntil := t.Kind == TaskWaitUntil
	var begin time.Time // of the phase's span, which covers the reads
	if e.cfg.Tracer != nil {
		begin = time.Now()
	}
	want := ExecExecute
	if waitUntil {
		want = ExecWaitUntil
		// Reading its inputs waits behind the execute calls and answers of
		// workflows further along (see Priority); the answer is urgent.
		ctx = WithPriority(ctx, PriorityLow)
	}
	s, err := e.snapshot(ctx, t, want)
	if err != nil {
		return err
	}
	if s == nil {
		e.limiter.drop(t.ID)
		return e.dropTask(ctx, t)
	}
	// The one place a state call is decided (with fireTimerEager's): a
	// paused run's call is held, before it takes a lock or a permit. A
	// run that is not paused costs a nil check and an atomic load here.
	if e.pausedBy(s.run.WorkflowType, s.rd) != "" {
		held, err := e.parkCall(ctx, t)
		if err != nil {
			return err
		}
		if held {
			e.limiter.drop(t.ID)
			return nil
		}
	}
	if keys := lockKeys(loadingPolicies(s.xd.Options, waitUntil)); len(keys) > 0 && !holdsAll(s.rd, keys, apiLockHolder(t.ExecutionID, t.Kind)) {
		acquired, err := e.acquireAPILocks(ctx, t, keys)
		if err != nil || !acquired {
			return err
		}
		// Load again: the previous holder may have written the keys.
		if s, err = e.snapshot(ctx, t, want); err != nil {
			return err
		}
		if s == nil {
			e.limiter.drop(t.ID)
			return e.dropTask(ctx, t)
		}
	}
	var fence func(context.Context) (context.Context, context.CancelFunc)
	if e.limiter != nil {
		var release func()
		fence, release, err = e.limiter.acquire(ctx, t, s)
		if errors.Is(err, errLimitWait) {
			return err
		}
		// The permits go back as soon as the worker answered (s.release),
		// or here should the call not be made.
		s.release = release
		defer release()
		if err != nil {
			return err
		}
	}
	phase := "execute"
	if waitUntil {
		phase = "waitUntil"
	}
	ctx, span := e.startPhase(ctx, phase, begin, t, s)
	callCtx, cancel := context.WithTimeout(ctx, apiTimeout(s.xd.Options, waitUntil))
	defer cancel()
	if fence != nil {
		var cancelFence context.CancelFunc
		callCtx, cancelFence = fence(callCtx)
		defer cancelFence()
	}
	var err2 error
	if waitUntil {
		err2 = e.callWaitUntil(ctx, callCtx, t, s)
	} else {
		err2 = e.callExecute(ctx, callCtx, t, s)
	}
	endSpan(span, err2)
	return err2
}

// workerContext is the context part of a state API request.
func workerContext(t *Task, s *apiSnapshot) iwfapi.Context {
	return iwfapi.Context{
		WorkflowId:               s.run.WorkflowID,
		WorkflowRunId:            s.run.RunID,
		WorkflowStartedTimestamp: s.run.StartedAt.Unix(),
		StateExecutionId:         ptr(s.x.ExecutionID),
		FirstAttemptTimestamp:    ptr(t.FirstAttemptAt.Unix()),
		Attempt:                  ptr(int32(t.Attempt)),
	}
}

// callWaitUntil calls the worker's waitUntil and applies the answer or
// the failed attempt. ctx is the task's, callCtx the attempt's.
func (e *Engine) callWaitUntil(ctx, callCtx context.Context, t *Task, s *apiSnapshot) error {
	req := &iwfapi.WorkflowStateStartRequest{
		Context: workerContext(t, s), WorkflowType: s.run.WorkflowType, WorkflowStateId: s.x.StateID,
		StateInput: mapPtr(s.xd.Input, valueOut), SearchAttributes: nonEmpty(s.sas), DataObjects: nonEmpty(s.das),
	}
	// Workers see payloads inline; an external store that cannot be read
	// is store trouble: the task is tried again, no attempt is counted.
	if err := e.inline(ctx, false, s.run.WorkflowID, s.run.RunID, req); err != nil {
		return err
	}
	begin := time.Now()
	callCtx, span := e.startWorkerCall(callCtx, "waitUntil", t, s)
	resp, err := e.worker.WaitUntil(callCtx, s.rd.WorkerURL, req)
	endSpan(span, err)
	s.callDone()
	e.recordCall("waitUntil", begin, err)
	if err == nil {
		commands := mapPtr(resp.CommandRequest, commandsIn)
		verr := checkTriggerType(commands)
		if verr == nil {
			verr = flatCommands(commands).Validate()
		}
		if verr == nil {
			verr = checkTimers(commands)
		}
		if verr != nil {
			err = fmt.Errorf("err msg: %v, response: %s", verr, encode(resp))
		}
	}
	e.recordStateCall(s, "waitUntil", err)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		nameTimeout(err, "StateApiWaitUntil")
		e.attemptFailedLog(t, s, "waitUntil", err)
		return e.attemptFailed(WithPriority(ctx, PriorityUrgent), t, err)
	}
	return e.applyWaitUntil(WithPriority(ctx, PriorityUrgent), t, s, resp)
}

// callExecute calls the worker's execute and applies the answer or the
// failed attempt.
func (e *Engine) callExecute(ctx, callCtx context.Context, t *Task, s *apiSnapshot) error {
	req := &iwfapi.WorkflowStateDecideRequest{
		Context: workerContext(t, s), WorkflowType: s.run.WorkflowType, WorkflowStateId: s.x.StateID,
		StateInput: mapPtr(s.xd.Input, valueOut), SearchAttributes: nonEmpty(s.sas), DataObjects: nonEmpty(s.das),
		StateLocals: mapSlice(s.xd.StateLocals, kvOut), CommandResults: mapPtr(s.xd.Results, resultsOut),
	}
	if err := e.inline(ctx, false, s.run.WorkflowID, s.run.RunID, req); err != nil {
		return err
	}
	begin := time.Now()
	callCtx, span := e.startWorkerCall(callCtx, "execute", t, s)
	resp, err := e.worker.Execute(callCtx, s.rd.WorkerURL, req)
	endSpan(span, err)
	s.callDone()
	e.recordCall("execute", begin, err)
	if err == nil {
		err = checkDecision(resp)
	}
	e.recordStateCall(s, "execute", err)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		nameTimeout(err, "StateApiExecute")
		e.attemptFailedLog(t, s, "execute", err)
		return e.attemptFailed(WithPriority(ctx, PriorityUrgent), t, err)
	}
	return e.applyExecute(WithPriority(ctx, PriorityUrgent), t, s, resp)
}

// checkDecision refuses an execute answer without a state decision.
func checkDecision(resp *iwfapi.WorkflowStateDecideResponse) error {
	if d := resp.StateDecision; d == nil || (len(slice(d.NextStates)) == 0 && d.ConditionalClose == nil) {
		return fmt.Errorf("err msg: empty state decision is no longer supported. If it's from old SDKs then upgrade the SDK to newer versions, response: %s", encode(resp))
	}
	return nil
}

// nameTimeout marks a timed-out state API call with its API, so that its
// failure message takes iWF's activity-timeout form.
func nameTimeout(err error, api string) {
	var ce *WorkerCallError
	if errors.As(err, &ce) && ce.Timeout {
		ce.API = api
	}
}

// recordStateCall counts a state API call by workflow type and state: a
// failed call, or an answer the engine refused, is an error.
func (e *Engine) recordStateCall(s *apiSnapshot, api string, err error) {
	wt, st := e.metrics.stateLabels.labels(s.run.WorkflowType, s.x.StateID)
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	e.metrics.stateCalls.inc(wt, st, api, outcome)
}

// recordCall counts a worker call and its latency.
func (e *Engine) recordCall(api string, begin time.Time, err error) {
	e.metrics.apiSeconds.observe(time.Since(begin), api)
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	e.metrics.apiCalls.inc(api, outcome)
}
