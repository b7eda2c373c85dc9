// Package workerclient calls the user's worker over HTTP: the waitUntil,
// execute and rpc endpoints of iWF's worker API. It implements
// engine.WorkerClient and owns nothing else (no retries: the engine decides
// about attempts).
package workerclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/workerpolicy"
)

// Worker API paths, relative to the run's iwfWorkerUrl.
const (
	WaitUntilPath = "/api/v1/workflowState/start"
	ExecutePath   = "/api/v1/workflowState/decide"
	RPCPath       = "/api/v1/workflowWorker/rpc"
)

// Headers a worker may set on a failed answer (extensions of this server;
// official iWF SDKs do not send them).
const (
	// NonRetryableHeader, set to "true", ends the state's retries at once.
	NonRetryableHeader = "Iwf-Non-Retryable"
	// RetryAfterHeader (seconds or an HTTP date) delays the next attempt
	// at least that long.
	RetryAfterHeader = "Retry-After"
)

// nonRetryable reports whether a failed answer says retrying cannot help.
func nonRetryable(h http.Header) bool {
	return strings.EqualFold(strings.TrimSpace(h.Get(NonRetryableHeader)), "true")
}

// retryAfter reads a Retry-After header: delay seconds or an HTTP date.
// Missing, malformed or past values give 0; larger ones are capped at
// engine.MaxRetryAfter.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get(RetryAfterHeader))
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		if secs >= int64(engine.MaxRetryAfter/time.Second) {
			return engine.MaxRetryAfter
		}
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return max(0, min(d, engine.MaxRetryAfter))
}

// maxResponseBytes bounds a worker answer.
const maxResponseBytes = 16 << 20

// Client is an HTTP engine.WorkerClient.
type Client struct {
	http    *http.Client
	headers http.Header
	policy  *workerpolicy.Policy
}

// Options configure NewWithOptions.
type Options struct {
	// Headers are added to every call.
	Headers http.Header
	// Policy decides which worker URLs may be called; a call to any other
	// URL fails without a request, and a connection to a denied address is
	// refused after name resolution. Nil allows every well-formed URL
	// except the addresses workerpolicy always denies.
	Policy *workerpolicy.Policy
}

// New returns a client that adds headers to every call. Per-call deadlines
// come from the caller's context.
func New(headers http.Header) *Client { return NewWithOptions(Options{Headers: headers}) }

// NewWithOptions returns a client configured by opts.
func NewWithOptions(opts Options) *Client {
	c := &Client{headers: opts.Headers.Clone(), policy: opts.Policy}
	transport := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			d := net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: c.policy.Control(ctx)}
			return d.DialContext(ctx, network, addr)
		},
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 512,
		IdleConnTimeout:     90 * time.Second,
	}
	c.http = &http.Client{Transport: transport, CheckRedirect: noRedirects}
	return c
}

// noRedirects stops the client at a redirect: the server calls only the
// URL a workflow names, never one its worker (or whoever answers in its
// place) points to, and so never sends the operator's headers elsewhere.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

var _ engine.WorkerClient = (*Client)(nil)

// WaitUntil calls the worker's waitUntil endpoint.
func (c *Client) WaitUntil(ctx context.Context, baseURL string, req *iwfapi.WorkflowStateStartRequest) (*iwfapi.WorkflowStateStartResponse, error) {
	var resp iwfapi.WorkflowStateStartResponse
	return &resp, c.call(ctx, baseURL+WaitUntilPath, req, &resp)
}

// Execute calls the worker's execute endpoint.
func (c *Client) Execute(ctx context.Context, baseURL string, req *iwfapi.WorkflowStateDecideRequest) (*iwfapi.WorkflowStateDecideResponse, error) {
	var resp iwfapi.WorkflowStateDecideResponse
	return &resp, c.call(ctx, baseURL+ExecutePath, req, &resp)
}

// RPC calls the worker's rpc endpoint.
func (c *Client) RPC(ctx context.Context, baseURL string, req *iwfapi.WorkflowWorkerRpcRequest) (*iwfapi.WorkflowWorkerRpcResponse, error) {
	var resp iwfapi.WorkflowWorkerRpcResponse
	return &resp, c.call(ctx, baseURL+RPCPath, req, &resp)
}

func (c *Client) call(ctx context.Context, url string, in, out any) error {
	ctx, err := c.policy.ForCall(ctx, url)
	if err != nil {
		return &engine.WorkerCallError{Err: err}
	}
	body, err := json.Marshal(in)
	if err != nil {
		return &engine.WorkerCallError{Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return &engine.WorkerCallError{Err: err}
	}
	for k, vs := range c.headers {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if trace.SpanContextFromContext(ctx).IsValid() {
		// Tracing is on: the worker continues the call's trace.
		propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return &engine.WorkerCallError{Err: err, Timeout: errors.Is(err, context.DeadlineExceeded)}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return &engine.WorkerCallError{Status: resp.StatusCode, Err: err, Timeout: errors.Is(err, context.DeadlineExceeded)}
	}
	if len(raw) > maxResponseBytes {
		return &engine.WorkerCallError{Status: resp.StatusCode, Body: raw[:1024], Err: fmt.Errorf("worker response exceeds %d bytes", maxResponseBytes)}
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		// The body of a redirect may be a page the redirect points into:
		// it is not kept (it would be stored in the history).
		return &engine.WorkerCallError{Status: resp.StatusCode, Err: fmt.Errorf("%s: worker calls do not follow redirects", resp.Status)}
	}
	if resp.StatusCode != http.StatusOK {
		return &engine.WorkerCallError{Status: resp.StatusCode, Body: raw, Err: fmt.Errorf("%s", resp.Status),
			NonRetryable: nonRetryable(resp.Header), RetryAfter: retryAfter(resp.Header, time.Now())}
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return &engine.WorkerCallError{Status: resp.StatusCode, Body: raw, Err: fmt.Errorf("decoding worker response: %w", err)}
	}
	return nil
}
