package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/audit"
)

// waitBatch waits until a batch is closed and returns it.
func waitBatch(t *testing.T, e *env, id string) engine.BatchInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		d, err := e.eng.DescribeBatch(ctx, engine.BatchDescribeRequest{ID: id})
		if err == nil && (d.Batch.State == engine.BatchCompleted || d.Batch.State == engine.BatchCancelled) {
			return d.Batch
		}
		select {
		case <-ctx.Done():
			t.Fatalf("batch %s never closed (last: %+v, %v)", id, d.Batch, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestBatchPages starts a batch from a search through the confirmation
// page and follows it on its page and the batches page, on both stores; a
// form without its CSRF token starts nothing.
func TestBatchPages(t *testing.T) {
	for _, kind := range stores {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, kind)
			for _, id := range []string{"bulk-1", "bulk-2", "bulk-3", "other-1"} {
				e.start(t, id)
				waitStatus(t, e, id, iwfapi.WorkflowStatusRunning)
			}
			query := "WorkflowId STARTS_WITH 'bulk-'"
			f := newFormClient(t, e.url)
			if body := f.open("/ui/"); strings.Contains(body, `id="batch-form"`) {
				t.Fatal("the list without a query offers a batch")
			}
			body := f.open("/ui/?q=" + url.QueryEscape(query))
			if !strings.Contains(body, `id="batch-form"`) || !strings.Contains(body, "Apply to all 3 matching") || !strings.Contains(body, `id="nav-batches"`) {
				t.Fatalf("list page lacks the batch form:\n%s", body)
			}
			form := func(token string) url.Values {
				return url.Values{"q": {"(" + query + ")"}, "operation": {"TERMINATE"}, "reason": {"bad deploy"}, "rps": {"50"}, "csrf": {token}}
			}
			// Without the CSRF token: refused, nothing started.
			bad := form("")
			bad.Set("confirm", "yes")
			if status, _, _ := f.post("batch-start", bad, nil); status != http.StatusForbidden {
				t.Fatalf("batch start without CSRF token: %d, want 403", status)
			}
			if l, err := e.eng.ListBatches(context.Background(), engine.BatchListRequest{}); err != nil || len(l.Batches) != 0 {
				t.Fatalf("a refused form started a batch: %+v %v", l, err)
			}
			// The confirmation page states the query, the count, the operation and the rate.
			status, body, _ := f.post("batch-start", form(f.token), nil)
			for _, want := range []string{`id="confirm"`, "3 runs match the query now", "TERMINATE", "at most 50 runs per second", "bad deploy", "STARTS_WITH"} {
				if !strings.Contains(body, want) {
					t.Errorf("confirmation page lacks %q", want)
				}
			}
			if status != http.StatusOK || t.Failed() {
				t.Fatalf("confirmation: %d\n%s", status, body)
			}
			ok := form(f.token)
			ok.Set("confirm", "yes")
			status, _, loc := f.post("batch-start", ok, nil)
			if status != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/batches/") {
				t.Fatalf("batch start: %d %q", status, loc)
			}
			id := strings.TrimPrefix(loc, "/ui/batches/")
			if b := waitBatch(t, e, id); b.State != engine.BatchCompleted || b.Done != 3 || b.Failed != 0 || b.Matched != 3 {
				t.Fatalf("batch: %+v", b)
			}
			for _, wf := range []string{"bulk-1", "bulk-2", "bulk-3"} {
				waitStatus(t, e, wf, iwfapi.WorkflowStatusTerminated)
			}
			if d, _ := e.eng.DescribeWorkflow(context.Background(), iwfapi.WorkflowDescribeRequest{WorkflowId: "other-1"}); d.Status != iwfapi.WorkflowStatusRunning {
				t.Fatalf("a run outside the query was changed: %s", d.Status)
			}
			body = f.open(loc)
			for _, want := range []string{`data-state="COMPLETED"`, `data-done="3"`, `data-failed="0"`, `data-matched="3"`, "bad deploy", "STARTS_WITH", "No run failed"} {
				if !strings.Contains(body, want) {
					t.Errorf("batch page lacks %q", want)
				}
			}
			if strings.Contains(body, `id="batch-cancel-form"`) {
				t.Error("a completed batch offers cancel")
			}
			if t.Failed() {
				t.Fatalf("batch page:\n%s", body)
			}
			if body = f.open("/ui/batches"); !strings.Contains(body, `data-batch-id="`+id+`"`) {
				t.Fatalf("batches page lacks %s:\n%s", id, body)
			}
			// The batches page shows the start of a long query; the
			// batch's page shows it whole.
			long, err := e.eng.StartBatch(context.Background(), engine.BatchRequest{
				Query: "WorkflowId = '" + strings.Repeat("z", 10000) + "'", Operation: engine.BatchOpCancel})
			if err != nil {
				t.Fatal(err)
			}
			if body = f.open("/ui/batches"); !strings.Contains(body, `data-batch-id="`+long.ID+`"`) ||
				!strings.Contains(body, strings.Repeat("z", 150)+"…") || strings.Contains(body, strings.Repeat("z", 300)) {
				t.Fatalf("batches page with a long query (%d bytes)", len(body))
			}
			if body = f.open("/ui/batches/" + long.ID); !strings.Contains(body, strings.Repeat("z", 10000)) {
				t.Fatalf("the batch's page lacks its whole query (%d bytes)", len(body))
			}
			// A second batch over the now terminated runs: each fails with its reason.
			signal := url.Values{"q": {query}, "operation": {"SIGNAL"}, "channel": {"approval"}, "value": {"1"}, "confirm": {"yes"}, "csrf": {f.token}}
			if status, _, loc = f.post("batch-start", signal, nil); status != http.StatusSeeOther {
				t.Fatalf("signal batch: %d", status)
			}
			id2 := strings.TrimPrefix(loc, "/ui/batches/")
			if b := waitBatch(t, e, id2); b.Failed != 3 {
				t.Fatalf("signal batch over closed runs: %+v", b)
			}
			if body = f.open(loc); !strings.Contains(body, `data-failed="3"`) || !strings.Contains(body, "bulk-2") || strings.Contains(body, "No run failed") {
				t.Fatalf("batch page with failures:\n%s", body)
			}
			// A bad form is a plain error page, with the engine's message,
			// before the confirmation page.
			for _, c := range []struct {
				form url.Values
				want string
			}{
				{url.Values{"operation": {"SIGNAL"}}, "operation SIGNAL needs signalChannelName"},
				{url.Values{"operation": {"RESET"}, "resetType": {"STATE_ID"}}, "resetType STATE_ID needs reset.stateId"},
				{url.Values{"operation": {"RESET"}, "resetType": {"HISTORY_EVENT_TIME"}, "point": {"soon"}}, "reset.historyEventTime"},
				{url.Values{"operation": {"SKIP_TIMER"}, "stateExecutionId": {"approve-1"}}, "timerCommandId or timerCommandIndex"},
				{url.Values{"operation": {"CANCEL"}, "rps": {"1e-300"}}, "rps must be from 0.01"},
				{url.Values{"operation": {"CANCEL"}, "reason": {strings.Repeat("r", 2000)}}, "reason is 2000 bytes long; the limit is 1024"},
			} {
				c.form.Set("q", query)
				c.form.Set("csrf", f.token)
				if status, body, _ = f.post("batch-start", c.form, nil); status != http.StatusBadRequest || !strings.Contains(body, c.want) || strings.Contains(body, `id="confirm"`) {
					t.Fatalf("%v: %d, want 400 with %q\n%s", c.form, status, c.want, body)
				}
			}
			if status, _ := get(t, f.c, e.url+"/ui/batches/nope"); status != http.StatusNotFound && status != http.StatusBadRequest {
				t.Fatalf("unknown batch: %d", status)
			}
		})
	}
}

// syncBuffer is a bytes.Buffer safe for the audit log's writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestBatchRoles runs the whole server with a reader and an operator
// token: the reader sees no "apply to all" and no batch pages and may not
// start a batch; the operator's console batch start and cancel are audited
// with the actor, who is the batch's creator.
func TestBatchRoles(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs := newRoleServer(t, ctx)
	e, reader, operator := rs.e, rs.reader, rs.operator
	e.start(t, "bulk-1")
	waitStatus(t, e, "bulk-1", iwfapi.WorkflowStatusRunning)
	listURL := "/ui/?q=" + url.QueryEscape("WorkflowId = 'bulk-1'")
	if body := reader.open(listURL); !strings.Contains(body, "bulk-1") || strings.Contains(body, `id="batch-form"`) || strings.Contains(body, "Apply to all") || strings.Contains(body, `id="nav-batches"`) {
		t.Fatalf("the reader's list offers a batch:\n%s", body)
	}
	if status, _ := get(t, reader.c, e.url+"/ui/batches"); status != http.StatusForbidden {
		t.Fatalf("reader's batches page: %d, want 403", status)
	}
	form := func(token string) url.Values {
		return url.Values{"q": {"WorkflowId = 'bulk-1'"}, "operation": {"CANCEL"}, "rps": {"1"}, "confirm": {"yes"}, "csrf": {token}}
	}
	if status, body, _ := reader.post("batch-start", form(reader.token), nil); status != http.StatusForbidden || !strings.Contains(body, "operator") {
		t.Fatalf("reader's batch start: %d\n%s", status, body)
	}
	if body := operator.open(listURL); !strings.Contains(body, `id="batch-form"`) || !strings.Contains(body, `id="nav-batches"`) ||
		!strings.Contains(body, `<option value="RESET">`) || strings.Contains(body, `<option value="SIGNAL">`) {
		t.Fatalf("the operator's list lacks the batch form, or offers a signal batch:\n%s", body)
	}
	// An on-call token cannot send signals of its own, so not by batch
	// either: not from the console, not through the API.
	signal := url.Values{"q": {"WorkflowId = 'bulk-1'"}, "operation": {"SIGNAL"}, "channel": {"approval"}, "confirm": {"yes"}, "csrf": {operator.token}}
	if status, body, _ := operator.post("batch-start", signal, map[string]string{"Origin": e.url}); status != http.StatusForbidden ||
		!strings.Contains(body, "a SIGNAL batch needs the all role") {
		t.Fatalf("operator's console SIGNAL batch: %d\n%s", status, body)
	}
	apiReq, _ := http.NewRequest(http.MethodPost, e.url+"/api/v1/batch/start",
		strings.NewReader(`{"query":"WorkflowId = 'bulk-1'","operation":"SIGNAL","signalChannelName":"approval"}`))
	apiReq.Header.Set("Content-Type", "application/json")
	apiResp, err := bearerTransport(operatorToken).RoundTrip(apiReq)
	if err != nil {
		t.Fatal(err)
	}
	apiBody, _ := io.ReadAll(apiResp.Body)
	apiResp.Body.Close()
	if apiResp.StatusCode != http.StatusForbidden || !strings.Contains(string(apiBody), "a SIGNAL batch needs the all role") {
		t.Fatalf("operator's API SIGNAL batch: %d %s", apiResp.StatusCode, apiBody)
	}
	if l, err := e.eng.ListBatches(ctx, engine.BatchListRequest{}); err != nil || len(l.Batches) != 0 {
		t.Fatalf("a refused SIGNAL batch was stored: %+v %v", l, err)
	}
	status, _, loc := operator.post("batch-start", form(operator.token), map[string]string{"Origin": e.url})
	if status != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/batches/") {
		t.Fatalf("operator's batch start: %d %q", status, loc)
	}
	id := strings.TrimPrefix(loc, "/ui/batches/")
	b := waitBatch(t, e, id)
	if b.CreatedBy != "oncall" || b.Done != 1 {
		t.Fatalf("batch: %+v", b)
	}
	if body := operator.open(loc); !strings.Contains(body, `id="batch-creator">oncall`) {
		t.Fatalf("batch page lacks the creator:\n%s", body)
	}
	// A closed batch cancels to itself; the cancel is audited with its id.
	cancelForm := url.Values{"batchId": {id}, "confirm": {"yes"}, "csrf": {operator.token}}
	if status, _, _ := operator.post("batch-cancel", cancelForm, map[string]string{"Origin": e.url}); status != http.StatusSeeOther {
		t.Fatalf("batch cancel: %d", status)
	}
	var ops []string
	for _, line := range strings.Split(strings.TrimSpace(rs.audit.String()), "\n") {
		var en audit.Entry
		if err := json.Unmarshal([]byte(line), &en); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		ops = append(ops, en.Operation+" "+en.Actor+" "+en.Source+" "+en.Outcome)
		if en.Outcome == "ok" && en.BatchID != id {
			t.Errorf("%s audited without the batch's id: %+v", en.Operation, en)
		}
	}
	want := []string{"batch/start dash console forbidden", "batch/start oncall console forbidden", "batch/start oncall api forbidden",
		"batch/start oncall console ok", "batch/cancel oncall console ok"}
	if strings.Join(ops, "|") != strings.Join(want, "|") {
		t.Fatalf("audit: %q, want %q", ops, want)
	}
}

// bearerTransport adds a bearer token to each request.
type bearerTransport string

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// waitCommands waits until the run of id waits for the commands of its
// "approve" state (the signal or the one-hour timer), and returns it.
func waitCommands(t *testing.T, e *env, id string) iwfapi.WorkflowDescribeResponse {
	t.Helper()
	return waitRun(t, e, id, "waited for its commands", func(d iwfapi.WorkflowDescribeResponse) bool {
		return d.Status == iwfapi.WorkflowStatusRunning && len(d.PendingStates) == 1 &&
			d.PendingStates[0].StateId == "approve" && d.PendingStates[0].Phase == iwfapi.PendingStateExecutionPhaseWAITINGCOMMANDS
	})
}

// TestBatchFormOperations starts, through the console's form and its
// confirmation page, a batch of each operation TestBatchPages does not
// (cancel, fail, skip timer, reset), on both stores: the confirmation page
// states the operation, and each matching run, and no other, gets the
// operation's effect.
func TestBatchFormOperations(t *testing.T) {
	cases := []struct {
		op      string
		fields  url.Values
		confirm string // a line of the confirmation page
		check   func(t *testing.T, e *env, id, oldRun string)
	}{
		{op: "CANCEL", confirm: "stop each run with CANCEL",
			check: func(t *testing.T, e *env, id, _ string) { waitStatus(t, e, id, iwfapi.WorkflowStatusCanceled) }},
		{op: "FAIL", confirm: "stop each run with FAIL",
			check: func(t *testing.T, e *env, id, _ string) { waitStatus(t, e, id, iwfapi.WorkflowStatusFailed) }},
		{op: "SKIP_TIMER", fields: url.Values{"stateExecutionId": {"approve-1"}, "timerCommandId": {"expiry"}},
			confirm: "skip timer expiry of state execution approve-1 in each run",
			// The timer fires at once: "approve" completes the run without a signal.
			check: func(t *testing.T, e *env, id, _ string) { waitStatus(t, e, id, iwfapi.WorkflowStatusCompleted) }},
		{op: "RESET", fields: url.Values{"resetType": {"BEGINNING"}},
			confirm: "reset each run to BEGINNING (a new run starts; a running run is ended)",
			// A new run of the same workflow starts from "prepare" and waits again.
			check: func(t *testing.T, e *env, id, oldRun string) {
				if d := waitCommands(t, e, id); d.WorkflowRunId == oldRun {
					t.Fatalf("%s: reset left the current run %s", id, oldRun)
				}
			}},
	}
	for _, kind := range stores {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, kind)
			f := newFormClient(t, e.url)
			for _, c := range cases {
				prefix := "op-" + strings.ToLower(c.op) + "-"
				ids := []string{prefix + "1", prefix + "2"}
				runs := map[string]string{}
				for _, id := range ids {
					runs[id] = e.start(t, id)
					waitCommands(t, e, id)
				}
				bystander := "keep-" + strings.ToLower(c.op)
				e.start(t, bystander)
				waitCommands(t, e, bystander)

				query := "WorkflowId STARTS_WITH '" + prefix + "'"
				if body := f.open("/ui/?q=" + url.QueryEscape(query)); !strings.Contains(body, "Apply to all 2 matching") {
					t.Fatalf("%s: the list offers no batch over the 2 matching runs:\n%s", c.op, body)
				}
				form := url.Values{"q": {query}, "operation": {c.op}, "reason": {"form test"}, "csrf": {f.token}}
				for k, v := range c.fields {
					form[k] = v
				}
				status, body, _ := f.post("batch-start", form, nil)
				if status != http.StatusOK || !strings.Contains(body, "2 runs match the query now") || !strings.Contains(body, c.confirm) {
					t.Fatalf("%s: confirmation page (%d) lacks %q:\n%s", c.op, status, c.confirm, body)
				}
				form.Set("confirm", "yes")
				status, _, loc := f.post("batch-start", form, nil)
				if status != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/batches/") {
					t.Fatalf("%s: batch start: %d %q", c.op, status, loc)
				}
				b := waitBatch(t, e, strings.TrimPrefix(loc, "/ui/batches/"))
				if b.State != engine.BatchCompleted || b.Matched != 2 || b.Done != 2 || b.Failed != 0 || string(b.Operation) != c.op {
					t.Fatalf("%s: batch %+v", c.op, b)
				}
				for _, id := range ids {
					c.check(t, e, id, runs[id])
				}
				if d := waitCommands(t, e, bystander); d.Status != iwfapi.WorkflowStatusRunning {
					t.Fatalf("%s: a run outside the query was changed: %+v", c.op, d)
				}
			}
		})
	}
}
