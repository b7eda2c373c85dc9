package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/audit"
)

// TestPauseActions: the run page of a paused run shows a badge, who paused
// it and why, and a Resume button to the operator only; Pause, Resume and
// the resume of the workflow type that holds a run are actions of the
// operator role, refused to a reader and audited.
func TestPauseActions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs := newRoleServer(t, ctx)
	e, reader, operator := rs.e, rs.reader, rs.operator
	e.start(t, "held-1")
	waitCommands(t, e, "held-1")
	page := "/ui/workflows/held-1"
	origin := map[string]string{"Origin": e.url}
	if body := reader.open(page); strings.Contains(body, `id="pause-form"`) || strings.Contains(body, `id="paused-badge"`) {
		t.Fatalf("the reader's page of a running run offers a pause, or shows a badge:\n%s", body)
	}
	if body := operator.open(page); !strings.Contains(body, `id="pause-form"`) || strings.Contains(body, `id="resume-form"`) {
		t.Fatalf("the operator's page of a running run lacks the pause form:\n%s", body)
	}
	form := func(f *formClient, extra url.Values) url.Values {
		v := url.Values{"workflowId": {"held-1"}, "confirm": {"yes"}, "csrf": {f.token}}
		for k, vs := range extra {
			v[k] = vs
		}
		return v
	}
	if status, body, _ := reader.post("pause", form(reader, nil), origin); status != http.StatusForbidden || !strings.Contains(body, "operator") {
		t.Fatalf("reader's pause: %d\n%s", status, body)
	}
	if status, _, _ := operator.post("pause", form(operator, url.Values{"reason": {"worker down"}}), origin); status != http.StatusSeeOther {
		t.Fatalf("operator's pause: %d", status)
	}
	body := reader.open(page)
	if !strings.Contains(body, `id="paused-badge"`) || !strings.Contains(body, "this run, by oncall") || !strings.Contains(body, ": worker down") ||
		strings.Contains(body, `id="resume-form"`) {
		t.Fatalf("the reader's page of a paused run lacks the badge or the pause, or offers a resume:\n%s", body)
	}
	if body := operator.open(page); !strings.Contains(body, `id="resume-form"`) || strings.Contains(body, `id="pause-form"`) {
		t.Fatalf("the operator's page of a paused run lacks the resume form:\n%s", body)
	}
	if status, _, _ := reader.post("resume", form(reader, nil), origin); status != http.StatusForbidden {
		t.Fatalf("reader's resume: %d", status)
	}
	if status, _, _ := operator.post("resume", form(operator, nil), origin); status != http.StatusSeeOther {
		t.Fatalf("operator's resume: %d", status)
	}
	if body := operator.open(page); strings.Contains(body, `id="paused-badge"`) {
		t.Fatalf("the page of a resumed run shows the badge:\n%s", body)
	}

	// A paused workflow type: the page names it and offers to resume it.
	if _, err := e.eng.SetPause(ctx, engine.ScopePauseRequest{Scope: engine.PauseScope{WorkflowType: demoType}, Reason: "bad deploy"}); err != nil {
		t.Fatal(err)
	}
	if body := operator.open(page); !strings.Contains(body, "workflow type "+demoType) || !strings.Contains(body, `id="resume-scope-form"`) ||
		strings.Contains(body, `id="resume-form"`) {
		t.Fatalf("the page of a run of a paused type:\n%s", body)
	}
	// The states page: a run that starts now has its first call held
	// (PAUSED); the one waiting for its signal still waits.
	e.start(t, "held-2")
	waitRun(t, e, "held-2", "had its call held", func(d iwfapi.WorkflowDescribeResponse) bool {
		return len(d.PendingStates) == 1 && d.PendingStates[0].HeldByPause != nil && *d.PendingStates[0].HeldByPause
	})
	body = reader.open("/ui/stats?type=" + demoType)
	for _, want := range []string{`data-state="approve" data-phase="WAITING_COMMANDS"`, `data-state="prepare" data-phase="PAUSED"`,
		`<td class="held">PAUSED</td><td data-count="1">`, "held-2"} {
		if !strings.Contains(body, want) {
			t.Fatalf("the states page lacks %q:\n%s", want, body)
		}
	}
	if status, _, _ := operator.post("resume-scope", form(operator, url.Values{"scope": {"type:" + demoType}, "rps": {"10"}}), origin); status != http.StatusSeeOther {
		t.Fatalf("operator's resume of the type: %d", status)
	}
	if l, err := e.eng.ListPauses(ctx); err != nil || len(l) != 0 {
		t.Fatalf("pauses after the console's resume: %+v %v", l, err)
	}
	var ops []string
	for _, line := range strings.Split(strings.TrimSpace(rs.audit.String()), "\n") {
		var en audit.Entry
		if err := json.Unmarshal([]byte(line), &en); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		ops = append(ops, en.Operation+" "+en.Actor+" "+en.Outcome+" "+en.WorkflowID+" "+en.Scope)
	}
	want := []string{"pause dash forbidden held-1 ", "pause oncall ok held-1 ", "resume dash forbidden held-1 ", "resume oncall ok held-1 ",
		"pause/delete oncall ok held-1 type:" + demoType}
	if strings.Join(ops, "|") != strings.Join(want, "|") {
		t.Fatalf("audit: %q, want %q", ops, want)
	}
}
