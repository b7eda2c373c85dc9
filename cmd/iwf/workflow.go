package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// searchAttrFlag collects --search-attribute Name=TYPE:value flags.
type searchAttrFlag []iwfapi.SearchAttribute

func (f *searchAttrFlag) String() string { return "" }

func (f *searchAttrFlag) Set(s string) error {
	name, rest, ok := strings.Cut(s, "=")
	typ, value, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || name == "" {
		return errors.New("want Name=TYPE:value, e.g. CustomerId=KEYWORD:c-17")
	}
	vt := iwfapi.SearchAttributeValueType(strings.ToUpper(typ))
	sa := iwfapi.SearchAttribute{Key: &name, ValueType: &vt}
	switch vt {
	case iwfapi.SearchAttributeValueTypeKeyword, iwfapi.SearchAttributeValueTypeText, iwfapi.SearchAttributeValueTypeDatetime:
		sa.StringValue = &value
	case iwfapi.SearchAttributeValueTypeInt:
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %q is not an integer", name, value)
		}
		sa.IntegerValue = &n
	case iwfapi.SearchAttributeValueTypeDouble:
		x, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return fmt.Errorf("%s: %q is not a number", name, value)
		}
		sa.DoubleValue = &x
	case iwfapi.SearchAttributeValueTypeBool:
		v, err := strconv.ParseBool(value)
		if err != nil {
			return fmt.Errorf("%s: %q is not true or false", name, value)
		}
		sa.BoolValue = &v
	case iwfapi.SearchAttributeValueTypeKeywordArray:
		vs := strings.Split(value, ",")
		sa.StringArrayValue = &vs
	default:
		return fmt.Errorf("%s: unknown type %q (KEYWORD, TEXT, DATETIME, INT, DOUBLE, BOOL, KEYWORD_ARRAY)", name, typ)
	}
	*f = append(*f, sa)
	return nil
}

func cmdStart(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("workflow start", "iwf workflow start --id ID --type TYPE --worker-url URL [flags]")
	id := fs.String("id", "", "the workflow id (required)")
	typ := fs.String("type", "", "the iWF workflow type (required)")
	workerURL := fs.String("worker-url", "", "the base URL of the worker that runs the workflow (required)")
	timeoutSecs := fs.Int("timeout-seconds", 0, "the workflow's timeout in seconds; 0 means none")
	startState := fs.String("start-state", "", "the id of the first state; none: the workflow waits for an RPC")
	input := fs.String("input", "", "the start state's input, as JSON")
	var attrs searchAttrFlag
	fs.Var(&attrs, "search-attribute", "an initial search attribute `Name=TYPE:value` (repeatable; KEYWORD_ARRAY values comma-separated)")
	if err := c.parseSub(fs, args, "id", "type", "worker-url"); err != nil {
		return err
	}
	if *timeoutSecs < 0 || *timeoutSecs > 1<<31-1 {
		return usagef("%s: --timeout-seconds must be between 0 and %d", fs.Name(), 1<<31-1)
	}
	obj, err := jsonObject("input", *input)
	if err != nil {
		return err
	}
	req := iwfapi.WorkflowStartRequest{
		WorkflowId:             *id,
		IwfWorkflowType:        *typ,
		IwfWorkerUrl:           *workerURL,
		WorkflowTimeoutSeconds: int32(*timeoutSecs),
		StartStateId:           optional(*startState),
		StateInput:             obj,
	}
	if len(attrs) > 0 {
		sa := []iwfapi.SearchAttribute(attrs)
		req.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{SearchAttributes: &sa}
	}
	var resp iwfapi.WorkflowStartResponse
	if printed, err := c.call(ctx, "/api/v1/workflow/start", req, &resp); printed || err != nil {
		return err
	}
	var b kv
	b.add("Workflow ID", *id)
	b.add("Run ID", deref(resp.WorkflowRunId))
	b.write(c.stdout)
	return nil
}

func cmdGet(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("workflow get", "iwf workflow get --id ID [--run-id RUN] [--wait | --archived [--archive-url URL]]")
	id := fs.String("id", "", "the workflow id (required)")
	runID := fs.String("run-id", "", "the run; default the current run (with --archived: the archived run that closed last)")
	wait := fs.Bool("wait", false, "wait until the run closes (getWithWait), then print its results")
	archived, archiveURL := c.archiveFlags(fs)
	if err := c.parseSub(fs, args, "id"); err != nil {
		return err
	}
	if *archived {
		if *wait {
			return usagef("%s: an archived run is closed: --archived takes no --wait", fs.Name())
		}
		return c.getArchived(ctx, fs, *archiveURL, *id, *runID)
	}
	cl, ctx, cancel, err := c.client(ctx, *wait)
	if err != nil {
		return err
	}
	defer cancel()
	req := iwfapi.WorkflowGetRequest{WorkflowId: *id, WorkflowRunId: optional(*runID), NeedsResults: ptr(true)}
	var resp iwfapi.WorkflowGetResponse
	var raw []byte
	if *wait {
		raw, err = getWithWait(ctx, cl, req, &resp)
	} else {
		raw, err = cl.post(ctx, "/api/v1/workflow/get", req, &resp)
	}
	if err != nil {
		return err
	}
	if c.json {
		return printJSON(c.stdout, raw)
	}
	var b kv
	b.add("Workflow ID", *id)
	b.add("Run ID", resp.WorkflowRunId)
	b.add("Status", string(resp.WorkflowStatus))
	b.addIf("Error type", string(deref(resp.ErrorType)))
	b.addIf("Error message", deref(resp.ErrorMessage))
	for _, r := range deref(resp.Results) {
		b.add("Result of "+r.CompletedStateExecutionId, formatObject(r.CompletedStateOutput))
	}
	b.write(c.stdout)
	return nil
}

// getWithWait long-polls until the run closes, polling again each time
// the server's wait budget runs out.
func getWithWait(ctx context.Context, cl *client, req iwfapi.WorkflowGetRequest, resp *iwfapi.WorkflowGetResponse) ([]byte, error) {
	req.NeedsResults = nil
	for {
		raw, err := cl.post(ctx, "/api/v1/workflow/getWithWait", req, resp)
		var ae *apiError
		if errors.As(err, &ae) && ae.resp.SubStatus != nil && *ae.resp.SubStatus == iwfapi.ErrorSubStatusLongPollTimeOut {
			continue
		}
		return raw, err
	}
}

func cmdSignal(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("workflow signal", "iwf workflow signal --id ID --channel NAME [--value JSON]")
	id := fs.String("id", "", "the workflow id (required)")
	runID := fs.String("run-id", "", "the run; default the current run")
	channel := fs.String("channel", "", "the signal channel's name (required)")
	value := fs.String("value", "", "the value to send, as JSON; none: the signal carries no value")
	if err := c.parseSub(fs, args, "id", "channel"); err != nil {
		return err
	}
	obj, err := jsonObject("value", *value)
	if err != nil {
		return err
	}
	req := iwfapi.WorkflowSignalRequest{WorkflowId: *id, WorkflowRunId: optional(*runID), SignalChannelName: *channel, SignalValue: obj}
	return c.simple(ctx, "/api/v1/workflow/signal", req, fmt.Sprintf("signal sent to %s on channel %s", *id, *channel))
}

// simple runs a call whose answer is empty and prints done.
func (c *cli) simple(ctx context.Context, path string, req any, done string) error {
	if printed, err := c.call(ctx, path, req, nil); printed || err != nil {
		return err
	}
	_, err := fmt.Fprintln(c.stdout, done)
	return err
}

func cmdStop(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("workflow stop", "iwf workflow stop --id ID [--type CANCEL|TERMINATE|FAIL] [--reason TEXT]")
	id := fs.String("id", "", "the workflow id (required)")
	runID := fs.String("run-id", "", "the run; default the current run")
	typ := fs.String("type", "CANCEL", "how to stop: CANCEL, TERMINATE or FAIL")
	reason := fs.String("reason", "", "why; for FAIL it becomes the run's error message")
	if err := c.parseSub(fs, args, "id"); err != nil {
		return err
	}
	st := iwfapi.WorkflowStopType(strings.ToUpper(*typ))
	switch st {
	case iwfapi.WorkflowStopTypeCancel, iwfapi.WorkflowStopTypeTerminate, iwfapi.WorkflowStopTypeFail:
	default:
		return usagef("%s: --type %q: want CANCEL, TERMINATE or FAIL", fs.Name(), *typ)
	}
	req := iwfapi.WorkflowStopRequest{WorkflowId: *id, WorkflowRunId: optional(*runID), StopType: &st, Reason: optional(*reason)}
	return c.simple(ctx, "/api/v1/workflow/stop", req, fmt.Sprintf("workflow %s stopped (%s)", *id, st))
}

func cmdReset(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("workflow reset", "iwf workflow reset --id ID --type TYPE [reset point flags]")
	id := fs.String("id", "", "the workflow id (required)")
	runID := fs.String("run-id", "", "the run to reset; default the current run")
	typ := fs.String("type", "", "the reset point's kind (required): BEGINNING, HISTORY_EVENT_ID, HISTORY_EVENT_TIME, STATE_ID, STATE_EXECUTION_ID")
	eventID := fs.Int("event-id", 0, "for HISTORY_EVENT_ID: the history event id")
	eventTime := fs.String("event-time", "", "for HISTORY_EVENT_TIME: the time, e.g. 2025-01-02T03:04:05Z")
	stateID := fs.String("state-id", "", "for STATE_ID: the state whose first execution to reset to")
	stateExecID := fs.String("state-execution-id", "", "for STATE_EXECUTION_ID: the state execution, e.g. S1-1")
	reason := fs.String("reason", "", "why; recorded with the reset")
	skipSignals := fs.Bool("skip-signal-reapply", false, "do not deliver again the signals that came after the reset point")
	if err := c.parseSub(fs, args, "id", "type"); err != nil {
		return err
	}
	rt := iwfapi.WorkflowResetType(strings.ToUpper(*typ))
	var err error
	req := iwfapi.WorkflowResetRequest{WorkflowId: *id, WorkflowRunId: optional(*runID), ResetType: rt, Reason: optional(*reason)}
	if *skipSignals {
		req.SkipSignalReapply = ptr(true)
	}
	need := func(flagName string, ok bool) error {
		if !ok {
			return usagef("%s: --type %s needs --%s", fs.Name(), rt, flagName)
		}
		return nil
	}
	switch rt {
	case iwfapi.WorkflowResetTypeBeginning:
	case iwfapi.WorkflowResetTypeHistoryEventId:
		if *eventID <= 0 || *eventID > 1<<31-1 {
			return need("event-id", false)
		}
		req.HistoryEventId = ptr(int32(*eventID))
	case iwfapi.WorkflowResetTypeHistoryEventTime:
		err = need("event-time", *eventTime != "")
		req.HistoryEventTime = eventTime
	case iwfapi.WorkflowResetTypeStateId:
		err = need("state-id", *stateID != "")
		req.StateId = stateID
	case iwfapi.WorkflowResetTypeStateExecutionId:
		err = need("state-execution-id", *stateExecID != "")
		req.StateExecutionId = stateExecID
	default:
		return usagef("%s: --type %q: want BEGINNING, HISTORY_EVENT_ID, HISTORY_EVENT_TIME, STATE_ID or STATE_EXECUTION_ID", fs.Name(), *typ)
	}
	if err != nil {
		return err
	}
	var resp iwfapi.WorkflowResetResponse
	if printed, err := c.call(ctx, "/api/v1/workflow/reset", req, &resp); printed || err != nil {
		return err
	}
	var b kv
	b.add("Workflow ID", *id)
	b.add("New run ID", resp.WorkflowRunId)
	b.write(c.stdout)
	return nil
}

func cmdRPC(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("workflow rpc", "iwf workflow rpc --id ID --name RPC [--input JSON]")
	id := fs.String("id", "", "the workflow id (required)")
	runID := fs.String("run-id", "", "the run; default the current run")
	name := fs.String("name", "", "the RPC's name (required)")
	input := fs.String("input", "", "the RPC's input, as JSON")
	rpcTimeout := fs.Int("rpc-timeout-seconds", 0, "the worker call's timeout; 0 means the server's maximum")
	if err := c.parseSub(fs, args, "id", "name"); err != nil {
		return err
	}
	obj, err := jsonObject("input", *input)
	if err != nil {
		return err
	}
	req := iwfapi.WorkflowRpcRequest{WorkflowId: *id, WorkflowRunId: optional(*runID), RpcName: *name, Input: obj}
	if *rpcTimeout > 0 {
		req.TimeoutSeconds = ptr(int32(min(*rpcTimeout, 1<<31-1)))
	}
	var resp iwfapi.WorkflowRpcResponse
	if printed, err := c.call(ctx, "/api/v1/workflow/rpc", req, &resp); printed || err != nil {
		return err
	}
	_, err = fmt.Fprintln(c.stdout, formatObject(resp.Output))
	return err
}

func cmdSkipTimer(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("workflow skip-timer", "iwf workflow skip-timer --id ID --state-execution-id SE (--timer-command-id CMD | --timer-index N)")
	id := fs.String("id", "", "the workflow id (required)")
	runID := fs.String("run-id", "", "the run; default the current run")
	stateExecID := fs.String("state-execution-id", "", "the state execution that waits on the timer, e.g. S1-1 (required)")
	commandID := fs.String("timer-command-id", "", "the timer's command id")
	index := fs.Int("timer-index", -1, "the timer's zero-based position among the state's timers, when it has no command id")
	if err := c.parseSub(fs, args, "id", "state-execution-id"); err != nil {
		return err
	}
	req := iwfapi.WorkflowSkipTimerRequest{WorkflowId: *id, WorkflowRunId: optional(*runID), WorkflowStateExecutionId: *stateExecID}
	switch {
	case *commandID != "" && *index >= 0:
		return usagef("%s: give --timer-command-id or --timer-index, not both", fs.Name())
	case *commandID != "":
		req.TimerCommandId = commandID
	case *index >= 0 && *index <= 1<<31-1:
		req.TimerCommandIndex = ptr(int32(*index))
	default:
		return usagef("%s: --timer-command-id or --timer-index is required", fs.Name())
	}
	return c.simple(ctx, "/api/v1/workflow/timer/skip", req, fmt.Sprintf("timer of %s skipped", *stateExecID))
}

// historyPage is the number of events iwf workflow history prints
// without --limit, and reads per request with --all (the server's largest
// page). Tests make it smaller.
var historyPage = 1000

func cmdHistory(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("workflow history", "iwf workflow history --id ID [--run-id RUN] [--after N] [--limit N | --all] [--archived [--archive-url URL]]")
	id := fs.String("id", "", "the workflow id (required)")
	runID := fs.String("run-id", "", "the run; default the current run (with --archived: the archived run that closed last)")
	after := fs.Int64("after", 0, "print only events with a larger event id (the next page: the id the previous one printed)")
	limit := fs.Int("limit", 1000, "print one page of at most this many events")
	all := fs.Bool("all", false, "print every event, reading and printing a page at a time")
	archived, archiveURL := c.archiveFlags(fs)
	if err := c.parseSub(fs, args, "id"); err != nil {
		return err
	}
	limitSet := false
	fs.Visit(func(f *flag.Flag) { limitSet = limitSet || f.Name == "limit" })
	if *after < 0 || *limit <= 0 {
		return usagef("%s: --after cannot be negative and --limit must be positive", fs.Name())
	}
	if *all && limitSet {
		return usagef("%s: --all prints every event; it takes no --limit", fs.Name())
	}
	if *archived {
		return c.historyArchived(ctx, fs, *archiveURL, *id, *runID, *after, *limit, *all)
	}
	cl, cctx, cancel, err := c.client(ctx, false)
	if err != nil {
		return err
	}
	defer cancel()
	if !*all {
		ctx = cctx
	}
	out := newHistoryPrinter(c)
	next, printed := *after, 0
	for {
		size := historyPage
		if !*all {
			size = min(*limit-printed, historyPage)
		}
		req := iwfapi.WorkflowHistoryRequest{WorkflowId: *id, WorkflowRunId: optional(*runID), PageSize: ptr(int32(size))}
		if next > 0 {
			req.AfterEventId = ptr(next)
		}
		var page iwfapi.WorkflowHistoryResponse
		rctx, rcancel := ctx, context.CancelFunc(func() {})
		if *all { // --timeout bounds each request of a stream, not the stream
			rctx, rcancel = context.WithTimeout(ctx, c.timeout)
		}
		_, err := cl.post(rctx, "/api/v1/workflow/history", req, &page)
		rcancel()
		if err != nil {
			return err
		}
		// Pin the run, so that a reset between pages does not mix runs.
		*runID = page.WorkflowRunId
		if err := out.page(page); err != nil {
			return err
		}
		printed += len(page.Events)
		more := deref(page.HasMore) && len(page.Events) > 0
		if len(page.Events) > 0 {
			next = page.Events[len(page.Events)-1].EventId
		}
		if !more {
			return out.end(false, *id, *runID, next)
		}
		if !*all && printed >= *limit {
			return out.end(true, *id, *runID, next)
		}
	}
}

// historyPrinter prints a history page by page, holding one page at most:
// a table, or one JSON object of the server's answer shape whose events
// are written as they come.
type historyPrinter struct {
	c        *cli
	events   int // events printed
	runID    string
	archived bool // the events come from the archive
}

func newHistoryPrinter(c *cli) *historyPrinter { return &historyPrinter{c: c} }

// page prints one page of events.
func (p *historyPrinter) page(page iwfapi.WorkflowHistoryResponse) error {
	w := p.c.stdout
	if p.runID == "" {
		p.runID = page.WorkflowRunId
		if p.c.json {
			fmt.Fprint(w, "{\n  \"events\": [")
		} else {
			fmt.Fprintf(w, "Run ID: %s\n", page.WorkflowRunId)
		}
	}
	if p.c.json {
		for _, e := range page.Events {
			b, err := json.MarshalIndent(e, "    ", "  ")
			if err != nil {
				return err
			}
			sep := ","
			if p.events == 0 {
				sep = ""
			}
			fmt.Fprintf(w, "%s\n    %s", sep, b)
			p.events++
		}
		return nil
	}
	// Each page is aligned on its own: a table of every page would hold
	// the whole history in memory.
	var t *table
	if p.events == 0 {
		t = newTable(w, "EVENT", "TIME", "TYPE", "STATE EXECUTION", "DATA")
	} else {
		t = &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	}
	for _, e := range page.Events {
		data := ""
		if e.Data != nil && len(*e.Data) > 0 {
			data = compactJSON(*e.Data)
		}
		t.row(strconv.FormatInt(e.EventId, 10), formatMillisPrecise(e.TimestampMs), e.EventType, deref(e.StateExecutionId), data)
		p.events++
	}
	return t.flush()
}

// end finishes the output; more says events follow the last printed (id
// last), and the table then ends with the command that prints them.
func (p *historyPrinter) end(more bool, workflowID, runID string, last int64) error {
	w := p.c.stdout
	if p.c.json {
		if p.events == 0 {
			fmt.Fprint(w, "]")
		} else {
			fmt.Fprint(w, "\n  ]")
		}
		rid, _ := json.Marshal(runID)
		_, err := fmt.Fprintf(w, ",\n  \"hasMore\": %t,\n  \"workflowRunId\": %s\n}\n", more, rid)
		return err
	}
	if more {
		archived := ""
		if p.archived {
			archived = " --archived"
		}
		_, err := fmt.Fprintf(w, "\nMore events: iwf workflow history%s --id %s --run-id %s --after %d (or --all)\n", archived, shellQuote(workflowID), runID, last)
		return err
	}
	return nil
}

// shellQuote quotes s for a POSIX shell when it holds more than letters,
// digits and a few safe marks.
func shellQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:/@+=,", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func cmdList(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("workflow list", "iwf workflow list [--query QUERY] [--page-size N] [--next-page-token TOKEN]")
	query := fs.String("query", "", "the search query (docs/search.md); empty lists every run")
	pageSize := fs.Int("page-size", 50, "at most this many runs")
	token := fs.String("next-page-token", "", "the token printed after the previous page")
	brief := fs.Bool("brief", false, "print only ids and run ids (one request; without it each run is looked up)")
	if err := c.parseSub(fs, args); err != nil {
		return err
	}
	if *pageSize <= 0 || *pageSize > 1<<31-1 {
		return usagef("%s: --page-size must be positive", fs.Name())
	}
	cl, ctx, cancel, err := c.client(ctx, false)
	if err != nil {
		return err
	}
	defer cancel()
	req := iwfapi.WorkflowSearchRequest{Query: *query, PageSize: ptr(int32(*pageSize)), NextPageToken: optional(*token)}
	var resp iwfapi.WorkflowSearchResponse
	raw, err := cl.post(ctx, "/api/v1/workflow/search", req, &resp)
	if err != nil {
		return err
	}
	if c.json {
		return printJSON(c.stdout, raw)
	}
	entries := deref(resp.WorkflowExecutions)
	if *brief {
		t := newTable(c.stdout, "WORKFLOW ID", "RUN ID")
		for _, e := range entries {
			t.row(e.WorkflowId, e.WorkflowRunId)
		}
		if err := t.flush(); err != nil {
			return err
		}
	} else {
		t := newTable(c.stdout, "WORKFLOW ID", "RUN ID", "TYPE", "STATUS", "START", "CLOSE")
		lk := &runLookup{cl: cl}
		for _, e := range entries {
			s, err := lk.summary(ctx, e.WorkflowId, e.WorkflowRunId)
			if err != nil {
				return err
			}
			t.row(e.WorkflowId, e.WorkflowRunId, s.workflowType, s.status, s.start, s.close)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if tok := deref(resp.NextPageToken); tok != "" {
		fmt.Fprintf(c.stdout, "\nMore runs: --next-page-token %s\n", tok)
	}
	return nil
}

// runSummary is what list prints about a run besides its ids.
type runSummary struct{ workflowType, status, start, close string }

// runLookup finds a run's type, status and times: from describe, or, on an
// older server without it, from get and the first history event (no close
// time then).
type runLookup struct {
	cl         *client
	noDescribe bool
}

func (l *runLookup) summary(ctx context.Context, id, runID string) (runSummary, error) {
	if !l.noDescribe {
		var d iwfapi.WorkflowDescribeResponse
		_, err := l.cl.post(ctx, describePath, iwfapi.WorkflowDescribeRequest{WorkflowId: id, WorkflowRunId: &runID}, &d)
		var ae *apiError
		switch {
		case err == nil:
			return runSummary{d.WorkflowType, string(d.Status), formatMillis(&d.StartedTimestampMs), formatMillis(d.ClosedTimestampMs)}, nil
		case errors.As(err, &ae) && ae.noRoute():
			l.noDescribe = true
		case errors.As(err, &ae) && ae.notFound():
			return runSummary{status: "(gone)"}, nil // deleted since the search
		default:
			return runSummary{}, err
		}
	}
	var g iwfapi.WorkflowGetResponse
	_, err := l.cl.post(ctx, "/api/v1/workflow/get", iwfapi.WorkflowGetRequest{WorkflowId: id, WorkflowRunId: &runID}, &g)
	var ae *apiError
	if errors.As(err, &ae) && ae.notFound() {
		return runSummary{status: "(gone)"}, nil
	}
	if err != nil {
		return runSummary{}, err
	}
	s := runSummary{status: string(g.WorkflowStatus)}
	var h iwfapi.WorkflowHistoryResponse
	if _, err := l.cl.post(ctx, "/api/v1/workflow/history", iwfapi.WorkflowHistoryRequest{WorkflowId: id, WorkflowRunId: &runID, PageSize: ptr(int32(1))}, &h); err == nil && len(h.Events) > 0 {
		e := h.Events[0]
		s.start = formatMillis(&e.TimestampMs)
		if e.Data != nil {
			if t, ok := (*e.Data)["workflowType"].(string); ok {
				s.workflowType = t
			}
		}
	}
	return s, nil
}

func cmdHealth(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("health", "iwf health")
	if err := c.parseSub(fs, args); err != nil {
		return err
	}
	cl, ctx, cancel, err := c.client(ctx, false)
	if err != nil {
		return err
	}
	defer cancel()
	began := time.Now()
	var h iwfapi.HealthInfo
	raw, err := cl.get(ctx, "/info/healthcheck", &h)
	if err != nil {
		return err
	}
	if c.json {
		return printJSON(c.stdout, raw)
	}
	var b kv
	b.add("Server", cl.base)
	b.add("Condition", deref(h.Condition))
	b.addIf("Hostname", deref(h.Hostname))
	b.add("Round trip", time.Since(began).Round(time.Millisecond).String())
	b.write(c.stdout)
	return nil
}
