package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/auth"
)

// maxFormBytes limits an action's form (a signal value is the largest part).
const maxFormBytes = 4 << 20

// confirmPage is the data of an action's confirmation page.
type confirmPage struct {
	Action     string
	Summary    []string
	Fields     []formField
	WorkflowID string
	BackURL    string
}

// formField is a hidden field the confirmation form sends again.
type formField struct{ Name, Value string }

// prepared is a checked action, ready to confirm or to run.
type prepared struct {
	title   string
	summary []string
	// do runs the action and returns the run to show next ("" for the
	// current run) and the flash message.
	do func(r *http.Request) (string, string, error)
}

// action serves POST <prefix>actions/{signal,stop,reset,skip-timer,pause,
// resume,resume-scope}: it
// refuses cross-site requests, checks the form, asks for confirmation,
// and once confirmed runs the action and redirects to the run's page with
// a flash message. The access table says who may (the server refuses the
// others before this handler); this handler checks again, so that the
// console embedded behind another guard refuses them too.
func (c *console) action(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, c.opts.Prefix+"actions/")
	if !allowedActions(r)[name] {
		p, _ := auth.PrincipalOf(r.Context())
		c.fail(w, r, http.StatusForbidden, fmt.Sprintf("forbidden: the %s action needs the %s role (or all); you have the %s role",
			name, auth.ConsoleNeed(http.MethodPost, "actions/"+name), p.Role))
		return
	}
	if !c.readForm(w, r) {
		return
	}
	f := r.PostForm
	id := strings.TrimSpace(f.Get("workflowId"))
	runID := strings.TrimSpace(f.Get("runId"))
	if id == "" {
		c.fail(w, r, http.StatusBadRequest, "workflowId is required")
		return
	}
	var (
		pa  *prepared
		err error
	)
	switch name {
	case "signal":
		pa, err = c.prepareSignal(id, runID, f)
	case "stop":
		pa, err = c.prepareStop(id, runID, f)
	case "reset":
		pa, err = c.prepareReset(id, runID, f)
	case "skip-timer":
		pa, err = c.prepareSkipTimer(id, runID, f)
	case "pause":
		pa, err = c.preparePause(id, runID, f)
	case "resume":
		pa, err = c.prepareResume(id, runID)
	case "resume-scope":
		pa, err = c.prepareResumeScope(id, runID, f)
	default:
		c.fail(w, r, http.StatusNotFound, "unknown action")
		return
	}
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	back := c.runURL(id, runID)
	if f.Get("confirm") != "yes" {
		cp := confirmPage{Action: r.URL.Path, WorkflowID: id, BackURL: back, Summary: pa.summary, Fields: hiddenFields(f)}
		c.render(w, r, http.StatusOK, "confirm", "Confirm: "+pa.title, false, cp)
		return
	}
	nextRun, msg, err := pa.do(r)
	if err != nil {
		status, text := explain(err)
		if status == http.StatusInternalServerError {
			c.opts.Logger.Error().Err(err).Str("workflowId", id).Str("action", pa.title).Msg("console: action failed")
		}
		c.fail(w, r, status, pa.title+" failed: "+text)
		return
	}
	c.opts.Logger.Info().Str("workflowId", id).Str("workflowRunId", runID).Str("action", pa.title).Msg("console: action")
	c.setFlash(w, r, true, msg)
	http.Redirect(w, r, c.runURL(id, nextRun), http.StatusSeeOther)
}

// hiddenFields are the fields of a form that its confirmation page sends
// again (all but the CSRF token and the confirmation), sorted by name.
func hiddenFields(f url.Values) []formField {
	keys := make([]string, 0, len(f))
	for k := range f {
		if k != csrfField && k != "confirm" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	fields := make([]formField, 0, len(keys))
	for _, k := range keys {
		fields = append(fields, formField{k, f.Get(k)})
	}
	return fields
}

func (c *console) prepareSignal(id, runID string, f url.Values) (*prepared, error) {
	channel := strings.TrimSpace(f.Get("channel"))
	if channel == "" {
		return nil, fmt.Errorf("the signal channel name is required")
	}
	encoding := strings.TrimSpace(f.Get("encoding"))
	if encoding == "" {
		encoding = "json"
	}
	raw := f.Get("value")
	var value *iwfapi.EncodedObject
	if strings.TrimSpace(raw) != "" {
		if encoding == "json" && !json.Valid([]byte(raw)) {
			return nil, fmt.Errorf("the signal value is not valid JSON (choose another encoding to send text)")
		}
		value = &iwfapi.EncodedObject{Encoding: ptr(encoding), Data: ptr(raw)}
	}
	req := iwfapi.WorkflowSignalRequest{WorkflowId: id, WorkflowRunId: ptr(runID), SignalChannelName: channel, SignalValue: value}
	sum := []string{"Send a signal to channel " + strconv.Quote(channel) + " of workflow " + strconv.Quote(id) + runLabel(runID)}
	if value != nil {
		sum = append(sum, "Value ("+encoding+"): "+shorten(raw, 500))
	} else {
		sum = append(sum, "Without a value")
	}
	return &prepared{title: "signal", summary: sum, do: func(r *http.Request) (string, string, error) {
		return runID, "Signal sent to channel " + strconv.Quote(channel) + ".", c.be.SignalWorkflow(r.Context(), req)
	}}, nil
}

func (c *console) prepareStop(id, runID string, f url.Values) (*prepared, error) {
	st := iwfapi.WorkflowStopType(f.Get("stopType"))
	switch st {
	case iwfapi.WorkflowStopTypeCancel, iwfapi.WorkflowStopTypeTerminate, iwfapi.WorkflowStopTypeFail:
	default:
		return nil, fmt.Errorf("the stop type must be CANCEL, TERMINATE or FAIL")
	}
	reason := strings.TrimSpace(f.Get("reason"))
	req := iwfapi.WorkflowStopRequest{WorkflowId: id, WorkflowRunId: ptr(runID), StopType: &st}
	if reason != "" {
		req.Reason = &reason
	}
	sum := []string{"Stop workflow " + strconv.Quote(id) + runLabel(runID) + " with " + string(st)}
	if reason != "" {
		sum = append(sum, "Reason: "+shorten(reason, 500))
	}
	return &prepared{title: "stop", summary: sum, do: func(r *http.Request) (string, string, error) {
		return runID, "Workflow stopped (" + string(st) + ").", c.be.StopWorkflow(r.Context(), req)
	}}, nil
}

func (c *console) prepareReset(id, runID string, f url.Values) (*prepared, error) {
	rt := iwfapi.WorkflowResetType(f.Get("resetType"))
	req := iwfapi.WorkflowResetRequest{WorkflowId: id, WorkflowRunId: ptr(runID), ResetType: rt}
	point := ""
	arg := strings.TrimSpace(f.Get("point"))
	switch rt {
	case iwfapi.WorkflowResetTypeBeginning:
	case iwfapi.WorkflowResetTypeHistoryEventId:
		n, err := strconv.ParseInt(arg, 10, 32)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("HISTORY_EVENT_ID needs a positive event id in the reset point")
		}
		req.HistoryEventId = ptr(int32(n))
		point = "history event " + arg
	case iwfapi.WorkflowResetTypeHistoryEventTime:
		if arg == "" {
			return nil, fmt.Errorf("HISTORY_EVENT_TIME needs a time in the reset point")
		}
		req.HistoryEventTime = &arg
		point = "history time " + arg
	case iwfapi.WorkflowResetTypeStateId:
		if arg == "" {
			return nil, fmt.Errorf("STATE_ID needs a state id in the reset point")
		}
		req.StateId = &arg
		point = "state " + arg
	case iwfapi.WorkflowResetTypeStateExecutionId:
		if arg == "" {
			return nil, fmt.Errorf("STATE_EXECUTION_ID needs a state execution id in the reset point")
		}
		req.StateExecutionId = &arg
		point = "state execution " + arg
	default:
		return nil, fmt.Errorf("unknown reset type %q", string(rt))
	}
	if reason := strings.TrimSpace(f.Get("reason")); reason != "" {
		req.Reason = &reason
	}
	if f.Get("skipSignalReapply") != "" {
		req.SkipSignalReapply = ptr(true)
	}
	sum := []string{"Reset workflow " + strconv.Quote(id) + runLabel(runID) + " to " + string(rt)}
	if point != "" {
		sum = append(sum, "Reset point: "+point)
	}
	if deref(req.SkipSignalReapply) {
		sum = append(sum, "Signals after the reset point are not re-applied")
	}
	sum = append(sum, "A new run starts; a running run is ended.")
	return &prepared{title: "reset", summary: sum, do: func(r *http.Request) (string, string, error) {
		resp, err := c.be.ResetWorkflow(r.Context(), req)
		return resp.WorkflowRunId, "Workflow reset: new run " + resp.WorkflowRunId + ".", err
	}}, nil
}

func (c *console) prepareSkipTimer(id, runID string, f url.Values) (*prepared, error) {
	xid := strings.TrimSpace(f.Get("stateExecutionId"))
	if xid == "" {
		return nil, fmt.Errorf("the state execution id is required")
	}
	req := iwfapi.WorkflowSkipTimerRequest{WorkflowId: id, WorkflowRunId: ptr(runID), WorkflowStateExecutionId: xid}
	timer := strings.TrimSpace(f.Get("timerCommandId"))
	if timer != "" {
		req.TimerCommandId = &timer
	} else {
		n, err := strconv.ParseInt(strings.TrimSpace(f.Get("timerIndex")), 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("give the timer's command id or its index (0 for the first timer)")
		}
		req.TimerCommandIndex = ptr(int32(n))
		timer = "#" + strconv.FormatInt(n, 10)
	}
	sum := []string{"Skip timer " + timer + " of state execution " + xid + " of workflow " + strconv.Quote(id) + runLabel(runID), "The timer fires now."}
	return &prepared{title: "skip timer", summary: sum, do: func(r *http.Request) (string, string, error) {
		return runID, "Timer " + timer + " of " + xid + " skipped.", c.be.SkipTimer(r.Context(), req)
	}}, nil
}

func (c *console) preparePause(id, runID string, f url.Values) (*prepared, error) {
	reason := strings.TrimSpace(f.Get("reason"))
	req := engine.PauseRequest{WorkflowID: id, RunID: runID, Reason: reason}
	sum := []string{"Pause workflow " + strconv.Quote(id) + runLabel(runID) + ": its worker is not called until it is resumed",
		"Its timers still fire, its signals are still accepted, its workflow timeout still counts."}
	if reason != "" {
		sum = append(sum, "Reason: "+shorten(reason, 500))
	}
	return &prepared{title: "pause", summary: sum, do: func(r *http.Request) (string, string, error) {
		return runID, "Workflow paused.", c.be.PauseWorkflow(r.Context(), req)
	}}, nil
}

func (c *console) prepareResume(id, runID string) (*prepared, error) {
	req := engine.ResumeRequest{WorkflowID: id, RunID: runID}
	sum := []string{"Resume workflow " + strconv.Quote(id) + runLabel(runID) + ": the worker calls it held are made now"}
	return &prepared{title: "resume", summary: sum, do: func(r *http.Request) (string, string, error) {
		return runID, "Workflow resumed.", c.be.ResumeWorkflow(r.Context(), req)
	}}, nil
}

// prepareResumeScope resumes the workflow type or worker host that holds
// the run of the page (its form names the scope).
func (c *console) prepareResumeScope(_, runID string, f url.Values) (*prepared, error) {
	var scope engine.PauseScope
	label := ""
	switch s := f.Get("scope"); {
	case strings.HasPrefix(s, "type:"):
		scope.WorkflowType = strings.TrimPrefix(s, "type:")
		label = "workflow type " + strconv.Quote(scope.WorkflowType)
	case strings.HasPrefix(s, "host:"):
		scope.WorkerHost = strings.TrimPrefix(s, "host:")
		label = "worker host " + strconv.Quote(scope.WorkerHost)
	default:
		return nil, fmt.Errorf("the scope must be type:NAME or host:HOST:PORT")
	}
	rps := 0.0
	if v := strings.TrimSpace(f.Get("rps")); v != "" {
		var err error
		if rps, err = strconv.ParseFloat(v, 64); err != nil {
			return nil, fmt.Errorf("the rate must be a number of calls per second")
		}
	}
	req := engine.ScopeResumeRequest{Scope: scope, RPS: rps}
	pace := "at the server's default pace"
	if rps != 0 {
		pace = strconv.FormatFloat(rps, 'g', -1, 64) + " a second"
	}
	sum := []string{"Resume the " + label + ": every run it holds, not this one only", "The worker calls it held are made " + pace + ", the oldest first."}
	return &prepared{title: "resume " + label, summary: sum, do: func(r *http.Request) (string, string, error) {
		res, err := c.be.DeletePause(r.Context(), req)
		return runID, fmt.Sprintf("Resumed the %s: %d held calls.", label, res.Resumed), err
	}}, nil
}

func runLabel(runID string) string {
	if runID == "" {
		return " (current run)"
	}
	return " (run " + runID + ")"
}

func shorten(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// readForm reads a POSTed console form, at most maxFormBytes, and checks
// that it comes from a console page (checkSameOrigin). It answers the
// request itself and reports false when either fails.
func (c *console) readForm(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		c.fail(w, r, http.StatusBadRequest, "cannot read the form: "+err.Error())
		return false
	}
	if err := c.checkSameOrigin(r); err != nil {
		c.fail(w, r, http.StatusForbidden, err.Error())
		return false
	}
	return true
}
