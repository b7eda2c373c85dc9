package console

// Batch operations in the console: "apply to all matching" on the list
// page starts a batch (POST actions/batch-start, behind the confirmation
// page), the batch page shows its progress and failures and cancels it
// (POST actions/batch-cancel), and the batches page lists them. They make
// the engine calls the API makes (/api/v1/batch/*) and, like the API, need
// the operator role, to read batches too.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/audit"
	"github.com/iwf-server/iwf-server/internal/auth"
)

// batchOperations are the operations the console offers, with the labels
// of the list page's form.
var batchOperations = []struct{ Value, Label string }{
	{string(engine.BatchOpTerminate), "terminate"},
	{string(engine.BatchOpCancel), "cancel"},
	{string(engine.BatchOpFail), "fail"},
	{string(engine.BatchOpSignal), "signal"},
	{string(engine.BatchOpSkipTimer), "skip timer"},
	{string(engine.BatchOpReset), "reset"},
}

// offeredOperations are the batch operations the list page's form offers
// the principal of r: those it may start (auth.BatchNeed).
func offeredOperations(r *http.Request) []struct{ Value, Label string } {
	var out []struct{ Value, Label string }
	for _, op := range batchOperations {
		if auth.AllowBatch(r.Context(), op.Value) == nil {
			out = append(out, op)
		}
	}
	return out
}

// resetTypes are the reset types the batch form offers.
var resetTypes = []string{
	string(iwfapi.WorkflowResetTypeBeginning), string(iwfapi.WorkflowResetTypeHistoryEventId),
	string(iwfapi.WorkflowResetTypeHistoryEventTime), string(iwfapi.WorkflowResetTypeStateId),
	string(iwfapi.WorkflowResetTypeStateExecutionId),
}

// batchFailuresPage is how many failed runs the batch page shows at a time.
const batchFailuresPage = 50

// countCap bounds the runs the confirmation page counts: one more than a
// batch may match by default.
const countCap = engine.DefaultMaxBatchRuns + 1

// batchPageData is the data of a batch's page.
type batchPageData struct {
	B engine.BatchInfo
	// State is the batch's state as the API shows it (RUNNING).
	State    string
	Failures []engine.BatchFailure
	// Processed is done + failed; Percent its share of matched.
	Processed int64
	Percent   int
	Open      bool // starting or running: it can be cancelled
	NextURL   string
	FirstURL  string
	ListURL   string
	Details   []string
}

// batchListData is the data of the batches page.
type batchListData struct {
	Batches  []batchRow
	NextURL  string
	FirstURL string
}

// batchRow is one batch of the list; Query is its query, shortened.
type batchRow struct {
	B     engine.BatchInfo
	State string // as the API shows it
	URL   string
	Query string
}

// batchState is a batch's state as the API shows it: STARTING, RUNNING,
// CANCELLED, COMPLETED.
func batchState(s engine.BatchState) string { return strings.ToUpper(string(s)) }

// batchRowQuery is how much of a batch's query the batches page shows:
// the batch's page shows the whole (up to search.MaxQueryLength).
const batchRowQuery = 200

// refuseBatch answers a batch request whose principal lacks the role (the
// server refuses it before the console; this holds the console embedded
// behind another guard to the same rule) and reports whether it did.
func (c *console) refuseBatch(w http.ResponseWriter, r *http.Request, what string) bool {
	if allowedActions(r)["batch"] {
		return false
	}
	p, _ := auth.PrincipalOf(r.Context())
	c.fail(w, r, http.StatusForbidden, fmt.Sprintf("forbidden: %s needs the %s role (or all); you have the %s role",
		what, auth.ConsoleNeed(http.MethodPost, "actions/batch-start"), p.Role))
	return true
}

// batchURL is the page of a batch.
func (c *console) batchURL(id string) string {
	return c.opts.Prefix + "batches/" + url.PathEscape(id)
}

// batchStart serves POST <prefix>actions/batch-start: as the run actions
// do, it refuses cross-site requests, checks the form and shows the
// confirmation page — with the number of runs the query matches now —
// and once confirmed starts the batch and goes to its page.
func (c *console) batchStart(w http.ResponseWriter, r *http.Request) {
	if c.refuseBatch(w, r, "a batch operation") || !c.readForm(w, r) {
		return
	}
	f := r.PostForm
	req, summary, err := batchRequest(f)
	if err != nil {
		status, text := http.StatusBadRequest, err.Error() // the form's own
		if engine.CodeOf(err) == engine.CodeInvalidArgument {
			status, text = explain(err) // the engine's refusal
		}
		c.fail(w, r, status, text)
		return
	}
	// As on the API: what the operation needs on one run, besides the
	// operator role the route needs (a SIGNAL batch needs the writer's too).
	if err := auth.AllowBatch(r.Context(), string(req.Operation)); err != nil {
		c.fail(w, r, http.StatusForbidden, err.Error())
		return
	}
	back := c.opts.Prefix + "?" + url.Values{"q": {f.Get("q")}}.Encode()
	if f.Get("confirm") != "yes" {
		n, more, err := c.countMatching(r, req.Query)
		if err != nil {
			c.failErr(w, r, err)
			return
		}
		count := thousands(int(n)) + " runs match the query now"
		if more {
			count = "more than " + thousands(int(n-1)) + " runs match the query now: too many for one batch, narrow the query"
		}
		summary = append([]string{"Query: " + req.Query, count}, summary...)
		summary = append(summary, "Each run that matches when the batch starts is processed once; runs that match later are not.")
		c.confirm(w, r, "batch operation", back, summary, f)
		return
	}
	resp, err := c.be.StartBatch(r.Context(), req)
	if err != nil {
		status, text := explain(err)
		if status == http.StatusInternalServerError {
			c.opts.Logger.Error().Err(err).Str("action", "batch start").Msg("console: action failed")
		}
		c.fail(w, r, status, "batch start failed: "+text)
		return
	}
	c.opts.Logger.Info().Str("batchId", resp.ID).Str("operation", string(req.Operation)).Msg("console: batch started")
	w.Header().Set(audit.BatchHeader, resp.ID)
	c.setFlash(w, r, true, fmt.Sprintf("Batch started: %s runs matched.", thousands(int(resp.Matched))))
	http.Redirect(w, r, c.batchURL(resp.ID), http.StatusSeeOther)
}

// confirm renders the confirmation page of a form, which sends the form's
// fields again with confirm=yes.
func (c *console) confirm(w http.ResponseWriter, r *http.Request, title, back string, summary []string, f url.Values) {
	cp := confirmPage{Action: r.URL.Path, BackURL: back, Summary: summary}
	cp.Fields = hiddenFields(f)
	c.render(w, r, http.StatusOK, "confirm", "Confirm: "+title, false, cp)
}

// countMatching counts the runs a query matches, up to countCap; more
// reports that there are at least countCap.
func (c *console) countMatching(r *http.Request, query string) (n int64, more bool, err error) {
	token := ""
	for {
		resp, err := c.be.SearchWorkflows(r.Context(), iwfapi.WorkflowSearchRequest{Query: query, PageSize: ptr(int32(1000)), NextPageToken: &token})
		if err != nil {
			return 0, false, err
		}
		n += int64(len(deref(resp.WorkflowExecutions)))
		if n >= countCap {
			return countCap, true, nil
		}
		if token = deref(resp.NextPageToken); token == "" {
			return n, false, nil
		}
	}
}

// batchRequest reads the batch form of the list page into a start
// request and the lines of its confirmation page. It only reads the form:
// whether the request is complete (each operation's parameters, the rate,
// the limits) is the engine's to say (engine.CheckBatchStart), and the
// page shows the engine's answer.
func batchRequest(f url.Values) (engine.BatchRequest, []string, error) {
	req := engine.BatchRequest{Query: strings.TrimSpace(f.Get("q")), Operation: engine.BatchOperation(f.Get("operation"))}
	rps := float64(engine.DefaultBatchRPS)
	if s := strings.TrimSpace(f.Get("rps")); s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return req, nil, fmt.Errorf("the rate must be a number of runs per second")
		}
		if v != 0 { // 0: the default, as on the API
			rps = v
		}
	}
	req.RPS = rps
	var sum []string
	switch req.Operation {
	case engine.BatchOpTerminate, engine.BatchOpCancel, engine.BatchOpFail:
		sum = append(sum, "Operation: stop each run with "+string(req.Operation))
	case engine.BatchOpSignal:
		ch := strings.TrimSpace(f.Get("channel"))
		req.SignalChannel = ch
		sum = append(sum, "Operation: send each run a signal to channel "+strconv.Quote(shorten(ch, 200)))
		encoding := strings.TrimSpace(f.Get("encoding"))
		if encoding == "" {
			encoding = "json"
		}
		if raw := f.Get("value"); strings.TrimSpace(raw) != "" {
			if encoding == "json" && !json.Valid([]byte(raw)) {
				return req, nil, fmt.Errorf("the signal value is not valid JSON (choose another encoding to send text)")
			}
			req.SignalValue = &engine.EncodedValue{Encoding: ptr(encoding), Data: ptr(raw)}
			sum = append(sum, "Value ("+encoding+"): "+shorten(raw, 500))
		} else {
			sum = append(sum, "Without a value")
		}
	case engine.BatchOpSkipTimer:
		xid := strings.TrimSpace(f.Get("stateExecutionId"))
		st := &engine.BatchSkipTimer{StateExecutionID: xid}
		timer := strings.TrimSpace(f.Get("timerCommandId"))
		if timer != "" {
			st.TimerCommandID = &timer
		} else if s := strings.TrimSpace(f.Get("timerIndex")); s != "" {
			n, err := strconv.ParseInt(s, 10, 32)
			if err != nil {
				return req, nil, fmt.Errorf("the timer's index must be a number (0 for the first timer)")
			}
			st.TimerCommandIndex = ptr(int32(n))
			timer = "#" + strconv.FormatInt(n, 10)
		}
		req.SkipTimer = st
		sum = append(sum, "Operation: skip timer "+shorten(timer, 200)+" of state execution "+shorten(xid, 200)+" in each run")
	case engine.BatchOpReset:
		rt := iwfapi.WorkflowResetType(f.Get("resetType"))
		ro := &engine.BatchReset{ResetType: string(rt)}
		arg := strings.TrimSpace(f.Get("point"))
		switch {
		case arg == "":
		case rt == iwfapi.WorkflowResetTypeHistoryEventId:
			n, err := strconv.ParseInt(arg, 10, 32)
			if err != nil {
				return req, nil, fmt.Errorf("HISTORY_EVENT_ID needs a history event id (a number) in the reset point")
			}
			ro.HistoryEventID = ptr(int32(n))
		case rt == iwfapi.WorkflowResetTypeHistoryEventTime:
			ro.HistoryEventTime = &arg
		case rt == iwfapi.WorkflowResetTypeStateId:
			ro.StateID = &arg
		case rt == iwfapi.WorkflowResetTypeStateExecutionId:
			ro.StateExecutionID = &arg
		}
		if f.Get("skipSignalReapply") != "" {
			ro.SkipSignalReapply = ptr(true)
		}
		req.Reset = ro
		line := "Operation: reset each run to " + string(rt)
		if arg != "" && rt != iwfapi.WorkflowResetTypeBeginning {
			line += " " + shorten(arg, 200)
		}
		sum = append(sum, line+" (a new run starts; a running run is ended)")
	}
	sum = append(sum, "Rate: at most "+strconv.FormatFloat(rps, 'f', -1, 64)+" runs per second")
	if reason := strings.TrimSpace(f.Get("reason")); reason != "" {
		req.Reason = reason
		sum = append(sum, "Reason: "+shorten(reason, 500))
	}
	if err := engine.CheckBatchStart(req); err != nil {
		return req, nil, err
	}
	return req, sum, nil
}

// batchCancel serves POST <prefix>actions/batch-cancel: confirmation, then
// the engine's CancelBatch, then the batch's page.
func (c *console) batchCancel(w http.ResponseWriter, r *http.Request) {
	if c.refuseBatch(w, r, "cancelling a batch") || !c.readForm(w, r) {
		return
	}
	f := r.PostForm
	id := strings.TrimSpace(f.Get("batchId"))
	if id == "" {
		c.fail(w, r, http.StatusBadRequest, "batchId is required")
		return
	}
	if f.Get("confirm") != "yes" {
		c.confirm(w, r, "cancel batch", c.batchURL(id), []string{"Cancel batch " + id,
			"Runs it processed stay processed; the others are left as they are."}, f)
		return
	}
	b, err := c.be.CancelBatch(r.Context(), id)
	if err != nil {
		status, text := explain(err)
		if status == http.StatusInternalServerError {
			c.opts.Logger.Error().Err(err).Str("batchId", id).Msg("console: batch cancel failed")
		}
		c.fail(w, r, status, "cancel failed: "+text)
		return
	}
	c.opts.Logger.Info().Str("batchId", id).Msg("console: batch cancelled")
	c.setFlash(w, r, true, "Batch "+batchState(b.State)+".")
	http.Redirect(w, r, c.batchURL(id), http.StatusSeeOther)
}

// batchPage serves GET <prefix>batches/{id}: the batch, its progress and a
// page of its failed runs; it refreshes itself while the batch runs.
func (c *console) batchPage(w http.ResponseWriter, r *http.Request) {
	if c.refuseBatch(w, r, "the batch pages") {
		return
	}
	id := r.PathValue("id")
	token := r.URL.Query().Get("failures")
	resp, err := c.be.DescribeBatch(r.Context(), engine.BatchDescribeRequest{ID: id,
		FailuresPageSize: batchFailuresPage, FailuresPageToken: token})
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	b := resp.Batch
	d := batchPageData{B: b, State: batchState(b.State), Failures: resp.Failures, Processed: b.Done + b.Failed, ListURL: c.opts.Prefix + "batches",
		Open: b.State == engine.BatchStarting || b.State == engine.BatchRunning}
	if b.Matched > 0 {
		d.Percent = int(d.Processed * 100 / b.Matched)
	} else if !d.Open {
		d.Percent = 100
	}
	if t := resp.FailuresNextPageToken; t != "" {
		d.NextURL = c.batchURL(id) + "?" + url.Values{"failures": {t}}.Encode()
	}
	if token != "" {
		d.FirstURL = c.batchURL(id)
	}
	d.Details = batchDetails(b)
	c.render(w, r, http.StatusOK, "batch", "Batch "+id, d.Open, d)
}

// batchDetails describes a batch's operation parameters.
func batchDetails(b engine.BatchInfo) []string {
	var out []string
	if ch := b.SignalChannel; ch != "" {
		out = append(out, "signal channel "+strconv.Quote(ch))
	}
	if st := b.SkipTimer; st != nil {
		timer := deref(st.TimerCommandID)
		if timer == "" && st.TimerCommandIndex != nil {
			timer = "#" + strconv.Itoa(int(*st.TimerCommandIndex))
		}
		out = append(out, "timer "+timer+" of state execution "+st.StateExecutionID)
	}
	if rs := b.Reset; rs != nil {
		line := "reset to " + rs.ResetType
		switch {
		case rs.HistoryEventID != nil:
			line += " " + strconv.Itoa(int(*rs.HistoryEventID))
		case rs.HistoryEventTime != nil:
			line += " " + *rs.HistoryEventTime
		case rs.StateID != nil:
			line += " " + *rs.StateID
		case rs.StateExecutionID != nil:
			line += " " + *rs.StateExecutionID
		}
		if deref(rs.SkipSignalReapply) {
			line += ", signals not re-applied"
		}
		out = append(out, line)
	}
	return out
}

// batchList serves GET <prefix>batches: a page of batches, newest first.
func (c *console) batchList(w http.ResponseWriter, r *http.Request) {
	if c.refuseBatch(w, r, "the batch pages") {
		return
	}
	token := r.URL.Query().Get("next")
	resp, err := c.be.ListBatches(r.Context(), engine.BatchListRequest{PageSize: c.opts.PageSize, PageToken: token})
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	d := batchListData{}
	for _, b := range resp.Batches {
		d.Batches = append(d.Batches, batchRow{B: b, State: batchState(b.State), URL: c.batchURL(b.ID), Query: shorten(b.Query, batchRowQuery)})
	}
	if t := resp.NextPageToken; t != "" {
		d.NextURL = c.opts.Prefix + "batches?" + url.Values{"next": {t}}.Encode()
	}
	if token != "" {
		d.FirstURL = c.opts.Prefix + "batches"
	}
	c.render(w, r, http.StatusOK, "batches", "Batches", true, d)
}
