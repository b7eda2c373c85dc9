package engine

// States in use (docs/operations.md, "Before removing a state: is it still
// in use?"): for a workflow type, how many live state executions of its
// open runs sit in each state, in which phase, since when, and what the
// waiting ones wait for (StateStats, POST /api/v1/workflow/stats); and the
// same across types as a gauge (iwf_state_executions).
//
// Both read the open runs from an index, those that started first first,
// up to a bound, and each run's live executions by its key
// (storesql.StateStats): a store of many closed runs costs them nothing,
// and a type of more open runs than the bound is answered for the oldest
// runs, saying so.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// StatePhase is where a live state execution stands, as StateStats
// counts it: the phases of describe (PendingStateExecution), with the
// calls that failed before apart, and the calls a pause holds apart.
type StatePhase string

// The phases.
const (
	// PhaseWaitUntil: its waitUntil call is pending (first attempt).
	PhaseWaitUntil StatePhase = "WAIT_UNTIL"
	// PhaseWaitingCommands: waiting for its commands (timers, signals,
	// internal channels).
	PhaseWaitingCommands StatePhase = "WAITING_COMMANDS"
	// PhaseExecute: its execute call is pending (first attempt).
	PhaseExecute StatePhase = "EXECUTE"
	// PhaseRetrying: its waitUntil or execute call is pending again,
	// after a failed or interrupted attempt.
	PhaseRetrying StatePhase = "RETRYING"
	// PhasePaused: its waitUntil or execute call is held by a pause of
	// its run, its workflow type or its worker host: the call came due
	// and was parked (parkCall), as describe's heldByPause says, until
	// the pause ends. A call not yet due (a retry's backoff) is parked
	// when it comes due, and counts in its own phase until then; an
	// execution waiting for commands makes no call and stays in
	// PhaseWaitingCommands.
	PhasePaused StatePhase = "PAUSED"
)

// StatePhases lists the phases in the order StateStats answers them.
var StatePhases = []StatePhase{PhaseWaitUntil, PhaseWaitingCommands, PhaseExecute, PhaseRetrying, PhasePaused}

// The bounds of StateStats.
const (
	// DefaultStatsRuns is how many open runs StateStats reads unless asked
	// otherwise.
	DefaultStatsRuns = 10_000
	// MaxStatsRuns is the most open runs StateStats reads.
	MaxStatsRuns = 100_000
	// MaxStatsWaiting is the most executions waiting for commands whose
	// commands StateStats reads.
	MaxStatsWaiting = 1_000
)

// LiveExecution is a live state execution of an open run, or an open run
// without one (ExecutionID ""), as ReadTx.LiveExecutions returns them.
type LiveExecution struct {
	WorkflowType string
	WorkflowID   string
	RunID        string
	RunStartedAt time.Time
	ExecutionID  string
	StateID      string
	Status       ExecutionStatus
	CreatedAt    time.Time
	// Attempt is the attempt number of the execution's pending waitUntil
	// or execute call; 0 when it has none.
	Attempt int
	// Parked is the parked mark of that call's task (Tx.TaskPark): what
	// holds it, "run" or a scope key; "" when nothing does.
	Parked string
}

// statsReadTx reads the live executions of open runs (part of ReadTx).
type statsReadTx interface {
	// LiveExecutions returns the live executions (LiveStatuses) of the
	// first maxRuns open runs of workflowType (of every type when ""), by
	// start time then run id, in no particular order; a run without a
	// live execution is one LiveExecution with ExecutionID "".
	LiveExecutions(ctx context.Context, workflowType string, maxRuns int) ([]*LiveExecution, error)
	// WaitingExecutions returns up to limit executions waiting for
	// commands (ExecWaiting), with their Data, among the first maxRuns
	// open runs of workflowType.
	WaitingExecutions(ctx context.Context, workflowType string, maxRuns, limit int) ([]*Execution, error)
}

// StateStatsRequest asks StateStats for a workflow type.
type StateStatsRequest struct {
	WorkflowType string
	// MaxRuns bounds the open runs read, oldest first: 0 means
	// DefaultStatsRuns; at most MaxStatsRuns.
	MaxRuns int
}

// StateStatsAnswer is StateStats' answer.
type StateStatsAnswer struct {
	WorkflowType string
	// Runs is the number of open runs read; Truncated says the type has
	// more, which were not read (the answer covers the oldest).
	Runs      int
	Truncated bool
	// States are the states with live executions, by state id.
	States []StateUse
	// WaitingRead is the number of executions waiting for commands whose
	// commands were read (at most MaxStatsWaiting); WaitingTruncated says
	// there were more, whose waits are not in Waits.
	WaitingRead      int
	WaitingTruncated bool
}

// StateUse is one state's live executions.
type StateUse struct {
	StateID string
	// Executions counts its live executions, Runs the runs they belong to.
	Executions int
	Runs       int
	// Phases counts them by phase, in the order of StatePhases; phases
	// without executions are left out.
	Phases []PhaseCount
	// Waits are what its executions waiting for commands wait for, among
	// those read (StateStatsAnswer.WaitingRead), by kind and name.
	Waits []CommandWait
}

// PhaseCount is the executions of a state in one phase, with the one that
// has been in the state longest.
type PhaseCount struct {
	Phase  StatePhase
	Count  int
	Oldest ExecutionRef
}

// ExecutionRef names a state execution and when it began.
type ExecutionRef struct {
	WorkflowID  string
	RunID       string
	ExecutionID string
	Since       time.Time
}

// CommandWait counts the executions of a state waiting for one command
// not yet completed: a signal channel or an internal channel by name, or a
// timer (Name "").
type CommandWait struct {
	Kind       string // SIGNAL, INTERNAL_CHANNEL or TIMER
	Name       string
	Executions int
}

// phaseOf is the phase of a live execution. A call is held by a pause
// when its task is parked, the engine's one representation of a held call
// (parkCall; describe's heldByPause, ListPauses' Held): the stats follow
// the store, not this node's cache of the scopes.
func phaseOf(x *LiveExecution) StatePhase {
	switch {
	case x.Status == ExecWaiting:
		return PhaseWaitingCommands
	case x.Parked != "":
		return PhasePaused
	case x.Attempt > 1:
		return PhaseRetrying
	case x.Status == ExecWaitUntil:
		return PhaseWaitUntil
	}
	return PhaseExecute
}

// StateStats answers, for a workflow type, how many live state executions
// of its open runs sit in each state and phase, the oldest of each, and
// what those waiting for commands wait for.
func (e *Engine) StateStats(ctx context.Context, req StateStatsRequest) (StateStatsAnswer, error) {
	if req.WorkflowType == "" {
		return StateStatsAnswer{}, Errorf(CodeInvalidArgument, "workflowType is required")
	}
	if err := CheckName("workflowType", req.WorkflowType); err != nil {
		return StateStatsAnswer{}, err
	}
	maxRuns := req.MaxRuns
	switch {
	case maxRuns < 0:
		return StateStatsAnswer{}, Errorf(CodeInvalidArgument, "maxRuns %d: want a positive number", maxRuns)
	case maxRuns == 0:
		maxRuns = DefaultStatsRuns
	case maxRuns > MaxStatsRuns:
		maxRuns = MaxStatsRuns
	}
	var (
		live    []*LiveExecution
		waiting []*Execution
	)
	err := e.storeView(ctx, func(ctx context.Context, tx ReadTx) error {
		var err error
		// One run more than asked says whether there are more.
		if live, err = tx.LiveExecutions(ctx, req.WorkflowType, maxRuns+1); err != nil {
			return err
		}
		waiting, err = tx.WaitingExecutions(ctx, req.WorkflowType, maxRuns, MaxStatsWaiting+1)
		return err
	})
	if err != nil {
		return StateStatsAnswer{}, err
	}
	ans := StateStatsAnswer{WorkflowType: req.WorkflowType}
	live, ans.Runs, ans.Truncated = firstRuns(live, maxRuns)
	if len(waiting) > MaxStatsWaiting {
		waiting, ans.WaitingTruncated = waiting[:MaxStatsWaiting], true
	}
	ans.WaitingRead = len(waiting)
	ans.States = stateUses(live)
	waits, err := commandWaits(waiting)
	if err != nil {
		return StateStatsAnswer{}, err
	}
	for i := range ans.States {
		ans.States[i].Waits = waits[ans.States[i].StateID]
	}
	return ans, nil
}

// firstRuns keeps the executions of the first n runs of live (by start
// time, then run id), and returns how many runs it kept and whether there
// were more.
func firstRuns(live []*LiveExecution, n int) ([]*LiveExecution, int, bool) {
	type run struct {
		started time.Time
		id      string
	}
	seen := map[string]bool{}
	var runs []run
	for _, x := range live {
		if !seen[x.RunID] {
			seen[x.RunID] = true
			runs = append(runs, run{x.RunStartedAt, x.RunID})
		}
	}
	if len(runs) <= n {
		return live, len(runs), false
	}
	sort.Slice(runs, func(i, j int) bool {
		if !runs[i].started.Equal(runs[j].started) {
			return runs[i].started.Before(runs[j].started)
		}
		return runs[i].id < runs[j].id
	})
	keep := map[string]bool{}
	for _, r := range runs[:n] {
		keep[r.id] = true
	}
	out := live[:0:0]
	for _, x := range live {
		if keep[x.RunID] {
			out = append(out, x)
		}
	}
	return out, n, true
}

// stateUses counts live executions by state and phase.
func stateUses(live []*LiveExecution) []StateUse {
	type acc struct {
		use    StateUse
		runs   map[string]struct{}
		phases map[StatePhase]*PhaseCount
	}
	by := map[string]*acc{}
	for _, x := range live {
		if x.ExecutionID == "" {
			continue
		}
		a := by[x.StateID]
		if a == nil {
			a = &acc{use: StateUse{StateID: x.StateID}, runs: map[string]struct{}{}, phases: map[StatePhase]*PhaseCount{}}
			by[x.StateID] = a
		}
		a.use.Executions++
		a.runs[x.RunID] = struct{}{}
		ph := phaseOf(x)
		pc := a.phases[ph]
		ref := ExecutionRef{WorkflowID: x.WorkflowID, RunID: x.RunID, ExecutionID: x.ExecutionID, Since: x.CreatedAt}
		if pc == nil {
			pc = &PhaseCount{Phase: ph, Oldest: ref}
			a.phases[ph] = pc
		} else if older(ref, pc.Oldest) {
			pc.Oldest = ref
		}
		pc.Count++
	}
	out := make([]StateUse, 0, len(by))
	for _, a := range by {
		a.use.Runs = len(a.runs)
		for _, ph := range StatePhases {
			if pc := a.phases[ph]; pc != nil {
				a.use.Phases = append(a.use.Phases, *pc)
			}
		}
		out = append(out, a.use)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StateID < out[j].StateID })
	return out
}

// older reports whether a began before b (then by ids, so that the
// answer does not depend on the order rows came in).
func older(a, b ExecutionRef) bool {
	if !a.Since.Equal(b.Since) {
		return a.Since.Before(b.Since)
	}
	if a.RunID != b.RunID {
		return a.RunID < b.RunID
	}
	return a.ExecutionID < b.ExecutionID
}

// commandWaits counts, per state, the commands not yet completed that the
// executions waiting for commands wait for.
func commandWaits(waiting []*Execution) (map[string][]CommandWait, error) {
	type key struct{ kind, name string }
	counts := map[string]map[key]int{}
	for _, x := range waiting {
		xd, err := decodeExec(x)
		if err != nil {
			return nil, err
		}
		c := xd.Commands
		if c == nil {
			continue
		}
		seen := map[key]bool{}
		i := 0
		pending := func(k key) {
			if !(i < len(xd.Done) && xd.Done[i]) && !seen[k] {
				seen[k] = true
				m := counts[x.StateID]
				if m == nil {
					m = map[key]int{}
					counts[x.StateID] = m
				}
				m[k]++
			}
			i++
		}
		for range slice(c.TimerCommands) {
			pending(key{"TIMER", ""})
		}
		for _, s := range slice(c.SignalCommands) {
			pending(key{"SIGNAL", s.SignalChannelName})
		}
		for _, ch := range slice(c.InterStateChannelCommands) {
			pending(key{"INTERNAL_CHANNEL", ch.ChannelName})
		}
	}
	out := map[string][]CommandWait{}
	for state, m := range counts {
		for k, n := range m {
			out[state] = append(out[state], CommandWait{Kind: k.kind, Name: k.name, Executions: n})
		}
		ws := out[state]
		sort.Slice(ws, func(i, j int) bool {
			if ws[i].Kind != ws[j].Kind {
				return ws[i].Kind < ws[j].Kind
			}
			return ws[i].Name < ws[j].Name
		})
	}
	return out, nil
}

// The gauge iwf_state_executions: the live executions of the oldest
// Config.StateMetricsRuns open runs of every type, by type, state and
// phase, read when a scrape finds the last reading older than
// stateMetricsMaxAge, and at most maxStateMetricSeries series.
const (
	// DefaultStateMetricsRuns is cmd/iwf-server's default of
	// Config.StateMetricsRuns.
	DefaultStateMetricsRuns = 10_000

	stateMetricsMaxAge   = 30 * time.Second
	stateMetricsTimeout  = 5 * time.Second
	maxStateMetricSeries = 1000
)

// stateMetrics is the last reading of iwf_state_executions.
type stateMetrics struct {
	mu        sync.Mutex
	readAt    time.Time // zero: never read
	series    []stateSeries
	runs      int
	truncated bool // more open runs, or more series, than counted
	failed    bool // the last reading failed: the series are older
}

type stateSeries struct {
	workflowType, stateID string
	phase                 StatePhase
	n                     int
}

// writeStateMetrics writes iwf_state_executions, reading the store first
// when the last reading is older than stateMetricsMaxAge (off when
// Config.StateMetricsRuns is 0).
func (e *Engine) writeStateMetrics(b *strings.Builder) {
	if e.cfg.StateMetricsRuns <= 0 {
		return
	}
	m := &e.stateMetrics
	m.mu.Lock()
	defer m.mu.Unlock()
	if now := time.Now(); m.readAt.IsZero() || now.Sub(m.readAt) >= stateMetricsMaxAge {
		ctx, cancel := context.WithTimeout(context.Background(), stateMetricsTimeout)
		err := e.readStateMetrics(ctx, m)
		cancel()
		m.readAt, m.failed = now, err != nil
		if err != nil {
			e.log.Warn().Err(err).Msg("reading the live state executions for iwf_state_executions")
		}
	}
	b.WriteString("# HELP iwf_state_executions Live state executions of the oldest open runs (see iwf_state_executions_runs), by workflow type, state and phase (WAIT_UNTIL, WAITING_COMMANDS, EXECUTE, RETRYING, PAUSED); read at most every 30s.\n# TYPE iwf_state_executions gauge\n")
	for _, s := range m.series {
		fmt.Fprintf(b, "iwf_state_executions%s %d\n", labelText([]string{"type", "state", "phase"}, truncateLabel(s.workflowType)+"\xff"+truncateLabel(s.stateID)+"\xff"+string(s.phase), ""), s.n)
	}
	fmt.Fprintf(b, "# HELP iwf_state_executions_runs Open runs whose live state executions iwf_state_executions counts (the oldest, up to --state-metrics-runs).\n# TYPE iwf_state_executions_runs gauge\niwf_state_executions_runs %d\n", m.runs)
	fmt.Fprintf(b, "# HELP iwf_state_executions_truncated 1 when iwf_state_executions leaves out open runs (more than --state-metrics-runs) or series (more than %d), else 0.\n# TYPE iwf_state_executions_truncated gauge\niwf_state_executions_truncated %d\n", maxStateMetricSeries, boolInt(m.truncated))
	fmt.Fprintf(b, "# HELP iwf_state_executions_read_failed 1 when the last reading for iwf_state_executions failed (its series are those of an earlier reading), else 0.\n# TYPE iwf_state_executions_read_failed gauge\niwf_state_executions_read_failed %d\n", boolInt(m.failed))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// readStateMetrics reads the store for iwf_state_executions into m.
func (e *Engine) readStateMetrics(ctx context.Context, m *stateMetrics) error {
	var live []*LiveExecution
	err := e.storeView(ctx, func(ctx context.Context, tx ReadTx) error {
		var err error
		live, err = tx.LiveExecutions(ctx, "", e.cfg.StateMetricsRuns+1)
		return err
	})
	if err != nil {
		return err
	}
	live, m.runs, m.truncated = firstRuns(live, e.cfg.StateMetricsRuns)
	type key struct {
		t, s string
		p    StatePhase
	}
	counts := map[key]int{}
	for _, x := range live {
		if x.ExecutionID != "" {
			counts[key{x.WorkflowType, x.StateID, phaseOf(x)}]++
		}
	}
	m.series = m.series[:0]
	for k, n := range counts {
		m.series = append(m.series, stateSeries{workflowType: k.t, stateID: k.s, phase: k.p, n: n})
	}
	sort.Slice(m.series, func(i, j int) bool {
		a, b := m.series[i], m.series[j]
		if a.workflowType != b.workflowType {
			return a.workflowType < b.workflowType
		}
		if a.stateID != b.stateID {
			return a.stateID < b.stateID
		}
		return a.phase < b.phase
	})
	if len(m.series) > maxStateMetricSeries {
		m.series, m.truncated = m.series[:maxStateMetricSeries], true
	}
	return nil
}
