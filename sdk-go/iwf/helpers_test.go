package iwf_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/iwf-server/iwf-server/sdk-go/iwf"
)

// state is a WorkflowState without WaitUntil whose behaviour is set per
// test.
type state struct {
	id      string
	execute func(iwf.Context, iwf.Object, iwf.CommandResults, iwf.Persistence, iwf.Communication) (*iwf.StateDecision, error)
	options *iwf.StateOptions
}

func (s *state) ID() string { return s.id }

func (s *state) Execute(ctx iwf.Context, in iwf.Object, r iwf.CommandResults, p iwf.Persistence, c iwf.Communication) (*iwf.StateDecision, error) {
	if s.execute == nil {
		return iwf.DeadEnd(), nil
	}
	return s.execute(ctx, in, r, p, c)
}

func (s *state) Options() *iwf.StateOptions { return s.options }

// waitState is a state with WaitUntil.
type waitState struct {
	state
	waitUntil func(iwf.Context, iwf.Object, iwf.Persistence, iwf.Communication) (*iwf.CommandRequest, error)
}

func (s *waitState) WaitUntil(ctx iwf.Context, in iwf.Object, p iwf.Persistence, c iwf.Communication) (*iwf.CommandRequest, error) {
	if s.waitUntil == nil {
		return nil, nil
	}
	return s.waitUntil(ctx, in, p, c)
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// post sends body to path on h and returns the status and the raw answer.
func post(t *testing.T, h http.Handler, path, body string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewBufferString(body)))
	data, err := io.ReadAll(rec.Result().Body)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Code, string(data)
}

// jsonEqual fails the test unless got and want are the same JSON value.
func jsonEqual(t *testing.T, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("got invalid JSON %q: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want invalid JSON %q: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("JSON differs\n got: %s\nwant: %s", compact(got), compact(want))
	}
}

func compact(s string) string {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		return s
	}
	return b.String()
}

// field returns the JSON value at a key of a JSON object, re-encoded.
func field(t *testing.T, doc, key string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatalf("not a JSON object %q: %v", doc, err)
	}
	v, ok := m[key]
	if !ok {
		t.Fatalf("no field %q in %s", key, doc)
	}
	return string(v)
}

// stringField returns the string at a key of a JSON object.
func stringField(t *testing.T, doc, key string) string {
	t.Helper()
	var s string
	if err := json.Unmarshal([]byte(field(t, doc, key)), &s); err != nil {
		t.Fatalf("field %q of %s is not a string: %v", key, doc, err)
	}
	return s
}

func sprint(v any) string { return fmt.Sprintf("%+v", v) }
