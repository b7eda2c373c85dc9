package iwf

import (
	"errors"
	"net/http"
	"strconv"
	"time"
)

// Headers of a failed worker answer that iwf-server reads (extensions of
// this server; other iWF servers ignore them and retry as their retry
// policy says).
const (
	// NonRetryableHeader, set to "true", ends the state API's retries.
	NonRetryableHeader = "Iwf-Non-Retryable"
	// RetryAfterHeader delays the next attempt (whole seconds).
	RetryAfterHeader = "Retry-After"
)

// retryHint carries what workflow code said about retrying a failure.
type retryHint struct {
	err          error
	nonRetryable bool
	after        time.Duration
}

func (h *retryHint) Error() string { return h.err.Error() }
func (h *retryHint) Unwrap() error { return h.err }

// NonRetryable marks err, returned by a WaitUntil or Execute, as a failure
// that retrying cannot fix (bad input, a record that no longer exists).
// The worker answers with the header Iwf-Non-Retryable: true, and
// iwf-server ends the state API's retries at once: the state's failure
// policy applies (proceed, or fail the workflow). It returns nil for a nil
// err.
func NonRetryable(err error) error {
	if err == nil {
		return nil
	}
	h := hintOf(err)
	return &retryHint{err: err, nonRetryable: true, after: h.after}
}

// RetryAfter asks iwf-server to wait at least d before the next attempt of
// the failed WaitUntil or Execute that returns it, as when a downstream
// service is rate-limited: the worker answers with a Retry-After header
// (d rounded up to whole seconds). The server caps the wait at 24 hours.
// It returns nil for a nil err.
func RetryAfter(d time.Duration, err error) error {
	if err == nil {
		return nil
	}
	h := hintOf(err)
	return &retryHint{err: err, nonRetryable: h.nonRetryable, after: d}
}

// hintOf returns the retry hints in err's chain (the outermost of each).
func hintOf(err error) retryHint {
	var out retryHint
	var seenAfter bool
	for e := err; e != nil; e = errors.Unwrap(e) {
		if h, ok := e.(*retryHint); ok {
			out.nonRetryable = out.nonRetryable || h.nonRetryable
			if !seenAfter && h.after > 0 {
				out.after, seenAfter = h.after, true
			}
		}
	}
	return out
}

// setRetryHeaders writes the retry hints of err as answer headers.
func setRetryHeaders(h http.Header, err error) {
	hint := hintOf(err)
	if hint.nonRetryable {
		h.Set(NonRetryableHeader, "true")
	}
	if hint.after > 0 {
		secs := int64((hint.after + time.Second - 1) / time.Second)
		h.Set(RetryAfterHeader, strconv.FormatInt(secs, 10))
	}
}
