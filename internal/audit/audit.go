// Package audit writes the audit log: one JSON object per line for every
// call that changes workflows, from the API (and so from the iwf command
// line and the SDKs) or from the web console, saying who made it, from
// where, on what and with which outcome. The HTTP layer (package httpapi)
// writes the entries; this package owns their shape and the file.
//
// The log is written with one write(2) per line under a mutex, so lines
// never interleave, and it is not synced: a line reaches the disk when the
// operating system writes it back, as the server's own log does. Reopen
// (on SIGHUP) lets logrotate move the file away.
package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// BatchHeader is the response header in which the web console names the
// batch a console batch start created, for the audit entry's BatchID.
const BatchHeader = "X-Iwf-Batch-Id"

// LimitHeader is the response header in which the web console names the
// limit a console limit action set or removed, for the audit entry's
// Limit.
const LimitHeader = "X-Iwf-Limit"

// Entry is one line of the audit log.
type Entry struct {
	// Time is when the call was answered (UTC).
	Time time.Time `json:"time"`
	// Actor is who made the call: a token's name, "token" for a token
	// without a name, a client certificate's subject ("CN=ops,O=Example"),
	// or "anonymous" when authentication is off.
	Actor string `json:"actor"`
	// Role is the actor's role: reader, writer, operator or all.
	Role string `json:"role,omitempty"`
	// RemoteAddr is the address of the client's connection (a proxy's,
	// behind one).
	RemoteAddr string `json:"remoteAddr"`
	// Source is "api" or "console".
	Source string `json:"source"`
	// Operation names the call: start, signal, stop, reset, skipTimer, …
	Operation string `json:"operation"`
	// WorkflowID is the workflow the call names.
	WorkflowID string `json:"workflowId"`
	// RunID is the run the call names; "" means the workflow's current
	// run. For start, it is the run started.
	RunID string `json:"runId"`
	// NewRunID is the run a reset started.
	NewRunID string `json:"newRunId,omitempty"`
	// BatchID is the batch operation the call belongs to or names.
	BatchID string `json:"batchId,omitempty"`
	// Limit is the limit on worker calls a limit call set or removed:
	// its key and value ("worker:host:80=5", "type:Order=0") or its key
	// and "removed".
	Limit string `json:"limit,omitempty"`
	// Scope is the workflow type ("type:NAME") or worker host
	// ("host:HOST:PORT") a pause/set or pause/delete names.
	Scope string `json:"scope,omitempty"`
	// Outcome is "ok", or why the call failed: an engine error code
	// (workflow_not_exists, invalid_argument, …), "forbidden" for a call
	// outside the actor's role, or "http_<status>".
	Outcome string `json:"outcome"`
	// Status is the HTTP status of the answer.
	Status int `json:"status"`
	// RequestID is the server's id of the request, sent back in its
	// X-Request-Id and shown in the access log.
	RequestID string `json:"requestId,omitempty"`
	// ClientRequestID is the X-Request-Id the client sent, as the client
	// chose it: never the server's id, at most 128 bytes, each byte outside
	// printable ASCII replaced by '?'.
	ClientRequestID string `json:"clientRequestId,omitempty"`
}

// Log is an audit log file (or stderr). It is safe for concurrent use.
type Log struct {
	path string
	// OnError, when set, is told of a line that could not be written.
	OnError func(error)

	mu   sync.Mutex
	w    io.Writer
	file *os.File // nil for stderr
}

// Open opens the audit log at path for appending, creating it with mode
// 0600 when missing; "-" is stderr.
func Open(path string) (*Log, error) {
	if path == "" {
		return nil, errors.New("audit-log: empty path")
	}
	l := &Log{path: path}
	if path == "-" {
		l.w = os.Stderr
		return l, nil
	}
	f, err := openFile(path)
	if err != nil {
		return nil, err
	}
	l.w, l.file = f, f
	return l, nil
}

// NewWriter returns a log that writes to w (for tests and embedding).
func NewWriter(w io.Writer) *Log { return &Log{path: "-", w: w} }

func openFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit-log: %w", err)
	}
	return f, nil
}

// Write appends an entry.
func (l *Log) Write(e Entry) {
	line, err := json.Marshal(e)
	if err != nil { // cannot happen: the fields are strings and numbers
		l.fail(err)
		return
	}
	line = append(line, '\n')
	l.mu.Lock()
	_, err = l.w.Write(line)
	l.mu.Unlock()
	if err != nil {
		l.fail(fmt.Errorf("audit-log %s: %w", l.path, err))
	}
}

func (l *Log) fail(err error) {
	if l.OnError != nil {
		l.OnError(err)
	}
}

// Reopen opens the file again (after logrotate moved it) and closes the
// previous one; on error the previous file stays in use. It does nothing
// for stderr.
func (l *Log) Reopen() error {
	if l.file == nil {
		return nil
	}
	f, err := openFile(l.path)
	if err != nil {
		return err
	}
	l.mu.Lock()
	old := l.file
	l.w, l.file = f, f
	l.mu.Unlock()
	return old.Close()
}

// Close closes the file (not stderr).
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file == nil {
		return nil
	}
	err := l.file.Close()
	l.file = nil
	l.w = io.Discard
	return err
}

// Path returns where the log is written ("-" for stderr).
func (l *Log) Path() string { return l.path }
