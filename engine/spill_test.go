package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/httpapi"
	"github.com/iwf-server/iwf-server/internal/store/sqlite"
)

// errMidWrite is the failure of a test store that fails mid-write.
var errMidWrite = errors.New("injected: the store fails mid-write")

// PutStream streams to the file store. With failPut set, the store fails
// mid-write: the first MiB goes to the bucket's writer, then the write
// fails and is abandoned.
func (p *testPayloads) PutStream(ctx context.Context, path string, r io.Reader) error {
	if !p.failPut.Load() {
		return p.Store.PutStream(ctx, path, r)
	}
	p.failedPuts.Add(1)
	return p.Store.PutStream(ctx, path, io.MultiReader(io.LimitReader(r, 1<<20), iotest.ErrReader(errMidWrite)))
}

// spillAPI is the REST API on h's engine as the server builds it with an
// external store: big payloads of request bodies stream to the store.
func spillAPI(t *testing.T, h *harness) http.Handler {
	t.Helper()
	api, err := httpapi.NewHandler(h.eng, httpapi.Options{ExternalStorage: true, Spill: h.eng, MaxBodyBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return api
}

// post sends body to the API.
func post(api http.Handler, path string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	api.ServeHTTP(rec, req)
	return rec
}

// escapy returns a payload of about n bytes that JSON escapes in every
// way: quotes, backslashes, control characters, HTML characters (\u003c),
// and characters of two, three and four bytes.
func escapy(what string, n int) string {
	const pattern = "0123456789 \"quoted\" back\\slash\nline\ttab <b>&amp; é € 😀 "
	return what + ":" + strings.Repeat(pattern, n/len(pattern))
}

// sameData fails the test unless v holds data want; it says how they
// differ without printing megabytes.
func sameData(t *testing.T, what string, v *iwfapi.EncodedObject, want string) {
	t.Helper()
	if v == nil || v.Data == nil {
		t.Errorf("%s: no data", what)
		return
	}
	if got := *v.Data; got != want {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Errorf("%s: %d bytes of data, want %d; they differ from byte %d", what, len(got), len(want), i)
	}
}

// holdsString reports whether the decoded JSON v holds the string s.
func holdsString(v any, s string) bool {
	switch x := v.(type) {
	case string:
		return x == s
	case map[string]any:
		for _, c := range x {
			if holdsString(c, s) {
				return true
			}
		}
	case []any:
		for _, c := range x {
			if holdsString(c, s) {
				return true
			}
		}
	}
	return false
}

// TestSpillEndToEnd: with an external store, a start request with a data
// attribute of 32 MiB and a signal with a big value stream to the store
// as they arrive through the API. The run keeps the objects written for
// the requests, each once: neither loaded nor written again. The worker
// receives the payloads inline, the API shows them inline, and the rows
// hold only references. A reference a client sends, even to an object
// streamed for another request, is handled as any sent reference: loaded,
// and written again for the run.
func TestSpillEndToEnd(t *testing.T) {
	forEachStoreWithPayloads(t, func(c *engine.Config) {
		c.PayloadThreshold = engine.DefaultPayloadThreshold
	}, func(t *testing.T, h *harness, ps *testPayloads) {
		const id = "spill/end-to-end"
		api := spillAPI(t, h)
		attribute := escapy("attribute", 32<<20)
		signal := escapy("signal", 4<<20)
		var (
			mu   sync.Mutex
			seen []string
		)
		h.worker.state("S1", stateHandlers{
			WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
				sameData(t, "waitUntil's data attribute", findKV(req.DataObjects, "big"), attribute)
				inline(t, "waitUntil's input", req.StateInput, "small input")
				mu.Lock()
				seen = append(seen, "waitUntil")
				mu.Unlock()
				return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
					SignalCommands:     &[]iwfapi.SignalCommand{{CommandId: ptr("c"), SignalChannelName: "go"}},
					CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
				}}, 200
			},
			Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				var sig *iwfapi.EncodedObject
				if r := req.CommandResults; r != nil && len(deref(r.SignalResults)) == 1 {
					sig = deref(r.SignalResults)[0].SignalValue
				}
				sameData(t, "execute's signal value", sig, signal)
				sameData(t, "execute's data attribute", findKV(req.DataObjects, "big"), attribute)
				mu.Lock()
				seen = append(seen, "execute")
				mu.Unlock()
				return decide(next(engine.GracefulCompletingState, nil)), 200
			},
		})
		start := mustJSON(iwfapi.WorkflowStartRequest{
			WorkflowId: id, IwfWorkflowType: "T", IwfWorkerUrl: h.worker.srv.URL, StartStateId: ptr("S1"),
			StateInput: obj("small input"),
			WorkflowStartOptions: &iwfapi.WorkflowStartOptions{DataAttributes: &[]iwfapi.KeyValue{
				kv("big", attribute), kv("small", "small"),
			}},
		})
		rec := post(api, "/api/v1/workflow/start", []byte(start))
		if rec.Code != 200 {
			t.Fatalf("start: %d %s", rec.Code, rec.Body)
		}
		var started iwfapi.WorkflowStartResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &started); err != nil {
			t.Fatal(err)
		}
		runID := deref(started.WorkflowRunId)
		h.eventually("the state to wait", func() bool { return h.worker.count("S1.waitUntil") == 1 })
		objects := ps.objects(t)
		if len(objects) != 1 || !strings.HasPrefix(objects[0], "_request/") {
			t.Fatalf("objects after the start: %v, want one under _request/", objects)
		}
		streamed := objects[0]

		// A client's reference to the object streamed for the start is
		// not one streamed for its own request: it is loaded and written
		// again, for the run.
		forged := fmt.Sprintf(`{"workflowId":%q,"signalChannelName":"copy","signalValue":{"encoding":"json","extStoreId":"local","extPath":%q}}`, id, streamed)
		if rec := post(api, "/api/v1/workflow/signal", []byte(forged)); rec.Code != 200 {
			t.Fatalf("a signal referring to another request's object: %d %s", rec.Code, rec.Body)
		}
		copied := newObjects(objects, ps.objects(t))
		if len(copied) != 1 || !strings.HasPrefix(copied[0], "spill_end-to-end/") {
			t.Fatalf("objects written for a sent reference: %v, want one of the run's", copied)
		}

		sig := mustJSON(iwfapi.WorkflowSignalRequest{WorkflowId: id, SignalChannelName: "go", SignalValue: obj(signal)})
		if rec := post(api, "/api/v1/workflow/signal", []byte(sig)); rec.Code != 200 {
			t.Fatalf("signal: %d %s", rec.Code, rec.Body)
		}
		if got := h.result(id); got.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			t.Fatalf("result: %s", mustJSON(got))
		}
		h.idle()
		mu.Lock()
		if strings.Join(seen, ",") != "waitUntil,execute" {
			t.Fatalf("the worker saw %v", seen)
		}
		mu.Unlock()

		// Three objects, each written once, all kept by the run.
		objects = ps.objects(t)
		kept := payloadList(t, h, runID)
		if len(objects) != 3 || len(kept) != 3 {
			t.Fatalf("objects %v, kept by the run %v; want 3", objects, kept)
		}
		requests := 0
		for _, r := range kept {
			if !ps.has(t, r.Path) || r.StoreID != "local" {
				t.Errorf("kept %+v: not in the store", r)
			}
			if strings.HasPrefix(r.Path, "_request/") {
				requests++
			}
		}
		if requests != 2 {
			t.Errorf("kept %v: want two objects streamed from the requests", kept)
		}
		if m := h.idleMetrics(); !strings.Contains(m, "iwf_external_storage_objects_written_total 3\n") {
			t.Errorf("metrics:\n%s", grepLines(m, "iwf_external_storage"))
		}

		// The rows hold references only.
		stored := storedBytes(t, h, runID)
		if strings.Contains(stored, `back\\slash\nline`) { // a piece of either, as JSON holds it
			t.Errorf("the store keeps a payload inline")
		}
		if len(stored) > 1<<20 || !strings.Contains(stored, `"extPath":"_request/`) {
			t.Errorf("the rows (%d bytes) hold no streamed reference", len(stored))
		}

		// The API shows them inline.
		rec = post(api, "/api/v1/workflow/dataobjects/get", []byte(fmt.Sprintf(`{"workflowId":%q,"keys":["big","small"]}`, id)))
		var das iwfapi.WorkflowGetDataObjectsResponse
		if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &das) != nil {
			t.Fatalf("dataobjects/get: %d %.300s", rec.Code, rec.Body)
		}
		big := findKV(das.Objects, "big")
		sameData(t, "dataobjects/get", big, attribute)
		if big == nil || deref(big.ExtStoreId) != "local" || !strings.HasPrefix(deref(big.ExtPath), "_request/") {
			t.Errorf("dataobjects/get shows no reference beside the data")
		}
		inline(t, "dataobjects/get of the small one", findKV(das.Objects, "small"), "small")
		rec = post(api, "/api/v1/workflow/history", []byte(fmt.Sprintf(`{"workflowId":%q}`, id)))
		var hist any
		if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &hist) != nil {
			t.Fatalf("history: %d %.300s", rec.Code, rec.Body)
		}
		if !holdsString(hist, signal) || !holdsString(hist, attribute) {
			t.Errorf("the history does not show the signal and the attribute inline")
		}
	})
}

// TestSpillStoreFails: a store that fails mid-write fails the request
// with 503; nothing is stored, neither object nor input, and the pending
// record is left to the payload sweep, which gives it up once the grace
// has passed.
func TestSpillStoreFails(t *testing.T) {
	forEachStoreWithPayloads(t, func(c *engine.Config) {
		c.Clock = &shiftClock{}
		c.PayloadThreshold = engine.DefaultPayloadThreshold
		c.PayloadGrace = time.Hour
	}, func(t *testing.T, h *harness, ps *testPayloads) {
		ctx := context.Background()
		api := spillAPI(t, h)
		// The sweep below moves the clock two hours on: the run's timeout
		// must outlast that, or the run could time out meanwhile.
		runID := h.start("spill/faults", "", nil, func(r *iwfapi.WorkflowStartRequest) { r.WorkflowTimeoutSeconds = 24 * 3600 })
		ps.failPut.Store(true)
		value := strings.Repeat("v", 4<<20)
		sig := mustJSON(iwfapi.WorkflowSignalRequest{WorkflowId: "spill/faults", SignalChannelName: "s", SignalValue: obj(value)})
		rec := post(api, "/api/v1/workflow/signal", []byte(sig))
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" ||
			!strings.Contains(rec.Body.String(), "external storage (put)") {
			t.Fatalf("signal while the store fails: %d %s", rec.Code, rec.Body)
		}
		start := mustJSON(iwfapi.WorkflowStartRequest{WorkflowId: "spill/never", IwfWorkflowType: "T", IwfWorkerUrl: h.worker.srv.URL,
			StateInput: obj(value)})
		if rec := post(api, "/api/v1/workflow/start", []byte(start)); rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("start while the store fails: %d %s", rec.Code, rec.Body)
		}
		if ps.failedPuts.Load() != 2 {
			t.Fatalf("%d writes failed, want 2", ps.failedPuts.Load())
		}
		// Nothing is stored: no object (not even a part of one), no input,
		// no run.
		var files []string
		_ = filepath.WalkDir(ps.dir, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files = append(files, path)
			}
			return nil
		})
		if len(files) != 0 {
			t.Fatalf("files left in the store: %v", files)
		}
		if strings.Contains(storedBytes(t, h, runID), "ExternalInput") {
			t.Fatal("the failed signal left an input in the run")
		}
		if _, err := h.eng.GetWorkflow(ctx, iwfapi.WorkflowGetRequest{WorkflowId: "spill/never"}); engine.CodeOf(err) != engine.CodeWorkflowNotExists {
			t.Fatalf("the failed start: %v", err)
		}
		m := h.idleMetrics()
		if !strings.Contains(m, `iwf_external_storage_errors_total{op="put"} 2`) {
			t.Errorf("the failures are not counted:\n%s", grepLines(m, "iwf_external_storage"))
		}
		// Within the grace, the pending records stay; past it, the sweep
		// gives them up (their objects were never written).
		if st, err := h.eng.SweepPayloads(ctx); err != nil || st.Expired != 0 {
			t.Fatalf("an early payload sweep: %+v %v", st, err)
		}
		h.clock.(*shiftClock).offset.Store(int64(2 * time.Hour))
		if st, err := h.eng.SweepPayloads(ctx); err != nil || st.Expired != 2 || st.Deleted != 2 {
			t.Fatalf("payload sweep: %+v %v; want the two pending records given up", st, err)
		}
		// The store back, the same signal goes through.
		h.clock.(*shiftClock).offset.Store(0)
		ps.failPut.Store(false)
		if rec := post(api, "/api/v1/workflow/signal", []byte(sig)); rec.Code != 200 {
			t.Fatalf("signal: %d %s", rec.Code, rec.Body)
		}
		if kept := payloadList(t, h, runID); len(kept) != 1 || !strings.HasPrefix(kept[0].Path, "_request/") {
			t.Fatalf("the run keeps %v", kept)
		}
	})
}

// TestSpillMemory: serving a request body of 32 MiB whose payload streams
// to the store allocates a small part of it: the body is never held, nor
// decoded, whole. It measures the bytes allocated by the whole process
// while the one request is served, with nothing else running (it is not
// parallel).
func TestSpillMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("sends a body of 32 MiB")
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "iwf.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ps := newTestPayloads(t)
	h := newHarness(t, st, func(c *engine.Config) {
		c.Payloads = ps
		c.SweepInterval = 24 * time.Hour
	})
	api := spillAPI(t, h)
	const id = "spill/memory"
	h.start(id, "", nil)
	body := func(n int) []byte {
		return []byte(`{"workflowId":"` + id + `","signalChannelName":"c","signalValue":{"encoding":"json","data":"` + strings.Repeat("m", n) + `"}}`)
	}
	// A first request warms up what is made once (caches, pools).
	if rec := post(api, "/api/v1/workflow/signal", body(1<<20)); rec.Code != 200 {
		t.Fatalf("signal: %d %s", rec.Code, rec.Body)
	}
	h.idle()
	big := body(32 << 20)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rec := post(api, "/api/v1/workflow/signal", big)
	runtime.ReadMemStats(&after)
	if rec.Code != 200 {
		t.Fatalf("signal: %d %s", rec.Code, rec.Body)
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("serving a body of %d MiB allocated %.1f MiB", len(big)>>20, float64(allocated)/(1<<20))
	if allocated > 8<<20 {
		t.Fatalf("serving a body of %d MiB allocated %.1f MiB, want under 8", len(big)>>20, float64(allocated)/(1<<20))
	}
	if objects := ps.objects(t); len(objects) != 2 {
		t.Fatalf("objects: %v", objects)
	}
}
