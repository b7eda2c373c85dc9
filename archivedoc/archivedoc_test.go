package archivedoc_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/archivedoc"
)

func ptr[T any](v T) *T { return &v }

// gz compresses doc.
func gz(t *testing.T, doc []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(doc)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// gunzip decompresses an encoded document.
func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// pages returns a next function that yields n events, size per page.
func pages(n, size int) func(context.Context) ([]archivedoc.Event, error) {
	sent := 0
	return func(context.Context) ([]archivedoc.Event, error) {
		var page []archivedoc.Event
		for ; sent < n && len(page) < size; sent++ {
			page = append(page, archivedoc.Event{EventID: int64(sent + 1), TimestampMs: int64(sent), EventType: "E", Data: json.RawMessage(`{"i":` + strconv.Itoa(sent) + `}`)})
		}
		return page, nil
	}
}

// TestFormat1: testdata/run_v1.json is a document of format 1 as the
// release before the document had types of its own wrote it (the summary
// and events in the API's shapes). It reads into the same run and events,
// and writing them again gives the same bytes: the document's shape does
// not follow the API's.
func TestFormat1(t *testing.T) {
	doc, err := os.ReadFile("testdata/run_v1.json")
	if err != nil {
		t.Fatal(err)
	}
	var events []archivedoc.Event
	run, err := archivedoc.Decode(bytes.NewReader(gz(t, doc)), func(ev archivedoc.Event) error {
		events = append(events, ev)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := &archivedoc.Run{Format: 1, WorkflowID: "orders/2024 ü?#..", RunID: "0b6f3c2e-5d1a-4c61-9d0e-8f1e2a3b4c5d", WorkflowType: `Order <&> "x"`,
		Status: "FAILED", StartedMs: 1767225600000, ClosedMs: 1767225660123, ArchivedMs: 1767312000456,
		ErrorType: "STATE_DECISION_FAILING_WORKFLOW_ERROR_TYPE", ErrorMessage: "boom <b>", StartStateID: "Start",
		Input: &archivedoc.Value{Encoding: ptr("json"), Data: ptr(`{"n":1,"big":12345678901234567890,"html":"<a>&"}`)},
		Results: []archivedoc.StateOutput{
			{CompletedStateID: "Done", CompletedStateExecutionID: "Done-1", CompletedStateOutput: &archivedoc.Value{Encoding: ptr("json"), Data: ptr(`"done"`)}},
			{CompletedStateID: "Other", CompletedStateExecutionID: "Other-2"},
			{CompletedStateID: "Big", CompletedStateExecutionID: "Big-1", CompletedStateOutput: &archivedoc.Value{Encoding: ptr("json"), ExtStoreID: ptr("s3"), ExtPath: ptr("w/r/o")}},
		},
		DataAttributes: []archivedoc.KeyValue{{Key: ptr("customer"), Value: &archivedoc.Value{Encoding: ptr("json"), Data: ptr(`"c-17"`)}}, {Key: ptr("empty")}, {Key: ptr("blank"), Value: &archivedoc.Value{}}},
		SearchAttributes: []archivedoc.SearchAttribute{
			{Key: ptr("CustomerId"), ValueType: ptr("KEYWORD"), StringValue: ptr("c-17")},
			{Key: ptr("Count"), ValueType: ptr("INT"), IntegerValue: ptr(int64(-42))},
			{Key: ptr("Score"), ValueType: ptr("DOUBLE"), DoubleValue: ptr(0.1)},
			{Key: ptr("Flag"), ValueType: ptr("BOOL"), BoolValue: ptr(false)},
			{Key: ptr("Tags"), ValueType: ptr("KEYWORD_ARRAY"), StringArrayValue: &[]string{"a", "b<c>"}},
		},
		HistoryEvents: 5}
	if !reflect.DeepEqual(run, want) {
		t.Fatalf("read\n%+v\nwant\n%+v", run, want)
	}
	if len(events) != 5 || events[1].ExecutionID != "Start-1" || events[2].Data != nil || string(events[3].Data) != "{}" ||
		events[4].EventType != "WorkflowClosed" || events[4].TimestampMs != 1767225660123 {
		t.Fatalf("events %+v", events)
	}
	var data map[string]any
	if err := json.Unmarshal(events[0].Data, &data); err != nil || data["actor"] != "oncall <x>" {
		t.Fatalf("the first event's data %s: %v", events[0].Data, err)
	}

	var buf bytes.Buffer
	sent := false
	if err := archivedoc.Encode(context.Background(), &buf, run, func(context.Context) ([]archivedoc.Event, error) {
		if sent {
			return nil, nil
		}
		sent = true
		return events, nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := gunzip(t, buf.Bytes()); !bytes.Equal(got, doc) {
		t.Fatalf("written again:\n%s\nthe document of format 1:\n%s", got, doc)
	}
}

// TestDecodeStop: an onEvent that returns ErrStop ends the reading with
// the summary and the events read so far, without an error; another error
// ends it with that error.
func TestDecodeStop(t *testing.T) {
	var buf bytes.Buffer
	r := &archivedoc.Run{WorkflowID: "w", RunID: "r", Status: "COMPLETED", WorkflowType: "T", ClosedMs: 7}
	if err := archivedoc.Encode(context.Background(), &buf, r, pages(50, 20)); err != nil {
		t.Fatal(err)
	}
	if r.HistoryEvents != 50 || r.Format != archivedoc.Format {
		t.Fatalf("Encode left %+v", r)
	}
	var seen []int64
	got, err := archivedoc.Decode(bytes.NewReader(buf.Bytes()), func(ev archivedoc.Event) error {
		if len(seen) == 3 {
			return archivedoc.ErrStop
		}
		seen = append(seen, ev.EventID)
		return nil
	})
	if err != nil || got == nil || got.WorkflowType != "T" || got.ClosedMs != 7 || len(seen) != 3 || seen[2] != 3 {
		t.Fatalf("Decode stopped: %+v, %v, events %v", got, err, seen)
	}
	boom := errors.New("boom")
	if _, err := archivedoc.Decode(bytes.NewReader(buf.Bytes()), func(archivedoc.Event) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Decode with a failing onEvent: %v", err)
	}
	if got, err := archivedoc.Decode(bytes.NewReader(buf.Bytes()), nil); err != nil || got.HistoryEvents != 50 {
		t.Fatalf("Decode without onEvent: %+v, %v", got, err)
	}
}

// TestEncodeKeysOnce: every key of an archived document appears once, so
// that a parser that keeps the first of two equal keys reads the same run
// as one that keeps the last; "historyEvents" holds the count.
func TestEncodeKeysOnce(t *testing.T) {
	for _, n := range []int{0, 1, 7} {
		var buf bytes.Buffer
		r := &archivedoc.Run{WorkflowID: "w", RunID: "r", Status: "COMPLETED", ClosedMs: 7}
		if err := archivedoc.Encode(context.Background(), &buf, r, pages(n, 3)); err != nil {
			t.Fatal(err)
		}
		doc := gunzip(t, buf.Bytes())
		if dups := duplicateKeys(t, doc); len(dups) > 0 {
			t.Fatalf("%d events: keys written twice: %v\n%s", n, dups, doc)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(doc, &fields); err != nil {
			t.Fatal(err)
		}
		if string(fields["historyEvents"]) != strconv.Itoa(n) {
			t.Fatalf("%d events: historyEvents %s", n, fields["historyEvents"])
		}
	}
}

// duplicateKeys returns the keys that appear more than once in one object
// of the JSON document doc, at any depth, as a strict parser sees them.
func duplicateKeys(t *testing.T, doc []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(doc))
	type frame struct {
		object bool
		keys   map[string]bool
		expect bool // the next string token of an object is a key
	}
	var stack []*frame
	var dups []string
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reading the document: %v", err)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.expect {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].object {
					stack[len(stack)-1].expect = true
				}
				continue
			}
			key := tok.(string)
			if top.keys[key] {
				dups = append(dups, key)
			}
			top.keys[key] = true
			top.expect = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, keys: map[string]bool{}, expect: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: the enclosing object expects a key again.
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].expect = true
		}
	}
	return dups
}

// TestDecodeOlderDuplicate: a document of an earlier release, with
// "historyEvents" 0 in its summary and the count after the history, reads
// with the count.
func TestDecodeOlderDuplicate(t *testing.T) {
	doc := []byte(`{"format":1,"workflowId":"w","workflowRunId":"r","workflowType":"T","status":"COMPLETED","startedTimestampMs":1,"closedTimestampMs":2,"archivedTimestampMs":3,"historyEvents":0,"history":[
{"eventId":1,"timestampMs":1,"eventType":"E"},
{"eventId":2,"timestampMs":2,"eventType":"E","data":null}
],"historyEvents":2}
`)
	var seen int
	r, err := archivedoc.Decode(bytes.NewReader(gz(t, doc)), func(archivedoc.Event) error { seen++; return nil })
	if err != nil || r.HistoryEvents != 2 || seen != 2 || r.WorkflowType != "T" {
		t.Fatalf("Decode of an older document: %+v, %d events, %v", r, seen, err)
	}
	newer := bytes.Replace(doc, []byte(`"format":1`), []byte(`"format":2`), 1)
	if _, err := archivedoc.Decode(bytes.NewReader(gz(t, newer)), nil); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("a document of a newer format: %v", err)
	}
}

// TestStandardLibraryOnly: the package links nothing but the standard
// library, so that reading an archive costs a client no engine and no
// cloud SDK.
func TestStandardLibraryOnly(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if got := strings.Fields(string(out)); len(got) != 1 || got[0] != "github.com/iwf-server/iwf-server/archivedoc" {
		t.Fatalf("archivedoc links %v", got)
	}
}
