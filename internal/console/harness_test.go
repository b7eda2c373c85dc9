package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/audit"
	"github.com/iwf-server/iwf-server/internal/auth"
	"github.com/iwf-server/iwf-server/internal/console"
	iwfserver "github.com/iwf-server/iwf-server/internal/server"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
	"github.com/iwf-server/iwf-server/internal/store/sqlite"
)

// demoType is the workflow type of the test worker: state "prepare" sets a
// data attribute and moves to "approve", which waits for the signal
// "approval" (or a one-hour timer) and completes the workflow with the
// signal's value.
const demoType = "ApprovalWorkflow"

// stores are the stores a test runs on: SQLite always, PostgreSQL when
// pgtest finds one.
var stores = []string{"sqlite", "postgres"}

// env is a server with the console mounted at /ui/ and a demo worker.
type env struct {
	eng       *engine.Engine
	url       string // the httptest server: /ui/ and the REST API
	workerURL string
}

// newEnv starts a server on a fresh store of the given kind.
func newEnv(t *testing.T, kind string) *env {
	t.Helper()
	return newEnvWith(t, kind, nil)
}

// newEnvWith is newEnv with the console's options changed by mod.
func newEnvWith(t *testing.T, kind string, mod func(*console.Options)) *env {
	t.Helper()
	return newEnvWorker(t, kind, mod, nil)
}

// newEnvWorker is newEnvWith with the engine calling workers through wc
// (nil: over HTTP).
func newEnvWorker(t *testing.T, kind string, mod func(*console.Options), wc engine.WorkerClient) *env {
	t.Helper()
	return newEnvEngine(t, kind, mod, engine.Config{WorkerClient: wc})
}

// newEnvEngine is newEnvWith with the engine's configuration ec (its
// polling and waiting set by the harness).
func newEnvEngine(t *testing.T, kind string, mod func(*console.Options), ec engine.Config) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var st engine.Store
	switch kind {
	case "sqlite":
		s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "iwf.db"))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		st = s
	case "postgres":
		st = pgtest.NewStore(t) // skips without PostgreSQL (fails in CI)
	}
	logger := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	ec.PollInterval, ec.MaxWait = 100*time.Millisecond, 10*time.Second
	srv, err := iwfserver.New(st, iwfserver.Options{
		Engine:    ec,
		Logger:    &logger,
		NoMetrics: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Close(ctx)
	})
	co := console.Options{Logger: logger, RefreshInterval: time.Second}
	if mod != nil {
		mod(&co)
	}
	ui, err := console.New(srv.Engine, co)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ui/", ui)
	mux.Handle("/", srv.Handler)
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	w := httptest.NewServer(demoWorker())
	t.Cleanup(w.Close)
	return &env{eng: srv.Engine, url: hs.URL, workerURL: w.URL}
}

// start starts a demo workflow.
func (e *env) start(t *testing.T, id string) string {
	t.Helper()
	resp, err := e.eng.StartWorkflow(context.Background(), iwfapi.WorkflowStartRequest{
		WorkflowId: id, IwfWorkflowType: demoType, IwfWorkerUrl: e.workerURL,
		StartStateId: ptr("prepare"), StateInput: text(`{"order":17}`), WorkflowTimeoutSeconds: 3600,
	})
	if err != nil {
		t.Fatal(err)
	}
	return *resp.WorkflowRunId
}

func ptr[T any](v T) *T { return &v }

func text(s string) *iwfapi.EncodedObject {
	return &iwfapi.EncodedObject{Encoding: ptr("json"), Data: ptr(s)}
}

// demoWorker answers the worker API for demoType.
func demoWorker() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/workflowState/start", func(rw http.ResponseWriter, r *http.Request) {
		var req iwfapi.WorkflowStateStartRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		var resp iwfapi.WorkflowStateStartResponse
		switch req.WorkflowStateId {
		case "prepare":
			resp.CommandRequest = &iwfapi.CommandRequest{CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted)}
		case "approve":
			resp.CommandRequest = &iwfapi.CommandRequest{
				CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAnyCompleted),
				SignalCommands:     &[]iwfapi.SignalCommand{{CommandId: ptr("approved"), SignalChannelName: "approval"}},
				TimerCommands:      &[]iwfapi.TimerCommand{{CommandId: ptr("expiry"), DurationSeconds: ptr(int64(3600))}},
			}
		}
		writeJSON(rw, resp)
	})
	mux.HandleFunc("POST /api/v1/workflowState/decide", func(rw http.ResponseWriter, r *http.Request) {
		var req iwfapi.WorkflowStateDecideRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		var resp iwfapi.WorkflowStateDecideResponse
		switch req.WorkflowStateId {
		case "prepare":
			resp.UpsertDataObjects = &[]iwfapi.KeyValue{{Key: ptr("customer"), Value: text(`{"name":"Ada","tier":"gold"}`)}}
			resp.UpsertSearchAttributes = &[]iwfapi.SearchAttribute{{Key: ptr("CustomKeywordField"), ValueType: ptr(iwfapi.SearchAttributeValueTypeKeyword), StringValue: ptr("gold")}}
			resp.StateDecision = &iwfapi.StateDecision{NextStates: &[]iwfapi.StateMovement{{StateId: "approve", StateInput: req.StateInput}}}
		case "approve":
			var out *iwfapi.EncodedObject
			if rs := req.CommandResults; rs != nil && rs.SignalResults != nil {
				for _, s := range *rs.SignalResults {
					if s.SignalValue != nil {
						out = s.SignalValue
					}
				}
			}
			resp.StateDecision = &iwfapi.StateDecision{NextStates: &[]iwfapi.StateMovement{{StateId: "_SYS_GRACEFUL_COMPLETING_WORKFLOW", StateInput: out}}}
		}
		writeJSON(rw, resp)
	})
	return mux
}

func writeJSON(rw http.ResponseWriter, v any) {
	rw.Header().Set("Content-Type", "application/json")
	json.NewEncoder(rw).Encode(v)
}

// roleServer is the whole server (engine, API, console) on a SQLite store
// with two tokens, a reader's and an operator's, and an audit log: the
// setting of the tests of what each role may do.
type roleServer struct {
	e                *env
	reader, operator *formClient
	audit            *syncBuffer
}

// The tokens of a roleServer.
const (
	readerToken   = "reader-token-0123456789"
	operatorToken = "operator-token-0123456789"
)

// newRoleServer starts a roleServer and the demo worker; both stop when
// the test ends.
func newRoleServer(t *testing.T, ctx context.Context) *roleServer {
	t.Helper()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "iwf.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte(readerToken+" dash reader\n"+operatorToken+" oncall operator\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	toks, err := auth.Load(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	rs := &roleServer{audit: &syncBuffer{}}
	logger := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	srv, err := iwfserver.New(st, iwfserver.Options{Auth: toks, NoMetrics: true, Logger: &logger, Audit: audit.NewWriter(rs.audit)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Close(ctx)
	})
	hs := httptest.NewServer(srv.Handler)
	t.Cleanup(hs.Close)
	wk := httptest.NewServer(demoWorker())
	t.Cleanup(wk.Close)
	rs.e = &env{eng: srv.Engine, url: hs.URL, workerURL: wk.URL}
	client := func(token string) *formClient {
		f := newFormClient(t, hs.URL)
		f.c.Transport = bearerTransport(token)
		return f
	}
	rs.reader, rs.operator = client(readerToken), client(operatorToken)
	return rs
}
