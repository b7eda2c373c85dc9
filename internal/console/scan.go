package console

// One pass over a run's history that keeps what a page of the run shows
// and no more: a compact record per state execution (enough for the
// diagram's counts and the timeline's order), the raw events of the page
// of executions the timeline shows, and the last events of the history and
// of the run's own events (signals, attribute writes, …) before the
// page's cursors. The store reads a history oldest first; showing it
// newest first means keeping the last page seen.

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// cursors are the positions of a run page's lists: each names the oldest
// entry of the newer page, and the list shows the entries before it (0:
// the newest).
type cursors struct {
	// Executions is a state execution's ordinal (1 for the first started).
	Executions int
	// Events and History are history event ids.
	Events, History int64
}

// compactExec is what the scan keeps of every state execution.
type compactExec struct {
	id     string
	state  int32 // index into scan.states
	parent int32 // index of the execution whose decision started it; -1: none
	skip   bool  // no waitUntil
	wuDone bool  // waitUntil completed
	wuFail bool  // a waitUntil attempt failed
	exFail bool  // an execute attempt failed
	done   bool  // execute completed
	// closing has bit i set when its decision named closingOrder[i].
	closing uint8
}

// live says whether the execution had not completed when the scan ended.
func (x *compactExec) live() bool { return !x.done }

// ring keeps the last n history events it is given.
type ring struct {
	buf  []*engine.HistoryEvent
	next int
	full bool
}

func newRing(n int) *ring { return &ring{buf: make([]*engine.HistoryEvent, n)} }

func (r *ring) add(ev *engine.HistoryEvent) {
	if len(r.buf) == 0 {
		return
	}
	r.buf[r.next] = ev
	r.next++
	if r.next == len(r.buf) {
		r.next, r.full = 0, true
	}
}

// newestFirst returns the kept events, the last given first.
func (r *ring) newestFirst() []*engine.HistoryEvent {
	n := r.next
	if r.full {
		n = len(r.buf)
	}
	out := make([]*engine.HistoryEvent, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, r.buf[(r.next-i+len(r.buf))%len(r.buf)])
	}
	return out
}

// scan is the state of one pass over a run's history.
type scan struct {
	page int
	at   cursors

	start, end time.Time
	first      time.Time // the first event's, the start when no WorkflowStarted says
	closed     bool
	closeEvent *engine.HistoryEvent

	execs    []compactExec
	byID     map[string]int32
	states   []string
	stateIdx map[string]int32
	decider  int32

	// windowEvents holds the events of the executions of the timeline's
	// page seen so far, by index: the last page size of those before the
	// cursor, whose indexes are consecutive.
	windowEvents map[int32][]*engine.HistoryEvent

	history, events          *ring
	historyCount, eventCount int
	// historyBefore and eventsBefore count the entries before the cursors
	// (those kept for the page and the older ones).
	historyBefore, eventsBefore int
}

func newScan(page int, at cursors) *scan {
	return &scan{page: page, at: at, byID: map[string]int32{}, stateIdx: map[string]int32{}, decider: -1,
		windowEvents: map[int32][]*engine.HistoryEvent{}, history: newRing(page), events: newRing(page)}
}

// startedData is the part of a StateExecutionStarted event the scan reads.
type startedData struct {
	StateID       string `json:"stateId"`
	SkipWaitUntil bool   `json:"skipWaitUntil"`
}

// The keys the scan looks for in the compact JSON the engine writes. A
// quote inside a JSON string is escaped, so these byte strings occur in
// an event's data only as the keys they are.
var (
	keyStateID       = []byte(`"stateId":"`)
	keySkipTrue      = []byte(`"skipWaitUntil":true`)
	keyClosingPrefix = []byte(`"stateId":"_SYS_`)
)

// startedOf reads a StateExecutionStarted event's data. Most state ids
// need no escapes, and are read without a JSON decoder.
func startedOf(data []byte) startedData {
	if i := bytes.Index(data, keyStateID); i >= 0 {
		rest := data[i+len(keyStateID):]
		if j := bytes.IndexByte(rest, '"'); j >= 0 && bytes.IndexByte(rest[:j], '\\') < 0 {
			return startedData{StateID: string(rest[:j]), SkipWaitUntil: bytes.Contains(data, keySkipTrue)}
		}
	}
	var d startedData
	_ = json.Unmarshal(data, &d)
	return d
}

// closingOrder are the closing states in the order the diagram links
// them.
var closingOrder = []string{"_SYS_GRACEFUL_COMPLETING_WORKFLOW", "_SYS_FORCE_COMPLETING_WORKFLOW", "_SYS_FORCE_FAILING_WORKFLOW", "_SYS_DEAD_END"}

// closingOf returns the closing next states (_SYS_…) an ExecuteCompleted
// event's decision names, as bits of closingOrder. The only "stateId"
// keys of a decision are its next states'.
func closingOf(data []byte) uint8 {
	var out uint8
	for {
		i := bytes.Index(data, keyClosingPrefix)
		if i < 0 {
			return out
		}
		data = data[i+len(keyStateID):]
		j := bytes.IndexByte(data, '"')
		if j < 0 {
			return out
		}
		for i, c := range closingOrder {
			if string(data[:j]) == c {
				out |= 1 << i
			}
		}
		data = data[j:]
	}
}

// add takes the next event of the history.
func (s *scan) add(ev *engine.HistoryEvent) error {
	s.historyCount++
	if s.historyCount == 1 {
		s.first = ev.At
	}
	if s.at.History == 0 || ev.ID < s.at.History {
		s.history.add(ev)
		s.historyBefore++
	}
	xi, known := int32(-1), false
	if ev.ExecutionID != "" {
		xi, known = s.byID[ev.ExecutionID]
	}
	if known {
		if _, ok := s.windowEvents[xi]; ok {
			s.windowEvents[xi] = append(s.windowEvents[xi], ev)
		}
	}
	switch {
	case ev.Type == evWorkflowStarted:
		if s.start.IsZero() {
			s.start = ev.At
		}
	case ev.Type == evStateStarted:
		d := startedOf(ev.Data)
		si, ok := s.stateIdx[d.StateID]
		if !ok {
			si = int32(len(s.states))
			s.states = append(s.states, d.StateID)
			s.stateIdx[d.StateID] = si
		}
		x := compactExec{id: ev.ExecutionID, state: si, parent: s.decider, skip: d.SkipWaitUntil}
		if known {
			s.execs[xi] = x // a second start of one id replaces the first, as the timeline does
		} else {
			xi = int32(len(s.execs))
			s.execs = append(s.execs, x)
			s.byID[ev.ExecutionID] = xi
			if ordinal := int(xi) + 1; s.at.Executions == 0 || ordinal < s.at.Executions {
				s.windowEvents[xi] = []*engine.HistoryEvent{ev}
				delete(s.windowEvents, xi-int32(s.page))
			}
		}
	case strings.HasSuffix(ev.Type, evAttemptFailedSfx) && known:
		if strings.HasPrefix(ev.Type, phaseWaitUntil) {
			s.execs[xi].wuFail = true
		} else {
			s.execs[xi].exFail = true
		}
	case ev.Type == evWaitUntilDone && known:
		s.execs[xi].wuDone = true
	case ev.Type == evExecuteDone && known:
		x := &s.execs[xi]
		x.done = true
		x.closing = closingOf(ev.Data)
	case ev.Type == evWorkflowClosed:
		s.closed, s.end, s.closeEvent = true, ev.At, ev
	case ev.ExecutionID == "":
		s.eventCount++
		if s.at.Events == 0 || ev.ID < s.at.Events {
			s.events.add(ev)
			s.eventsBefore++
		}
	}
	switch ev.Type {
	case evExecuteDone:
		s.decider = xi
		if !known {
			s.decider = -1
		}
	case evStateStarted, evPublished:
	default:
		s.decider = -1
	}
	return nil
}

// storedEvent is the inverse of engine.HistoryEventOut, for tests that hand-write a
// history in the API's shape.
func storedEvent(ev iwfapi.WorkflowHistoryEvent) *engine.HistoryEvent {
	out := &engine.HistoryEvent{ID: ev.EventId, At: time.UnixMilli(ev.TimestampMs), Type: ev.EventType, ExecutionID: deref(ev.StateExecutionId)}
	if ev.Data != nil {
		out.Data, _ = json.Marshal(*ev.Data)
	}
	return out
}

// runView is what a scan yields for the page.
type runView struct {
	// Timeline holds the page's executions, newest first, with the run's
	// span and the page's run events.
	Timeline *timeline
	Diagram  *diagram
	History  []iwfapi.WorkflowHistoryEvent // newest first
	// Counts of all entries, and of those before the page's cursor.
	ExecutionCount, ExecutionsBefore int
	EventCount, EventsBefore         int
	HistoryCount, HistoryBefore      int
	// FirstExecution is the id of the run's first state execution.
	FirstExecution string
}

// finish derives the view once the history was read; now ends the span of
// a running run.
func (s *scan) finish(now time.Time) *runView {
	v := &runView{ExecutionCount: len(s.execs), EventCount: s.eventCount, HistoryCount: s.historyCount,
		EventsBefore: s.eventsBefore, HistoryBefore: s.historyBefore}
	v.ExecutionsBefore = len(s.execs)
	if s.at.Executions > 0 {
		v.ExecutionsBefore = min(len(s.execs), s.at.Executions-1)
	}
	if len(s.execs) > 0 && s.execs[0].parent < 0 {
		v.FirstExecution = s.execs[0].id
	}
	// The page's executions in full: their own events (and the close) give
	// phases, attempts and decisions; the scan gives each its parent.
	var events []iwfapi.WorkflowHistoryEvent
	for _, evs := range s.windowEvents {
		for _, ev := range evs {
			events = append(events, engine.HistoryEventOut(ev))
		}
	}
	if s.closeEvent != nil {
		events = append(events, engine.HistoryEventOut(s.closeEvent))
	}
	sortEvents(events)
	tl := buildTimeline(events, now)
	for _, x := range tl.Executions {
		if xi, ok := s.byID[x.ID]; ok {
			x.Parent = ""
			if p := s.execs[xi].parent; p >= 0 {
				x.Parent = s.execs[p].id
			}
		}
	}
	for i, j := 0, len(tl.Executions)-1; i < j; i, j = i+1, j-1 {
		tl.Executions[i], tl.Executions[j] = tl.Executions[j], tl.Executions[i]
	}
	tl.Closed, tl.Start, tl.End = s.closed, s.start, s.end
	if tl.Start.IsZero() {
		tl.Start = s.first
	}
	if !s.closed {
		tl.End = now
	}
	if tl.End.Before(tl.Start) {
		tl.End = tl.Start
	}
	for _, x := range tl.Executions {
		end := x.Ended
		if end.IsZero() {
			end = tl.End
		}
		if tl.From.IsZero() || x.Started.Before(tl.From) {
			tl.From = x.Started
		}
		if end.After(tl.To) {
			tl.To = end
		}
	}
	tl.Inputs = nil
	for _, ev := range s.events.newestFirst() {
		w := engine.HistoryEventOut(ev)
		tl.Inputs = append(tl.Inputs, runEvent{ID: ev.ID, At: ev.At, Type: ev.Type, Data: deref(w.Data)})
	}
	v.Timeline = tl
	for _, ev := range s.history.newestFirst() {
		v.History = append(v.History, engine.HistoryEventOut(ev))
	}
	v.Diagram = s.diagram(tl.CloseInfo)
	return v
}

// sortEvents orders events by id (the window's events are each in order,
// but executions interleave).
func sortEvents(evs []iwfapi.WorkflowHistoryEvent) {
	sort.Slice(evs, func(i, j int) bool { return evs[i].EventId < evs[j].EventId })
}

// diagram counts the executions of every state and the transitions
// between them, over all the run's executions.
func (s *scan) diagram(closeInfo map[string]any) *diagram {
	g := newGraph()
	start := g.node("start", "start", "start")
	nodes := make([]*node, len(s.states))
	for i, st := range s.states {
		nodes[i] = g.node("state:"+st, st, "state")
	}
	failedClose := s.closed && str(closeInfo["status"]) == "FAILED"
	for i := range s.execs {
		x := &s.execs[i]
		n := nodes[x.state]
		n.Executions++
		if x.live() {
			if !s.closed {
				n.Running++
			} else if failedClose && ((!x.skip && !x.wuDone && x.wuFail) || ((x.skip || x.wuDone) && x.exFail)) {
				n.Failed++
			}
		}
		from := start
		if x.parent >= 0 {
			from = nodes[s.execs[x.parent].state]
		}
		g.link(from, n)
		for i, next := range closingOrder {
			if x.closing&(1<<i) != 0 {
				g.link(n, g.node("end:"+next, closingStates[next], "end"))
			}
		}
	}
	if s.closed {
		if st := str(closeInfo["status"]); st != "" && st != "COMPLETED" {
			end := g.node("end:status:"+st, strings.ToLower(st), "end")
			for i := range s.execs {
				if x := &s.execs[i]; x.live() {
					g.link(nodes[x.state], end)
				}
			}
		}
	}
	layout(g.d, start)
	return g.d
}

// outline selects the events whose data the scan reads during its pass
// (engine.ScanHistoryOutline): a started execution's state, a closing
// decision and the close. The events the page shows are read with their
// data afterwards (missing, fill).
var outline = engine.OutlineData{
	Types:      []string{evStateStarted, evWorkflowClosed},
	MarkedType: evExecuteDone,
	Marker:     string(keyClosingPrefix),
}

// kept calls fn with every event the scan keeps for the page.
func (s *scan) kept(fn func(*engine.HistoryEvent)) {
	for _, evs := range s.windowEvents {
		for _, ev := range evs {
			fn(ev)
		}
	}
	for _, r := range []*ring{s.history, s.events} {
		for _, ev := range r.buf {
			if ev != nil {
				fn(ev)
			}
		}
	}
}

// missing returns the ids of the events the page shows that were read
// without their data (at most a few page sizes of them), in id order.
func (s *scan) missing() []int64 {
	seen := map[int64]bool{}
	s.kept(func(ev *engine.HistoryEvent) {
		if ev.Data == nil {
			seen[ev.ID] = true
		}
	})
	ids := make([]int64, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// fill gives the kept events the data of events, read by id.
func (s *scan) fill(events []*engine.HistoryEvent) {
	data := make(map[int64][]byte, len(events))
	for _, ev := range events {
		data[ev.ID] = ev.Data
	}
	s.kept(func(ev *engine.HistoryEvent) {
		if d, ok := data[ev.ID]; ok && ev.Data == nil {
			ev.Data = d
		}
	})
}
