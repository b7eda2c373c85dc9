package iwf_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/iwf-server/iwf-server/sdk-go/iwf"
)

// textEncoder is an ObjectEncoder that writes values with fmt and reads
// them into *string.
type textEncoder struct{}

func (textEncoder) Encode(v any) (iwf.EncodedObject, error) {
	return iwf.EncodedObject{Encoding: "text", Data: fmt.Sprint(v)}, nil
}

func (textEncoder) Decode(o iwf.EncodedObject, ptr any) error {
	s, ok := ptr.(*string)
	if !ok {
		return errors.New("text decodes into *string only")
	}
	*s = o.Data
	return nil
}

func TestPluggableObjectEncoder(t *testing.T) {
	echo := &state{id: "echo", execute: func(_ iwf.Context, in iwf.Object, _ iwf.CommandResults, _ iwf.Persistence, _ iwf.Communication) (*iwf.StateDecision, error) {
		s, err := iwf.As[string](in)
		if err != nil {
			return nil, err
		}
		return iwf.GracefulCompleteWorkflow(s + "!"), nil
	}}
	reg, err := iwf.NewRegistry(&iwf.Workflow{Type: "Echo", StartState: echo})
	if err != nil {
		t.Fatal(err)
	}
	h := iwf.NewWorkerService(reg, &iwf.WorkerOptions{ObjectEncoder: textEncoder{}, Logger: quietLogger()})
	status, body := post(t, h, iwf.ExecutePath, `{"context":{"workflowId":"w","workflowRunId":"r","workflowStartedTimestamp":1},
	  "workflowType":"Echo","workflowStateId":"echo","stateInput":{"encoding":"text","data":"hi"}}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	jsonEqual(t, body, `{"stateDecision":{"nextStates":[{"stateId":"_SYS_GRACEFUL_COMPLETING_WORKFLOW","stateInput":{"encoding":"text","data":"hi!"}}]}}`)

	f := newFakeServer(t, ok(`{}`))
	c, err := iwf.NewClient(f.url, &iwf.ClientOptions{ObjectEncoder: textEncoder{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SignalWorkflow(context.Background(), "w", "", "ch", 42); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, f.lastCall().body, `{"workflowId":"w","signalChannelName":"ch","signalValue":{"encoding":"text","data":"42"}}`)
}

func TestJSONObjectEncoder(t *testing.T) {
	enc := iwf.JSONObjectEncoder()
	o, err := enc.Encode(map[string]int{"a": 1})
	if err != nil || o != (iwf.EncodedObject{Encoding: "json", Data: `{"a":1}`}) {
		t.Fatalf("Encode = %+v, %v", o, err)
	}
	var n int
	for _, encoding := range []string{"json", "", "BuiltinJacksonJson"} {
		n = 0
		if err := enc.Decode(iwf.EncodedObject{Encoding: encoding, Data: "7"}, &n); err != nil || n != 7 {
			t.Errorf("Decode with encoding %q = %d, %v", encoding, n, err)
		}
	}
	if err := enc.Decode(iwf.EncodedObject{Encoding: "json"}, &n); err != nil || n != 7 {
		t.Errorf("empty data changed the target or failed: %d, %v", n, err)
	}
	if err := enc.Decode(iwf.EncodedObject{Encoding: "protobuf", Data: "x"}, &n); err == nil {
		t.Error("decoded a protobuf object as JSON")
	}

	// A null Object leaves the target alone; As gives the zero value.
	var null iwf.Object
	s := "default"
	if err := null.Get(&s); err != nil || s != "default" || !null.IsNull() {
		t.Errorf("null Object: %q, %v", s, err)
	}
	if _, ok := null.Encoded(); ok {
		t.Error("null Object has an encoding")
	}
	if v, err := iwf.As[int](null); err != nil || v != 0 {
		t.Errorf("As on null = %d, %v", v, err)
	}
}

// An Object given as a value is sent on as received, whatever its encoding.
func TestObjectPassesThrough(t *testing.T) {
	next := &state{id: "next"}
	first := &state{id: "first", execute: func(_ iwf.Context, in iwf.Object, _ iwf.CommandResults, _ iwf.Persistence, _ iwf.Communication) (*iwf.StateDecision, error) {
		return iwf.SingleNextState(next, in), nil
	}}
	reg, err := iwf.NewRegistry(&iwf.Workflow{Type: "Fwd", StartState: first, States: []iwf.WorkflowState{next}})
	if err != nil {
		t.Fatal(err)
	}
	h := iwf.NewWorkerService(reg, &iwf.WorkerOptions{Logger: quietLogger()})
	status, body := post(t, h, iwf.ExecutePath, `{"context":{"workflowId":"w","workflowRunId":"r","workflowStartedTimestamp":1},
	  "workflowType":"Fwd","workflowStateId":"first","stateInput":{"encoding":"BuiltinJacksonJson","data":"{\"x\":1}"}}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	jsonEqual(t, body, `{"stateDecision":{"nextStates":[{"stateId":"next","stateInput":{"encoding":"BuiltinJacksonJson","data":"{\"x\":1}"},
	  "stateOptions":{"skipWaitUntil":true}}]}}`)
}
