package console

// The limits page and the states page. The limits page lists the
// concurrency and rate limits on worker calls in force and sets, changes
// and removes them (POST actions/limit-set, actions/limit-delete, behind
// the confirmation page): the engine calls the API makes
// (/api/v1/limit/*), with the operator role, also to read them. The
// states page shows where the open runs of a workflow type stand, state by
// state (as POST /api/v1/workflow/stats), for readers.

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/audit"
	"github.com/iwf-server/iwf-server/internal/auth"
)

// limitKinds are the kinds of limits the limits page offers, with their
// labels and the unit of their values.
var limitKinds = []struct{ Value, Label, Unit string }{
	{string(engine.LimitWorkerConcurrency), "worker host: calls in flight", "calls in flight"},
	{string(engine.LimitWorkerRate), "worker host: calls per second", "calls per second"},
	{string(engine.LimitTypeConcurrency), "workflow type: state executions in waitUntil/execute", "state executions"},
}

// limitKindLabel is the label of a kind of limit.
func limitKindLabel(k engine.LimitKind) string {
	for _, x := range limitKinds {
		if x.Value == string(k) {
			return x.Label
		}
	}
	return string(k)
}

// limitsPageData is the data of the limits page.
type limitsPageData struct {
	Limits []limitRow
	Kinds  []struct{ Value, Label, Unit string }
	Max    int
}

// limitRow is one limit of the limits page.
type limitRow struct {
	L         engine.Limit
	KindLabel string
	Value     string
	Paused    bool
}

// refuseLimits answers a limits request whose principal lacks the role
// (the server refuses it before the console; this holds the console
// embedded behind another guard to the same rule) and reports whether it
// did.
func (c *console) refuseLimits(w http.ResponseWriter, r *http.Request, what string) bool {
	if allowedActions(r)["limits"] {
		return false
	}
	p, _ := auth.PrincipalOf(r.Context())
	c.fail(w, r, http.StatusForbidden, fmt.Sprintf("forbidden: %s needs the %s role (or all); you have the %s role",
		what, auth.ConsoleNeed(http.MethodGet, "limits"), p.Role))
	return true
}

// limitsPage serves GET <prefix>limits: the limits in force, and the forms
// that set and remove them.
func (c *console) limitsPage(w http.ResponseWriter, r *http.Request) {
	if c.refuseLimits(w, r, "the limits page") {
		return
	}
	ls, err := c.be.ListLimits(r.Context())
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	d := limitsPageData{Kinds: limitKinds, Max: engine.MaxLimitValue}
	for _, l := range ls {
		d.Limits = append(d.Limits, limitRow{L: l, KindLabel: limitKindLabel(l.Kind), Value: l.String(), Paused: l.Value == 0})
	}
	c.render(w, r, http.StatusOK, "limits", "Limits", false, d)
}

// limitSet serves POST <prefix>actions/limit-set: confirmation, then the
// engine's SetLimit (which validates the limit), then the limits page.
func (c *console) limitSet(w http.ResponseWriter, r *http.Request) {
	if c.refuseLimits(w, r, "setting a limit") || !c.readForm(w, r) {
		return
	}
	f := r.PostForm
	ch := engine.LimitChange{Kind: engine.LimitKind(f.Get("kind")), Target: strings.TrimSpace(f.Get("target"))}
	v, err := strconv.ParseFloat(strings.TrimSpace(f.Get("value")), 64)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, "the limit's value must be a number (0 pauses the calls)")
		return
	}
	ch.Value = v
	back := c.opts.Prefix + "limits"
	if f.Get("confirm") != "yes" {
		what := fmt.Sprintf("Set the limit %s of %s to %s", limitKindLabel(ch.Kind), ch.Target, engine.Limit{Value: v})
		sum := []string{what, "Every node applies it within seconds; calls in flight finish."}
		if v == 0 {
			sum = append(sum, "0 pauses the calls it applies to: they wait until the limit is raised or removed.")
		}
		c.confirm(w, r, "set limit", back, sum, f)
		return
	}
	l, err := c.be.SetLimit(r.Context(), ch)
	if err != nil {
		status, text := explain(err)
		if status == http.StatusInternalServerError {
			c.opts.Logger.Error().Err(err).Msg("console: limit set failed")
		}
		c.fail(w, r, status, "setting the limit failed: "+text)
		return
	}
	w.Header().Set(audit.LimitHeader, l.Key()+"="+strconv.FormatFloat(l.Value, 'g', -1, 64))
	c.setFlash(w, r, true, fmt.Sprintf("Limit set: %s of %s is %s.", limitKindLabel(l.Kind), l.Target, l))
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// limitDelete serves POST <prefix>actions/limit-delete: confirmation,
// then the engine's DeleteLimit, then the limits page.
func (c *console) limitDelete(w http.ResponseWriter, r *http.Request) {
	if c.refuseLimits(w, r, "removing a limit") || !c.readForm(w, r) {
		return
	}
	f := r.PostForm
	kind, target := engine.LimitKind(f.Get("kind")), strings.TrimSpace(f.Get("target"))
	back := c.opts.Prefix + "limits"
	if f.Get("confirm") != "yes" {
		c.confirm(w, r, "remove limit", back, []string{fmt.Sprintf("Remove the limit %s of %s", limitKindLabel(kind), target),
			"The calls waiting for it go ahead, on every node within seconds."}, f)
		return
	}
	l, err := c.be.DeleteLimit(r.Context(), kind, target)
	if err != nil {
		status, text := explain(err)
		if status == http.StatusInternalServerError {
			c.opts.Logger.Error().Err(err).Msg("console: limit delete failed")
		}
		c.fail(w, r, status, "removing the limit failed: "+text)
		return
	}
	w.Header().Set(audit.LimitHeader, l.Key()+" removed")
	c.setFlash(w, r, true, fmt.Sprintf("Limit removed: %s of %s (was %s).", limitKindLabel(l.Kind), l.Target, l))
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// statsPageData is the data of the states page.
type statsPageData struct {
	Type   string
	Asked  bool
	Answer engine.StateStatsAnswer
	// ListURL lists the open runs of the type.
	ListURL string
}

// statsPage serves GET <prefix>stats?type=T: where the open runs of a
// workflow type stand, state by state.
func (c *console) statsPage(w http.ResponseWriter, r *http.Request) {
	d := statsPageData{Type: strings.TrimSpace(r.URL.Query().Get("type"))}
	if d.Type != "" {
		a, err := c.be.StateStats(r.Context(), engine.StateStatsRequest{WorkflowType: d.Type})
		if err != nil {
			c.failErr(w, r, err)
			return
		}
		d.Asked, d.Answer = true, a
		q := "WorkflowType = '" + strings.ReplaceAll(d.Type, "'", "''") + "' AND WorkflowStatus = 'RUNNING'"
		d.ListURL = c.opts.Prefix + "?" + url.Values{"q": {q}}.Encode()
	}
	c.render(w, r, http.StatusOK, "stats", "States in use", d.Asked, d)
}
