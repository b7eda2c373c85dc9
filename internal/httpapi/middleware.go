package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"time"

	"github.com/go-chi/chi/v5/middleware"
	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// RequestIDHeader carries the request id. The server makes its own for
// every request and sends it in the response; an id the client sent in
// the request is kept beside it as the client's (clientRequestId in the
// access and audit logs), never in its place: a client cannot choose the
// id that the server's logs and audit lines are found by.
const RequestIDHeader = "X-Request-Id"

// maxClientRequestID bounds the client's request id that the logs keep.
const maxClientRequestID = 128

type ctxKey int

const requestInfoKey ctxKey = iota

// requestInfo is what the middleware learns about a request, for the access
// log and the error log.
type requestInfo struct {
	id string
	// clientID is the X-Request-Id the client sent, bounded
	// (clientRequestID); "" when it sent none.
	clientID string
	// body is the request body as read by readBody, until a handler
	// has decoded it (releaseBody); names are the ids it names, read
	// from it once (bodyNames).
	body      *heldBody
	names     bodyNames
	namesRead bool
	timeout   time.Duration // the deadline the request was given
	// errCode is the engine error code of a failed call (for the audit
	// log); resultRunID is the run a start or reset created,
	// resultBatchID the batch a batch start created.
	errCode       string
	resultRunID   string
	resultBatchID string
	// scope is the paused scope a pause/set or pause/delete names.
	scope string
	// resultLimit is the limit a limit call set or removed ("worker:h:80=5",
	// "worker:h:80 removed"), for the audit log.
	resultLimit string
}

func infoFrom(ctx context.Context) *requestInfo {
	if ri, ok := ctx.Value(requestInfoKey).(*requestInfo); ok {
		return ri
	}
	return &requestInfo{}
}

func requestIDFrom(ctx context.Context) string { return infoFrom(ctx).id }

// heldBody holds a request body read by readBody. Its readers read
// through it, so that releasing it (releaseBody) frees the bytes although
// the request, its readers included, lives on.
type heldBody struct{ b []byte }

// reader returns a reader of the body from its start.
func (h *heldBody) reader() io.ReadCloser { return &heldReader{h: h} }

// heldReader reads a heldBody; a released body reads as empty.
type heldReader struct {
	h   *heldBody
	off int
}

func (r *heldReader) Read(p []byte) (int, error) {
	if r.off >= len(r.h.b) {
		return 0, io.EOF
	}
	n := copy(p, r.h.b[r.off:])
	r.off += n
	return n, nil
}

func (r *heldReader) Close() error { return nil }

// rawBody returns the request body, nil once released.
func (ri *requestInfo) rawBody() []byte {
	if ri.body == nil {
		return nil
	}
	return ri.body.b
}

// bodyNames are the ids a JSON request body names at its top level, for
// the access and audit logs.
type bodyNames struct {
	WorkflowID string `json:"workflowId"`
	RunID      string `json:"workflowRunId"`
	BatchID    string `json:"batchId"`
}

// bodyNames returns the ids the body names, read from it on the first
// call.
func (ri *requestInfo) bodyNames() bodyNames {
	if !ri.namesRead {
		ri.namesRead = true
		if b := ri.rawBody(); len(b) > 0 && bytes.Contains(b, []byte(`Id"`)) {
			_ = json.Unmarshal(b, &ri.names)
		}
	}
	return ri.names
}

// releaseBody lets the request body go once a handler has decoded it: a
// request then holds its decoded value, not the bytes beside it (with
// external storage on, a body may be 64 MiB). The ids the logs need are
// read first.
func (ri *requestInfo) releaseBody() {
	ri.bodyNames()
	if ri.body != nil {
		ri.body.b = nil
	}
}

// releaseDecodedBody is the strict server's middleware that releases
// the request body: it runs once the body is decoded into the request
// object, before the operation.
func releaseDecodedBody(f iwfapi.StrictHandlerFunc, _ string) iwfapi.StrictHandlerFunc {
	return func(ctx context.Context, w http.ResponseWriter, r *http.Request, request any) (any, error) {
		infoFrom(ctx).releaseBody()
		return f(ctx, w, r, request)
	}
}

// clientRequestID returns the id a client sent as the logs keep it: at
// most maxClientRequestID bytes, each byte outside printable ASCII
// (0x21–0x7e: no spaces, controls or line breaks) replaced by '?'.
func clientRequestID(s string) string {
	if len(s) > maxClientRequestID {
		s = s[:maxClientRequestID]
	}
	b := []byte(s)
	for i, c := range b {
		if c < 0x21 || c > 0x7e {
			b[i] = '?'
		}
	}
	return string(b)
}

// requestID gives the request the server's own id, sent back in the
// response, keeps the client's id (if any) beside it, and stores the
// request info in the context.
func requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := uuid.NewString()
		w.Header().Set(RequestIDHeader, id)
		ri := &requestInfo{id: id, clientID: clientRequestID(r.Header.Get(RequestIDHeader))}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestInfoKey, ri)))
	})
}

// accessLog logs one line per request: method, path, status, duration,
// request id, response size and, when the JSON body names one, the
// workflowId.
func accessLog(log zerolog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
			defer func() {
				status := ww.Status()
				if status == 0 {
					status = http.StatusOK
				}
				ev := log.Info()
				switch {
				case status == http.StatusGatewayTimeout:
					ev = log.Warn() // past its deadline: slow, not broken
				case status >= 500:
					ev = log.Error()
				}
				if !ev.Enabled() {
					return
				}
				ri := infoFrom(r.Context())
				ev = ev.Str("method", r.Method).Str("path", r.URL.Path).Int("status", status).
					Dur("duration", time.Since(start)).Str("requestId", ri.id).Int("bytes", ww.BytesWritten())
				if ri.clientID != "" {
					ev = ev.Str("clientRequestId", ri.clientID)
				}
				if id := ri.bodyNames().WorkflowID; id != "" {
					ev = ev.Str("workflowId", id)
				}
				ev.Msg("request")
			}()
			next.ServeHTTP(ww, r)
		})
	}
}

// recoverer turns a panic in a handler into a logged 500 ErrorResponse.
func recoverer(log zerolog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				p := recover()
				if p == nil {
					return
				}
				if p == http.ErrAbortHandler { //nolint:errorlint // sentinel compared as net/http does
					panic(p)
				}
				log.Error().Str("requestId", requestIDFrom(r.Context())).Str("path", r.URL.Path).
					Str("panic", fmt.Sprint(p)).Bytes("stack", debug.Stack()).Msg("handler panicked")
				if ww, ok := w.(middleware.WrapResponseWriter); ok && ww.Status() != 0 {
					return // the response has begun; nothing sensible can be added
				}
				writeError(w, http.StatusInternalServerError, internalErrorDetail)
			}()
			next.ServeHTTP(w, r)
		})
	}
}

// readBody reads the whole request body up front, at most limit bytes:
// larger bodies are answered with 413. A body with a Content-Length is
// read into a buffer of that size (no growing copies). The body stays
// readable for the handlers that follow, until one has decoded it
// (releaseDecodedBody). A body that spill streams is left to spillBody,
// which reads it after the access check.
func readBody(limit int64, spill *spillConfig) func(http.Handler) http.Handler {
	tooLarge := fmt.Sprintf("request body too large: the limit is %d bytes", limit)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Body == nil || r.Body == http.NoBody {
				next.ServeHTTP(w, r)
				return
			}
			if r.ContentLength > limit {
				writeError(w, http.StatusRequestEntityTooLarge, tooLarge)
				return
			}
			if spill.applies(r) {
				next.ServeHTTP(w, r)
				return
			}
			body, err := readAll(http.MaxBytesReader(w, r.Body, limit), r.ContentLength)
			if err != nil {
				var tooBig *http.MaxBytesError
				if errors.As(err, &tooBig) {
					writeError(w, http.StatusRequestEntityTooLarge, tooLarge)
					return
				}
				writeError(w, http.StatusBadRequest, "cannot read the request body: "+readFailure(err))
				return
			}
			if err := checkBody(body); err != nil {
				writeError(w, http.StatusBadRequest, "invalid request: "+err.Error())
				return
			}
			held := &heldBody{b: body}
			infoFrom(r.Context()).body = held
			r.ContentLength = int64(len(body))
			r.Body = held.reader()
			r.GetBody = func() (io.ReadCloser, error) { return held.reader(), nil }
			next.ServeHTTP(w, r)
		})
	}
}

// readAll reads a body of size bytes (-1 or 0: unknown) into a buffer of
// that size, or, its size unknown, as io.ReadAll does.
func readAll(r io.Reader, size int64) ([]byte, error) {
	if size <= 0 {
		return io.ReadAll(r)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("the body ended before its Content-Length: %w", err)
		}
		return nil, err
	}
	return b, nil
}

// readFailure says why a request body could not be read, without the
// socket addresses that a *net.OpError names.
func readFailure(err error) string {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return "it did not arrive within the read timeout"
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	return err.Error()
}
