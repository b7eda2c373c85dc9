package upgradetest

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/postgres"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
	"github.com/iwf-server/iwf-server/internal/store/sqlite"
)

// TestSQLiteUpgradeV1 opens a copy of the SQLite database written by the
// format-1 release with this code and checks every workflow in it.
func TestSQLiteUpgradeV1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "iwf.db")
	copyFile(t, "testdata/v1/iwf.db", path)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	checkUpgrade(t, st)
}

// TestPostgresUpgradeV1 restores the pg_dump written by the format-1
// release into a new schema, opens it with this code and checks every
// workflow in it.
func TestPostgresUpgradeV1(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.NewSchemaName()
	restoreDump(t, url, "testdata/v1/postgres.sql", schema)
	ctx := context.Background()
	st, err := postgres.Open(ctx, url, postgres.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	checkUpgrade(t, st)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// restoreDump runs a plain-text pg_dump of dumpSchema into schema, which the
// test drops at its end. psql meta-commands (\restrict) are left out.
func restoreDump(t *testing.T, url, file, schema string) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var sql strings.Builder
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, `\`) {
			sql.WriteString(strings.ReplaceAll(line, dumpSchema, schema))
			sql.WriteByte('\n')
		}
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	t.Cleanup(func() { pgtest.DropSchema(t, url, schema) })
	if _, err := conn.PgConn().Exec(ctx, sql.String()).ReadAll(); err != nil {
		t.Fatalf("restoring %s: %v", file, err)
	}
}

// checkUpgrade runs the release under test on a store holding the
// scenario's data as the previous release left it.
func checkUpgrade(t *testing.T, st engine.Store) {
	w := newWorker(t, false)
	eng := engineFor(t, st, w, true)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		eng.Close(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := driver{t: t, eng: eng, ctx: ctx}
	t.Run("closed", func(t *testing.T) { checkClosed(driver{t: t, eng: eng, ctx: ctx}) })
	t.Run("in flight", func(t *testing.T) { finishInFlight(driver{t: t, eng: eng, ctx: ctx}, w) })
	// Every run's history reads from its start to its close.
	for _, id := range []string{wfEveryShape, wfFailedDecision, wfFailedAPI, wfCanceled, wfTerminated, wfTimeout, wfRetryChain, wfReset,
		wfWaitTimer, wfWaitSignal, wfWaitInternal, wfAnyCombination, wfFailingWait, wfWithOptions} {
		h := d.history(id, "")
		if len(h) < 2 || h[0].EventType != "WorkflowStarted" || h[len(h)-1].EventType != "WorkflowClosed" {
			t.Errorf("%s: history %v does not run from WorkflowStarted to WorkflowClosed", id, types(h))
		}
	}
}

func types(h []iwfapi.WorkflowHistoryEvent) []string {
	out := make([]string, len(h))
	for i, ev := range h {
		out[i] = ev.EventType
	}
	return out
}

// outputs returns the results' outputs, sorted.
func outputs(r iwfapi.WorkflowGetResponse) []string {
	var out []string
	for _, o := range deref(r.Results) {
		out = append(out, o.CompletedStateExecutionId+"="+deref(deref(o.CompletedStateOutput).Data))
	}
	slices.Sort(out)
	return out
}

func expect(t *testing.T, what string, got, want any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("%s:\n got %s\nwant %s", what, g, w)
	}
}

// checkClosed reads every closed run of the scenario.
func checkClosed(d driver) {
	t := d.t
	r := d.result(wfEveryShape, "")
	expect(t, "every-shape status", r.WorkflowStatus, iwfapi.WorkflowStatusCompleted)
	expect(t, "every-shape outputs", outputs(r), []string{`S2-1="thread-1"`, `S2-2="thread-2:state local"`})
	das, err := d.eng.GetDataAttributes(d.ctx, iwfapi.WorkflowGetDataObjectsRequest{WorkflowId: wfEveryShape})
	if err != nil {
		t.Fatal(err)
	}
	expect(t, "every-shape data attributes", das.Objects, []iwfapi.KeyValue{
		{Key: ptr("initial"), Value: obj(`1`)}, {Key: ptr("shape"), Value: obj(`"every"`)},
	})
	keys := []iwfapi.SearchAttributeKeyAndType{}
	for _, sa := range searchAttributes() {
		keys = append(keys, iwfapi.SearchAttributeKeyAndType{Key: sa.Key, ValueType: sa.ValueType})
	}
	sas, err := d.eng.GetSearchAttributes(d.ctx, iwfapi.WorkflowGetSearchAttributesRequest{WorkflowId: wfEveryShape, Keys: &keys})
	if err != nil {
		t.Fatal(err)
	}
	want := searchAttributes()
	want[2].StringValue = ptr("2024-02-03T04:05:06Z") // canonical form
	expect(t, "every-shape search attributes", sas.SearchAttributes, want)
	for _, q := range []string{"CustomKeywordField='keyword-1'", "CustomIntField=42 AND CustomBoolField=true", "CustomKeywordArrayField='b'"} {
		found, err := d.eng.SearchWorkflows(d.ctx, iwfapi.WorkflowSearchRequest{Query: q})
		if err != nil {
			t.Fatalf("search %q: %v", q, err)
		}
		if runs := deref(found.WorkflowExecutions); len(runs) != 1 || runs[0].WorkflowId != wfEveryShape {
			t.Errorf("search %q found %v, want every-shape", q, found.WorkflowExecutions)
		}
	}

	r = d.result(wfFailedDecision, "")
	expect(t, "failed-decision", []any{r.WorkflowStatus, deref(r.ErrorType), outputs(r)},
		[]any{iwfapi.WorkflowStatusFailed, iwfapi.WorkflowErrorTypeStateDecisionFailingWorkflow, []string{`S1-1="failed on purpose"`}})
	r = d.result(wfFailedAPI, "")
	if r.WorkflowStatus != iwfapi.WorkflowStatusFailed || deref(r.ErrorType) != iwfapi.WorkflowErrorTypeStateApiFail || !strings.HasPrefix(deref(r.ErrorMessage), "statusCode: 500") {
		t.Errorf("failed-api: %s %s %q", r.WorkflowStatus, deref(r.ErrorType), deref(r.ErrorMessage))
	}
	expect(t, "stopped-cancel", d.result(wfCanceled, "").WorkflowStatus, iwfapi.WorkflowStatusCanceled)
	expect(t, "stopped-terminate", d.result(wfTerminated, "").WorkflowStatus, iwfapi.WorkflowStatusTerminated)
	expect(t, "timeout", d.result(wfTimeout, "").WorkflowStatus, iwfapi.WorkflowStatusTimeout)

	// The retry chain: getWithWait follows the retry to the second run.
	first := d.history(wfRetryChain, "")
	r = d.result(wfRetryChain, "")
	expect(t, "retry-chain last run", r.WorkflowStatus, iwfapi.WorkflowStatusFailed)
	if retried := d.historyTypes(wfRetryChain, r.WorkflowRunId); slices.Contains(retried, "RetriedAsNewRun") {
		t.Errorf("the last run of the chain was retried again: %v", retried)
	}
	if len(first) == 0 {
		t.Error("retry-chain has no history")
	}

	// The reset: the current run is the reset run, which completed.
	r = d.result(wfReset, "")
	expect(t, "reset run", []any{r.WorkflowStatus, outputs(r)}, []any{iwfapi.WorkflowStatusCompleted, []string{`S2-1="done"`}})
}

func (d driver) historyTypes(id, runID string) []string { return types(d.history(id, runID)) }

// finishInFlight drives every run in flight to completion.
func finishInFlight(d driver, w *worker) {
	t := d.t
	if err := d.eng.SkipTimer(d.ctx, iwfapi.WorkflowSkipTimerRequest{WorkflowId: wfWaitTimer, WorkflowStateExecutionId: "S1-1", TimerCommandId: ptr("far")}); err != nil {
		t.Fatalf("skip timer: %v", err)
	}
	d.signal(wfWaitSignal, "go", obj(`"go!"`))
	rpc, err := d.eng.InvokeRPC(d.ctx, iwfapi.WorkflowRpcRequest{WorkflowId: wfWaitInternal, RpcName: "publish"})
	if err != nil {
		t.Fatalf("rpc: %v", err)
	}
	expect(t, "rpc output", rpc.Output, obj(`"rpc-output"`))
	d.signal(wfAnyCombination, "b", obj(`"b-after-upgrade"`))
	completion := make(chan iwfapi.WorkflowWaitForStateCompletionResponse, 1)
	go func() {
		resp, err := d.eng.WaitForStateCompletion(d.ctx, iwfapi.WorkflowWaitForStateCompletionRequest{WorkflowId: wfWithOptions, StateId: ptr("S2"), WaitForKey: ptr("k")})
		if err != nil {
			t.Errorf("waitForStateCompletion: %v", err)
		}
		completion <- resp
	}()
	d.signal(wfWithOptions, "go", nil)

	results := func(id string) string {
		r := d.result(id, "")
		if r.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			t.Fatalf("%s: %s %s", id, r.WorkflowStatus, deref(r.ErrorMessage))
		}
		return deref(deref(r.Results)[0].CompletedStateOutput.Data)
	}
	expect(t, "wait-timer results", results(wfWaitTimer),
		`{"stateStartApiSucceeded":true,"stateWaitUntilFailed":false,"timerResults":[{"commandId":"far","timerStatus":"FIRED"}]}`)
	expect(t, "wait-signal results", results(wfWaitSignal),
		`{"signalResults":[{"commandId":"go","signalChannelName":"go","signalRequestStatus":"RECEIVED","signalValue":{"data":"\"go!\"","encoding":"json"}}],"stateStartApiSucceeded":true,"stateWaitUntilFailed":false}`)
	expect(t, "wait-internal results", results(wfWaitInternal),
		`{"interStateChannelResults":[{"channelName":"ic","commandId":"ic","requestStatus":"RECEIVED","value":{"data":"\"published by rpc\"","encoding":"json"}}],"stateStartApiSucceeded":true,"stateWaitUntilFailed":false}`)
	expect(t, "any-combination results", results(wfAnyCombination),
		`{"signalResults":[{"commandId":"a","signalChannelName":"a","signalRequestStatus":"RECEIVED","signalValue":{"data":"\"a-before-upgrade\"","encoding":"json"}},`+
			`{"commandId":"b","signalChannelName":"b","signalRequestStatus":"RECEIVED","signalValue":{"data":"\"b-after-upgrade\"","encoding":"json"}}],`+
			`"stateStartApiSucceeded":true,"stateWaitUntilFailed":false,"timerResults":[{"commandId":"t","timerStatus":"SCHEDULED"}]}`)
	expect(t, "failing-waituntil", results(wfFailingWait), `"done"`)
	expect(t, "with-options", results(wfWithOptions), `"with options"`)
	expect(t, "with-options completion", deref((<-completion).StateCompletionOutput).CompletedStateExecutionId, "S2-1")

	// The signal buffered before the upgrade and never waited for is still there.
	dump, err := d.eng.DumpWorkflow(d.ctx, iwfapi.WorkflowDumpRequest{WorkflowId: wfWaitSignal, PageSizeInBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Signals map[string]iwfapi.ChannelInfo `json:"signalChannels"`
	}
	if err := json.Unmarshal([]byte(dump.JsonData), &doc); err != nil {
		t.Fatal(err)
	}
	expect(t, "wait-signal buffered signals", doc.Signals, map[string]iwfapi.ChannelInfo{"other": {Size: ptr(int32(1))}})

	// Each execute of this release was called once; the failing waitUntil
	// went on with the attempt count the previous release had reached.
	for _, id := range []string{wfWaitTimer, wfWaitSignal, wfWaitInternal, wfAnyCombination, wfFailingWait} {
		if n := w.count(id + " S1-1 execute "); n != 1 {
			t.Errorf("%s: execute called %d times, want 1", id, n)
		}
	}
	if w.count(wfFailingWait+" S1-1 waitUntil 1") != 0 || w.count(wfFailingWait+" S1-1 waitUntil 2") != 0 {
		t.Errorf("failing-waituntil restarted its attempts: %v", w.calls)
	}
}
