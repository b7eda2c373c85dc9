package workerclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/workerclient"
)

func TestCallsCarryHeadersAndDecodeAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != workerclient.ExecutePath || r.Header.Get("X-Test") != "yes" || r.Header.Get("Content-Type") != "application/json" {
			w.WriteHeader(400)
			return
		}
		w.Write([]byte(`{"stateDecision":{"nextStates":[{"stateId":"S2"}]}}`))
	}))
	defer srv.Close()
	c := workerclient.New(http.Header{"X-Test": {"yes"}})
	resp, err := c.Execute(context.Background(), srv.URL, &iwfapi.WorkflowStateDecideRequest{WorkflowStateId: "S1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := (*resp.StateDecision.NextStates)[0].StateId; got != "S2" {
		t.Fatalf("next state %q", got)
	}
}

func TestFailuresCarryStatusBodyAndTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == workerclient.RPCPath {
			time.Sleep(200 * time.Millisecond)
		}
		w.WriteHeader(502)
		w.Write([]byte(`{"detail":"boom","errorType":"test-type"}`))
	}))
	defer srv.Close()
	c := workerclient.New(nil)
	_, err := c.WaitUntil(context.Background(), srv.URL, &iwfapi.WorkflowStateStartRequest{})
	var ce *engine.WorkerCallError
	if !errors.As(err, &ce) || ce.Status != 502 || !strings.Contains(string(ce.Body), "boom") || ce.Timeout {
		t.Fatalf("error %#v", err)
	}
	if !strings.HasPrefix(err.Error(), `statusCode: 502, responseBody: {"detail":"boom","errorType":"test-type"}`) {
		t.Fatalf("message %q", err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = c.RPC(ctx, srv.URL, &iwfapi.WorkflowWorkerRpcRequest{})
	if !errors.As(err, &ce) || !ce.Timeout || !strings.Contains(err.Error(), "StartToClose") {
		t.Fatalf("timeout error %v", err)
	}
}

// TestRedirectsAreNotFollowed: a worker answering a redirect fails the
// call; the redirect's target never receives a request (nor the operator's
// headers), and the redirect's body is not kept.
func TestRedirectsAreNotFollowed(t *testing.T) {
	var targetCalls int
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		targetCalls++
		w.Write([]byte(`{"stateDecision":{"nextStates":[{"stateId":"S2"}]}}`))
	}))
	defer target.Close()
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", target.URL+"/internal/page")
		w.WriteHeader(http.StatusFound)
		w.Write([]byte("secret internal page"))
	}))
	defer worker.Close()
	c := workerclient.New(http.Header{"Authorization": {"Bearer s3cr3t"}})
	_, err := c.Execute(context.Background(), worker.URL, &iwfapi.WorkflowStateDecideRequest{WorkflowStateId: "S1"})
	var ce *engine.WorkerCallError
	if !errors.As(err, &ce) || ce.Status != http.StatusFound || len(ce.Body) != 0 || !strings.Contains(err.Error(), "do not follow redirects") {
		t.Fatalf("got %v (%+v), want a failed call with status 302, no body, naming the redirect", err, ce)
	}
	if strings.Contains(err.Error(), "secret internal page") {
		t.Fatalf("the redirect's body leaked into the error: %v", err)
	}
	if targetCalls != 0 {
		t.Fatalf("the redirect target was called %d times", targetCalls)
	}
}
