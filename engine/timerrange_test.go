package engine_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// syncWriter collects log output written from the engine's goroutines.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestTimerOutOfRangeFailsTheState: a timer whose time overflows (here 2^63-1
// seconds, which used to fire at once) is an invalid waitUntil answer: the
// attempt fails, with a message naming the timer and the range, and the
// failure is logged at warn level with the workflow's ids.
func TestTimerOutOfRangeFailsTheState(t *testing.T) {
	logs := &syncWriter{}
	logger := zerolog.New(logs).Level(zerolog.WarnLevel)
	forEachStoreWith(t, func(c *engine.Config) { c.Logger = &logger }, func(t *testing.T, h *harness) {
		h.worker.state("S1", stateHandlers{
			WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
				return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
					CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
					TimerCommands:      &[]iwfapi.TimerCommand{{CommandId: ptr("forever"), DurationSeconds: ptr(int64(1<<63 - 1))}},
				}}, 200
			},
			Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				return decide(next(engine.ForceCompletingState, nil)), 200
			},
		})
		id := "wf-timer-range-" + t.Name()[strings.LastIndex(t.Name(), "/")+1:]
		h.start(id, "S1", nil, func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = &iwfapi.WorkflowStateOptions{WaitUntilApiRetryPolicy: &iwfapi.RetryPolicy{MaximumAttempts: ptr(int32(1))}}
		})
		got := h.result(id)
		if got.WorkflowStatus != iwfapi.WorkflowStatusFailed || !strings.Contains(deref(got.ErrorMessage), `timer command "forever": durationSeconds 9223372036854775807 is outside the supported range`) {
			t.Fatalf("got %s %q, want FAILED naming the timer's range", got.WorkflowStatus, deref(got.ErrorMessage))
		}
		if n := h.worker.count("S1.execute"); n != 0 {
			t.Fatalf("execute called %d times: the timer fired", n)
		}
		if !strings.Contains(logs.String(), `"workflowId":"`+id+`"`) || !strings.Contains(logs.String(), `"message":"worker call failed"`) {
			t.Fatalf("no warn line for the failed attempt:\n%s", logs.String())
		}
	})
}

// TestStartRejectsUnusableWorkerURLs: a worker URL the server cannot or
// must not call is a 400 at start, and nothing is stored.
func TestStartRejectsUnusableWorkerURLs(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		for _, bad := range []string{"not a url", "file:///etc/passwd", "http://", "http://127.0.0.1:8803/capture?", "http://u:p@127.0.0.1:8803",
			"http://127.0.0.1:8803/w?x=1", "http://127.0.0.1:8803/w#frag", "ftp://127.0.0.1/", "/relative/path"} {
			_, err := h.eng.StartWorkflow(context.Background(), iwfapi.WorkflowStartRequest{
				WorkflowId: "wf-bad-url", IwfWorkflowType: "T", IwfWorkerUrl: bad, StartStateId: ptr("S1"),
			})
			if engine.CodeOf(err) != engine.CodeInvalidArgument || !strings.Contains(err.Error(), "iwfWorkerUrl") {
				t.Errorf("%q: %v, want an invalid_argument error naming iwfWorkerUrl", bad, err)
			}
		}
		_, err := h.eng.GetWorkflow(context.Background(), iwfapi.WorkflowGetRequest{WorkflowId: "wf-bad-url"})
		if engine.CodeOf(err) != engine.CodeWorkflowNotExists {
			t.Fatalf("a refused start stored a workflow: %v", err)
		}
	})
}
