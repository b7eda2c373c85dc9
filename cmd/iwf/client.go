package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// maxAnswerBytes bounds what the CLI reads of one answer.
const maxAnswerBytes = 64 << 20

// client calls the server's REST API. Request and answer bodies are the
// generated wire types of api/iwfapi; the transport is plain net/http, so
// that every command sees the raw answer (for --json) and one error path.
type client struct {
	base  string
	token string
	http  *http.Client
}

// apiError is an answer of the server with a status other than 200.
type apiError struct {
	status int
	resp   iwfapi.ErrorResponse
	text   string // the body, when it is not an ErrorResponse
}

func (e *apiError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "server answered %d %s", e.status, http.StatusText(e.status))
	detail := e.text
	if e.resp.Detail != nil && *e.resp.Detail != "" {
		detail = *e.resp.Detail
	}
	if detail != "" {
		b.WriteString(": " + oneLine(detail))
	}
	if e.resp.SubStatus != nil && *e.resp.SubStatus != "" {
		fmt.Fprintf(&b, " (%s)", *e.resp.SubStatus)
	}
	if w := e.resp.OriginalWorkerErrorDetail; w != nil && *w != "" {
		b.WriteString("; worker: " + oneLine(*w))
		if t := e.resp.OriginalWorkerErrorType; t != nil && *t != "" {
			fmt.Fprintf(&b, " (%s)", *t)
		}
	}
	return b.String()
}

// notFound reports whether the error says the workflow (or the path) does
// not exist.
func (e *apiError) notFound() bool {
	if e.status == http.StatusNotFound {
		return true
	}
	return e.resp.SubStatus != nil && *e.resp.SubStatus == iwfapi.ErrorSubStatusWorkflowNotExists
}

// noRoute reports whether the server does not know the path at all (an
// older server without an extension endpoint), rather than a workflow.
func (e *apiError) noRoute() bool {
	return e.status == http.StatusNotFound && e.resp.SubStatus == nil
}

// unreachableError means no answer came from the server: it could not be
// connected to, the connection broke, or --timeout passed.
type unreachableError struct {
	base string
	err  error
}

func (e *unreachableError) Error() string {
	if errors.Is(e.err, context.DeadlineExceeded) {
		return fmt.Sprintf("no answer from %s in time (--timeout)", e.base)
	}
	return fmt.Sprintf("cannot reach the server at %s: %v", e.base, e.err)
}

func (e *unreachableError) Unwrap() error { return e.err }

// post sends in as the JSON body of a POST to path and decodes the answer
// into out (when out is not nil). It returns the answer's body.
func (c *client) post(ctx context.Context, path string, in, out any) ([]byte, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	return c.do(ctx, http.MethodPost, path, body, out)
}

// get sends a GET to path and decodes the answer into out.
func (c *client) get(ctx context.Context, path string, out any) ([]byte, error) {
	return c.do(ctx, http.MethodGet, path, nil, out)
}

func (c *client) do(ctx context.Context, method, path string, body []byte, out any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, &usageError{msg: fmt.Sprintf("invalid --server %q: %v", c.base, err)}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "iwf-cli")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, &unreachableError{base: c.base, err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, &unreachableError{base: c.base, err: fmt.Errorf("reading the answer: %w", err)}
	}
	if resp.StatusCode != http.StatusOK {
		e := &apiError{status: resp.StatusCode}
		if json.Unmarshal(raw, &e.resp) != nil {
			e.resp = iwfapi.ErrorResponse{}
			e.text = strings.TrimSpace(string(raw))
			if len(e.text) > 200 {
				e.text = e.text[:200] + "…"
			}
		}
		return raw, e
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return raw, fmt.Errorf("unexpected answer from %s %s: %v", method, path, err)
		}
	}
	return raw, nil
}

// oneLine folds a multi-line text into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
