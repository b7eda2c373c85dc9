package engine_test

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/archive"
	"github.com/iwf-server/iwf-server/internal/extstore"
)

// payloadThreshold is the external storage threshold of these tests: the
// payloads named big* are longer, the others shorter.
const payloadThreshold = 64

// big returns a payload over payloadThreshold that names what it is, so
// that a test can look for it in the stored rows.
func big(what string) string { return what + ":" + strings.Repeat("x", 2*payloadThreshold) }

// testPayloads is the external store of a test: a file:// store
// (internal/extstore) whose puts and gets can be made to fail.
type testPayloads struct {
	*extstore.Store
	dir              string
	failPut, failGet atomic.Bool
	failedPuts       atomic.Int64
	failedGets       atomic.Int64
}

func (p *testPayloads) Put(ctx context.Context, path, data string) error {
	if p.failPut.Load() {
		p.failedPuts.Add(1)
		return errors.New("injected: the store refuses writes")
	}
	return p.Store.Put(ctx, path, data)
}

func (p *testPayloads) Get(ctx context.Context, storeID, path string) (string, error) {
	if p.failGet.Load() {
		p.failedGets.Add(1)
		return "", errors.New("injected: the store refuses reads")
	}
	return p.Store.Get(ctx, storeID, path)
}

// objects returns the paths of the objects in the store's directory.
func (p *testPayloads) objects(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(p.dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !strings.HasSuffix(path, ".attrs") && !strings.HasSuffix(path, ".tmp") {
			rel, _ := filepath.Rel(p.dir, path)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (p *testPayloads) has(t *testing.T, path string) bool {
	t.Helper()
	for _, o := range p.objects(t) {
		if o == path {
			return true
		}
	}
	return false
}

func newTestPayloads(t *testing.T) *testPayloads {
	t.Helper()
	dir := t.TempDir()
	s, err := extstore.Open(context.Background(), extstore.Location{ID: "local", URL: "file://" + dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &testPayloads{Store: s, dir: dir}
}

// forEachStoreWithPayloads runs fn on both stores with an external store
// of its own for each.
func forEachStoreWithPayloads(t *testing.T, mod func(*engine.Config), fn func(t *testing.T, h *harness, ps *testPayloads)) {
	forEachStoreOpen(t, func(t *testing.T, st engine.Store) {
		ps := newTestPayloads(t)
		h := newHarness(t, st, func(c *engine.Config) {
			c.Payloads, c.PayloadThreshold = ps, payloadThreshold
			c.SweepInterval = 24 * time.Hour // the tests sweep themselves
			if mod != nil {
				mod(c)
			}
		})
		fn(t, h, ps)
	})
}

// inline fails the test unless v is an encoded object with data want
// and no reference.
func inline(t *testing.T, what string, v *iwfapi.EncodedObject, want string) {
	t.Helper()
	if v == nil || deref(v.Data) != want || v.ExtPath != nil || v.ExtStoreId != nil {
		t.Errorf("%s: %s, want the data %.20q… inline without a reference", what, mustJSON(v), want)
	}
}

// shown fails the test unless v has data want and the reference to its
// object beside it, as API answers show stored payloads.
func shown(t *testing.T, what string, v *iwfapi.EncodedObject, want string) {
	t.Helper()
	if v == nil || deref(v.Data) != want || deref(v.ExtStoreId) != "local" || deref(v.ExtPath) == "" {
		t.Errorf("%s: %s, want the data %.20q… with its reference", what, mustJSON(v), want)
	}
}

// storedBytes returns everything the store keeps of a run: its row, its
// executions, history, attributes and buffered messages.
func storedBytes(t *testing.T, h *harness, runID string) string {
	t.Helper()
	var b strings.Builder
	err := h.store.View(context.Background(), func(ctx context.Context, tx engine.ReadTx) error {
		run, err := tx.RunGet(ctx, runID)
		if err != nil {
			return err
		}
		b.Write(run.Data)
		xs, err := tx.ExecutionList(ctx, runID)
		if err != nil {
			return err
		}
		for _, x := range xs {
			b.Write(x.Data)
		}
		evs, err := tx.HistoryList(ctx, runID, 0, 0)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			b.Write(ev.Data)
		}
		das, err := tx.DataAttributeGet(ctx, runID, nil)
		if err != nil {
			return err
		}
		for _, a := range das {
			b.Write(a.Value)
		}
		for _, kind := range []engine.ChannelKind{engine.ChannelSignal, engine.ChannelInternal} {
			counts, err := tx.MessageCounts(ctx, runID, kind)
			if err != nil {
				return err
			}
			for ch := range counts {
				msgs, err := tx.MessagePeek(ctx, runID, kind, ch, 0)
				if err != nil {
					return err
				}
				for _, m := range msgs {
					b.Write(m.Value)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func payloadList(t *testing.T, h *harness, runID string) []engine.PayloadRef {
	t.Helper()
	var out []engine.PayloadRef
	err := h.store.View(context.Background(), func(ctx context.Context, tx engine.ReadTx) error {
		var err error
		out, err = tx.PayloadList(ctx, runID)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func kv(key, data string) iwfapi.KeyValue { return iwfapi.KeyValue{Key: ptr(key), Value: obj(data)} }

func findKV(kvs *[]iwfapi.KeyValue, key string) *iwfapi.EncodedObject {
	for _, kv := range deref(kvs) {
		if deref(kv.Key) == key {
			return kv.Value
		}
	}
	return nil
}

// TestExternalStorageEndToEnd: with an external store, every payload
// over the threshold — the start input and data attributes, a signal, a
// worker's data attribute, state local and publish, the next state's
// input and the result — is kept out of the rows, whose references name
// one object each; the worker receives every payload inline, and every
// API answer shows it inline with its reference.
func TestExternalStorageEndToEnd(t *testing.T) {
	forEachStoreWithPayloads(t, nil, func(t *testing.T, h *harness, ps *testPayloads) {
		ctx := context.Background()
		const id = "ext/end-to-end"
		var (
			mu   sync.Mutex
			seen []string // what the worker checked
		)
		saw := func(what string) {
			mu.Lock()
			seen = append(seen, what)
			mu.Unlock()
		}
		h.worker.state("S1", stateHandlers{
			WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
				inline(t, "waitUntil's input", req.StateInput, big("input"))
				inline(t, "waitUntil's data attribute", findKV(req.DataObjects, "big"), big("attribute"))
				inline(t, "waitUntil's small data attribute", findKV(req.DataObjects, "small"), "small")
				saw("waitUntil")
				return iwfapi.WorkflowStateStartResponse{
					CommandRequest: &iwfapi.CommandRequest{
						SignalCommands:     &[]iwfapi.SignalCommand{{CommandId: ptr("c"), SignalChannelName: "go"}},
						CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
					},
					UpsertStateLocals:          &[]iwfapi.KeyValue{kv("local", big("local"))},
					UpsertDataObjects:          &[]iwfapi.KeyValue{kv("fromWorker", big("worker attribute"))},
					PublishToInterStateChannel: &[]iwfapi.InterStateChannelPublishing{{ChannelName: "ch", Value: obj(big("publish"))}},
				}, 200
			},
			Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				inline(t, "execute's input", req.StateInput, big("input"))
				inline(t, "execute's state local", findKV(req.StateLocals, "local"), big("local"))
				inline(t, "execute's worker attribute", findKV(req.DataObjects, "fromWorker"), big("worker attribute"))
				var sig *iwfapi.EncodedObject
				if r := req.CommandResults; r != nil && len(deref(r.SignalResults)) == 1 {
					sig = deref(r.SignalResults)[0].SignalValue
				}
				inline(t, "execute's signal value", sig, big("signal"))
				saw("S1 execute")
				return decide(next("S2", obj(big("next input")), skipWaitUntil)), 200
			},
		})
		h.worker.state("S2", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			inline(t, "S2's input", req.StateInput, big("next input"))
			saw("S2 execute")
			return decide(next(engine.GracefulCompletingState, obj(big("result")))), 200
		}})
		runID := h.start(id, "S1", obj(big("input")), func(r *iwfapi.WorkflowStartRequest) {
			r.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{DataAttributes: &[]iwfapi.KeyValue{kv("big", big("attribute")), kv("small", "small")}}
		})
		if err := h.eng.SignalWorkflow(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: id, SignalChannelName: "go", SignalValue: obj(big("signal"))}); err != nil {
			t.Fatal(err)
		}
		got := h.result(id)
		if got.WorkflowStatus != iwfapi.WorkflowStatusCompleted || len(deref(got.Results)) != 1 {
			t.Fatalf("result: %s", mustJSON(got))
		}
		shown(t, "getWithWait's result", deref(got.Results)[0].CompletedStateOutput, big("result"))
		h.idle()
		if strings.Join(seen, ",") != "waitUntil,S1 execute,S2 execute" {
			t.Fatalf("the worker saw %v", seen)
		}

		// The rows hold references only.
		stored := storedBytes(t, h, runID)
		for _, what := range []string{"input", "attribute", "signal", "local", "worker attribute", "publish", "next input", "result"} {
			if strings.Contains(stored, big(what)) {
				t.Errorf("the store keeps the %s inline", what)
			}
		}
		if !strings.Contains(stored, `"extStoreId":"local"`) || !strings.Contains(stored, `"small"`) {
			t.Errorf("the rows hold no reference, or lost the small payload: %.300s", stored)
		}
		// One object per payload, however many rows repeat it, each kept by the run.
		kept := payloadList(t, h, runID)
		if len(kept) != 8 || len(ps.objects(t)) != 8 {
			t.Fatalf("%d objects kept by the run, %d in the store; want 8: %v %v", len(kept), len(ps.objects(t)), kept, ps.objects(t))
		}
		for _, r := range kept {
			if r.StoreID != "local" || !strings.HasPrefix(r.Path, "ext_end-to-end/") || !ps.has(t, r.Path) {
				t.Errorf("object %+v: want the store local, a path under ext_end-to-end/ and a file", r)
			}
		}

		// Every answer shows the payloads inline, with their references.
		da, err := h.eng.GetDataAttributes(ctx, iwfapi.WorkflowGetDataObjectsRequest{WorkflowId: id})
		if err != nil {
			t.Fatal(err)
		}
		shown(t, "dataobjects/get", findKV(da.Objects, "big"), big("attribute"))
		shown(t, "dataobjects/get of the worker's", findKV(da.Objects, "fromWorker"), big("worker attribute"))
		if small := findKV(da.Objects, "small"); small == nil || small.ExtPath != nil || deref(small.Data) != "small" {
			t.Errorf("dataobjects/get of the small one: %s", mustJSON(small))
		}
		g, err := h.eng.GetWorkflow(ctx, iwfapi.WorkflowGetRequest{WorkflowId: id, NeedsResults: ptr(true)})
		if err != nil || len(deref(g.Results)) != 1 {
			t.Fatalf("get: %s %v", mustJSON(g), err)
		}
		shown(t, "get's result", deref(g.Results)[0].CompletedStateOutput, big("result"))
		hist, err := h.eng.WorkflowHistory(ctx, iwfapi.WorkflowHistoryRequest{WorkflowId: id})
		if err != nil {
			t.Fatal(err)
		}
		dump := dumpAll(t, h, id)
		for _, what := range []string{"input", "signal", "next input", "result"} {
			if !strings.Contains(mustJSON(hist), big(what)) {
				t.Errorf("the history does not show the %s", what)
			}
			if !strings.Contains(dump, big(what)) {
				t.Errorf("the dump does not show the %s", what)
			}
		}
		for _, what := range []string{"local", "attribute"} {
			if !strings.Contains(dump, big(what)) {
				t.Errorf("the dump does not show the %s", what)
			}
		}
		ins, err := h.eng.InspectRun(ctx, id, runID, []string{"S1-1"}, 10)
		if err != nil || len(ins.Executions) != 1 || len(ins.Internal) != 1 {
			t.Fatalf("inspect: %+v %v", ins, err)
		}
		if !strings.Contains(string(ins.Executions[0].Data), big("local")) || !strings.Contains(string(ins.Internal[0].Value), big("publish")) {
			t.Errorf("inspect shows references: %s %s", ins.Executions[0].Data, ins.Internal[0].Value)
		}

		// A reference loads through encodedobject/load.
		ref := findKV(da.Objects, "big")
		loaded, err := h.eng.LoadEncodedObject(ctx, iwfapi.EncodedObject{Encoding: ref.Encoding, ExtStoreId: ref.ExtStoreId, ExtPath: ref.ExtPath})
		if err != nil {
			t.Fatal(err)
		}
		shown(t, "encodedobject/load", &loaded, big("attribute"))
		if m := h.idleMetrics(); !strings.Contains(m, "iwf_external_storage_objects_written_total 8\n") {
			t.Errorf("metrics:\n%s", grepLines(m, "iwf_external_storage"))
		}
	})
}

func dumpAll(t *testing.T, h *harness, id string) string {
	t.Helper()
	var b strings.Builder
	for page := int32(0); ; page++ {
		d, err := h.eng.DumpWorkflow(context.Background(), iwfapi.WorkflowDumpRequest{WorkflowId: id, PageNum: page, PageSizeInBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(d.JsonData)
		if page+1 >= d.TotalPages {
			return b.String()
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestExternalStorageReferencesSent: a reference a client or a worker
// sends is loaded and stored as if its data had been sent (in an object
// of the run's own); one that names no store of the server, a path it
// does not write, or no object is refused with a 400, and nothing is
// stored. An RPC's input sent as a reference reaches the worker inline,
// and its big data attribute upsert is kept out of the rows.
func TestExternalStorageReferencesSent(t *testing.T) {
	forEachStoreWithPayloads(t, nil, func(t *testing.T, h *harness, ps *testPayloads) {
		ctx := context.Background()
		h.start("ext/source", "", nil, func(r *iwfapi.WorkflowStartRequest) {
			r.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{DataAttributes: &[]iwfapi.KeyValue{kv("doc", big("document"))}}
		})
		da, err := h.eng.GetDataAttributes(ctx, iwfapi.WorkflowGetDataObjectsRequest{WorkflowId: "ext/source"})
		if err != nil {
			t.Fatal(err)
		}
		src := findKV(da.Objects, "doc")
		ref := func() *iwfapi.EncodedObject {
			return &iwfapi.EncodedObject{Encoding: src.Encoding, ExtStoreId: src.ExtStoreId, ExtPath: src.ExtPath}
		}
		h.worker.rpc("echo", func(req iwfapi.WorkflowWorkerRpcRequest) (iwfapi.WorkflowWorkerRpcResponse, int) {
			inline(t, "the RPC's input", req.Input, big("document"))
			inline(t, "the RPC's data attribute", findKV(req.DataAttributes, "copy"), big("document"))
			return iwfapi.WorkflowWorkerRpcResponse{Output: obj("ok"), UpsertDataAttributes: &[]iwfapi.KeyValue{kv("rpc", big("rpc upsert"))}}, 200
		})
		runID := h.start("ext/target", "", nil)
		// Sent back as an answer shows it (data and reference): the data counts.
		if err := h.eng.SetDataAttributes(ctx, iwfapi.WorkflowSetDataObjectsRequest{WorkflowId: "ext/target",
			Objects: &[]iwfapi.KeyValue{{Key: ptr("copy"), Value: src}}}); err != nil {
			t.Fatal(err)
		}
		// A reference alone is loaded.
		if err := h.eng.SignalWorkflow(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: "ext/target", SignalChannelName: "s", SignalValue: ref()}); err != nil {
			t.Fatal(err)
		}
		resp, err := h.eng.InvokeRPC(ctx, iwfapi.WorkflowRpcRequest{WorkflowId: "ext/target", RpcName: "echo", Input: ref()})
		if err != nil || deref(resp.Output.Data) != "ok" {
			t.Fatalf("rpc: %s %v", mustJSON(resp), err)
		}
		kept := payloadList(t, h, runID)
		if len(kept) != 3 {
			t.Fatalf("the target run keeps %v, want objects of its own for the copy, the signal and the RPC's upsert", kept)
		}
		for _, r := range kept {
			if r.Path == deref(src.ExtPath) {
				t.Fatalf("the target run shares the source's object %s", r.Path)
			}
		}
		stored := storedBytes(t, h, runID)
		if strings.Contains(stored, big("document")) || strings.Contains(stored, big("rpc upsert")) || strings.Contains(stored, deref(src.ExtPath)) {
			t.Fatalf("the target's rows: %.500s", stored)
		}

		before := len(ps.objects(t))
		for _, c := range []struct {
			name string
			v    iwfapi.EncodedObject
		}{
			{"an unknown store", iwfapi.EncodedObject{ExtStoreId: ptr("elsewhere"), ExtPath: src.ExtPath}},
			{"a path the server does not write", iwfapi.EncodedObject{ExtStoreId: ptr("local"), ExtPath: ptr("../../etc/passwd")}},
			{"no object", iwfapi.EncodedObject{ExtStoreId: ptr("local"), ExtPath: ptr("ext_source/00000000-0000-4000-8000-000000000000")}},
			{"a path without its store", iwfapi.EncodedObject{ExtPath: src.ExtPath}},
		} {
			err := h.eng.SignalWorkflow(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: "ext/target", SignalChannelName: "s", SignalValue: &c.v})
			if engine.CodeOf(err) != engine.CodeInvalidArgument {
				t.Errorf("signal with %s: %v, want invalid argument", c.name, err)
			}
			if _, err := h.eng.LoadEncodedObject(ctx, c.v); engine.CodeOf(err) != engine.CodeInvalidArgument {
				t.Errorf("encodedobject/load of %s: %v, want invalid argument", c.name, err)
			}
		}
		if n := len(ps.objects(t)); n != before {
			t.Fatalf("refused calls wrote %d objects", n-before)
		}
		if got := storedBytes(t, h, runID); got != stored {
			t.Fatal("a refused call changed the run")
		}
		// An object with its data loads as it is.
		if got, err := h.eng.LoadEncodedObject(ctx, *obj("x")); err != nil || deref(got.Data) != "x" {
			t.Fatalf("load of inline data: %s %v", mustJSON(got), err)
		}
	})
}

// TestExternalStorageFaults: a store that refuses writes fails an API
// write with a 503 and stores nothing; a worker's answer whose payload
// cannot be written is dropped and the call made again, without counting
// an attempt, until the store takes it; a payload that cannot be read
// holds its worker call back until it can. Each failure is counted.
func TestExternalStorageFaults(t *testing.T) {
	forEachStoreWithPayloads(t, nil, func(t *testing.T, h *harness, ps *testPayloads) {
		ctx := context.Background()
		runID := h.start("ext/api", "", nil)
		ps.failPut.Store(true)
		err := h.eng.SignalWorkflow(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: "ext/api", SignalChannelName: "s", SignalValue: obj(big("signal"))})
		if engine.CodeOf(err) != engine.CodeUnavailable {
			t.Fatalf("signal while the store refuses writes: %v, want unavailable (503)", err)
		}
		err = h.eng.SetDataAttributes(ctx, iwfapi.WorkflowSetDataObjectsRequest{WorkflowId: "ext/api", Objects: &[]iwfapi.KeyValue{kv("k", big("attribute"))}})
		if engine.CodeOf(err) != engine.CodeUnavailable {
			t.Fatalf("dataobjects/set while the store refuses writes: %v", err)
		}
		if strings.Contains(storedBytes(t, h, runID), "ExternalInput") || strings.Contains(dumpAll(t, h, "ext/api"), `"s"`) {
			t.Fatal("a refused call left something in the run")
		}
		// Small payloads do not need the store.
		if err := h.eng.SignalWorkflow(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: "ext/api", SignalChannelName: "s", SignalValue: obj("small")}); err != nil {
			t.Fatalf("a small signal: %v", err)
		}

		// A worker's answer: its big next input cannot be written.
		var calls, attempts sync.Map // attempt numbers seen per call
		var n atomic.Int64
		h.worker.state("W1", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			calls.Store(n.Add(1), deref(req.Context.Attempt))
			return decide(next("W2", obj(big("next")), skipWaitUntil)), 200
		}})
		h.worker.state("W2", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			inline(t, "W2's input", req.StateInput, big("next"))
			return decide(next(engine.GracefulCompletingState, nil)), 200
		}})
		h.start("ext/worker", "W1", nil, func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
		})
		h.eventually("the answer to be tried again", func() bool { return n.Load() >= 2 })
		ps.failPut.Store(false)
		if got := h.result("ext/worker"); got.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			t.Fatalf("ext/worker: %s", mustJSON(got))
		}
		calls.Range(func(k, v any) bool {
			attempts.Store(v, true)
			return true
		})
		attempts.Range(func(k, _ any) bool {
			if k.(int32) != 1 {
				t.Errorf("an execute call with attempt %d: a store failure counted as an attempt", k)
			}
			return true
		})

		// A payload that cannot be read holds the call back.
		var executed atomic.Int64
		h.worker.state("R1", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			inline(t, "R1's input", req.StateInput, big("read me"))
			executed.Add(1)
			return decide(next(engine.GracefulCompletingState, nil)), 200
		}})
		ps.failGet.Store(true)
		h.start("ext/read", "R1", obj(big("read me")), func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
		})
		h.eventually("the read to be tried again", func() bool { return ps.failedGets.Load() >= 2 })
		if executed.Load() != 0 {
			t.Fatal("the worker was called without its input")
		}
		_, err = h.eng.GetDataAttributes(ctx, iwfapi.WorkflowGetDataObjectsRequest{WorkflowId: "ext/source-less"})
		if engine.CodeOf(err) != engine.CodeWorkflowNotExists {
			t.Fatalf("get of an unknown workflow: %v", err)
		}
		if _, err := h.eng.GetWorkflow(ctx, iwfapi.WorkflowGetRequest{WorkflowId: "ext/worker", NeedsResults: ptr(true)}); err != nil {
			t.Fatalf("get of a result without payloads: %v", err)
		}
		ps.failGet.Store(false)
		if got := h.result("ext/read"); got.WorkflowStatus != iwfapi.WorkflowStatusCompleted || executed.Load() != 1 {
			t.Fatalf("ext/read: %s, %d calls", mustJSON(got), executed.Load())
		}
		m := h.idleMetrics()
		if !strings.Contains(m, `iwf_external_storage_errors_total{op="put"}`) || !strings.Contains(m, `iwf_external_storage_errors_total{op="get"}`) {
			t.Errorf("the failures are not counted:\n%s", grepLines(m, "iwf_external_storage"))
		}
	})
}

// TestExternalStorageDeletion: retention deletes a run's objects after
// the run, unless another run refers to them (a reset run, a workflow
// retry); an object whose transaction never committed is deleted once
// the grace has passed; the runs that still refer to objects read them.
func TestExternalStorageDeletion(t *testing.T) {
	forEachStoreWithPayloads(t, func(c *engine.Config) {
		c.Clock = &shiftClock{}
		c.Retention = time.Hour
		c.PayloadGrace = 2 * time.Hour
	}, func(t *testing.T, h *harness, ps *testPayloads) {
		ctx := context.Background()
		clk := h.clock.(*shiftClock)
		waitGo := stateHandlers{
			WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
				return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
					SignalCommands: &[]iwfapi.SignalCommand{{CommandId: ptr("c"), SignalChannelName: "go"}}, CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
				}}, 200
			},
		}
		// A: completes; its input and result go with it.
		h.worker.state("Done", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			return decide(next(engine.GracefulCompletingState, obj(big("A's result")))), 200
		}})
		runA := h.start("ext/a", "Done", obj(big("A's input")), func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
		})
		if got := h.result("ext/a"); got.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			t.Fatalf("ext/a: %s", mustJSON(got))
		}
		objectsA := payloadList(t, h, runA)
		if len(objectsA) != 2 {
			t.Fatalf("A keeps %v", objectsA)
		}

		// B: reset while it waits: the new run shares B's input.
		var bInputs atomic.Int64
		h.worker.state("B", stateHandlers{WaitUntil: waitGo.WaitUntil, Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			inline(t, "B's input", req.StateInput, big("B's input"))
			bInputs.Add(1)
			return decide(next(engine.GracefulCompletingState, nil)), 200
		}})
		noTimeout := func(r *iwfapi.WorkflowStartRequest) { r.WorkflowTimeoutSeconds = 0 } // the clock jumps hours
		runB1 := h.start("ext/b", "B", obj(big("B's input")), noTimeout)
		h.eventually("B to wait", func() bool { return h.worker.count("B.waitUntil") == 1 })
		reset, err := h.eng.ResetWorkflow(ctx, iwfapi.WorkflowResetRequest{WorkflowId: "ext/b", ResetType: iwfapi.WorkflowResetTypeBeginning})
		if err != nil {
			t.Fatal(err)
		}
		runB2 := reset.WorkflowRunId
		if got, want := payloadList(t, h, runB2), payloadList(t, h, runB1); mustJSON(got) != mustJSON(want) || len(got) != 1 {
			t.Fatalf("the reset run keeps %v, the base run %v", got, want)
		}

		// C: fails and is retried; the retry shares the start input. Its
		// runs follow one another: the first calls are the first run's.
		var cWaits, cExecutes atomic.Int64
		h.worker.state("C", stateHandlers{WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
			if cWaits.Add(1) == 1 {
				return iwfapi.WorkflowStateStartResponse{}, 200
			}
			return waitGo.WaitUntil(req)
		}, Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			inline(t, "C's input", req.StateInput, big("C's input"))
			if cExecutes.Add(1) == 1 {
				return decide(next(engine.ForceFailingState, nil)), 200
			}
			return decide(next(engine.GracefulCompletingState, nil)), 200
		}})
		runC1 := h.start("ext/c", "C", obj(big("C's input")), noTimeout, func(r *iwfapi.WorkflowStartRequest) {
			r.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{RetryPolicy: &iwfapi.WorkflowRetryPolicy{MaximumAttempts: ptr(int32(2))}}
		})
		var runC2 string
		h.eventually("C to be retried", func() bool {
			g, err := h.eng.GetWorkflow(ctx, iwfapi.WorkflowGetRequest{WorkflowId: "ext/c"})
			runC2 = g.WorkflowRunId
			return err == nil && runC2 != runC1
		})
		if got, want := payloadList(t, h, runC2), payloadList(t, h, runC1); mustJSON(got) != mustJSON(want) || len(got) != 1 {
			t.Fatalf("the retry keeps %v, the failed run %v", got, want)
		}

		// An object whose transaction never committed: a start answered
		// with the running run.
		before := ps.objects(t)
		resp, err := h.eng.StartWorkflow(ctx, iwfapi.WorkflowStartRequest{WorkflowId: "ext/b", IwfWorkflowType: "T", IwfWorkerUrl: h.worker.srv.URL,
			StartStateId: ptr("B"), StateInput: obj(big("never kept")),
			WorkflowStartOptions: &iwfapi.WorkflowStartOptions{WorkflowAlreadyStartedOptions: &iwfapi.WorkflowAlreadyStartedOptions{IgnoreAlreadyStartedError: true},
				WorkflowIDReusePolicy: ptr(iwfapi.WorkflowIDReusePolicyRejectDuplicate)}})
		if err != nil || deref(resp.WorkflowRunId) != runB2 {
			t.Fatalf("start of a running id: %s %v", mustJSON(resp), err)
		}
		orphans := newObjects(before, ps.objects(t))
		if len(orphans) != 1 {
			t.Fatalf("objects written by the start: %v", orphans)
		}
		h.idle()

		// Within the grace, nothing is deleted; a retention later, A and
		// the closed runs of B and C go, and so do the objects no run
		// keeps: A's, and the orphan's once the grace has passed too.
		if st, err := h.eng.SweepPayloads(ctx); err != nil || st.Deleted != 0 || st.Expired != 0 {
			t.Fatalf("an early payload sweep: %+v %v", st, err)
		}
		clk.offset.Store(int64(3 * time.Hour))
		h.eventually("the closed runs to be deleted", func() bool {
			st, err := h.eng.Sweep(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return st.Deleted == 0 && len(payloadList(t, h, runA)) == 0
		})
		for _, id := range []string{runA, runB1, runC1} {
			if got := payloadList(t, h, id); len(got) != 0 {
				t.Fatalf("deleted run %s still keeps %v", id, got)
			}
		}
		st, err := h.eng.SweepPayloads(ctx)
		if err != nil || st.Expired != 1 || st.Deleted != 3 {
			t.Fatalf("payload sweep: %+v %v; want the orphan expired and it and A's two objects deleted", st, err)
		}
		for _, r := range objectsA {
			if ps.has(t, r.Path) {
				t.Errorf("A's object %s is still in the store", r.Path)
			}
		}
		if ps.has(t, orphans[0]) {
			t.Errorf("the orphan %s is still in the store", orphans[0])
		}
		for _, r := range append(payloadList(t, h, runB2), payloadList(t, h, runC2)...) {
			if !ps.has(t, r.Path) {
				t.Errorf("%s, kept by a running run, was deleted", r.Path)
			}
		}
		if st, err := h.eng.SweepPayloads(ctx); err != nil || st.Deleted != 0 {
			t.Fatalf("a second payload sweep: %+v %v", st, err)
		}
		// The running runs read what they keep.
		for _, id := range []string{"ext/b", "ext/c"} {
			if err := h.eng.SignalWorkflow(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: id, SignalChannelName: "go"}); err != nil {
				t.Fatal(err)
			}
			if got := h.result(id); got.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
				t.Fatalf("%s: %s", id, mustJSON(got))
			}
		}
		if bInputs.Load() != 1 {
			t.Fatalf("B's execute ran %d times", bInputs.Load())
		}
		m := h.idleMetrics()
		if !strings.Contains(m, "iwf_external_storage_objects_deleted_total 3\n") {
			t.Errorf("metrics:\n%s", grepLines(m, "iwf_external_storage"))
		}
	})
}

// newObjects returns the paths of after that before lacks.
func newObjects(before, after []string) []string {
	had := map[string]bool{}
	for _, p := range before {
		had[p] = true
	}
	var out []string
	for _, p := range after {
		if !had[p] {
			out = append(out, p)
		}
	}
	return out
}

// TestExternalStorageOff: without an external store, references pass as
// opaque values, as before, and encodedobject/load is not offered.
func TestExternalStorageOff(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		h.start("ext/off", "", nil)
		ref := iwfapi.EncodedObject{Encoding: ptr("json"), ExtStoreId: ptr("s"), ExtPath: ptr("p")}
		if err := h.eng.SetDataAttributes(ctx, iwfapi.WorkflowSetDataObjectsRequest{WorkflowId: "ext/off",
			Objects: &[]iwfapi.KeyValue{{Key: ptr("r"), Value: &ref}, kv("big", big("kept inline"))}}); err != nil {
			t.Fatal(err)
		}
		da, err := h.eng.GetDataAttributes(ctx, iwfapi.WorkflowGetDataObjectsRequest{WorkflowId: "ext/off"})
		if err != nil {
			t.Fatal(err)
		}
		if got := findKV(da.Objects, "r"); mustJSON(got) != mustJSON(ref) {
			t.Fatalf("the reference came back as %s", mustJSON(got))
		}
		if got := findKV(da.Objects, "big"); deref(got.Data) != big("kept inline") || got.ExtPath != nil {
			t.Fatalf("the big payload came back as %s", mustJSON(got))
		}
		if _, err := h.eng.LoadEncodedObject(ctx, ref); engine.CodeOf(err) != engine.CodeUnimplemented {
			t.Fatalf("encodedobject/load without a store: %v", err)
		}
	})
}

// TestExternalStorageArchive: an archived run holds its payloads
// themselves, not references to objects that go with the run.
func TestExternalStorageArchive(t *testing.T) {
	forEachStoreOpen(t, func(t *testing.T, st engine.Store) {
		dir := t.TempDir()
		b, err := archive.Open(context.Background(), "file://"+dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		ps := newTestPayloads(t)
		clock := &shiftClock{}
		h := newHarness(t, st, func(c *engine.Config) {
			c.Payloads, c.PayloadThreshold = ps, payloadThreshold
			c.Archive, c.Clock, c.Retention, c.SweepInterval = b, clock, time.Hour, 24*time.Hour
		})
		ctx := context.Background()
		h.worker.state("Done", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			return decide(next(engine.GracefulCompletingState, obj(big("archived result")))), 200
		}})
		h.start("ext/archived", "Done", obj(big("archived input")), func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
			r.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{DataAttributes: &[]iwfapi.KeyValue{kv("doc", big("archived attribute"))}}
		})
		if got := h.result("ext/archived"); got.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			t.Fatalf("ext/archived: %s", mustJSON(got))
		}
		h.idle()
		clock.offset.Store(int64(2 * time.Hour))
		st1, err := h.eng.Sweep(ctx)
		if err != nil || st1.Archived != 1 || st1.Deleted != 1 {
			t.Fatalf("sweep: %+v %v", st1, err)
		}
		if st2, err := h.eng.SweepPayloads(ctx); err != nil || st2.Deleted != 3 {
			t.Fatalf("payload sweep: %+v %v", st2, err)
		}
		var doc string
		err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || !strings.HasSuffix(p, ".json.gz") {
				return err
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			zr, err := gzip.NewReader(f)
			if err != nil {
				return err
			}
			b, err := io.ReadAll(zr)
			doc = string(b)
			return err
		})
		if err != nil || doc == "" {
			t.Fatalf("the archived object: %v", err)
		}
		for _, what := range []string{"archived input", "archived result", "archived attribute"} {
			if !strings.Contains(doc, big(what)) {
				t.Errorf("the archive does not hold the %s", what)
			}
		}
		if strings.Contains(doc, "extPath") {
			t.Errorf("the archive holds references: %.300s", doc)
		}
	})
}

// flakyS3 wraps an in-process S3 (gofakes3): while failing is set, a PUT
// fails after part of its body has arrived (a store that breaks mid-write)
// and every other request fails at once, with a 503.
type flakyS3 struct {
	next       http.Handler
	failing    atomic.Bool
	failedPuts atomic.Int64
}

func (f *flakyS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !f.failing.Load() {
		f.next.ServeHTTP(w, r)
		return
	}
	if r.Method == http.MethodPut {
		_, _ = io.CopyN(io.Discard, r.Body, 16)
		f.failedPuts.Add(1)
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>ServiceUnavailable</Code><Message>down</Message></Error>`)
}

// TestExternalStorageS3: the engine on an s3:// store (gofakes3 in
// process): payloads go out and come back inline; while the store fails
// mid-write, an API write answers 503 and stores nothing, and a worker's
// answer is taken again once the store is back.
func TestExternalStorageS3(t *testing.T) {
	forEachStoreOpen(t, func(t *testing.T, st engine.Store) {
		backend := s3mem.New()
		if err := backend.CreateBucket("iwf-payloads"); err != nil {
			t.Fatal(err)
		}
		s3 := &flakyS3{next: gofakes3.New(backend).Server()}
		srv := httptest.NewServer(s3)
		t.Cleanup(srv.Close)
		// Anonymous requests: no credentials from the environment, which
		// parallel tests cannot set.
		store, err := extstore.Open(context.Background(), extstore.Location{ID: "s3",
			URL: "s3://iwf-payloads?endpoint=" + srv.URL + "&region=us-east-1&use_path_style=true&anonymous=true"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		h := newHarness(t, st, func(c *engine.Config) { c.Payloads, c.PayloadThreshold = store, payloadThreshold })
		ctx := context.Background()
		var s1 atomic.Int64
		h.worker.state("S1", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			inline(t, "S1's input", req.StateInput, big("s3 input"))
			if s1.Add(1) == 1 {
				// The store breaks as the answer arrives, and is back
				// once the engine has given up writing (the SDK's own
				// retries included).
				s3.failing.Store(true)
				go func() {
					for !strings.Contains(metrics(t, h), `iwf_external_storage_errors_total{op="put"}`) {
						time.Sleep(time.Millisecond)
					}
					s3.failing.Store(false)
				}()
			}
			return decide(next("S2", obj(big("s3 next")))), 200
		}})
		h.worker.state("S2", stateHandlers{
			WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
				inline(t, "S2's input", req.StateInput, big("s3 next"))
				return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
					CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
					SignalCommands:     &[]iwfapi.SignalCommand{{SignalChannelName: "go", CommandId: ptr("go")}},
				}}, 200
			},
			Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				inline(t, "S2's signal", deref(req.CommandResults.SignalResults)[0].SignalValue, big("s3 signal"))
				return decide(next(engine.GracefulCompletingState, obj(big("s3 result")))), 200
			},
		})
		runID := h.start("ext/s3", "S1", obj(big("s3 input")), func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
		})
		h.eventually("S2 to wait", func() bool { return h.worker.count("S2.waitUntil") == 1 })
		if n := s1.Load(); n < 2 {
			t.Fatalf("S1's answer was applied although its payload could not be written (%d calls)", n)
		}
		s3.failing.Store(true)
		err = h.eng.SignalWorkflow(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: "ext/s3", SignalChannelName: "go", SignalValue: obj(big("s3 signal"))})
		if engine.CodeOf(err) != engine.CodeUnavailable {
			t.Fatalf("a signal while the store fails: %v, want unavailable (503)", err)
		}
		if strings.Contains(storedBytes(t, h, runID), "ExternalInput") {
			t.Fatal("the refused signal was stored")
		}
		s3.failing.Store(false)
		if err := h.eng.SignalWorkflow(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: "ext/s3", SignalChannelName: "go", SignalValue: obj(big("s3 signal"))}); err != nil {
			t.Fatal(err)
		}
		got := h.result("ext/s3")
		if got.WorkflowStatus != iwfapi.WorkflowStatusCompleted || len(deref(got.Results)) != 1 {
			t.Fatalf("ext/s3: %s", mustJSON(got))
		}
		if out := deref(got.Results)[0].CompletedStateOutput; deref(out.Data) != big("s3 result") || deref(out.ExtStoreId) != "s3" {
			t.Fatalf("the result: %s", mustJSON(out))
		}
		if strings.Contains(storedBytes(t, h, runID), big("s3")[:10]+"x") {
			t.Fatal("a payload is stored inline")
		}
		// Every object the run keeps is in the bucket; the failed writes
		// left none behind that the run refers to.
		for _, r := range payloadList(t, h, runID) {
			if _, err := backend.HeadObject("iwf-payloads", r.Path); err != nil {
				t.Errorf("object %s: %v", r.Path, err)
			}
		}
	})
}

// metrics returns the engine's metrics as they are now.
func metrics(t *testing.T, h *harness) string {
	var b strings.Builder
	if err := h.eng.WriteMetrics(&b); err != nil {
		t.Error(err)
	}
	return b.String()
}
