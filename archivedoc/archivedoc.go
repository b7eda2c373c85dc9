// Package archivedoc is the archived run's document: its types, its
// encoding (one gzip-compressed JSON object, Run with the run's whole
// history as its "history" array), the key it is stored under, and
// Local, a reader of a file:// archive's directory for clients that link
// no blob store.
//
// The engine writes the document (engine/archive.go) and internal/archive
// stores it in a bucket and reads it back. The types are the stored
// format and belong to no API: they are deliberately independent of the
// generated wire types of api/iwfapi, and their JSON names and field
// order are frozen (a test re-encodes a document of format 1 byte for
// byte). The package imports the standard library only, so that a client
// links no engine and no cloud SDK to read an archive; a test checks.
package archivedoc

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
)

// Format is the version of the document this package writes. It reads
// every version up to it.
const Format = 1

// ErrNotFound is returned when no archived run matches.
var ErrNotFound = errors.New("archive: no archived run")

// Run is an archived run without its history: the summary, the input, the
// results and the attributes, as the run had them when it was archived.
type Run struct {
	// Format is the document's version (Format).
	Format       int    `json:"format"`
	WorkflowID   string `json:"workflowId"`
	RunID        string `json:"workflowRunId"`
	WorkflowType string `json:"workflowType"`
	// Status is the run's final iWF WorkflowStatus (COMPLETED, FAILED,
	// TIMEOUT, TERMINATED, CANCELED, CONTINUED_AS_NEW).
	Status string `json:"status"`
	// StartedMs, ClosedMs and ArchivedMs are unix milliseconds.
	StartedMs    int64  `json:"startedTimestampMs"`
	ClosedMs     int64  `json:"closedTimestampMs"`
	ArchivedMs   int64  `json:"archivedTimestampMs"`
	ErrorType    string `json:"errorType,omitempty"`
	ErrorMessage string `json:"errorMessage,omitempty"`
	// StartStateID and Input are the start state and its input.
	StartStateID string `json:"startStateId,omitempty"`
	Input        *Value `json:"input,omitempty"`
	// Results are the state completion outputs the run recorded.
	Results          []StateOutput     `json:"results,omitempty"`
	DataAttributes   []KeyValue        `json:"dataAttributes,omitempty"`
	SearchAttributes []SearchAttribute `json:"searchAttributes,omitempty"`
	// HistoryEvents is the number of events of the document's history.
	HistoryEvents int `json:"historyEvents"`
}

// Value is an encoded object: a user value in its encoding, or a reference
// to an external object. (The field order is the JSON's.)
type Value struct {
	Data       *string `json:"data,omitempty"`
	Encoding   *string `json:"encoding,omitempty"`
	ExtPath    *string `json:"extPath,omitempty"`
	ExtStoreID *string `json:"extStoreId,omitempty"`
}

// StateOutput is a state execution's completion output.
type StateOutput struct {
	CompletedStateExecutionID string `json:"completedStateExecutionId"`
	CompletedStateID          string `json:"completedStateId"`
	CompletedStateOutput      *Value `json:"completedStateOutput,omitempty"`
}

// KeyValue is a data attribute.
type KeyValue struct {
	Key   *string `json:"key,omitempty"`
	Value *Value  `json:"value,omitempty"`
}

// SearchAttribute is a search attribute: its key, its type (ValueType,
// e.g. KEYWORD, INT) and the value of that type.
type SearchAttribute struct {
	BoolValue        *bool     `json:"boolValue,omitempty"`
	DoubleValue      *float64  `json:"doubleValue,omitempty"`
	IntegerValue     *int64    `json:"integerValue,omitempty"`
	Key              *string   `json:"key,omitempty"`
	StringArrayValue *[]string `json:"stringArrayValue,omitempty"`
	StringValue      *string   `json:"stringValue,omitempty"`
	ValueType        *string   `json:"valueType,omitempty"`
}

// Event is one event of an archived run's history.
type Event struct {
	// Data is the event's details, a JSON object (absent when none).
	Data        json.RawMessage `json:"data,omitempty"`
	EventID     int64           `json:"eventId"`
	EventType   string          `json:"eventType"`
	ExecutionID string          `json:"stateExecutionId,omitempty"`
	// TimestampMs is when it happened, unix milliseconds.
	TimestampMs int64 `json:"timestampMs"`
}

// Key is the object key of a run: workflows/<escaped workflow id>/<run
// id>.json.gz. The workflow id is path-escaped (a "/" in it becomes %2F,
// and a "." %2E), so every id yields a valid key of its own; an id whose
// escaped form is longer than 400 bytes is replaced by "!sha256-" and its
// SHA-256 in hex, which no escaped id can equal ("!" is always escaped),
// to stay within the key length of every store.
func Key(workflowID, runID string) string {
	return Prefix(workflowID) + url.PathEscape(runID) + KeySuffix
}

// KeySuffix ends the key of every run.
const KeySuffix = ".json.gz"

// Prefix is the key prefix of a workflow id's runs, ending in "/".
func Prefix(workflowID string) string {
	// Dots are escaped too: "." and ".." are no names, and a name that
	// ends in ".." is not what every driver lists under.
	esc := strings.ReplaceAll(url.PathEscape(workflowID), ".", "%2E")
	if len(esc) > 400 {
		sum := sha256.Sum256([]byte(workflowID))
		esc = "!sha256-" + hex.EncodeToString(sum[:])
	}
	return "workflows/" + esc + "/"
}

// ClosedMeta is the object metadata key that holds a run's close time
// (unix ms), so that the newest run of an id is found without reading its
// object.
const ClosedMeta = "closed-ms"

// Encode writes the gzip-compressed document of r and the events next
// returns, page by page until it returns none, to w. It sets r.Format and
// r.HistoryEvents.
func Encode(ctx context.Context, w io.Writer, r *Run, next func(context.Context) ([]Event, error)) error {
	zw := gzip.NewWriter(w)
	bw := bufio.NewWriterSize(zw, 64<<10)
	r.Format = Format
	r.HistoryEvents = 0
	// The summary's fields without the history's length, which is known
	// only at the end: every key appears once in the document.
	head, err := json.Marshal(summary{Run: r})
	if err != nil {
		return err
	}
	// The summary's fields, then the history, then its length.
	bw.Write(head[:len(head)-1])
	bw.WriteString(`,"history":[`)
	n := 0
	for {
		events, err := next(ctx)
		if err != nil {
			return err
		}
		if len(events) == 0 {
			break
		}
		for _, ev := range events {
			b, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			if n > 0 {
				bw.WriteByte(',')
			}
			bw.WriteByte('\n')
			bw.Write(b)
			n++
		}
	}
	r.HistoryEvents = n
	fmt.Fprintf(bw, "\n],\"historyEvents\":%d}\n", n)
	if err := bw.Flush(); err != nil {
		return err
	}
	return zw.Close()
}

// summary is the head of a document: Run's fields without
// "historyEvents" (the outer field, always nil, hides the embedded one).
type summary struct {
	*Run
	HistoryEvents *int `json:"historyEvents,omitempty"`
}

// ErrStop, returned by Decode's onEvent, ends the reading there: Decode
// then returns the run as read so far — its summary, which the document
// holds before the history, with HistoryEvents 0 — and a nil error.
var ErrStop = errors.New("archive: stop reading")

// Decode reads a document written by Encode from r (gzip-compressed),
// calling onEvent with each history event in order (nil: the events are
// skipped), and returns the run. It holds one event at a time. A key
// that appears twice takes its last value: documents written by earlier
// releases carry "historyEvents" as 0 before the history and as the
// count after it.
func Decode(r io.Reader, onEvent func(Event) error) (*Run, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("archive: not a gzip object: %w", err)
	}
	defer zr.Close()
	dec := json.NewDecoder(bufio.NewReader(zr))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("archive: not an archived run (%v)", err)
	}
	fields := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("archive: reading the document: %w", err)
		}
		key, _ := t.(string)
		if key != "history" {
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return nil, fmt.Errorf("archive: reading %s: %w", key, err)
			}
			fields[key] = v
			continue
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('[') {
			return nil, fmt.Errorf("archive: the history is not an array (%v)", err)
		}
		for dec.More() {
			if onEvent == nil {
				var skip json.RawMessage
				if err := dec.Decode(&skip); err != nil {
					return nil, fmt.Errorf("archive: reading the history: %w", err)
				}
				continue
			}
			var ev Event
			if err := dec.Decode(&ev); err != nil {
				return nil, fmt.Errorf("archive: reading the history: %w", err)
			}
			if err := onEvent(ev); errors.Is(err, ErrStop) {
				return decodeHead(fields)
			} else if err != nil {
				return nil, err
			}
		}
		if _, err := dec.Token(); err != nil {
			return nil, fmt.Errorf("archive: reading the history: %w", err)
		}
	}
	return decodeHead(fields)
}

// decodeHead decodes the summary's fields of a document.
func decodeHead(fields map[string]json.RawMessage) (*Run, error) {
	head, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	var run Run
	if err := json.Unmarshal(head, &run); err != nil {
		return nil, fmt.Errorf("archive: reading the summary: %w", err)
	}
	if run.Format > Format {
		return nil, fmt.Errorf("archive: the document's format %d is newer than this program's (%d)", run.Format, Format)
	}
	return &run, nil
}
