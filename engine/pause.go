package engine

// Pause and resume: incident controls that hold a run's worker calls
// (docs/operations.md, "Incident controls").
//
// A run is paused by itself (PauseWorkflow, a batch PAUSE: its record
// says so, Pause in record.Run) or as part of a paused scope, a workflow
// type or a worker host (SetPause: one row of the pauses table, not a
// write per run). A paused run makes no waitUntil or execute call and
// answers an RPC with CodePaused; everything else goes on: its timers
// come due and fire, its signals and internal messages are buffered, its
// workflow timeout counts, and it can be stopped, reset and signalled.
//
// The one place the engine decides to make a state call is callStateAPI
// (and its eager form for a lone timer, fireTimerEager): both read the run
// record first, in the snapshot of the call's inputs, and ask pausedBy. A
// run that is not paused costs a nil check and one atomic load there and
// nothing else: no query. A paused run's due call is parked (parkCall): in
// one transaction under the run's lock the pause is checked in the store
// (the record, or the scope's row, read FOR SHARE on PostgreSQL so that a
// concurrent resume waits for it or it for the resume), and the task is
// set aside with its attempt unchanged: unleased, due at parkedDue, which
// no claim ever reaches, and marked with what holds it (Tx.TaskPark). A
// parked task costs nothing until its pause ends: no claim, no loop.
//
// Resuming a run makes its parked calls due at once, in the order they
// were created, each once (Tx.TaskUnpark); resuming a scope makes them due
// at a pace, rps calls a second (one apart by 1/rps of a second), so that
// a worker that comes back is not flooded. A call made due in a scope
// that is still paused for another reason is parked again for it.
//
// The scopes are cached on each node (pauseSet): loaded at start, reloaded
// after each change made on the node, at once when another node announces
// one (ChangeFeed) and at least every pauseRefresh otherwise. A scope the
// node paused is in its cache before it answers, even should the reload
// fail, and a read that began before it cannot take it out (pauses.apply).
// The park transaction reads the store, not the cache: a stale cache can
// delay a scope's pause on a node by at most the refresh, never park a
// call that nothing holds.

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iwf-server/iwf-server/engine/internal/record"
	"github.com/iwf-server/iwf-server/search"
)

// Pause is a paused scope, a row of the pauses table: every run of a
// workflow type ("type:NAME") or every run whose worker URL names a host
// ("host:HOST:PORT", lower case, the scheme's port when the URL has none).
type Pause struct {
	Scope  string
	Reason string
	By     string
	At     time.Time
}

// The scopes' prefixes, and what holds a parked call of a run paused by
// itself (the parked mark of Tx.TaskPark).
const (
	pauseTypePrefix = "type:"
	pauseHostPrefix = "host:"
	parkedByRun     = "run"
)

// SystemSAPaused is the system search attribute of runs paused by
// themselves (PauseWorkflow, a batch PAUSE, a run that carries its
// predecessor's pause): true while paused, false once resumed. Runs held
// by a paused workflow type or worker host are found by that type or in
// the scope's listing (ListPauses).
const SystemSAPaused = "IwfPaused"

// parkedDue is the due time of a parked task: later than any claim looks.
var parkedDue = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	// DefaultResumeRPS is the pace at which the held calls of a resumed
	// scope become due when the resume names none: calls per second.
	DefaultResumeRPS = 50
	// MaxPauses bounds the paused scopes at once.
	MaxPauses = 1000
	// MaxPauseReasonBytes bounds the reason of a pause.
	MaxPauseReasonBytes = MaxBatchReasonBytes
)

// pauseHint is the ChangeFeed key that announces a pause: of a run
// (pauseHintRun) or of the scopes (pauseHintScopes, reload them).
const (
	pauseHintRun    = "pause:run"
	pauseHintScopes = "pause:scopes"
)

// pauseReadTx is the read side of the pauses (part of ReadTx).
type pauseReadTx interface {
	// PauseList returns every paused scope, by scope.
	PauseList(ctx context.Context) ([]*Pause, error)
	// TaskParkedCount returns the number of parked tasks per parked mark
	// (Tx.TaskPark); marks without tasks are absent.
	TaskParkedCount(ctx context.Context) (map[string]int, error)
}

// pauseTx is the write side of the pauses (part of Tx).
type pauseTx interface {
	// PauseInsert stores a paused scope and reports true, or reports false
	// and changes nothing when the scope is paused already.
	PauseInsert(ctx context.Context, p *Pause) (bool, error)
	// PauseDelete removes a paused scope and reports whether it was one.
	PauseDelete(ctx context.Context, scope string) (bool, error)
	// PauseHold returns the paused scopes among scopes, by scope, and
	// keeps them from being deleted until the transaction ends (FOR SHARE
	// on PostgreSQL; SQLite's single writer does so by itself).
	PauseHold(ctx context.Context, scopes []string) ([]*Pause, error)
	// TaskPark sets aside a task owner holds the lease of: unleased, due
	// at due, its attempt unchanged, marked parked (not ""). It reports
	// false, changing nothing, when owner does not hold the task.
	TaskPark(ctx context.Context, id int64, owner, parked string, due time.Time) (bool, error)
	// TaskUnpark makes parked tasks due again (see TaskUnparkParams) and
	// returns them as they are now, in id order.
	TaskUnpark(ctx context.Context, p TaskUnparkParams) ([]*Task, error)
}

// TaskUnparkParams selects parked tasks and says when they are due.
type TaskUnparkParams struct {
	// Parked selects the tasks of one parked mark; "" any mark.
	Parked string
	// RunID selects the tasks of one run; "" any run.
	RunID string
	// Due is the due time of the first task, in id order; each next one
	// is due Step later.
	Due  time.Time
	Step time.Duration
	// Owner, when not "", leases the tasks to it until their due time
	// plus LeaseDuration; otherwise they are unleased.
	Owner         string
	LeaseDuration time.Duration
	// Limit bounds the tasks; <= 0 means no limit.
	Limit int
}

// PauseScope names a scope: a workflow type or a worker host
// (HOST:PORT), exactly one of them.
type PauseScope struct {
	WorkflowType string
	WorkerHost   string
}

// key is the scope's key in the pauses table.
func (s PauseScope) key() (string, error) {
	switch {
	case s.WorkflowType != "" && s.WorkerHost != "":
		return "", Errorf(CodeInvalidArgument, "name either a workflowType or a workerHost, not both")
	case s.WorkflowType != "":
		if err := CheckName("workflowType", s.WorkflowType); err != nil {
			return "", err
		}
		return pauseTypePrefix + s.WorkflowType, nil
	case s.WorkerHost != "":
		if err := checkHostPort(s.WorkerHost); err != nil {
			return "", Errorf(CodeInvalidArgument, "workerHost %q: %v (as the worker URLs name it, e.g. green.internal:8803)", s.WorkerHost, err)
		}
		if err := CheckName("workerHost", s.WorkerHost); err != nil {
			return "", err
		}
		return pauseHostPrefix + NormalizeHostPort(s.WorkerHost), nil
	}
	return "", Errorf(CodeInvalidArgument, "a workflowType or a workerHost is required")
}

// scopeOf is the PauseScope of a scope key.
func scopeOf(key string) PauseScope {
	if t, ok := strings.CutPrefix(key, pauseTypePrefix); ok {
		return PauseScope{WorkflowType: t}
	}
	return PauseScope{WorkerHost: strings.TrimPrefix(key, pauseHostPrefix)}
}

// PauseInfo is a paused scope as the API shows it, with the number of
// calls it holds (parked) now.
type PauseInfo struct {
	PauseScope
	Reason string
	By     string
	At     time.Time
	Held   int
}

// RunPause says why a run's calls are held: Scope is "run" for a run
// paused by itself, else "type:NAME" or "host:HOST:PORT".
type RunPause struct {
	Scope  string
	By     string
	At     time.Time
	Reason string
}

// PauseRequest pauses one run; RunID "" is the workflow's current run.
type PauseRequest struct {
	WorkflowID string
	RunID      string
	Reason     string
}

// ResumeRequest resumes one run; RunID "" is the workflow's current run.
type ResumeRequest struct {
	WorkflowID string
	RunID      string
}

// ScopePauseRequest pauses a scope.
type ScopePauseRequest struct {
	Scope  PauseScope
	Reason string
}

// ScopeResumeRequest resumes a scope: its held calls become due RPS a
// second (0: DefaultResumeRPS).
type ScopeResumeRequest struct {
	Scope PauseScope
	RPS   float64
}

// ScopeResumed is what ResumeScope answers: how many held calls became due
// and when the last of them is due.
type ScopeResumed struct {
	Resumed int
	LastDue time.Time
}

// pauseSet is a node's cache of the paused scopes, by scope.
type pauseSet map[string]*Pause

// pauses is the engine's part of pause and resume: the cache and the
// epoch that invalidates prefetched call inputs.
type pauses struct {
	set atomic.Pointer[pauseSet]
	// epoch advances with every pause this node makes or hears of: a
	// call whose inputs were read before (prefetched with an older epoch)
	// reads them again, so that it sees the pause.
	epoch atomic.Uint64
	// reload asks the refresh loop to read the scopes now.
	reload chan struct{}

	// mu orders the writes of set: begun numbers each read of the
	// scopes and each change the node made, in the order they began;
	// applied is the number of the one set holds. A read that began
	// before the one set holds is stale and is dropped.
	mu             sync.Mutex
	begun, applied uint64
}

func newPauses() *pauses { return &pauses{reload: make(chan struct{}, 1)} }

// begin numbers a read of the scopes that begins now.
func (p *pauses) begin() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.begun++
	return p.begun
}

// apply makes set the cache, read by the read numbered seq, unless a read
// or a change that began later is in the cache already. It reports whether
// the scopes changed.
func (p *pauses) apply(seq uint64, set pauseSet) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if seq < p.applied {
		return false
	}
	p.applied = seq
	old := p.set.Swap(&set)
	return old == nil || !sameScopes(*old, set)
}

// hold adds a scope this node paused to the cache, after its commit: the
// node holds it from then on, whatever its next read of the scopes does.
func (p *pauses) hold(ps *Pause) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.begun++
	p.applied = p.begun
	set := pauseSet{}
	if old := p.set.Load(); old != nil {
		maps.Copy(set, *old)
	}
	set[ps.Scope] = ps
	p.set.Store(&set)
	p.epoch.Add(1)
}

// pausedBy says what holds the calls of a run of workflowType whose
// record is rd: "run", a scope key, or "" when nothing does. It reads the
// record and the node's cache, never the store.
func (e *Engine) pausedBy(workflowType string, rd *record.Run) string {
	if rd.Pause != nil {
		return parkedByRun
	}
	set := e.pauses.set.Load()
	if set == nil || len(*set) == 0 {
		return ""
	}
	if _, ok := (*set)[pauseTypePrefix+workflowType]; ok {
		return pauseTypePrefix + workflowType
	}
	if hp := workerHostPort(rd.WorkerURL); hp != "" {
		if _, ok := (*set)[pauseHostPrefix+hp]; ok {
			return pauseHostPrefix + hp
		}
	}
	return ""
}

// scopesOf are the scopes a run of workflowType with worker URL workerURL
// is in, the type's first.
func scopesOf(workflowType, workerURL string) []string {
	scopes := []string{pauseTypePrefix + workflowType}
	if hp := workerHostPort(workerURL); hp != "" {
		scopes = append(scopes, pauseHostPrefix+hp)
	}
	return scopes
}

// parkCall sets aside the due call task t of a run that pausedBy says is
// paused, after checking the pause in the store under the run's lock. It
// reports false when nothing holds the run after all (the node's cache was
// stale): the caller then makes the call. A run that closed meanwhile
// loses the task.
func (e *Engine) parkCall(ctx context.Context, task *Task) (bool, error) {
	handled := false
	err := e.update(ctx, func(t *txn) error {
		handled = false
		run, err := t.tx.RunLock(t.ctx, task.RunID)
		if errors.Is(err, ErrNotFound) {
			handled = true
			_, err = t.tx.TaskDelete(t.ctx, task.ID, e.cfg.NodeID)
			return err
		}
		if err != nil {
			return err
		}
		if run.Status != RunRunning {
			handled = true
			_, err = t.tx.TaskDelete(t.ctx, task.ID, e.cfg.NodeID)
			return err
		}
		rd, err := decodeRun(run)
		if err != nil {
			return err
		}
		by := ""
		if rd.Pause != nil {
			by = parkedByRun
		} else {
			scopes := scopesOf(run.WorkflowType, rd.WorkerURL)
			held, err := t.tx.PauseHold(t.ctx, scopes)
			if err != nil {
				return err
			}
			for _, s := range scopes {
				if slices.ContainsFunc(held, func(p *Pause) bool { return p.Scope == s }) {
					by = s
					break
				}
			}
		}
		if by == "" {
			return nil
		}
		handled = true
		ok, err := t.tx.TaskPark(t.ctx, task.ID, e.cfg.NodeID, by, parkedDue)
		if err != nil {
			return err
		}
		if !ok {
			t.fx.stale = append(t.fx.stale, task)
			return nil
		}
		api := "execute"
		if task.Kind == TaskWaitUntil {
			api = "waitUntil"
		}
		t.record(&HistoryEvent{RunID: run.RunID, At: t.now, Type: "StateCallHeld", ExecutionID: task.ExecutionID,
			Data: encode(map[string]any{"api": api, "attempt": task.Attempt, "pausedBy": by})})
		return nil
	})
	if err != nil {
		return false, err
	}
	if handled {
		e.metrics.callsHeld.inc()
	}
	return handled, nil
}

// checkPauseReason refuses a reason the stores cannot keep or that is too
// long.
func checkPauseReason(reason string) error {
	return checkText("reason", reason, MaxPauseReasonBytes)
}

// PauseWorkflow pauses a run (POST /api/v1/workflow/pause): it makes no
// worker call until ResumeWorkflow. A run paused already is a 400.
func (e *Engine) PauseWorkflow(ctx context.Context, req PauseRequest) error {
	if err := checkPauseReason(req.Reason); err != nil {
		return err
	}
	return e.pauseRun(ctx, req.WorkflowID, req.RunID, req.Reason, nil)
}

// pauseRun pauses a run, then calls then in the same transaction (a batch
// marks its item done there).
func (e *Engine) pauseRun(ctx context.Context, workflowID, runID, reason string, then func(t *txn) error) error {
	actor := ActorOf(ctx)
	err := e.mutateRunThen(ctx, workflowID, runID, func(r *runTxn) error {
		if p := r.rd.Pause; p != nil {
			return Errorf(CodeInvalidArgument, "workflow %s run %s is paused already (%s)", r.run.WorkflowID, r.run.RunID, pauseText(parkedByRun, p.By, time.UnixMilli(p.At), p.Reason))
		}
		r.rd.Pause = &record.Pause{By: actor, At: unixMs(r.now), Reason: reason}
		if err := r.writePaused(true); err != nil {
			return err
		}
		r.record(r.event("", "WorkflowPaused", map[string]any{"actor": actor, "reason": reason}))
		return nil
	}, then)
	if err == nil {
		e.pauseAnnounce(false)
	}
	return err
}

// writePaused writes the system search attribute IwfPaused.
func (r *runTxn) writePaused(paused bool) error {
	sa := record.SearchAttribute{Key: ptr(SystemSAPaused), ValueType: ptr(string(search.Bool)), BoolValue: ptr(paused)}
	return r.tx.SearchAttributeUpsert(r.ctx, r.run.RunID, []*SearchAttribute{{Key: SystemSAPaused, ValueType: search.Bool, Raw: encode(sa), Bool: ptr(paused)}})
}

// carryPause pauses a new run that follows a paused one (a workflow retry,
// a cron run, a reset): the workflow stays paused until resumed.
func (r *runTxn) carryPause(p *record.Pause, from string) error {
	cp := *p
	r.rd.Pause = &cp
	if err := r.writePaused(true); err != nil {
		return err
	}
	r.record(r.event("", "WorkflowPaused", map[string]any{"actor": p.By, "reason": p.Reason, "carriedFromRunId": from}))
	return nil
}

// ResumeWorkflow resumes a paused run (POST /api/v1/workflow/resume): the
// calls it held become due now, in the order they were made due, each
// once. A run that is not paused is a 400.
func (e *Engine) ResumeWorkflow(ctx context.Context, req ResumeRequest) error {
	return e.resumeRun(ctx, req.WorkflowID, req.RunID, nil)
}

// resumeRun resumes a run, then calls then in the same transaction.
func (e *Engine) resumeRun(ctx context.Context, workflowID, runID string, then func(t *txn) error) error {
	actor := ActorOf(ctx)
	return e.mutateRunThen(ctx, workflowID, runID, func(r *runTxn) error {
		if r.rd.Pause == nil {
			return Errorf(CodeInvalidArgument, "workflow %s run %s is not paused", r.run.WorkflowID, r.run.RunID)
		}
		r.rd.Pause = nil
		if err := r.writePaused(false); err != nil {
			return err
		}
		tasks, err := r.tx.TaskUnpark(r.ctx, TaskUnparkParams{Parked: parkedByRun, RunID: r.run.RunID, Due: ceilMillisecond(r.now),
			Owner: r.e.cfg.NodeID, LeaseDuration: r.e.cfg.LeaseDuration})
		if err != nil {
			return err
		}
		r.keepLocal(tasks...)
		r.record(r.event("", "WorkflowResumed", map[string]any{"actor": actor, "callsResumed": len(tasks)}))
		return nil
	}, then)
}

// SetPause pauses a scope (POST /api/v1/pause/set): a workflow type or a
// worker host. Its runs, and those that start while it is paused, make no
// worker call until ResumeScope; every node holds it within seconds
// (pauseRefresh) and at once when the change feed tells it. A scope paused
// already is a 400.
func (e *Engine) SetPause(ctx context.Context, req ScopePauseRequest) (PauseInfo, error) {
	key, err := req.Scope.key()
	if err != nil {
		return PauseInfo{}, err
	}
	if err := checkPauseReason(req.Reason); err != nil {
		return PauseInfo{}, err
	}
	p := &Pause{Scope: key, Reason: req.Reason, By: ActorOf(ctx), At: e.cfg.Clock.Now().Truncate(time.Millisecond)}
	err = e.storeUpdate(ctx, func(ctx context.Context, tx Tx) error {
		all, err := tx.PauseList(ctx)
		if err != nil {
			return err
		}
		for _, q := range all {
			if q.Scope == key {
				return Errorf(CodeInvalidArgument, "%s is paused already (%s)", scopeText(key), pauseText(key, q.By, q.At, q.Reason))
			}
		}
		if len(all) >= MaxPauses {
			return Errorf(CodeInvalidArgument, "%d scopes are paused, the most at once: resume some first", MaxPauses)
		}
		ok, err := tx.PauseInsert(ctx, p)
		if err == nil && !ok {
			return Errorf(CodeInvalidArgument, "%s is paused already", scopeText(key))
		}
		return err
	})
	if err != nil {
		return PauseInfo{}, err
	}
	e.log.Warn().Str("scope", key).Str("actor", p.By).Str("reason", p.Reason).Msg("paused: worker calls of the scope are held")
	e.pauses.hold(p)
	e.scopesChanged(ctx)
	return PauseInfo{PauseScope: req.Scope, Reason: p.Reason, By: p.By, At: p.At}, nil
}

// DeletePause resumes a scope (POST /api/v1/pause/delete): the calls it
// holds become due at req.RPS a second, the oldest first, so that the
// worker is not flooded; calls the scope did not hold yet are made at
// once. A scope that is not paused is a 400.
func (e *Engine) DeletePause(ctx context.Context, req ScopeResumeRequest) (ScopeResumed, error) {
	key, err := req.Scope.key()
	if err != nil {
		return ScopeResumed{}, err
	}
	rps := req.RPS
	if rps == 0 {
		rps = DefaultResumeRPS
	}
	if !(rps >= MinBatchRPS && rps <= MaxBatchRPS) {
		return ScopeResumed{}, Errorf(CodeInvalidArgument, "rps must be from %v to %d calls per second, or absent or 0 for the default, %d; got %v",
			MinBatchRPS, MaxBatchRPS, DefaultResumeRPS, rps)
	}
	step := batchInterval(rps)
	var out ScopeResumed
	err = e.storeUpdate(ctx, func(ctx context.Context, tx Tx) error {
		out = ScopeResumed{}
		ok, err := tx.PauseDelete(ctx, key)
		if err != nil {
			return err
		}
		if !ok {
			return Errorf(CodeInvalidArgument, "%s is not paused", scopeText(key))
		}
		now := ceilMillisecond(e.cfg.Clock.Now())
		// One statement in the transaction that ends the pause: a crash
		// leaves the scope paused with its calls held, or resumed with
		// all of them due.
		tasks, err := tx.TaskUnpark(ctx, TaskUnparkParams{Parked: key, Due: now, Step: step})
		if err != nil {
			return err
		}
		out.Resumed = len(tasks)
		if len(tasks) > 0 {
			out.LastDue = tasks[len(tasks)-1].DueAt
		}
		return nil
	})
	if err != nil {
		return ScopeResumed{}, err
	}
	e.log.Warn().Str("scope", key).Str("actor", ActorOf(ctx)).Int("callsResumed", out.Resumed).Float64("rps", rps).Msg("resumed")
	e.scopesChanged(ctx)
	if out.Resumed > 0 {
		e.disp.claimSoon()
		if e.feed != nil {
			e.feed.PublishChanges(Changes{Tasks: true})
		}
	}
	return out, nil
}

// ListPauses returns the paused scopes, by scope, with the calls each
// holds now (POST /api/v1/pause/list).
func (e *Engine) ListPauses(ctx context.Context) ([]PauseInfo, error) {
	var out []PauseInfo
	err := e.storeView(ctx, func(ctx context.Context, tx ReadTx) error {
		out = []PauseInfo{}
		all, err := tx.PauseList(ctx)
		if err != nil || len(all) == 0 {
			return err
		}
		held, err := tx.TaskParkedCount(ctx)
		if err != nil {
			return err
		}
		for _, p := range all {
			out = append(out, PauseInfo{PauseScope: scopeOf(p.Scope), Reason: p.Reason, By: p.By, At: p.At, Held: held[p.Scope]})
		}
		return nil
	})
	return out, err
}

// runPauseOf says why a run's calls are held, or nil: its record, or the
// node's cache of the scopes.
func (e *Engine) runPauseOf(workflowType string, rd *record.Run) *RunPause {
	by := e.pausedBy(workflowType, rd)
	switch by {
	case "":
		return nil
	case parkedByRun:
		return &RunPause{Scope: by, By: rd.Pause.By, At: time.UnixMilli(rd.Pause.At).UTC(), Reason: rd.Pause.Reason}
	}
	if set := e.pauses.set.Load(); set != nil {
		if p := (*set)[by]; p != nil {
			return &RunPause{Scope: by, By: p.By, At: p.At, Reason: p.Reason}
		}
	}
	return &RunPause{Scope: by}
}

// pausedError is the answer to an RPC of a paused run.
func pausedError(run *Run, p *RunPause) error {
	how := "resume it with POST /api/v1/workflow/resume (iwf workflow resume)"
	if p.Scope != parkedByRun {
		how = "resume the " + strings.TrimSuffix(scopeText(p.Scope), " ") + " with POST /api/v1/pause/delete (iwf pause delete)"
	}
	return Errorf(CodePaused, "workflow %s run %s is paused (%s): its worker is not called until it resumes; %s",
		run.WorkflowID, run.RunID, pauseText(p.Scope, p.By, p.At, p.Reason), how)
}

// scopeText names a scope key for people.
func scopeText(key string) string {
	if t, ok := strings.CutPrefix(key, pauseTypePrefix); ok {
		return "workflow type " + t
	}
	if h, ok := strings.CutPrefix(key, pauseHostPrefix); ok {
		return "worker host " + h
	}
	return "the run"
}

// pauseText says who paused what, when and why.
func pauseText(scope, by string, at time.Time, reason string) string {
	s := "paused"
	if scope != parkedByRun {
		s = scopeText(scope) + " paused"
	}
	if by != "" {
		s += " by " + by
	}
	if !at.IsZero() {
		s += " at " + at.UTC().Format(time.RFC3339)
	}
	if reason != "" {
		s += ": " + reason
	}
	return s
}

// pauseAnnounce tells this node's calls, and the other nodes, that a pause
// was made (scopes: the scopes changed).
func (e *Engine) pauseAnnounce(scopes bool) {
	e.pauses.epoch.Add(1)
	if e.feed == nil {
		return
	}
	key := pauseHintRun
	if scopes {
		key = pauseHintScopes
	}
	e.feed.PublishChanges(Changes{Keys: []string{key}})
}

// scopesChanged reloads this node's cache after a change of the scopes it
// committed, and tells the other nodes.
func (e *Engine) scopesChanged(ctx context.Context) {
	if err := e.reloadPauses(context.WithoutCancel(ctx)); err != nil {
		e.log.Warn().Err(err).Msg("reading the paused scopes failed; the next refresh retries")
		e.reloadPausesSoon()
	}
	e.pauseAnnounce(true)
}

// reloadPauses reads the paused scopes into the node's cache.
func (e *Engine) reloadPauses(ctx context.Context) error {
	seq := e.pauses.begin()
	var all []*Pause
	err := e.storeView(ctx, func(ctx context.Context, tx ReadTx) error {
		var err error
		all, err = tx.PauseList(ctx)
		return err
	})
	if err != nil {
		return err
	}
	set := make(pauseSet, len(all))
	for _, p := range all {
		set[p.Scope] = p
	}
	if e.pauses.apply(seq, set) {
		e.pauses.epoch.Add(1)
	}
	return nil
}

func sameScopes(a, b pauseSet) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

// reloadPausesSoon asks the refresh loop to read the scopes now.
func (e *Engine) reloadPausesSoon() {
	select {
	case e.pauses.reload <- struct{}{}:
	default:
	}
}

// pauseRefresh is how often a node whose store other nodes share reads
// the paused scopes without being told of a change: 2 × PollInterval, so
// 2 s by default.
func (e *Engine) pauseRefresh() time.Duration { return 2 * e.cfg.PollInterval }

// pauseLoop keeps the node's cache of the scopes, until ctx ends: it reads
// them when asked (a change made here whose read failed, an announcement
// of another node's) and, on a store that other nodes share (one with a
// ChangeFeed), every pauseRefresh, the safety net for a lost announcement.
// A store of one process (SQLite) changes only through this engine, which
// reads the scopes after each change.
func (e *Engine) pauseLoop(ctx context.Context) {
	failed := false // the last read failed: read again after pauseRefresh
	for {
		var t Timer
		var tick <-chan time.Time
		if e.feed != nil || failed {
			t = e.cfg.Clock.NewTimer(e.pauseRefresh())
			tick = t.C()
		}
		select {
		case <-ctx.Done():
			if t != nil {
				t.Stop()
			}
			return
		case <-tick:
		case <-e.pauses.reload:
			if t != nil {
				t.Stop()
			}
		}
		err := e.reloadPauses(ctx)
		failed = err != nil
		if err != nil && ctx.Err() == nil && !e.storeUnavailable(err, "pause refreshes wait") {
			e.log.Error().Err(err).Msg("reading the paused scopes")
		}
	}
}

// pauseHeard applies a pause another node announced.
func (e *Engine) pauseHeard(key string) {
	e.pauses.epoch.Add(1)
	if key == pauseHintScopes {
		e.reloadPausesSoon()
	}
}

// setWorkerURL re-routes a run to another worker URL (a batch
// SET_WORKER_URL), between two of its calls: under the run's lock, as
// every decision is, so that a call in flight finishes with the URL it
// was sent to and the next call goes to the new one. The change is
// recorded in the run's history with who made it and why.
func (e *Engine) setWorkerURL(ctx context.Context, workflowID, runID, workerURL, reason string, then func(t *txn) error) error {
	if err := e.checkWorkerURL(ctx, workerURL); err != nil {
		return err
	}
	actor := ActorOf(ctx)
	to := strings.TrimRight(workerURL, "/")
	return e.mutateRunThen(ctx, workflowID, runID, func(r *runTxn) error {
		from := r.rd.WorkerURL
		if from == to {
			return nil
		}
		r.rd.WorkerURL = to
		// The start request's URL too: a retry, a cron run or a reset
		// of this run starts at the new URL.
		r.rd.Start.IwfWorkerURL = workerURL
		r.record(r.event("", "WorkerURLChanged", map[string]any{"from": from, "to": to, "actor": actor, "reason": reason}))
		return nil
	}, then)
}

// pausedScopes is the number of paused scopes in the node's cache.
func (e *Engine) pausedScopes() int {
	if set := e.pauses.set.Load(); set != nil {
		return len(*set)
	}
	return 0
}
