package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
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
	// HistoryTruncated says the history has more events than were read.
	HistoryTruncated bool
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

// dumpDoc is the part of the dump the page reads: each execution's input
// and commands, and the run's search attributes. It is read leniently.
type dumpDoc struct {
	Executions []struct {
		ID   string `json:"stateExecutionId"`
		Data struct {
			Input    *iwfapi.EncodedObject  `json:"input"`
			Commands *iwfapi.CommandRequest `json:"commands"`
		} `json:"data"`
	} `json:"stateExecutions"`
	SearchAttributes []json.RawMessage `json:"searchAttributes"`
}

// maxDumpBytes bounds the dump the page reads.
const maxDumpBytes = 8 << 20

// run serves a run's page.
func (c *console) run(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	runParam := r.URL.Query().Get("run")
	d, err := c.describe(ctx, iwfapi.WorkflowDescribeRequest{WorkflowId: id, WorkflowRunId: ptr(runParam)})
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	p := &runPage{WorkflowID: id, RunParam: runParam, D: d, Running: d.Status == iwfapi.WorkflowStatusRunning,
		ResetTypes: []string{"BEGINNING", "HISTORY_EVENT_ID", "HISTORY_EVENT_TIME", "STATE_ID", "STATE_EXECUTION_ID"},
		StopTypes:  []string{"CANCEL", "TERMINATE", "FAIL"}}
	runID := d.WorkflowRunId // later reads address the run described
	end := c.opts.Now()
	if d.ClosedTimestampMs != nil {
		end = time.UnixMilli(*d.ClosedTimestampMs)
	}
	p.Duration = humanDuration(end.Sub(time.UnixMilli(d.StartedTimestampMs)))
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
	p.History, p.HistoryTruncated, err = c.history(ctx, id, runID)
	if err != nil {
		p.problem(c, "history", err)
	}
	p.Timeline = buildTimeline(p.History, c.opts.Now())
	p.Diagram = buildDiagram(p.Timeline)
	if da, err := c.be.GetDataAttributes(ctx, iwfapi.WorkflowGetDataObjectsRequest{WorkflowId: id, WorkflowRunId: &runID}); err != nil {
		p.problem(c, "data attributes", err)
	} else {
		p.Data = deref(da.Objects)
	}
	dump, err := c.dump(ctx, id, runID)
	if err != nil {
		p.problem(c, "state inputs and search attributes", err)
	}
	inputs := map[string]*iwfapi.EncodedObject{}
	commands := map[string]*iwfapi.CommandRequest{}
	if dump != nil {
		for _, x := range dump.Executions {
			inputs[x.ID], commands[x.ID] = x.Data.Input, x.Data.Commands
		}
		p.Search = dump.SearchAttributes
	}
	for i, x := range p.Timeline.Executions {
		if i == 0 && x.Parent == "" {
			p.Input = inputs[x.ID]
		}
		end := x.Ended
		if end.IsZero() {
			end = p.Timeline.End
		}
		p.Rows = append(p.Rows, timelineRow{X: x, Bars: p.Timeline.bars(x), Input: inputs[x.ID], Commands: commandViews(commands[x.ID], x.CommandsDone), Duration: humanDuration(end.Sub(x.Started))})
	}
	title := id
	c.render(w, r, http.StatusOK, "run", title, true, p)
}

// problem notes a part of the page that could not be read.
func (p *runPage) problem(c *console, what string, err error) {
	status, msg := explain(err)
	if status == http.StatusInternalServerError {
		c.opts.Logger.Error().Err(err).Str("workflowId", p.WorkflowID).Str("part", what).Msg("console: read run")
	}
	p.Problems = append(p.Problems, "cannot read the "+what+": "+msg)
}

// history reads a run's history, at most MaxHistoryEvents events.
func (c *console) history(ctx context.Context, id, runID string) ([]iwfapi.WorkflowHistoryEvent, bool, error) {
	var events []iwfapi.WorkflowHistoryEvent
	var after int64
	for {
		size := min(1000, c.opts.MaxHistoryEvents-len(events))
		h, err := c.be.WorkflowHistory(ctx, iwfapi.WorkflowHistoryRequest{WorkflowId: id, WorkflowRunId: &runID, AfterEventId: &after, PageSize: ptr(int32(size))})
		if err != nil {
			return events, false, err
		}
		events = append(events, h.Events...)
		more := deref(h.HasMore) && len(h.Events) > 0
		if !more {
			return events, false, nil
		}
		if len(events) >= c.opts.MaxHistoryEvents {
			return events, true, nil
		}
		after = h.Events[len(h.Events)-1].EventId
	}
}

// dump reads the parts of a run's dump the page shows.
func (c *console) dump(ctx context.Context, id, runID string) (*dumpDoc, error) {
	var buf strings.Builder
	for page := int32(0); ; page++ {
		resp, err := c.be.DumpWorkflow(ctx, iwfapi.WorkflowDumpRequest{WorkflowId: id, WorkflowRunId: runID, PageNum: page, PageSizeInBytes: 1 << 20})
		if err != nil {
			return nil, err
		}
		buf.WriteString(resp.JsonData)
		if buf.Len() > maxDumpBytes {
			return nil, errors.New("the run's dump is larger than 8 MiB")
		}
		if page+1 >= resp.TotalPages {
			break
		}
	}
	var doc dumpDoc
	if err := json.Unmarshal([]byte(buf.String()), &doc); err != nil {
		return nil, err
	}
	return &doc, nil
}
