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
)

// RequestIDHeader carries the request id: taken from the request when the
// client sends one, generated otherwise, and always echoed in the response.
const RequestIDHeader = "X-Request-Id"

type ctxKey int

const requestInfoKey ctxKey = iota

// requestInfo is what the middleware learns about a request, for the access
// log and the error log.
type requestInfo struct {
	id      string
	body    []byte        // the request body as read by readBody
	timeout time.Duration // the deadline the request was given
	// errCode is the engine error code of a failed call (for the audit
	// log); resultRunID is the run a start or reset created,
	// resultBatchID the batch a batch start created.
	errCode       string
	resultRunID   string
	resultBatchID string
}

func infoFrom(ctx context.Context) *requestInfo {
	if ri, ok := ctx.Value(requestInfoKey).(*requestInfo); ok {
		return ri
	}
	return &requestInfo{}
}

func requestIDFrom(ctx context.Context) string { return infoFrom(ctx).id }

// validRequestID accepts client-sent ids of printable ASCII up to 128 bytes.
func validRequestID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// requestID assigns the request id and stores the request info in the
// context.
func requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(RequestIDHeader)
		if !validRequestID(id) {
			id = uuid.NewString()
		}
		w.Header().Set(RequestIDHeader, id)
		ri := &requestInfo{id: id}
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
				if id := workflowIDOf(ri.body); id != "" {
					ev = ev.Str("workflowId", id)
				}
				ev.Msg("request")
			}()
			next.ServeHTTP(ww, r)
		})
	}
}

// workflowIDOf extracts the top-level workflowId of a JSON body, if any.
func workflowIDOf(body []byte) string {
	if len(body) == 0 || !bytes.Contains(body, []byte(`"workflowId"`)) {
		return ""
	}
	var v struct {
		WorkflowID string `json:"workflowId"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	return v.WorkflowID
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
// larger bodies are answered with 413. The body stays readable for the
// handlers that follow.
func readBody(limit int64) func(http.Handler) http.Handler {
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
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
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
			infoFrom(r.Context()).body = body
			r.ContentLength = int64(len(body))
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
			next.ServeHTTP(w, r)
		})
	}
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
