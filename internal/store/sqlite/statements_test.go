package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/sqlite"
	"github.com/iwf-server/iwf-server/internal/workerclient"
)

// maxWriterStatementsW1 bounds the statements SQLite's writer runs per W1
// workflow (cmd/iwf-bench's W1: S1 -> S2 -> graceful completion, both
// without waitUntil, no workflow timeout): measured 17 (a start 5; S1's
// answer 6 and the read of S2's inputs at the end of its transaction;
// S2's answer with the close 5), plus less than one, so that a change that
// adds a statement to W1's path fails the test. It was 22 before an
// answer's checks rode in its updates and a new workflow id took one
// insert.
const maxWriterStatementsW1 = 17.99

// TestWriterStatementsPerWorkflow runs W1 workflows one at a time through
// the engine, with a real HTTP worker, on a SQLite store, and counts the
// statements of the writer per workflow (Store.WriterStatements). The
// engine polls and renews leases once an hour, so nothing but the
// workflows writes during the count; getWithWait reads on a reader.
func TestWriterStatementsPerWorkflow(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "iwf.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req iwfapi.WorkflowStateDecideRequest
		if r.URL.Path != "/api/v1/workflowState/decide" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "unexpected call "+r.URL.Path, http.StatusBadRequest)
			return
		}
		move := iwfapi.StateMovement{StateId: engine.GracefulCompletingState}
		if req.WorkflowStateId == "S1" {
			move = iwfapi.StateMovement{StateId: "S2", StateOptions: &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptrTo(true)}}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(iwfapi.WorkflowStateDecideResponse{
			StateDecision: &iwfapi.StateDecision{NextStates: &[]iwfapi.StateMovement{move}}})
	}))
	defer worker.Close()
	logger := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	eng, err := engine.New(st, engine.Config{WorkerClient: workerclient.New(nil), PollInterval: time.Hour,
		LeaseDuration: time.Hour, MaxWait: 20 * time.Second, Concurrency: 4, Logger: &logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		eng.Close(cctx)
	}()
	run := func(i int) {
		t.Helper()
		id := fmt.Sprintf("wf-%d", i)
		if _, err := eng.StartWorkflow(ctx, iwfapi.WorkflowStartRequest{WorkflowId: id, IwfWorkflowType: "W1",
			IwfWorkerUrl: worker.URL, StartStateId: ptrTo("S1"),
			StateOptions: &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptrTo(true)}}); err != nil {
			t.Fatal(err)
		}
		for {
			resp, err := eng.GetWorkflowWithWait(ctx, iwfapi.WorkflowGetRequest{WorkflowId: id})
			if err == nil && resp.WorkflowStatus == iwfapi.WorkflowStatusCompleted {
				return
			}
			var ee *engine.Error
			if err != nil && !(errors.As(err, &ee) && ee.Code == engine.CodeLongPollTimeout) {
				t.Fatalf("workflow %s: %v", id, err)
			}
			if err == nil {
				t.Fatalf("workflow %s closed as %s", id, resp.WorkflowStatus)
			}
		}
	}
	run(0) // the first workflow also prepares the writer's statements
	const n = 20
	before := st.WriterStatements()
	for i := 1; i <= n; i++ {
		run(i)
	}
	per := float64(st.WriterStatements()-before) / n
	t.Logf("W1: %.2f writer statements per workflow (%d workflows)", per, n)
	if per > maxWriterStatementsW1 {
		t.Errorf("W1 ran %.2f writer statements per workflow, want at most %.2f", per, maxWriterStatementsW1)
	}
}

func ptrTo[T any](v T) *T { return &v }
