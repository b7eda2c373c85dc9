package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// runPage is the data of a run's page.
type runPage struct {
	WorkflowID string
	// RunParam is the run the URL names ("" for the current run).
	RunParam string
	D        iwfapi.WorkflowDescribeResponse
	Running  bool
	Duration string
	Input    *iwfapi.EncodedObject
	Results  []iwfapi.StateCompletionOutput
	Pending  []pendingView
	Timeline *timeline
	Rows     []timelineRow
	Diagram  *diagram
	Data     []iwfapi.KeyValue
	Search   []json.RawMessage
	History  []iwfapi.WorkflowHistoryEvent
	// Executions, Events and HistoryList page the timeline, the run's
	// own events and the raw history.
	Executions, Events, HistoryList listInfo
	// HistoryTruncated says the history has more events than were read
	// (MaxHistoryEvents).
	HistoryTruncated bool
	MaxHistoryEvents int
	// Channels are the channels with buffered messages (ChannelsHidden
	// more are not listed), Messages the buffered messages read, and
	// BufferedTotal the number of all of them.
	Channels       []channelView
	ChannelsHidden int
	Messages       []messageView
	BufferedTotal  int
	// Archived is set when the page shows an archived run (read-only).
	Archived *archivedView
	// Pause says why the run's worker calls are held; nil when they are
	// not.
	Pause *pauseView
	// Problems are the parts that could not be read, said plainly.
	Problems   []string
	ResetTypes []string
	StopTypes  []string
}

// pendingView is a pending state execution with its timers' indexes.
type pendingView struct {
	iwfapi.PendingStateExecution
	Timers []timerView
}

// timerView is a timer of a pending execution, for the skip form.
type timerView struct {
	Index     int
	CommandID string
	FireAt    int64
	Done      bool
}

// timelineRow is an execution of the timeline with its bars and details.
type timelineRow struct {
	X        *stateExecution
	Bars     []bar
	Input    *iwfapi.EncodedObject
	Commands []commandView
	Duration string
}

// commandView is a command a waitUntil asked for, and whether it completed.
type commandView struct {
	Kind, ID, Channel string
	Done              bool
}

// commandViews lists a command request in the engine's flattened order
// (timers, signals, internal channels) with the completion flags.
func commandViews(c *iwfapi.CommandRequest, done []bool) []commandView {
	if c == nil {
		return nil
	}
	var out []commandView
	add := func(v commandView) {
		v.Done = len(out) < len(done) && done[len(out)]
		out = append(out, v)
	}
	for _, t := range deref(c.TimerCommands) {
		add(commandView{Kind: "TIMER", ID: deref(t.CommandId)})
	}
	for _, s := range deref(c.SignalCommands) {
		add(commandView{Kind: "SIGNAL", ID: deref(s.CommandId), Channel: s.SignalChannelName})
	}
	for _, ch := range deref(c.InterStateChannelCommands) {
		add(commandView{Kind: "INTERNAL_CHANNEL", ID: deref(ch.CommandId), Channel: ch.ChannelName})
	}
	return out
}

// execRecord is the part of a state execution's stored record the page
// shows: its input and the commands its waitUntil asked for. It is read
// leniently.
type execRecord struct {
	Input    *iwfapi.EncodedObject  `json:"input"`
	Commands *iwfapi.CommandRequest `json:"commands"`
}

// listInfo is the paging of one list of the run page: how many entries it
// shows of how many, and the links to the older entries and back to the
// newest.
type listInfo struct {
	Shown, Total int
	// Older counts the entries older than those shown.
	Older int
	// From and To are the ordinals of the executions shown (the oldest and
	// newest).
	From, To         int
	OlderURL, Newest string
}

// channelView is one channel with buffered messages.
type channelView struct {
	Kind, Channel string
	Count         int
}

// messageView is one buffered message.
type messageView struct {
	Kind, Channel string
	At            time.Time
	Value         *iwfapi.EncodedObject
}

// The query parameters of the run page's cursors.
const (
	paramExecutions = "xb"
	paramEvents     = "eb"
	paramHistory    = "hb"
)

// pageCursors reads the cursors of a run page's query.
func pageCursors(q url.Values) (cursors, error) {
	var at cursors
	for _, c := range []struct {
		name string
		set  func(int64)
	}{
		{paramExecutions, func(v int64) { at.Executions = int(min(v, 1<<31)) }},
		{paramEvents, func(v int64) { at.Events = v }},
		{paramHistory, func(v int64) { at.History = v }},
	} {
		raw := q.Get(c.name)
		if raw == "" {
			continue
		}
		v, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || v < 1 {
			return at, fmt.Errorf("invalid %s %q: want a positive number (follow the page's \"older\" links)", c.name, raw)
		}
		c.set(v)
	}
	return at, nil
}

// pageURL is the run page with one cursor changed (value 0 removes it),
// at the list's anchor.
func (c *console) pageURL(id string, q url.Values, param string, value int64, anchor string) string {
	v := url.Values{}
	for _, k := range []string{"run", paramExecutions, paramEvents, paramHistory} {
		if q.Get(k) != "" {
			v.Set(k, q.Get(k))
		}
	}
	v.Del(param)
	if value > 0 {
		v.Set(param, strconv.FormatInt(value, 10))
	}
	u := c.opts.Prefix + "workflows/" + url.PathEscape(id)
	if len(v) > 0 {
		u += "?" + v.Encode()
	}
	return u + "#" + anchor
}

// run serves a run's page: a live run's from the store, or, when the
// store has no such run and an archive is configured, an archived run's
// from the archive (archivedRun).
func (c *console) run(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	q := r.URL.Query()
	runParam := q.Get("run")
	at, err := pageCursors(q)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	d, err := c.describe(ctx, iwfapi.WorkflowDescribeRequest{WorkflowId: id, WorkflowRunId: ptr(runParam)})
	if engine.CodeOf(err) == engine.CodeWorkflowNotExists && c.opts.Archive != nil {
		c.archivedRun(w, r, id, runParam, at, err)
		return
	}
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	p := &runPage{WorkflowID: id, RunParam: runParam, D: d, Running: d.Status == iwfapi.WorkflowStatusRunning,
		ResetTypes: []string{"BEGINNING", "HISTORY_EVENT_ID", "HISTORY_EVENT_TIME", "STATE_ID", "STATE_EXECUTION_ID"},
		StopTypes:  []string{"CANCEL", "TERMINATE", "FAIL"}}
	runID := d.WorkflowRunId // later reads address the run described
	p.Pause = pauseViewOf(d.Paused)
	p.Duration = runDuration(d, c.opts.Now())
	for _, ps := range d.PendingStates {
		pv := pendingView{PendingStateExecution: ps}
		timer := 0
		for _, cmd := range deref(ps.Commands) {
			if cmd.Kind == iwfapi.PendingCommandKindTIMER {
				pv.Timers = append(pv.Timers, timerView{Index: timer, CommandID: deref(cmd.CommandId), FireAt: deref(cmd.FiringTimestampMs), Done: cmd.Done})
				timer++
			}
		}
		p.Pending = append(p.Pending, pv)
	}
	if !p.Running {
		g, err := c.be.GetWorkflow(ctx, iwfapi.WorkflowGetRequest{WorkflowId: id, WorkflowRunId: &runID, NeedsResults: ptr(true)})
		if err != nil {
			p.problem(c, "results", err)
		} else {
			p.Results = deref(g.Results)
		}
	}
	size := c.opts.RunPageSize
	// One pass over the history's outline (the data of a few events
	// only), then a read of the events the page shows.
	sc := newScan(size, at)
	_, p.HistoryTruncated, err = c.be.ScanHistoryOutline(ctx, id, runID, c.opts.MaxHistoryEvents, outline, sc.add)
	if err == nil {
		if ids := sc.missing(); len(ids) > 0 {
			var evs []*engine.HistoryEvent
			if evs, err = c.be.HistoryEvents(ctx, runID, ids); err == nil {
				sc.fill(evs)
			}
		}
	}
	if err != nil {
		p.problem(c, "history", err)
		sc = newScan(size, at)
	}
	v := sc.finish(c.opts.Now())
	p.view(c, id, q, at, v)
	if da, err := c.be.GetDataAttributes(ctx, iwfapi.WorkflowGetDataObjectsRequest{WorkflowId: id, WorkflowRunId: &runID}); err != nil {
		p.problem(c, "data attributes", err)
	} else {
		p.Data = deref(da.Objects)
	}
	ids := make([]string, 0, len(v.Timeline.Executions)+1)
	for _, x := range v.Timeline.Executions {
		ids = append(ids, x.ID)
	}
	if v.FirstExecution != "" {
		ids = append(ids, v.FirstExecution)
	}
	records := map[string]execRecord{}
	ins, err := c.be.InspectRun(ctx, id, runID, ids, size)
	if err != nil {
		p.problem(c, "state inputs, buffered messages and search attributes", err)
	} else {
		for _, x := range ins.Executions {
			var rec execRecord
			_ = json.Unmarshal(x.Data, &rec)
			records[x.ExecutionID] = rec
		}
		p.Search = ins.SearchAttributes
		p.buffers(ins, size)
	}
	if v.FirstExecution != "" {
		p.Input = records[v.FirstExecution].Input
	}
	p.rows(v, records)
	c.render(w, r, http.StatusOK, "run", id, true, p)
}

// runDuration is how long a run ran, or runs so far.
func runDuration(d iwfapi.WorkflowDescribeResponse, now time.Time) string {
	end := now
	if d.ClosedTimestampMs != nil {
		end = time.UnixMilli(*d.ClosedTimestampMs)
	}
	return humanDuration(end.Sub(time.UnixMilli(d.StartedTimestampMs)))
}

// view fills the page's timeline, diagram and history from a scan's view,
// with the paging of each list.
func (p *runPage) view(c *console, id string, q url.Values, at cursors, v *runView) {
	p.Timeline, p.Diagram, p.History = v.Timeline, v.Diagram, v.History
	p.MaxHistoryEvents = c.opts.MaxHistoryEvents
	n := len(v.Timeline.Executions)
	p.Executions = listInfo{Shown: n, Total: v.ExecutionCount, Older: v.ExecutionsBefore - n, From: v.ExecutionsBefore - n + 1, To: v.ExecutionsBefore}
	if p.Executions.Older > 0 {
		p.Executions.OlderURL = c.pageURL(id, q, paramExecutions, int64(p.Executions.From), "timeline")
	}
	if at.Executions > 0 {
		p.Executions.Newest = c.pageURL(id, q, paramExecutions, 0, "timeline")
	}
	p.Events = listInfo{Shown: len(v.Timeline.Inputs), Total: v.EventCount, Older: v.EventsBefore - len(v.Timeline.Inputs)}
	if p.Events.Older > 0 {
		p.Events.OlderURL = c.pageURL(id, q, paramEvents, v.Timeline.Inputs[len(v.Timeline.Inputs)-1].ID, "events")
	}
	if at.Events > 0 {
		p.Events.Newest = c.pageURL(id, q, paramEvents, 0, "events")
	}
	p.HistoryList = listInfo{Shown: len(v.History), Total: v.HistoryCount, Older: v.HistoryBefore - len(v.History)}
	if p.HistoryList.Older > 0 {
		p.HistoryList.OlderURL = c.pageURL(id, q, paramHistory, v.History[len(v.History)-1].EventId, "history")
	}
	if at.History > 0 {
		p.HistoryList.Newest = c.pageURL(id, q, paramHistory, 0, "history")
	}
}

// rows lays out the timeline's executions with their stored records
// (input and commands; none for an archived run).
func (p *runPage) rows(v *runView, records map[string]execRecord) {
	for _, x := range v.Timeline.Executions {
		end := x.Ended
		if end.IsZero() {
			end = v.Timeline.End
		}
		rec := records[x.ID]
		p.Rows = append(p.Rows, timelineRow{X: x, Bars: v.Timeline.bars(x), Input: rec.Input, Commands: commandViews(rec.Commands, x.CommandsDone), Duration: humanDuration(end.Sub(x.Started))})
	}
}

// buffers fills the page's buffered messages: the count of every channel
// (at most size channels of each kind listed) and the messages read.
func (p *runPage) buffers(ins *engine.RunInspection, size int) {
	for _, k := range []struct {
		kind   string
		counts map[string]int
		msgs   []*engine.Message
	}{{"signal", ins.SignalCounts, ins.Signals}, {"internal channel", ins.InternalCounts, ins.Internal}} {
		names := make([]string, 0, len(k.counts))
		for ch, n := range k.counts {
			names = append(names, ch)
			p.BufferedTotal += n
		}
		sort.Strings(names)
		if len(names) > size {
			p.ChannelsHidden += len(names) - size
			names = names[:size]
		}
		for _, ch := range names {
			p.Channels = append(p.Channels, channelView{Kind: k.kind, Channel: ch, Count: k.counts[ch]})
		}
		for _, m := range k.msgs {
			mv := messageView{Kind: k.kind, Channel: m.Channel, At: m.CreatedAt}
			if len(m.Value) > 0 {
				var v iwfapi.EncodedObject
				if json.Unmarshal(m.Value, &v) == nil {
					mv.Value = &v
				}
			}
			p.Messages = append(p.Messages, mv)
		}
	}
}

// problem notes a part of the page that could not be read.
func (p *runPage) problem(c *console, what string, err error) {
	status, msg := explain(err)
	if status == http.StatusInternalServerError {
		c.opts.Logger.Error().Err(err).Str("workflowId", p.WorkflowID).Str("part", what).Msg("console: read run")
	}
	p.Problems = append(p.Problems, "cannot read the "+what+": "+msg)
}

// pauseView is what holds a paused run's worker calls, for the page's
// badge and its Resume action.
type pauseView struct {
	// What names it: "this run", "workflow type T", "worker host H".
	What string
	// ByRun: the run is paused by itself (Resume resumes it); otherwise
	// Scope is the workflow type or worker host that holds it.
	ByRun  bool
	Scope  string
	By     string
	At     *int64
	Reason string
}

func pauseViewOf(p *iwfapi.WorkflowPauseInfo) *pauseView {
	if p == nil {
		return nil
	}
	v := &pauseView{Scope: p.Scope, By: deref(p.PausedBy), At: p.PausedTimestampMs, Reason: deref(p.Reason)}
	switch {
	case strings.HasPrefix(p.Scope, "type:"):
		v.What = "workflow type " + strings.TrimPrefix(p.Scope, "type:")
	case strings.HasPrefix(p.Scope, "host:"):
		v.What = "worker host " + strings.TrimPrefix(p.Scope, "host:")
	default:
		v.What, v.ByRun = "this run", true
	}
	return v
}
