package compattest

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// post sends a raw JSON body to a server path.
func (e *env) post(path, body string) (int, http.Header, []byte) {
	e.t.Helper()
	resp, err := http.Post(e.url+path, "application/json", strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// TestDocumentedDifferences checks the behaviours docs/compatibility.md
// records where this server differs from iWF or where iWF's behaviour is
// Temporal-specific. Each subtest names the claim it checks.
func TestDocumentedDifferences(t *testing.T) {
	t.Run("encodedobject/load is not offered (404)", func(t *testing.T) {
		forEachStore(t, func(t *testing.T, e *env) {
			resp, err := e.api.LoadEncodedObjectWithResponse(e.ctx(), iwfapi.EncodedObject{Encoding: ptr("json"), Data: ptr("1")})
			if err != nil {
				t.Fatal(err)
			}
			expectError(t, "encodedobject/load", resp, 404,
				`{"detail":"not found: /api/v1/workflow/encodedobject/load is not offered by this server (no external payload storage)"}`)
		})
	})
	t.Run("routing and validation errors are ErrorResponse JSON", func(t *testing.T) {
		forEachStore(t, func(t *testing.T, e *env) {
			status, _, body := e.post("/api/v1/workflow/nope", `{}`)
			if status != 404 || !strings.Contains(field(t, body, "detail"), "/api/v1/workflow/nope") {
				t.Errorf("unknown path: %d %s", status, body)
			}
			resp, err := http.Get(e.url + "/api/v1/workflow/start")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
				t.Errorf("GET of a POST path: %d Allow=%q", resp.StatusCode, resp.Header.Get("Allow"))
			}
			status, _, body = e.post("/api/v1/workflow/start", `{"workflowId":"x","iwfWorkflowType":"T","workflowTimeoutSeconds":10}`)
			if d := field(t, body, "detail"); status != 400 || !strings.Contains(d, "invalid request schema") || !strings.Contains(d, "iwfWorkerUrl") ||
				field(t, body, "subStatus") != "" {
				t.Errorf("missing required field: %d %s", status, body)
			}
			status, _, body = e.post("/api/v1/workflow/stop", `{"workflowId":"x","stopType":"EXPLODE"}`)
			if status != 400 || !strings.Contains(field(t, body, "detail"), "invalid request schema") {
				t.Errorf("unknown enum value: %d %s", status, body)
			}
			status, _, body = e.post("/api/v1/workflow/signal", `{"workflowId":`)
			if status != 400 || !strings.Contains(field(t, body, "detail"), "invalid request schema") {
				t.Errorf("malformed JSON: %d %s", status, body)
			}
		})
	})
	t.Run("health check and hello", func(t *testing.T) {
		forEachStore(t, func(t *testing.T, e *env) {
			h, err := e.api.HealthCheckWithResponse(e.ctx())
			if err != nil || h.StatusCode() != 200 || h.JSON200 == nil || deref(h.JSON200.Condition) != "OK" ||
				deref(h.JSON200.Hostname) == "" || h.JSON200.Duration == nil || *h.JSON200.Duration != 0 {
				t.Errorf("healthcheck: %v %d %s", err, statusOf(h), bodyOf(h))
			}
			resp, err := http.Get(e.url + "/")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != "Hello World from iWF server!" {
				t.Errorf("GET /: %d %q", resp.StatusCode, b)
			}
		})
	})
	t.Run("triggerContinueAsNew is a no-op", func(t *testing.T) {
		forEachStore(t, func(t *testing.T, e *env) {
			e.w.state("S1", waitForever, nil)
			wfID := e.id("trigger-can")
			runID := e.start(e.startRequest(wfID, "t", "S1"))
			resp, err := e.api.TriggerContinueAsNewWithResponse(e.ctx(), iwfapi.TriggerContinueAsNewRequest{WorkflowId: wfID})
			if err != nil {
				t.Fatal(err)
			}
			expectError(t, "triggerContinueAsNew", resp, 200, `{}`)
			if r, _ := e.get(wfID, "", false); r.WorkflowRunId != runID || r.WorkflowStatus != iwfapi.WorkflowStatusRunning {
				t.Errorf("after triggerContinueAsNew: %s", mustJSON(r))
			}
			e.stop(iwfapi.WorkflowStopRequest{WorkflowId: wfID})
			resp, err = e.api.TriggerContinueAsNewWithResponse(e.ctx(), iwfapi.TriggerContinueAsNewRequest{WorkflowId: wfID})
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode() != 400 || !strings.Contains(string(resp.Body), "WORKFLOW_NOT_EXISTS_SUB_STATUS") {
				t.Errorf("triggerContinueAsNew on a closed run: %d %s", resp.StatusCode(), resp.Body)
			}
		})
	})
	t.Run("cron starts a run at once and returns its id", func(t *testing.T) {
		forEachStore(t, func(t *testing.T, e *env) {
			wfID := e.id("cron")
			req := e.startRequest(wfID, "t", "S1")
			req.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{CronSchedule: ptr("0 0 1 1 *")}
			runID := e.start(req)
			if r, _ := e.get(wfID, "", false); r.WorkflowRunId != runID || r.WorkflowStatus != iwfapi.WorkflowStatusRunning {
				t.Errorf("cron run: %s", mustJSON(r))
			}
			time.Sleep(200 * time.Millisecond)
			if n := len(e.w.counts()); n != 0 {
				t.Errorf("the start state ran before its cron time: %v", e.w.counts())
			}
			req.WorkflowId = e.id("bad-cron")
			req.WorkflowStartOptions.CronSchedule = ptr("every day")
			bad := e.startRaw(req)
			if bad.StatusCode() != 400 || !strings.Contains(string(bad.Body), "invalid cronSchedule") {
				t.Errorf("invalid cron: %d %s", bad.StatusCode(), bad.Body)
			}
		})
	})
	t.Run("a cron run's timeout counts from its scheduled start", func(t *testing.T) {
		forEachStore(t, func(t *testing.T, e *env) {
			wfID := e.id("cron-timeout")
			req := e.startRequest(wfID, "t", "S1")
			req.WorkflowTimeoutSeconds = 1
			req.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{CronSchedule: ptr("0 0 1 1 *")}
			first := e.start(req)
			time.Sleep(2 * time.Second)
			if r, body := e.get(wfID, first, false); r.WorkflowStatus != iwfapi.WorkflowStatusRunning {
				t.Errorf("the first cron run, not due before January, is already closed: %s", body)
			}
		})
	})
	t.Run("history-based resets use this server's history", func(t *testing.T) {
		forEachStore(t, func(t *testing.T, e *env) {
			skip := iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
			e.w.state("S1", nil, func(iwfapi.WorkflowStateDecideRequest) reply {
				e.w.sleep(30 * time.Millisecond)
				return decide(moveWith("S2", nil, skip))
			})
			e.w.state("S2", nil, complete)
			wfID := e.id("history-reset")
			req := e.startRequest(wfID, "t", "S1")
			req.StateOptions = &skip
			first := e.start(req)
			e.result(wfID)
			var s2 *iwfapi.WorkflowHistoryEvent
			resp, err := e.api.GetWorkflowHistoryWithResponse(e.ctx(), iwfapi.WorkflowHistoryRequest{WorkflowId: wfID})
			if err != nil || resp.JSON200 == nil {
				t.Fatalf("history: %v %s", err, bodyOf(resp))
			}
			for i, ev := range resp.JSON200.Events {
				if ev.EventType == "StateExecutionStarted" && deref(ev.StateExecutionId) == "S2-1" {
					s2 = &resp.JSON200.Events[i]
				}
			}
			if s2 == nil {
				t.Fatalf("no StateExecutionStarted event of S2-1 in %s", resp.Body)
			}
			e.reset(iwfapi.WorkflowResetRequest{WorkflowId: wfID, WorkflowRunId: ptr(first), ResetType: iwfapi.WorkflowResetTypeHistoryEventId, HistoryEventId: ptr(int32(s2.EventId))})
			e.result(wfID)
			e.w.expectCounts(t, map[string]int{"S1.execute": 1, "S2.execute": 2})
			at := time.UnixMilli(s2.TimestampMs).UTC().Format(time.RFC3339Nano)
			e.reset(iwfapi.WorkflowResetRequest{WorkflowId: wfID, WorkflowRunId: ptr(first), ResetType: iwfapi.WorkflowResetTypeHistoryEventTime, HistoryEventTime: ptr(at)})
			e.result(wfID)
			e.w.expectCounts(t, map[string]int{"S1.execute": 1, "S2.execute": 3})
			// A point before any state started is the beginning.
			e.reset(iwfapi.WorkflowResetRequest{WorkflowId: wfID, WorkflowRunId: ptr(first), ResetType: iwfapi.WorkflowResetTypeHistoryEventId, HistoryEventId: ptr(int32(1))})
			e.result(wfID)
			e.w.expectCounts(t, map[string]int{"S1.execute": 2, "S2.execute": 4})
		})
	})
	t.Run("state-based reset keeps the current attributes", func(t *testing.T) {
		forEachStore(t, func(t *testing.T, e *env) {
			skip := iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
			e.w.state("S1", nil, func(iwfapi.WorkflowStateDecideRequest) reply {
				return ok(iwfapi.WorkflowStateDecideResponse{
					UpsertDataObjects: list(kv("k", obj("from S1"))),
					StateDecision:     &iwfapi.StateDecision{NextStates: list(move("S2", nil))},
				})
			})
			// S2 starts waiting only once both signals are buffered, so the
			// second signal never arrives after the run completed.
			release := make(chan struct{})
			e.w.state("S2", func(iwfapi.WorkflowStateStartRequest) reply {
				<-release
				return commands(iwfapi.CommandRequest{
					CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
					SignalCommands:     list(iwfapi.SignalCommand{CommandId: ptr("a"), SignalChannelName: "a"}),
				})
			}, func(iwfapi.WorkflowStateDecideRequest) reply {
				return ok(iwfapi.WorkflowStateDecideResponse{
					UpsertDataObjects: list(kv("k", obj("from S2"))),
					StateDecision:     &iwfapi.StateDecision{NextStates: list(move(gracefulComplete, nil))},
				})
			})
			wfID := e.id("reset-keeps")
			req := e.startRequest(wfID, "t", "S1")
			req.StateOptions = &skip
			e.start(req)
			e.signal(wfID, "a", obj("first"))
			e.signal(wfID, "a", obj("second"))
			close(release)
			e.result(wfID)
			e.reset(iwfapi.WorkflowResetRequest{WorkflowId: wfID, ResetType: iwfapi.WorkflowResetTypeStateId, StateId: ptr("S2")})
			if r, _ := e.result(wfID); r.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
				t.Fatalf("reset run: %s", r.WorkflowStatus)
			}
			b := e.w.body(t, "S2.execute", 1)
			jsonEqual(t, "data attributes seen by the re-executed S2", []byte(field(t, b, "DataObjects")), `[{"key":"k","value":{"encoding":"json","data":"from S2"}}]`)
			// Signals are as in iWF: those buffered at the reset point and
			// those received after it are delivered again, in order.
			jsonEqual(t, "signal consumed by the re-executed S2", e.executeResults("S2", 1), `{"signalResults":[{"commandId":"a","signalChannelName":"a",
				"signalRequestStatus":"RECEIVED","signalValue":{"encoding":"json","data":"first"}}],"stateStartApiSucceeded":true,"stateWaitUntilFailed":false}`)
		})
	})
	t.Run("each attempt of a state API loads the attributes again", func(t *testing.T) {
		forEachStore(t, func(t *testing.T, e *env) {
			var wfID string
			e.w.state("S1", func(req iwfapi.WorkflowStateStartRequest) reply {
				if deref(req.Context.Attempt) == 1 {
					resp, err := e.api.SetWorkflowDataObjectsWithResponse(e.ctx(), iwfapi.WorkflowSetDataObjectsRequest{
						WorkflowId: req.Context.WorkflowId, Objects: list(kv("k", obj("v2"))),
					})
					if err != nil || resp.StatusCode() != 200 {
						e.w.fail("dataobjects/set during the first attempt: %v %s", err, bodyOf(resp))
					}
					return reply{status: 500, body: iwfapi.WorkerErrorResponse{Detail: ptr("try again")}}
				}
				return noCommands(req)
			}, complete)
			wfID = e.id("per-attempt-load")
			req := e.startRequest(wfID, "t", "S1")
			req.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{DataAttributes: list(kv("k", obj("v1")))}
			e.start(req)
			if r, _ := e.result(wfID); r.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
				t.Fatalf("status %s", r.WorkflowStatus)
			}
			jsonEqual(t, "first attempt", []byte(field(t, e.w.body(t, "S1.waitUntil", 0), "dataObjects")), `[{"key":"k","value":{"encoding":"json","data":"v1"}}]`)
			jsonEqual(t, "second attempt", []byte(field(t, e.w.body(t, "S1.waitUntil", 1), "dataObjects")), `[{"key":"k","value":{"encoding":"json","data":"v2"}}]`)
		})
	})
	t.Run("publishToInternalChannel", func(t *testing.T) {
		forEachStore(t, func(t *testing.T, e *env) {
			e.w.state("S1", func(iwfapi.WorkflowStateStartRequest) reply {
				return commands(iwfapi.CommandRequest{
					CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
					InterStateChannelCommands: list(
						iwfapi.InterStateChannelCommand{CommandId: ptr("1"), ChannelName: "c"},
						iwfapi.InterStateChannelCommand{CommandId: ptr("2"), ChannelName: "c"},
					),
				})
			}, complete)
			wfID := e.id("publish")
			e.start(e.startRequest(wfID, "t", "S1"))
			resp, err := e.api.PublishToInternalChannelWithResponse(e.ctx(), iwfapi.PublishToInternalChannelRequest{WorkflowId: wfID, Messages: list(
				iwfapi.InterStateChannelPublishing{ChannelName: "c", Value: obj("one")},
				iwfapi.InterStateChannelPublishing{ChannelName: "c"},
			)})
			if err != nil {
				t.Fatal(err)
			}
			expectError(t, "publishToInternalChannel", resp, 200, `{}`)
			e.result(wfID)
			jsonEqual(t, "S1 commandResults", e.executeResults("S1", 0), `{"interStateChannelResults":[
				{"commandId":"1","channelName":"c","requestStatus":"RECEIVED","value":{"encoding":"json","data":"one"}},
				{"commandId":"2","channelName":"c","requestStatus":"RECEIVED"}],"stateStartApiSucceeded":true,"stateWaitUntilFailed":false}`)
		})
	})
	t.Run("workflow retry policy starts new runs that getWithWait follows", func(t *testing.T) {
		forEachStore(t, func(t *testing.T, e *env) {
			e.w.state("S1", func(iwfapi.WorkflowStateStartRequest) reply { return reply{status: 500, body: "{}"} }, nil)
			wfID := e.id("retry-policy")
			req := e.startRequest(wfID, "t", "S1")
			req.StateOptions = &iwfapi.WorkflowStateOptions{WaitUntilApiRetryPolicy: &iwfapi.RetryPolicy{MaximumAttempts: ptr(int32(1))}}
			req.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{RetryPolicy: &iwfapi.WorkflowRetryPolicy{
				InitialIntervalSeconds: ptr(int32(1)), MaximumAttempts: ptr(int32(2)),
			}}
			first := e.start(req)
			r, _ := e.result(wfID)
			if r.WorkflowRunId == first || r.WorkflowStatus != iwfapi.WorkflowStatusFailed || deref(r.ErrorType) != iwfapi.WorkflowErrorTypeStateApiFail {
				t.Errorf("final run: %s (first run %s)", mustJSON(r), first)
			}
			if f, _ := e.get(wfID, first, false); f.WorkflowStatus != iwfapi.WorkflowStatusFailed {
				t.Errorf("first run: %s", mustJSON(f))
			}
			e.w.expectCounts(t, map[string]int{"S1.waitUntil": 2})
		})
	})
	t.Run("searchattributes/get returns the value as written", func(t *testing.T) {
		forEachStore(t, func(t *testing.T, e *env) {
			wfID := e.id("sa-typed")
			req := e.startRequest(wfID, "t", "")
			req.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{SearchAttributes: list(intSA("CustomIntField", 7))}
			e.start(req)
			jsonEqualValue(t, "INT read as KEYWORD", e.searchAttributes(wfID, "", saKey("CustomIntField", iwfapi.SearchAttributeValueTypeKeyword)),
				`[{"key":"CustomIntField","valueType":"INT","integerValue":7}]`)
		})
	})
	t.Run("internal/dump pages", func(t *testing.T) {
		forEachStore(t, func(t *testing.T, e *env) {
			wfID := e.id("dump")
			runID := e.start(e.startRequest(wfID, "t", ""))
			resp, err := e.api.DumpWorkflowInternalWithResponse(e.ctx(), iwfapi.WorkflowDumpRequest{WorkflowId: wfID, WorkflowRunId: runID, PageSizeInBytes: 100, PageNum: 0})
			if err != nil || resp.JSON200 == nil || resp.JSON200.TotalPages < 2 || len(resp.JSON200.JsonData) != 100 || len(resp.JSON200.Checksum) != 32 {
				t.Fatalf("dump page 0: %v %s", err, bodyOf(resp))
			}
			beyond, err := e.api.DumpWorkflowInternalWithResponse(e.ctx(), iwfapi.WorkflowDumpRequest{WorkflowId: wfID, WorkflowRunId: runID, PageSizeInBytes: 100, PageNum: resp.JSON200.TotalPages})
			if err != nil {
				t.Fatal(err)
			}
			if beyond.StatusCode() != 400 || !strings.Contains(string(beyond.Body), "UNCATEGORIZED_SUB_STATUS") {
				t.Errorf("dump page beyond the last: %d %s", beyond.StatusCode(), beyond.Body)
			}
		})
	})
	t.Run("a state-based reset gets a fresh workflow timeout", func(t *testing.T) {
		forEachStore(t, func(t *testing.T, e *env) {
			// S1 waits for a signal: the first run never gets one and times
			// out; each reset run gets it and completes, within a fresh
			// timeout of its own.
			e.w.state("S1", func(iwfapi.WorkflowStateStartRequest) reply {
				return commands(iwfapi.CommandRequest{CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
					SignalCommands: list(iwfapi.SignalCommand{CommandId: ptr("go"), SignalChannelName: "go"})})
			}, goTo("S2"))
			e.w.state("S2", noCommands, complete)
			wfID := e.id("reset-timeout")
			req := e.startRequest(wfID, "t", "S1")
			req.WorkflowTimeoutSeconds = 5
			first := e.start(req)
			if r, _ := e.result(wfID); r.WorkflowStatus != iwfapi.WorkflowStatusTimeout {
				t.Fatalf("first run: %s, want TIMEOUT", r.WorkflowStatus)
			}
			for _, r := range []iwfapi.WorkflowResetRequest{
				{ResetType: iwfapi.WorkflowResetTypeBeginning},
				{ResetType: iwfapi.WorkflowResetTypeStateId, StateId: ptr("S1")},
				{ResetType: iwfapi.WorkflowResetTypeStateExecutionId, StateExecutionId: ptr("S1-1")},
			} {
				r.WorkflowId, r.WorkflowRunId = wfID, ptr(first)
				e.reset(r)
				e.signal(wfID, "go", nil)
				if got, _ := e.result(wfID); got.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
					t.Errorf("reset %s of a run past its deadline: %s, want COMPLETED (Temporal recomputes the execution timeout on reset since temporalio/temporal#5987)",
						r.ResetType, got.WorkflowStatus)
				}
			}
		})
	})
}
