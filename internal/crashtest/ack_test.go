package crashtest

import (
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// TestKillAfterAcknowledgedCalls checks "acknowledged means committed" for
// the API calls that change a workflow: after each of start, set data
// attributes, publish to an internal channel, skip timer and stop answers
// 200, the server is killed at once and restarted, and the effect must be
// there:
//
//   - start: the workflow exists and runs its first state;
//   - setDataObjects: the attribute reads back;
//   - publishToInternalChannel: the message is buffered;
//   - skipTimer: the state's 1-hour timer is skipped, its execute runs once
//     and sees the attribute and the message;
//   - stop: a second workflow is CANCELED.
func TestKillAfterAcknowledgedCalls(t *testing.T) {
	forEachStore(t, func(t *testing.T, db string) {
		w := NewWorker(t)
		w.State("W", State{
			WaitUntil: func(req *iwfapi.WorkflowStateStartRequest) *iwfapi.WorkflowStateStartResponse {
				return &iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
					CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
					TimerCommands:      &[]iwfapi.TimerCommand{{CommandId: ptr("long"), DurationSeconds: ptr(int64(3600))}},
				}}
			},
			Execute: func(req *iwfapi.WorkflowStateDecideRequest) *iwfapi.WorkflowStateDecideResponse {
				return decide([]iwfapi.KeyValue{Incr(req.DataObjects, "count")}, iwfapi.StateMovement{
					StateId: engine.GracefulCompletingState, StateInput: Object(strconv.Itoa(Counter(req.DataObjects, "k"))),
				})
			},
		})
		srv := startServer(t, db, "server")
		crash := func() {
			t.Helper()
			srv.Kill()
			srv.Start()
		}
		ctx := Ctx(t, 60*time.Second)
		waiting := func(id string) {
			t.Helper()
			eventually(t, 60*time.Second, id+": W-1 waiting for its timer", func() bool {
				d, err := dump(srv, id)
				return err == nil && d.execStatus("W-1") == "WAITING"
			})
		}

		startWorkflow(t, srv, w, "wf", "W", "", nil)
		crash()
		waiting("wf")

		set, err := srv.Client().SetWorkflowDataObjectsWithResponse(ctx, iwfapi.WorkflowSetDataObjectsRequest{
			WorkflowId: "wf", Objects: &[]iwfapi.KeyValue{{Key: ptr("k"), Value: Object("7")}},
		})
		if err != nil || set.StatusCode() != http.StatusOK {
			t.Fatalf("setDataObjects: %v %s", err, body(set))
		}
		crash()
		got, err := srv.Client().GetWorkflowDataObjectsWithResponse(ctx, iwfapi.WorkflowGetDataObjectsRequest{WorkflowId: "wf", Keys: &[]string{"k"}})
		if err != nil || got.JSON200 == nil || Counter(got.JSON200.Objects, "k") != 7 {
			t.Fatalf("after setDataObjects and a crash: %v %s", err, body(got))
		}

		pub, err := srv.Client().PublishToInternalChannelWithResponse(ctx, iwfapi.PublishToInternalChannelRequest{
			WorkflowId: "wf", Messages: &[]iwfapi.InterStateChannelPublishing{{ChannelName: "ch", Value: Object("m")}},
		})
		if err != nil || pub.StatusCode() != http.StatusOK {
			t.Fatalf("publishToInternalChannel: %v %s", err, body(pub))
		}
		crash()
		if d := mustDump(t, srv, "wf"); deref(d.Internal["ch"].Size) != 1 {
			t.Fatalf("after publishToInternalChannel and a crash: internal channels %s", mustJSON(d.Internal))
		}

		skip, err := srv.Client().SkipTimerWithResponse(ctx, iwfapi.WorkflowSkipTimerRequest{
			WorkflowId: "wf", WorkflowStateExecutionId: "W-1", TimerCommandId: ptr("long"),
		})
		if err != nil || skip.StatusCode() != http.StatusOK {
			t.Fatalf("skipTimer: %v %s", err, body(skip))
		}
		crash()
		r := result(t, srv, "wf", 90*time.Second)
		want := iwfapi.WorkflowGetResponse{
			WorkflowRunId: r.WorkflowRunId, WorkflowStatus: iwfapi.WorkflowStatusCompleted,
			Results: &[]iwfapi.StateCompletionOutput{{CompletedStateId: "W", CompletedStateExecutionId: "W-1", CompletedStateOutput: Object("7")}},
		}
		if !equal(r, want) {
			t.Errorf("after skipTimer and a crash: result %s, want %s", mustJSON(r), mustJSON(want))
		}
		d := mustDump(t, srv, "wf")
		if got := d.attr("count"); got != "1" {
			t.Errorf("data attribute count = %q, want 1", got)
		}
		for _, p := range checkOnce(d) {
			t.Error(p)
		}
		if n := w.Count("wf", "W", WaitUntil); n < 1 || n > 2 {
			t.Errorf("W.waitUntil called %d times, want 1 (or 2 if the kill after start hit the call)", n)
		}

		startWorkflow(t, srv, w, "stopped", "W", "", nil)
		stop, err := srv.Client().StopWorkflowWithResponse(ctx, iwfapi.WorkflowStopRequest{WorkflowId: "stopped"})
		if err != nil || stop.StatusCode() != http.StatusOK {
			t.Fatalf("stop: %v %s", err, body(stop))
		}
		crash()
		get, err := srv.Client().GetWorkflowWithResponse(ctx, iwfapi.WorkflowGetRequest{WorkflowId: "stopped"})
		if err != nil || get.JSON200 == nil || get.JSON200.WorkflowStatus != iwfapi.WorkflowStatusCanceled {
			t.Errorf("after stop and a crash: %v %s, want CANCELED", err, body(get))
		}
	})
}

// body describes a generated client response for a message: its status
// and body ("" when there is none).
func body(r interface {
	StatusCode() int
	GetBody() []byte
}) string {
	if v := reflect.ValueOf(r); !v.IsValid() || v.IsNil() {
		return ""
	}
	return fmt.Sprintf("%d %s", r.StatusCode(), r.GetBody())
}
