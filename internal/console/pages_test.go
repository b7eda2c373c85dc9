package console_test

import (
	"html"
	"regexp"

	"context"
	"github.com/iwf-server/iwf-server/internal/console"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// get fetches a page and returns its status and body.
func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitStatus waits until a run has the status.
func waitStatus(t *testing.T, e *env, id string, want iwfapi.WorkflowStatus) {
	t.Helper()
	waitRun(t, e, id, "reached "+string(want), func(d iwfapi.WorkflowDescribeResponse) bool {
		return d.Status == want && (want != iwfapi.WorkflowStatusRunning || len(d.PendingStates) > 0 && d.PendingStates[0].StateId == "approve")
	})
}

// waitRun describes the current run of id until ok accepts it (for a
// minute at most) and returns it; what names the wait in the failure.
func waitRun(t *testing.T, e *env, id, what string, ok func(iwfapi.WorkflowDescribeResponse) bool) iwfapi.WorkflowDescribeResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		d, err := e.eng.DescribeWorkflow(ctx, iwfapi.WorkflowDescribeRequest{WorkflowId: id})
		if err == nil && ok(d) {
			return d
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never %s (last: %+v, %v)", id, what, d, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestPagesRender(t *testing.T) {
	e := newEnv(t, "sqlite")
	e.start(t, "order-1")
	waitStatus(t, e, "order-1", iwfapi.WorkflowStatusRunning)
	c := &http.Client{}
	status, body := get(t, c, e.url+"/ui/")
	if status != 200 || !strings.Contains(body, "order-1") || !strings.Contains(body, demoType) {
		t.Fatalf("list: %d\n%s", status, body)
	}
	status, body = get(t, c, e.url+"/ui/?status=Completed")
	if status != 200 || strings.Contains(body, "order-1") {
		t.Fatalf("list of completed runs: %d\n%s", status, body)
	}
	status, body = get(t, c, e.url+"/ui/?q="+url.QueryEscape("WorkflowId = "))
	if status != 400 || !strings.Contains(body, "invalid search query") {
		t.Fatalf("bad query: %d\n%s", status, body)
	}
	status, body = get(t, c, e.url+"/ui/workflows/order-1")
	for _, want := range []string{"WAITING_COMMANDS", "approval", "customer", "CustomKeywordField", "prepare-1", "approve-1", "&#34;order&#34;: 17"} {
		if !strings.Contains(body, want) {
			t.Errorf("run page lacks %q", want)
		}
	}
	if status != 200 || t.Failed() {
		t.Fatalf("run: %d\n%s", status, body)
	}
	status, _ = get(t, c, e.url+"/ui/workflows/nope")
	if status != 404 {
		t.Fatalf("unknown workflow: %d", status)
	}
}

// TestListPaging pages through runs with the search API's token, newest
// first, and composes the status and type filters into the query.
func TestListPaging(t *testing.T) {
	e := newEnvWith(t, "sqlite", func(o *console.Options) { o.PageSize = 2 })
	for _, id := range []string{"p-1", "p-2", "p-3"} {
		e.start(t, id)
	}
	c := &http.Client{}
	_, body := get(t, c, e.url+"/ui/?type="+demoType+"&status=Running")
	if !strings.Contains(body, "(ExecutionStatus=&#39;Running&#39; AND WorkflowType=&#39;ApprovalWorkflow&#39; ORDER BY StartTime DESC") &&
		!strings.Contains(body, "ExecutionStatus=&#39;Running&#39; AND WorkflowType=&#39;ApprovalWorkflow&#39; ORDER BY StartTime DESC") {
		t.Fatalf("composed query missing:\n%s", body)
	}
	// Runs started in the same millisecond tie on StartTime, so the test
	// checks that the two pages hold the three runs once each.
	rows := regexp.MustCompile(`data-workflow-id="(p-\d)"`)
	seen := map[string]int{}
	first := rows.FindAllStringSubmatch(body, -1)
	if len(first) != 2 {
		t.Fatalf("first page has %d runs, want 2:\n%s", len(first), body)
	}
	for _, r := range first {
		seen[r[1]]++
	}
	m := regexp.MustCompile(`id="next" href="([^"]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no next page link:\n%s", body)
	}
	_, body = get(t, c, e.url+html.UnescapeString(m[1]))
	for _, r := range rows.FindAllStringSubmatch(body, -1) {
		seen[r[1]]++
	}
	if len(seen) != 3 || seen["p-1"] != 1 || seen["p-2"] != 1 || seen["p-3"] != 1 || !strings.Contains(body, "page 2") {
		t.Fatalf("pages hold %v:\n%s", seen, body)
	}
	// The free query and its own ORDER BY.
	_, body = get(t, c, e.url+"/ui/?q="+url.QueryEscape("WorkflowId STARTS_WITH 'p-' ORDER BY StartTime ASC"))
	if !strings.Contains(body, "(WorkflowId STARTS_WITH &#39;p-&#39;) ORDER BY StartTime ASC</code>") || len(rows.FindAllStringSubmatch(body, -1)) != 2 {
		t.Fatalf("own ORDER BY:\n%s", body)
	}
}

// TestRunPageLimits shows a run on both stores with a page size of one: one
// entry of each list with an "older" link, and a history longer than
// MaxHistoryEvents said to be cut.
func TestRunPageLimits(t *testing.T) {
	for _, kind := range stores {
		t.Run(kind, func(t *testing.T) {
			e := newEnvWith(t, kind, func(o *console.Options) { o.RunPageSize = 1 })
			e.start(t, "lim-1")
			waitStatus(t, e, "lim-1", iwfapi.WorkflowStatusRunning)
			for _, ch := range []string{"a", "b", "b"} {
				if err := e.eng.SignalWorkflow(context.Background(), iwfapi.WorkflowSignalRequest{WorkflowId: "lim-1", SignalChannelName: ch}); err != nil {
					t.Fatal(err)
				}
			}
			c := &http.Client{}
			_, body := get(t, c, e.url+"/ui/workflows/lim-1")
			for _, want := range []string{
				"showing 1 of 2 state executions (#2–#2), newest first · 1 older",
				"showing 1 of 3 run events, newest first · 2 older",
				`id="older-executions"`, `id="older-events"`, `id="older-history"`,
				"3 message(s) not yet consumed; the first 1 are shown.",
				"and 1 more channel(s)",
			} {
				if !strings.Contains(body, want) {
					t.Errorf("the run page lacks %q", want)
				}
			}
			if t.Failed() {
				t.Fatal(body)
			}
			status, body := get(t, c, e.url+"/ui/workflows/lim-1?xb=x")
			if status != 400 || !strings.Contains(body, "invalid xb") {
				t.Fatalf("bad cursor: %d\n%s", status, body)
			}

			short := newEnvWith(t, kind, func(o *console.Options) { o.MaxHistoryEvents = 3 })
			short.start(t, "lim-2")
			waitStatus(t, short, "lim-2", iwfapi.WorkflowStatusRunning)
			_, body = get(t, c, short.url+"/ui/workflows/lim-2")
			if !strings.Contains(body, "Raw history (3 events or more)") || !strings.Contains(body, "The history has more than 3 events") {
				t.Fatalf("a history longer than MaxHistoryEvents:\n%s", body)
			}
		})
	}
}
