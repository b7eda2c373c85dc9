package engine

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine/internal/record"
)

// fill sets every field of the value v points to: pointers allocated,
// strings, numbers and booleans non-zero, slices of one element. Recursive
// types are filled to depth levels.
func fill(v reflect.Value, depth int) {
	switch v.Kind() {
	case reflect.Pointer:
		if depth == 0 {
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), depth-1)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			fill(v.Field(i), depth)
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), depth)
		v.Set(s)
	case reflect.String:
		v.SetString("s-" + v.Type().Name())
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	}
}

func filled[T any]() T {
	var v T
	fill(reflect.ValueOf(&v).Elem(), 3)
	return v
}

// jsonOf decodes v's JSON into generic values, for comparison.
func jsonOf(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameJSON checks that a wire value and the record converted from it (or
// to it) encode the same document, except for the named top-level fields
// the record deliberately leaves out. A wire field the record lacks fails
// here: either the record gains it (and the stored format grows, which is
// additive) or the edge documents that it is dropped.
func sameJSON(t *testing.T, name string, wire, rec any, dropped ...string) {
	t.Helper()
	w, r := jsonOf(t, wire), jsonOf(t, rec)
	if m, ok := w.(map[string]any); ok {
		for _, k := range dropped {
			delete(m, k)
		}
	}
	if !reflect.DeepEqual(w, r) {
		wb, _ := json.Marshal(w)
		rb, _ := json.Marshal(r)
		t.Errorf("%s: wire and record differ\nwire:   %s\nrecord: %s", name, wb, rb)
	}
}

// TestWireRecordMapping checks every conversion of wire.go against fully
// populated values: nothing the engine must keep is lost at the edge, and
// the stored JSON names are the wire names that format version 1 used.
func TestWireRecordMapping(t *testing.T) {
	start := filled[iwfapi.WorkflowStartRequest]()
	sameJSON(t, "start request", start, startIn(start))

	opts := filled[iwfapi.WorkflowStateOptions]()
	sameJSON(t, "state options", opts, optionsIn(opts))

	cmds := filled[iwfapi.CommandRequest]()
	sameJSON(t, "command request", cmds, commandsIn(cmds))

	dec := filled[iwfapi.StateDecision]()
	sameJSON(t, "state decision", dec, decisionIn(dec))

	pub := filled[iwfapi.InterStateChannelPublishing]()
	sameJSON(t, "publish", pub, publishIn(pub))

	cfg := filled[iwfapi.WorkflowConfig]()
	sameJSON(t, "config in", cfg, configIn(cfg))
	sameJSON(t, "config out", configOut(configIn(cfg)), cfg)

	sa := filled[iwfapi.SearchAttribute]()
	sameJSON(t, "search attribute in", sa, searchAttributeIn(sa))
	sameJSON(t, "search attribute out", searchAttributeOut(searchAttributeIn(sa)), sa)

	kv := filled[iwfapi.KeyValue]()
	sameJSON(t, "key value in", kv, kvIn(kv))
	sameJSON(t, "key value out", kvOut(kvIn(kv)), kv)

	skip := filled[iwfapi.WorkflowSkipTimerRequest]()
	sameJSON(t, "skip timer", skip, skipTimerIn(skip), "workflowId", "workflowRunId")

	res := filled[record.CommandResults]()
	sameJSON(t, "command results", resultsOut(res), res)

	out := filled[record.StateOutput]()
	sameJSON(t, "state output", outputOut(out), out)
}
