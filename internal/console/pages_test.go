package console_test

import (
	"context"
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
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		d, err := e.eng.DescribeWorkflow(ctx, iwfapi.WorkflowDescribeRequest{WorkflowId: id})
		if err == nil && d.Status == want && (want != iwfapi.WorkflowStatusRunning || len(d.PendingStates) > 0 && d.PendingStates[0].StateId == "approve") {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never reached %s (last: %+v, %v)", id, want, d, err)
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
