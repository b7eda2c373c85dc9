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

// A failed answer's Iwf-Non-Retryable and Retry-After headers reach the
// engine; Retry-After is read as seconds or an HTTP date, and capped.
func TestFailedAnswerRetryHeaders(t *testing.T) {
	var hdr http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, vs := range hdr {
			w.Header()[k] = vs
		}
		w.WriteHeader(503)
	}))
	defer srv.Close()
	c := workerclient.New(nil)
	future := time.Now().Add(90 * time.Minute).UTC().Format(http.TimeFormat)
	for _, tc := range []struct {
		name         string
		header       http.Header
		nonRetryable bool
		min, max     time.Duration
	}{
		{"none", nil, false, 0, 0},
		{"non-retryable", http.Header{"Iwf-Non-Retryable": {"TRUE"}}, true, 0, 0},
		{"non-retryable false", http.Header{"Iwf-Non-Retryable": {"false"}}, false, 0, 0},
		{"seconds", http.Header{"Retry-After": {"120"}}, false, 2 * time.Minute, 2 * time.Minute},
		{"http date", http.Header{"Retry-After": {future}}, false, 88 * time.Minute, 90 * time.Minute},
		{"past date", http.Header{"Retry-After": {"Mon, 02 Jan 2006 15:04:05 GMT"}}, false, 0, 0},
		{"negative", http.Header{"Retry-After": {"-5"}}, false, 0, 0},
		{"garbage", http.Header{"Retry-After": {"soon"}}, false, 0, 0},
		{"huge", http.Header{"Retry-After": {"99999999999999999"}}, false, engine.MaxRetryAfter, engine.MaxRetryAfter},
		{"beyond the cap", http.Header{"Retry-After": {"172800"}}, false, engine.MaxRetryAfter, engine.MaxRetryAfter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr = tc.header
			_, err := c.WaitUntil(context.Background(), srv.URL, &iwfapi.WorkflowStateStartRequest{})
			var ce *engine.WorkerCallError
			if !errors.As(err, &ce) || ce.Status != 503 {
				t.Fatalf("error %v", err)
			}
			if ce.NonRetryable != tc.nonRetryable || ce.RetryAfter < tc.min || ce.RetryAfter > tc.max {
				t.Fatalf("nonRetryable=%v retryAfter=%s, want %v and [%s, %s]", ce.NonRetryable, ce.RetryAfter, tc.nonRetryable, tc.min, tc.max)
			}
		})
	}
}
