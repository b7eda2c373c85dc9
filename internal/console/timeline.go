package console

// The timeline and the diagram of a run, derived from its history alone:
// which state executions ran, their waitUntil and execute attempts, the
// commands they waited for, the decisions they took and the states those
// decisions started.

import (
	"sort"
	"strings"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// The history event types the derivation reads (see engine's history).
const (
	evWorkflowStarted  = "WorkflowStarted"
	evWorkflowClosed   = "WorkflowClosed"
	evStateStarted     = "StateExecutionStarted"
	evWaitUntilDone    = "WaitUntilCompleted"
	evCommandsDone     = "CommandsCompleted"
	evTimerFired       = "TimerFired"
	evExecuteDone      = "ExecuteCompleted"
	evAttemptFailedSfx = "AttemptFailed" // prefixed with WAIT_UNTIL or EXECUTE
	evExternalInput    = "ExternalInput"
	evPublished        = "InternalMessagesPublished"
)

// The phases and end states of a state execution.
const (
	phaseWaitUntil = "WAIT_UNTIL"
	phaseWaiting   = "WAITING_COMMANDS"
	phaseExecute   = "EXECUTE"
	execCompleted  = "COMPLETED"
	execFailed     = "FAILED"
	execAbandoned  = "ABANDONED"
)

// Closing decisions: next state ids that end the workflow.
var closingStates = map[string]string{
	"_SYS_GRACEFUL_COMPLETING_WORKFLOW": "complete",
	"_SYS_FORCE_COMPLETING_WORKFLOW":    "force complete",
	"_SYS_FORCE_FAILING_WORKFLOW":       "fail",
	"_SYS_DEAD_END":                     "dead end",
}

// timeline is state executions of a run as its history tells them: in the
// order they started as buildTimeline derives them, newest first on a run
// page (one page of them).
type timeline struct {
	Start, End time.Time // the run's span (End is now while it runs)
	// From and To are the span the bars are drawn on: the executions'
	// (the run's when zero).
	From, To   time.Time
	Closed     bool
	CloseInfo  map[string]any
	Executions []*stateExecution
	// Inputs are the run-level events: signals, publishes from outside,
	// attribute writes, skipped timers, resets.
	Inputs []runEvent
}

// stateExecution is one state execution as its history tells it.
type stateExecution struct {
	ID, StateID   string
	Parent        string // the execution whose decision started it; "" for the start
	Started       time.Time
	SkipWaitUntil bool
	WaitUntil     apiCall
	// CommandCount is the number of commands waitUntil asked for.
	CommandCount int
	CommandsAt   time.Time // when its commands were satisfied
	CommandsDone []bool
	TimersFired  []int
	Execute      apiCall
	NextStates   []string
	Decision     any
	Ended        time.Time
	// Status is the phase it is in (WAIT_UNTIL, WAITING_COMMANDS,
	// EXECUTE) while live, else COMPLETED, FAILED or ABANDONED.
	Status string
}

// apiCall is the history of one worker API of a state execution.
type apiCall struct {
	Attempts  int // attempts made (failed ones plus the successful one)
	Failures  []attemptFailure
	Completed time.Time
}

// attemptFailure is one failed worker call.
type attemptFailure struct {
	Attempt      int
	At           time.Time
	Status       int
	Error        string
	NonRetryable bool
	RetryAfterMs int64
}

// runEvent is an event of the run not owned by a state execution.
type runEvent struct {
	ID   int64
	At   time.Time
	Type string
	Data any
}

// live says whether the execution has not ended.
func (x *stateExecution) live() bool { return x.Ended.IsZero() }

// buildTimeline derives a run's timeline from its history, oldest event
// first; now ends the span of a running run.
func buildTimeline(events []iwfapi.WorkflowHistoryEvent, now time.Time) *timeline {
	tl := &timeline{}
	byID := map[string]*stateExecution{}
	decider := "" // the execution whose ExecuteCompleted was the last event
	for _, ev := range events {
		at := time.UnixMilli(ev.TimestampMs)
		data := deref(ev.Data)
		xid := deref(ev.StateExecutionId)
		x := byID[xid]
		switch {
		case ev.EventType == evWorkflowStarted:
			if tl.Start.IsZero() {
				tl.Start = at
			}
		case ev.EventType == evStateStarted:
			x = &stateExecution{ID: xid, StateID: str(data["stateId"]), Parent: decider, Started: at, SkipWaitUntil: boolean(data["skipWaitUntil"])}
			x.Status = phaseWaitUntil
			if x.SkipWaitUntil {
				x.Status = phaseExecute
			}
			if _, dup := byID[xid]; !dup {
				tl.Executions = append(tl.Executions, x)
			}
			byID[xid] = x
		case strings.HasSuffix(ev.EventType, evAttemptFailedSfx) && x != nil:
			f := attemptFailure{Attempt: integer(data["attempt"]), At: at, Status: integer(data["status"]), Error: str(data["error"]),
				NonRetryable: boolean(data["nonRetryable"]), RetryAfterMs: int64(integer(data["retryAfterMs"]))}
			call := &x.Execute
			if strings.HasPrefix(ev.EventType, phaseWaitUntil) {
				call = &x.WaitUntil
			}
			call.Failures = append(call.Failures, f)
			call.Attempts = max(call.Attempts, f.Attempt)
		case ev.EventType == evWaitUntilDone && x != nil:
			x.WaitUntil.Completed = at
			x.WaitUntil.Attempts = max(x.WaitUntil.Attempts, integer(data["attempt"]))
			x.CommandCount = integer(data["commands"])
			x.Status = phaseWaiting
		case ev.EventType == evCommandsDone && x != nil:
			x.CommandsAt = at
			if d, ok := data["done"].([]any); ok {
				for _, v := range d {
					x.CommandsDone = append(x.CommandsDone, boolean(v))
				}
			}
			x.Status = phaseExecute
		case ev.EventType == evTimerFired && x != nil:
			x.TimersFired = append(x.TimersFired, integer(data["index"]))
		case ev.EventType == evExecuteDone && x != nil:
			x.Execute.Completed = at
			x.Execute.Attempts = max(x.Execute.Attempts, integer(data["attempt"]))
			x.Decision = data["decision"]
			if d, ok := data["decision"].(map[string]any); ok {
				if ns, ok := d["nextStates"].([]any); ok {
					for _, n := range ns {
						if m, ok := n.(map[string]any); ok {
							x.NextStates = append(x.NextStates, str(m["stateId"]))
						}
					}
				}
			}
			x.Ended, x.Status = at, execCompleted
		case ev.EventType == evWorkflowClosed:
			tl.Closed, tl.End, tl.CloseInfo = true, at, data
			for _, lx := range tl.Executions {
				if lx.live() {
					lx.Ended = at
					lx.Status = execAbandoned
					if str(data["status"]) == "FAILED" && len(lx.currentCall().Failures) > 0 {
						lx.Status = execFailed
					}
				}
			}
		case xid == "":
			tl.Inputs = append(tl.Inputs, runEvent{ID: ev.EventId, At: at, Type: ev.EventType, Data: data})
		}
		switch ev.EventType {
		case evExecuteDone:
			decider = xid
		case evStateStarted, evPublished:
		default:
			decider = ""
		}
	}
	if !tl.Closed {
		tl.End = now
	}
	if len(events) > 0 && tl.Start.IsZero() {
		tl.Start = time.UnixMilli(events[0].TimestampMs)
	}
	if tl.End.Before(tl.Start) {
		tl.End = tl.Start
	}
	return tl
}

// currentCall is the API call of the execution's phase.
func (x *stateExecution) currentCall() *apiCall {
	if x.WaitUntil.Completed.IsZero() && !x.SkipWaitUntil {
		return &x.WaitUntil
	}
	return &x.Execute
}

// bar is one segment of a timeline row: a phase from its start to its end.
type bar struct {
	Class, Title string
	Left, Width  float64 // percent of the run's span
}

// bars lays an execution's phases out on the run's span.
func (tl *timeline) bars(x *stateExecution) []bar {
	end := x.Ended
	if end.IsZero() {
		end = tl.End
	}
	from, to := tl.From, tl.To
	if from.IsZero() || to.IsZero() {
		from, to = tl.Start, tl.End
	}
	span := to.Sub(from)
	pos := func(t time.Time) float64 {
		if span <= 0 {
			return 0
		}
		return min(100, max(0, float64(t.Sub(from))/float64(span)*100))
	}
	var out []bar
	add := func(class, title string, a, b time.Time) {
		if b.IsZero() || b.After(end) {
			b = end
		}
		left, right := pos(a), pos(b)
		out = append(out, bar{Class: class, Title: title + " " + humanDuration(b.Sub(a)), Left: left, Width: max(right-left, 0.4)})
	}
	t := x.Started
	if !x.SkipWaitUntil {
		add("wu", "waitUntil", t, x.WaitUntil.Completed)
		if x.WaitUntil.Completed.IsZero() {
			return out
		}
		t = x.WaitUntil.Completed
		add("wait", "waiting for commands", t, x.CommandsAt)
		if x.CommandsAt.IsZero() {
			return out
		}
		t = x.CommandsAt
	}
	add("ex", "execute", t, x.Execute.Completed)
	return out
}

// diagram is the graph of the states a run went through.
type diagram struct {
	Width, Height int
	Nodes         []*node
	Edges         []*edge
}

// node is a state (or the start, or an end of the workflow) in the diagram.
type node struct {
	Key, Label, Title string
	Kind              string // start, state, end
	Executions        int
	Running, Failed   int
	Layer, Pos        int
	X, Y, W, H        int
	// CX is the centre of the box; TY1 and TY2 the baselines of its lines.
	CX, TY1, TY2 int
}

// edge is a transition between states, with how often it was taken.
type edge struct {
	From, To *node
	Count    int
	Path     string
	LabelX   int
	LabelY   int
}

// graph builds a diagram: nodes by key, in the order first asked for, and
// edges with how often each was taken.
type graph struct {
	d     *diagram
	nodes map[string]*node
	edges map[[2]*node]*edge
}

func newGraph() *graph {
	return &graph{d: &diagram{}, nodes: map[string]*node{}, edges: map[[2]*node]*edge{}}
}

// node returns the node of key, adding it when new.
func (g *graph) node(key, label, kind string) *node {
	if n, ok := g.nodes[key]; ok {
		return n
	}
	n := &node{Key: key, Label: label, Title: label, Kind: kind}
	g.nodes[key] = n
	g.d.Nodes = append(g.d.Nodes, n)
	return n
}

// link counts one transition from a to b.
func (g *graph) link(a, b *node) {
	k := [2]*node{a, b}
	if e, ok := g.edges[k]; ok {
		e.Count++
		return
	}
	e := &edge{From: a, To: b, Count: 1}
	g.edges[k] = e
	g.d.Edges = append(g.d.Edges, e)
}

// The diagram's geometry, in SVG user units.
const (
	nodeW, nodeH = 170, 40
	gapX, gapY   = 36, 56
	margin       = 16
	loopRoom     = 60
)

// layout places nodes in layers by their distance from the start and draws
// the edges: forward edges downwards, others as loops on the right.
func layout(d *diagram, start *node) {
	out := map[*node][]*node{}
	for _, e := range d.Edges {
		out[e.From] = append(out[e.From], e.To)
	}
	layerOf := map[*node]int{start: 0}
	queue := []*node{start}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, m := range out[n] {
			if _, seen := layerOf[m]; !seen {
				layerOf[m] = layerOf[n] + 1
				queue = append(queue, m)
			}
		}
	}
	maxLayer := 0
	for _, n := range d.Nodes {
		if _, ok := layerOf[n]; !ok {
			layerOf[n] = 1
		}
		maxLayer = max(maxLayer, layerOf[n])
	}
	// End nodes go on the last layer, below every state.
	for _, n := range d.Nodes {
		if n.Kind == "end" {
			layerOf[n] = max(layerOf[n], maxLayer)
		}
	}
	perLayer := map[int][]*node{}
	layers := 0
	for _, n := range d.Nodes {
		n.Layer = layerOf[n]
		n.Pos = len(perLayer[n.Layer])
		perLayer[n.Layer] = append(perLayer[n.Layer], n)
		layers = max(layers, n.Layer+1)
	}
	widest := 1
	for _, ns := range perLayer {
		widest = max(widest, len(ns))
	}
	inner := widest*nodeW + (widest-1)*gapX
	for l, ns := range perLayer {
		row := len(ns)*nodeW + (len(ns)-1)*gapX
		x0 := margin + (inner-row)/2
		for i, n := range ns {
			n.X, n.Y, n.W, n.H = x0+i*(nodeW+gapX), margin+l*(nodeH+gapY), nodeW, nodeH
			if n.Kind != "state" {
				n.W = nodeW * 2 / 3
				n.X += (nodeW - n.W) / 2
			}
			n.CX, n.TY1, n.TY2 = n.X+n.W/2, n.Y+17, n.Y+32
			if n.Executions == 0 {
				n.TY1 = n.Y + 25
			}
			if len([]rune(n.Label)) > 22 {
				n.Label = string([]rune(n.Label)[:21]) + "…"
			}
		}
	}
	d.Width = 2*margin + inner + loopRoom
	d.Height = 2*margin + layers*nodeH + (layers-1)*gapY
	sort.SliceStable(d.Edges, func(i, j int) bool { return d.Edges[i].From.Layer < d.Edges[j].From.Layer })
	loops := 0
	for _, e := range d.Edges {
		a, b := e.From, e.To
		if b.Layer > a.Layer {
			x1, y1 := a.X+a.W/2, a.Y+a.H
			x2, y2 := b.X+b.W/2, b.Y
			my := (y1 + y2) / 2
			e.Path = pathf("M%d %d C%d %d %d %d %d %d", x1, y1, x1, my, x2, my, x2, y2-2)
			e.LabelX, e.LabelY = (x1+x2)/2+6, my
			continue
		}
		loops++
		x1, y1 := a.X+a.W, a.Y+a.H/2
		x2, y2 := b.X+b.W, b.Y+b.H/2
		bulge := max(x1, x2) + 24 + 10*loops
		if a == b {
			y1, y2 = a.Y+a.H/3, a.Y+2*a.H/3
		}
		e.Path = pathf("M%d %d C%d %d %d %d %d %d", x1, y1, bulge, y1, bulge, y2, x2+2, y2)
		e.LabelX, e.LabelY = bulge-4, (y1+y2)/2
		d.Width = max(d.Width, bulge+margin+20)
	}
}
