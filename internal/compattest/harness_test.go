package compattest

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	iwfserver "github.com/iwf-server/iwf-server/internal/server"
	"github.com/iwf-server/iwf-server/internal/store/postgres"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
	"github.com/iwf-server/iwf-server/internal/store/sqlite"
	"github.com/iwf-server/iwf-server/internal/workerclient"
)

// defaultMaxWait is the long-poll cap of the shared servers. iWF's own
// integration tests use 12 s; a smaller cap keeps the long-poll tests short.
// Helpers that wait for a result retry on 420, as the SDKs do.
const defaultMaxWait = 4 * time.Second

// maxBodyBytes is the request body limit of the servers, the default of
// cmd/iwf-server.
const maxBodyBytes = 4 << 20

// TestMain raises -test.parallel (most tests spend their time waiting) and
// shuts the shared servers down after the run.
func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", "64")
	}
	code := m.Run()
	shutdownServers()
	os.Exit(code)
}

// storeKind names the store a server runs on.
type storeKind string

const (
	sqliteStore   storeKind = "sqlite"
	postgresStore storeKind = "postgres"
)

// serverOptions are the settings a test may need to differ from the shared
// servers'. Servers are shared per (store, options).
type serverOptions struct {
	maxWait time.Duration
	// header is a worker header "Name: value" the server sends to workers.
	header string
}

var defaultOptions = serverOptions{maxWait: defaultMaxWait}

// server is one iwf-server assembled in process.
type server struct {
	url string
}

var registry struct {
	sync.Mutex
	servers map[string]*server
	// closers shut the servers down, in creation order.
	closers []func()
}

// shutdownServers closes every server, newest first.
func shutdownServers() {
	registry.Lock()
	defer registry.Unlock()
	for i := len(registry.closers) - 1; i >= 0; i-- {
		registry.closers[i]()
	}
	registry.closers = nil
	registry.servers = nil
}

// getServer returns the shared server for a store and options, starting it
// on first use. For PostgreSQL it skips the test when no server answers.
func getServer(t *testing.T, kind storeKind, opts serverOptions) *server {
	t.Helper()
	var pgURL string
	if kind == postgresStore {
		pgURL = pgtest.URL(t) // skips (or fails) before any lock is taken
	}
	registry.Lock()
	defer registry.Unlock()
	key := fmt.Sprintf("%s/%+v", kind, opts)
	if s := registry.servers[key]; s != nil {
		return s
	}
	if registry.servers == nil {
		registry.servers = map[string]*server{}
	}
	s, closer, err := startServer(kind, pgURL, opts)
	if err != nil {
		t.Fatalf("start %s server: %v", kind, err)
	}
	registry.servers[key] = s
	registry.closers = append(registry.closers, closer)
	return s
}

// store is what a server needs from either store.
type store interface {
	engine.Store
	Migrate(ctx context.Context) error
}

// startServer wires a server as cmd/iwf-server does: store, migrations,
// engine with an HTTP worker client, REST handler.
func startServer(kind storeKind, pgURL string, opts serverOptions) (*server, func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var (
		st      store
		cleanup []func()
		err     error
	)
	undo := func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}
	switch kind {
	case sqliteStore:
		dir, derr := os.MkdirTemp("", "iwf-compattest-")
		if derr != nil {
			return nil, nil, derr
		}
		cleanup = append(cleanup, func() { os.RemoveAll(dir) })
		st, err = sqlite.Open(ctx, filepath.Join(dir, "iwf.db"))
	case postgresStore:
		schema := pgtest.NewSchemaName()
		cleanup = append(cleanup, func() { dropSchema(pgURL, schema) })
		st, err = postgres.Open(ctx, withPoolSize(pgURL, 24), postgres.WithSchema(schema))
	}
	if err != nil {
		undo()
		return nil, nil, err
	}
	cleanup = append(cleanup, func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		undo()
		return nil, nil, err
	}
	var headers http.Header
	if opts.header != "" {
		name, value, _ := strings.Cut(opts.header, ":")
		headers = http.Header{}
		headers.Add(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	logger := zerolog.Nop()
	if os.Getenv("IWF_COMPATTEST_LOG") != "" {
		logger = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).With().Timestamp().
			Str("store", string(kind)).Logger().Level(zerolog.DebugLevel)
	}
	srv, err := iwfserver.New(st, iwfserver.Options{
		Engine: engine.Config{
			MaxWait:              opts.maxWait,
			LeaseDuration:        10 * time.Second,
			PollInterval:         100 * time.Millisecond,
			Concurrency:          64,
			ReleaseLeasesOnStart: kind == sqliteStore,
		},
		WorkerHeaders: headers,
		Logger:        &logger,
		MaxBodyBytes:  maxBodyBytes,
		NoMetrics:     true,
	})
	if err != nil {
		undo()
		return nil, nil, err
	}
	if err := srv.Start(ctx); err != nil {
		undo()
		return nil, nil, err
	}
	cleanup = append(cleanup, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
	})
	handler := srv.Handler
	hs := httptest.NewServer(handler)
	cleanup = append(cleanup, func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	return &server{url: hs.URL}, undo, nil
}

// withPoolSize sets the connection pool size of a PostgreSQL URL (or
// keyword/value string): one shared server runs all the tests' workflows at
// once, more than pgxpool's default of max(4, CPUs) connections serve well.
func withPoolSize(pgURL string, n int) string {
	u, err := url.Parse(pgURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return fmt.Sprintf("%s pool_max_conns=%d", pgURL, n)
	}
	q := u.Query()
	if q.Get("pool_max_conns") == "" {
		q.Set("pool_max_conns", strconv.Itoa(n))
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func dropSchema(url, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		fmt.Fprintf(os.Stderr, "compattest: drop schema %s: %v\n", schema, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		fmt.Fprintf(os.Stderr, "compattest: drop schema %s: %v\n", schema, err)
	}
}

// env is what one test needs: a server, a client for it and the test's own
// worker.
type env struct {
	t     *testing.T
	store storeKind
	url   string
	api   *iwfapi.ClientWithResponses
	w     *worker
}

// forEachStore runs fn on the shared SQLite and PostgreSQL servers, as two
// parallel subtests named after the store.
func forEachStore(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Helper()
	forEachStoreWith(t, defaultOptions, fn)
}

// forEachStoreWith is forEachStore on servers with special options.
func forEachStoreWith(t *testing.T, opts serverOptions, fn func(t *testing.T, e *env)) {
	t.Helper()
	t.Parallel()
	for _, kind := range []storeKind{sqliteStore, postgresStore} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			fn(t, newEnv(t, kind, opts))
		})
	}
}

func newEnv(t *testing.T, kind storeKind, opts serverOptions) *env {
	t.Helper()
	s := getServer(t, kind, opts)
	api, err := iwfapi.NewClientWithResponses(s.url, iwfapi.WithHTTPClient(&http.Client{Timeout: 60 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, store: kind, url: s.url, api: api, w: newWorker(t)}
}

var idCounter atomic.Int64

// id returns a workflow id unique in this process and store.
func (e *env) id(name string) string {
	return fmt.Sprintf("%s-%s-%d-%d", name, e.store, time.Now().UnixNano(), idCounter.Add(1))
}

// ctx is the context of API calls.
func (e *env) ctx() context.Context { return context.Background() }

// startRequest returns a start request for the test's worker; startState
// may be empty. The workflow timeout is a generous 120 s: iWF's tests use
// 10–40 s, which a loaded machine may exceed when the timeout is not what a
// test is about.
func (e *env) startRequest(wfID, wfType, startState string) iwfapi.WorkflowStartRequest {
	req := iwfapi.WorkflowStartRequest{
		WorkflowId:             wfID,
		IwfWorkflowType:        wfType,
		WorkflowTimeoutSeconds: 120,
		IwfWorkerUrl:           e.w.url,
	}
	if startState != "" {
		req.StartStateId = ptr(startState)
	}
	return req
}

// startRaw sends a start request and returns the raw answer.
func (e *env) startRaw(req iwfapi.WorkflowStartRequest) *iwfapi.StartWorkflowResponse {
	e.t.Helper()
	resp, err := e.api.StartWorkflowWithResponse(e.ctx(), req)
	if err != nil {
		e.t.Fatalf("start %s: %v", req.WorkflowId, err)
	}
	e.t.Cleanup(func() { e.terminate(req.WorkflowId) })
	return resp
}

// start starts a workflow and returns its run id; any error fails the test.
func (e *env) start(req iwfapi.WorkflowStartRequest) string {
	e.t.Helper()
	resp := e.startRaw(req)
	if resp.StatusCode() != 200 || resp.JSON200 == nil || deref(resp.JSON200.WorkflowRunId) == "" {
		e.t.Fatalf("start %s: %d %s", req.WorkflowId, resp.StatusCode(), resp.Body)
	}
	return *resp.JSON200.WorkflowRunId
}

// terminate ends a workflow left running by a test, ignoring errors.
func (e *env) terminate(wfID string) {
	_, _ = e.api.StopWorkflowWithResponse(context.Background(), iwfapi.WorkflowStopRequest{
		WorkflowId: wfID, StopType: ptr(iwfapi.WorkflowStopTypeTerminate),
	})
}

// resultTimeout bounds how long result waits for a workflow to close.
const resultTimeout = 40 * time.Second

// result waits for the current run of wfID to close (getWithWait, retried on
// 420 as the SDKs do) and returns the answer and its raw body.
func (e *env) result(wfID string) (iwfapi.WorkflowGetResponse, []byte) {
	e.t.Helper()
	return e.resultOf(wfID, "")
}

// resultOf is result for a given run ("" for the current run).
func (e *env) resultOf(wfID, runID string) (iwfapi.WorkflowGetResponse, []byte) {
	e.t.Helper()
	deadline := time.Now().Add(resultTimeout)
	for {
		req := iwfapi.WorkflowGetRequest{WorkflowId: wfID}
		if runID != "" {
			req.WorkflowRunId = ptr(runID)
		}
		resp, err := e.api.GetWorkflowWithWaitWithResponse(e.ctx(), req)
		if err != nil {
			e.t.Fatalf("getWithWait %s: %v", wfID, err)
		}
		switch {
		case resp.StatusCode() == 200 && resp.JSON200 != nil:
			return *resp.JSON200, resp.Body
		case resp.StatusCode() == 420 && time.Now().Before(deadline):
			continue
		}
		e.t.Fatalf("getWithWait %s: %d %s", wfID, resp.StatusCode(), resp.Body)
	}
}

// get describes a run without waiting.
func (e *env) get(wfID, runID string, needsResults bool) (iwfapi.WorkflowGetResponse, []byte) {
	e.t.Helper()
	req := iwfapi.WorkflowGetRequest{WorkflowId: wfID, NeedsResults: ptr(needsResults)}
	if runID != "" {
		req.WorkflowRunId = ptr(runID)
	}
	resp, err := e.api.GetWorkflowWithResponse(e.ctx(), req)
	if err != nil || resp.StatusCode() != 200 || resp.JSON200 == nil {
		e.t.Fatalf("get %s: %v %d %s", wfID, err, statusOf(resp), bodyOf(resp))
	}
	return *resp.JSON200, resp.Body
}

// status returns the status of the current run of wfID.
func (e *env) status(wfID string) iwfapi.WorkflowStatus {
	e.t.Helper()
	r, _ := e.get(wfID, "", false)
	return r.WorkflowStatus
}

// signal sends a signal; any error fails the test.
func (e *env) signal(wfID, channel string, value *iwfapi.EncodedObject) {
	e.t.Helper()
	resp, err := e.api.SignalWorkflowWithResponse(e.ctx(), iwfapi.WorkflowSignalRequest{
		WorkflowId: wfID, WorkflowRunId: ptr(""), SignalChannelName: channel, SignalValue: value,
	})
	if err != nil || resp.StatusCode() != 200 {
		e.t.Fatalf("signal %s/%s: %v %d %s", wfID, channel, err, statusOf(resp), bodyOf(resp))
	}
	jsonEqual(e.t, "signal answer", resp.Body, `{}`)
}

// rpc invokes an RPC and returns the raw answer.
func (e *env) rpc(req iwfapi.WorkflowRpcRequest) *iwfapi.ExecuteWorkflowRpcResponse {
	e.t.Helper()
	resp, err := e.api.ExecuteWorkflowRpcWithResponse(e.ctx(), req)
	if err != nil {
		e.t.Fatalf("rpc %s: %v", req.RpcName, err)
	}
	return resp
}

// rpcOK invokes an RPC that must succeed and returns its answer.
func (e *env) rpcOK(req iwfapi.WorkflowRpcRequest) iwfapi.WorkflowRpcResponse {
	e.t.Helper()
	resp := e.rpc(req)
	if resp.StatusCode() != 200 || resp.JSON200 == nil {
		e.t.Fatalf("rpc %s: %d %s", req.RpcName, resp.StatusCode(), resp.Body)
	}
	return *resp.JSON200
}

// stop stops a workflow; any error fails the test.
func (e *env) stop(req iwfapi.WorkflowStopRequest) {
	e.t.Helper()
	resp, err := e.api.StopWorkflowWithResponse(e.ctx(), req)
	if err != nil || resp.StatusCode() != 200 {
		e.t.Fatalf("stop %s: %v %d %s", req.WorkflowId, err, statusOf(resp), bodyOf(resp))
	}
	jsonEqual(e.t, "stop answer", resp.Body, `{}`)
}

// reset resets a workflow and returns the new run id.
func (e *env) reset(req iwfapi.WorkflowResetRequest) string {
	e.t.Helper()
	resp, err := e.api.ResetWorkflowWithResponse(e.ctx(), req)
	if err != nil || resp.StatusCode() != 200 || resp.JSON200 == nil {
		e.t.Fatalf("reset %s %s: %v %d %s", req.WorkflowId, req.ResetType, err, statusOf(resp), bodyOf(resp))
	}
	return resp.JSON200.WorkflowRunId
}

// dataAttributes reads data attributes (all when keys is empty).
func (e *env) dataAttributes(wfID, runID string, keys ...string) []iwfapi.KeyValue {
	e.t.Helper()
	req := iwfapi.WorkflowGetDataObjectsRequest{WorkflowId: wfID}
	if runID != "" {
		req.WorkflowRunId = ptr(runID)
	}
	if len(keys) > 0 {
		req.Keys = &keys
	}
	resp, err := e.api.GetWorkflowDataObjectsWithResponse(e.ctx(), req)
	if err != nil || resp.StatusCode() != 200 || resp.JSON200 == nil {
		e.t.Fatalf("dataobjects/get %s: %v %d %s", wfID, err, statusOf(resp), bodyOf(resp))
	}
	return slice(resp.JSON200.Objects)
}

// searchAttributes reads typed search attributes.
func (e *env) searchAttributes(wfID, runID string, keys ...iwfapi.SearchAttributeKeyAndType) []iwfapi.SearchAttribute {
	e.t.Helper()
	req := iwfapi.WorkflowGetSearchAttributesRequest{WorkflowId: wfID}
	if keys != nil {
		req.Keys = &keys
	}
	if runID != "" {
		req.WorkflowRunId = ptr(runID)
	}
	resp, err := e.api.GetWorkflowSearchAttributesWithResponse(e.ctx(), req)
	if err != nil || resp.StatusCode() != 200 || resp.JSON200 == nil {
		e.t.Fatalf("searchattributes/get %s: %v %d %s", wfID, err, statusOf(resp), bodyOf(resp))
	}
	return slice(resp.JSON200.SearchAttributes)
}

// skipTimer sends a timer skip request and returns the raw answer.
func (e *env) skipTimer(req iwfapi.WorkflowSkipTimerRequest) *iwfapi.SkipTimerResponse {
	e.t.Helper()
	resp, err := e.api.SkipTimerWithResponse(e.ctx(), req)
	if err != nil {
		e.t.Fatalf("timer/skip %s: %v", req.WorkflowId, err)
	}
	return resp
}

// dump reads the whole internal dump of a run as a JSON object.
func (e *env) dump(wfID, runID string) map[string]any {
	e.t.Helper()
	var doc strings.Builder
	for page := int32(0); ; page++ {
		resp, err := e.api.DumpWorkflowInternalWithResponse(e.ctx(), iwfapi.WorkflowDumpRequest{
			WorkflowId: wfID, WorkflowRunId: runID, PageSizeInBytes: 0, PageNum: page,
		})
		if err != nil || resp.StatusCode() != 200 || resp.JSON200 == nil {
			e.t.Fatalf("internal/dump %s: %v %d %s", wfID, err, statusOf(resp), bodyOf(resp))
		}
		doc.WriteString(resp.JSON200.JsonData)
		if page+1 >= resp.JSON200.TotalPages {
			break
		}
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(doc.String()), &m); err != nil {
		e.t.Fatalf("dump of %s is not JSON: %v", wfID, err)
	}
	return m
}

// hasEvent reports whether a run's history (this server's extension
// POST /api/v1/workflow/history) has an event of type typ for an execution
// ("" matches any).
func (e *env) hasEvent(wfID, runID, typ, executionID string) bool {
	e.t.Helper()
	var after int64
	for {
		req := iwfapi.WorkflowHistoryRequest{WorkflowId: wfID, AfterEventId: ptr(after), PageSize: ptr(int32(1000))}
		if runID != "" {
			req.WorkflowRunId = ptr(runID)
		}
		resp, err := e.api.GetWorkflowHistoryWithResponse(e.ctx(), req)
		if err != nil || resp.StatusCode() != 200 || resp.JSON200 == nil {
			e.t.Fatalf("history %s: %v %d %s", wfID, err, statusOf(resp), bodyOf(resp))
		}
		for _, ev := range resp.JSON200.Events {
			if ev.EventType == typ && (executionID == "" || deref(ev.StateExecutionId) == executionID) {
				return true
			}
			after = ev.EventId
		}
		if !deref(resp.JSON200.HasMore) {
			return false
		}
	}
}

// waitEvent waits until a run's history has an event (see hasEvent).
func (e *env) waitEvent(wfID, runID, typ, executionID string) {
	e.t.Helper()
	e.eventually(fmt.Sprintf("%s of %s in %s", typ, executionID, wfID), func() bool {
		return e.hasEvent(wfID, runID, typ, executionID)
	})
}

// waiting waits until a state execution has answered waitUntil and waits
// for its commands.
func (e *env) waiting(wfID, executionID string) {
	e.t.Helper()
	e.waitEvent(wfID, "", "WaitUntilCompleted", executionID)
}

// eventually polls cond every 20 ms until it holds, failing the test after
// a minute.
func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// answer is what every generated response type offers.
type answer interface {
	StatusCode() int
	GetBody() []byte
}

func statusOf(a answer) int {
	if a == nil || reflect.ValueOf(a).IsNil() {
		return 0
	}
	return a.StatusCode()
}

func bodyOf(a answer) []byte {
	if a == nil || reflect.ValueOf(a).IsNil() {
		return nil
	}
	return a.GetBody()
}

// expectError checks an error answer: its status and its whole body.
func expectError(t *testing.T, what string, a answer, status int, body string) {
	t.Helper()
	if a.StatusCode() != status {
		t.Errorf("%s: status %d, want %d; body %s", what, a.StatusCode(), status, a.GetBody())
		return
	}
	jsonEqual(t, what, a.GetBody(), body)
}

// jsonEqual compares a JSON document with the expected one, ignoring
// formatting and member order.
func jsonEqual(t *testing.T, what string, got []byte, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Errorf("%s: not JSON: %v: %s", what, err, got)
		return false
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: bad expectation %q: %v", what, want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got  %s\n want %s", what, canonical(got), canonical([]byte(want)))
		return false
	}
	return true
}

// jsonEqualValue is jsonEqual for a value marshalled to JSON.
func jsonEqualValue(t *testing.T, what string, got any, want string) bool {
	t.Helper()
	return jsonEqual(t, what, mustJSON(got), want)
}

func canonical(b []byte) string {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return string(b)
	}
	return string(mustJSON(v))
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// field extracts a top-level member of a JSON object as raw JSON ("" when
// absent).
func field(t *testing.T, doc []byte, name string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatalf("not a JSON object: %v: %s", err, doc)
	}
	return string(m[name])
}

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

func slice[T any](p *[]T) []T {
	if p == nil {
		return nil
	}
	return *p
}

func list[T any](v ...T) *[]T { return &v }

// obj is a JSON-encoded EncodedObject.
func obj(data string) *iwfapi.EncodedObject {
	return &iwfapi.EncodedObject{Encoding: ptr("json"), Data: ptr(data)}
}

// Reserved state ids.
const (
	gracefulComplete = "_SYS_GRACEFUL_COMPLETING_WORKFLOW"
	forceComplete    = "_SYS_FORCE_COMPLETING_WORKFLOW"
	forceFail        = "_SYS_FORCE_FAILING_WORKFLOW"
	deadEnd          = "_SYS_DEAD_END"
)

// ---------------------------------------------------------------------------
// The test worker.

// reply is a worker answer: an HTTP status and a body, marshalled as JSON
// unless it is a string or []byte.
type reply struct {
	status int
	body   any
}

func ok(body any) reply { return reply{status: 200, body: body} }

type (
	waitUntilFunc func(req iwfapi.WorkflowStateStartRequest) reply
	executeFunc   func(req iwfapi.WorkflowStateDecideRequest) reply
	rpcFunc       func(req iwfapi.WorkflowWorkerRpcRequest) reply
)

// worker is a real HTTP worker for one test. Handlers are registered per
// state id (and per RPC name); the worker counts calls per
// "<state>.waitUntil", "<state>.execute" and "<rpc>.rpc", keeps every raw
// request body and its headers, and reports unexpected calls and failed
// expectations (fail) as test errors when the test ends.
type worker struct {
	t       *testing.T
	url     string
	closing chan struct{}

	mu        sync.Mutex
	waitUntil map[string]waitUntilFunc
	execute   map[string]executeFunc
	rpcs      map[string]rpcFunc
	calls     map[string]int
	bodies    map[string][][]byte
	headers   map[string][]http.Header
	problems  []string
	// required is a header "Name: value" every call must carry.
	required [2]string
}

func newWorker(t *testing.T) *worker {
	w := &worker{
		t: t, closing: make(chan struct{}),
		waitUntil: map[string]waitUntilFunc{}, execute: map[string]executeFunc{}, rpcs: map[string]rpcFunc{},
		calls: map[string]int{}, bodies: map[string][][]byte{}, headers: map[string][]http.Header{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+workerclient.WaitUntilPath, handle(w, ".waitUntil",
		func(r *iwfapi.WorkflowStateStartRequest) string { return r.WorkflowStateId },
		func(name string) func(iwfapi.WorkflowStateStartRequest) reply { return w.waitUntil[name] }))
	mux.HandleFunc("POST "+workerclient.ExecutePath, handle(w, ".execute",
		func(r *iwfapi.WorkflowStateDecideRequest) string { return r.WorkflowStateId },
		func(name string) func(iwfapi.WorkflowStateDecideRequest) reply { return w.execute[name] }))
	mux.HandleFunc("POST "+workerclient.RPCPath, handle(w, ".rpc",
		func(r *iwfapi.WorkflowWorkerRpcRequest) string { return r.RpcName },
		func(name string) func(iwfapi.WorkflowWorkerRpcRequest) reply { return w.rpcs[name] }))
	srv := httptest.NewServer(mux)
	w.url = srv.URL
	t.Cleanup(func() {
		close(w.closing)
		srv.CloseClientConnections()
		srv.Close()
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, p := range w.problems {
			t.Errorf("worker: %s", p)
		}
	})
	return w
}

func (w *worker) decode(rw http.ResponseWriter, r *http.Request, v any) ([]byte, bool) {
	w.mu.Lock()
	required := w.required
	w.mu.Unlock()
	if required[0] != "" && r.Header.Get(required[0]) != required[1] {
		w.write(rw, w.reject("%s without the header %s: %s", r.URL.Path, required[0], required[1]))
		return nil, false
	}
	raw, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(raw, v)
	}
	if err != nil {
		w.fail("undecodable request to %s: %v: %s", r.URL.Path, err, raw)
		w.write(rw, reply{status: 400, body: iwfapi.WorkerErrorResponse{Detail: ptr(err.Error())}})
		return nil, false
	}
	return raw, true
}

func (w *worker) record(key string, raw []byte, h http.Header) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls[key]++
	w.bodies[key] = append(w.bodies[key], raw)
	w.headers[key] = append(w.headers[key], h.Clone())
}

func (w *worker) unexpected(key string) reply {
	w.fail("unexpected call %s", key)
	return reply{status: 500, body: iwfapi.WorkerErrorResponse{Detail: ptr("unexpected call " + key), ErrorType: ptr("unexpected")}}
}

func (w *worker) write(rw http.ResponseWriter, r reply) {
	var body []byte
	switch b := r.body.(type) {
	case []byte:
		body = b
	case string:
		body = []byte(b)
	default:
		body = mustJSON(b)
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(r.status)
	_, _ = rw.Write(body)
}

// fail records a failed expectation of a handler; it is reported when the
// test ends.
func (w *worker) fail(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.problems = append(w.problems, fmt.Sprintf(format, args...))
}

// reject records a failed expectation and returns a 400 answer, as iWF's
// test workers do.
func (w *worker) reject(format string, args ...any) reply {
	msg := fmt.Sprintf(format, args...)
	w.fail("%s", msg)
	return reply{status: 400, body: iwfapi.WorkerErrorResponse{Detail: ptr(msg), ErrorType: ptr("test-expectation")}}
}

// state registers the handlers of a state; a nil waitUntil means the state
// must skip waitUntil (a call is an error).
func (w *worker) state(id string, wu waitUntilFunc, ex executeFunc) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if wu != nil {
		w.waitUntil[id] = wu
	}
	if ex != nil {
		w.execute[id] = ex
	}
}

// requireHeader makes the worker reject (400) every call without the header.
func (w *worker) requireHeader(name, value string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.required = [2]string{name, value}
}

// rpc registers an RPC handler.
func (w *worker) rpc(name string, h rpcFunc) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rpcs[name] = h
}

// count returns the number of calls of "<state>.<api>" or "<rpc>.rpc".
func (w *worker) count(key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls[key]
}

// counts returns all call counts.
func (w *worker) counts() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int, len(w.calls))
	for k, v := range w.calls {
		out[k] = v
	}
	return out
}

// expectCounts checks all call counts at once.
func (w *worker) expectCounts(t *testing.T, want map[string]int) {
	t.Helper()
	if got := w.counts(); !reflect.DeepEqual(got, want) {
		t.Errorf("worker calls = %v, want %v", got, want)
	}
}

// body returns the raw body of the n-th (0-based) call of key.
func (w *worker) body(t *testing.T, key string, n int) []byte {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if n >= len(w.bodies[key]) {
		t.Fatalf("no call %d of %s (%d calls)", n, key, len(w.bodies[key]))
	}
	return w.bodies[key][n]
}

// header returns the headers of the n-th call of key.
func (w *worker) header(t *testing.T, key string, n int) http.Header {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if n >= len(w.headers[key]) {
		t.Fatalf("no call %d of %s", n, key)
	}
	return w.headers[key][n]
}

// sleep pauses a handler for d, or less when the test is ending.
func (w *worker) sleep(d time.Duration) {
	select {
	case <-time.After(d):
	case <-w.closing:
	}
}

// gate is a barrier a handler waits on until the test opens it.
type gate struct {
	once sync.Once
	ch   chan struct{}
}

func newGate() *gate { return &gate{ch: make(chan struct{})} }

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }

// await blocks a handler until g opens (false after 15 s or when the test
// ends).
func (w *worker) await(g *gate) bool {
	select {
	case <-g.ch:
		return true
	case <-w.closing:
	case <-time.After(15 * time.Second):
		w.fail("gate never opened")
	}
	return false
}

// passed waits (in the test) until a handler opened g.
func (e *env) passed(g *gate, what string) {
	e.t.Helper()
	select {
	case <-g.ch:
	case <-time.After(15 * time.Second):
		e.t.Fatalf("timed out waiting for %s", what)
	}
}

// recorder collects strings from handlers.
type recorder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.b.WriteString(s)
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.b.String()
}

// Common worker answers.

// noCommands answers waitUntil with no commands, with the legacy trigger
// type iWF's test workers send.
func noCommands(iwfapi.WorkflowStateStartRequest) reply {
	return ok(iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
		DeciderTriggerType: ptr(iwfapi.DeciderTriggerTypeAllCommandCompleted),
	}})
}

// commands answers waitUntil with a command request.
func commands(cr iwfapi.CommandRequest) reply {
	return ok(iwfapi.WorkflowStateStartResponse{CommandRequest: &cr})
}

// decide answers execute with next states.
func decide(moves ...iwfapi.StateMovement) reply {
	return ok(iwfapi.WorkflowStateDecideResponse{StateDecision: &iwfapi.StateDecision{NextStates: &moves}})
}

// move is a state movement.
func move(stateID string, input *iwfapi.EncodedObject) iwfapi.StateMovement {
	return iwfapi.StateMovement{StateId: stateID, StateInput: input}
}

// moveWith is a state movement with options.
func moveWith(stateID string, input *iwfapi.EncodedObject, opts iwfapi.WorkflowStateOptions) iwfapi.StateMovement {
	return iwfapi.StateMovement{StateId: stateID, StateInput: input, StateOptions: &opts}
}

// complete answers execute with a graceful completion without output.
func complete(iwfapi.WorkflowStateDecideRequest) reply { return decide(move(gracefulComplete, nil)) }

// goTo answers execute by moving to one state.
func goTo(stateID string) executeFunc {
	return func(iwfapi.WorkflowStateDecideRequest) reply { return decide(move(stateID, nil)) }
}

// bytesContain reports whether b contains s.
func bytesContain(b []byte, s string) bool { return bytes.Contains(b, []byte(s)) }

// handle serves one worker path: it decodes the request, records the call
// under "<state or rpc name><suffix>", and answers with the test's handler
// for that name, or fails the test when there is none.
func handle[Req any](w *worker, suffix string, name func(*Req) string, handler func(name string) func(Req) reply) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		var req Req
		raw, ok := w.decode(rw, r, &req)
		if !ok {
			return
		}
		n := name(&req)
		key := n + suffix
		w.record(key, raw, r.Header)
		w.mu.Lock()
		h := handler(n)
		w.mu.Unlock()
		if h == nil {
			w.write(rw, w.unexpected(key))
			return
		}
		w.write(rw, h(req))
	}
}
