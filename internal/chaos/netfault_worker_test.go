package chaos

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/crashtest"
	"github.com/iwf-server/iwf-server/internal/faultproxy"
)

// workerAPITimeout is the state API timeout of the worker-link test's
// workflows, and workerBackoff their retry backoff.
const (
	workerAPITimeout = 2 * time.Second
	workerBackoff    = time.Second
)

// TestWorkerLinkFaults puts a fault proxy between the server and a real
// HTTP worker and strikes the link with each network fault while a workflow
// runs: with 200 ms of latency or a bandwidth limit the workflow completes
// with no failed attempt; with connection resets and with a black hole
// (the worker's answers never arrive) each attempt ends as a failed attempt
// — for the black hole, after the state API timeout and not before — and
// the workflow completes once the link heals: no execution is stuck.
func TestWorkerLinkFaults(t *testing.T) {
	srv := crashtest.StartServer(t, crashtest.Options{Bin: serverBin, DB: crashtest.SQLiteDB(t), Name: "server", LogLevel: "info"})
	w := crashtest.NewWorker(t)
	w.State("S", crashtest.State{
		WaitUntil: func(*iwfapi.WorkflowStateStartRequest) *iwfapi.WorkflowStateStartResponse {
			return &iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted)}}
		},
		Execute: func(*iwfapi.WorkflowStateDecideRequest) *iwfapi.WorkflowStateDecideResponse {
			return decide(nil, iwfapi.StateMovement{StateId: engine.GracefulCompletingState, StateInput: crashtest.Object("done")})
		},
	})
	wu, err := url.Parse(w.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := faultproxy.New(t, wu.Host)
	viaProxy := *wu
	viaProxy.Host = proxy.Addr()

	secs := int32(workerAPITimeout / time.Second)
	retry := &iwfapi.RetryPolicy{InitialIntervalSeconds: ptr(int32(workerBackoff / time.Second)), MaximumIntervalSeconds: ptr(int32(workerBackoff / time.Second)),
		BackoffCoefficient: ptr(float32(1))}
	opts := &iwfapi.WorkflowStateOptions{
		WaitUntilApiTimeoutSeconds: &secs, ExecuteApiTimeoutSeconds: &secs,
		WaitUntilApiRetryPolicy: retry, ExecuteApiRetryPolicy: retry,
	}
	start := func(id string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		resp, err := srv.Client().StartWorkflowWithResponse(ctx, iwfapi.WorkflowStartRequest{
			WorkflowId: id, IwfWorkflowType: "LinkFault", IwfWorkerUrl: viaProxy.String(),
			WorkflowTimeoutSeconds: 600, StartStateId: ptr("S"), StateOptions: opts,
		})
		if err != nil || resp.StatusCode() != 200 {
			t.Fatalf("start %s: %v %v", id, err, resp)
		}
	}
	attempts := func(id string) []crashtest.Call {
		return w.Calls(func(c crashtest.Call) bool { return c.WorkflowID == id && c.API == crashtest.WaitUntil })
	}
	completes := func(id string) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
			resp, err := srv.Client().GetWorkflowWithWaitWithResponse(ctx, iwfapi.WorkflowGetRequest{WorkflowId: id, WaitTimeSeconds: ptr(int32(20))})
			cancel()
			if err == nil && resp.JSON200 != nil && resp.JSON200.WorkflowStatus != iwfapi.WorkflowStatusRunning {
				if s := resp.JSON200.WorkflowStatus; s != iwfapi.WorkflowStatusCompleted {
					t.Fatalf("%s ended %s, want COMPLETED", id, s)
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still running 2 minutes after the link healed: a stuck execution (%v %v)", id, err, resp)
			}
		}
	}

	// Slow links: the workflow completes, each API called once.
	for _, f := range []struct {
		name string
		set  func() error
	}{
		{"latency", func() error { return proxy.Latency(200, faultproxy.Both...) }},
		{"bandwidth", func() error { return proxy.Bandwidth(16, faultproxy.Both...) }},
	} {
		id := "link-" + f.name
		if err := f.set(); err != nil {
			t.Fatal(err)
		}
		start(id)
		completes(id)
		if err := proxy.Heal(); err != nil {
			t.Fatal(err)
		}
		if n := len(attempts(id)); n != 1 {
			t.Errorf("%s: waitUntil called %d times through a slow link, want once", f.name, n)
		}
	}

	// Resets of the worker's answers: failed attempts, then completion.
	if err := proxy.Reset(faultproxy.Downstream); err != nil {
		t.Fatal(err)
	}
	start("link-reset")
	waitUntil(t, 2*time.Minute, "two waitUntil attempts under resets", func() bool { return len(attempts("link-reset")) >= 2 })
	if err := proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	completes("link-reset")

	// A black hole: the worker gets each call, its answers never arrive.
	// Each attempt must end by its timeout (the next comes a timeout plus
	// a backoff later, never sooner), and the workflow completes after the
	// heal.
	if err := proxy.BlackHole(faultproxy.Downstream); err != nil {
		t.Fatal(err)
	}
	start("link-blackhole")
	waitUntil(t, 2*time.Minute, "three waitUntil attempts into a black hole", func() bool { return len(attempts("link-blackhole")) >= 3 })
	healed := time.Now()
	if err := proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	completes("link-blackhole")
	calls := attempts("link-blackhole")
	var gaps []string
	for i := 1; i < len(calls) && calls[i].At.Before(healed); i++ {
		gap := calls[i].At.Sub(calls[i-1].At)
		gaps = append(gaps, gap.Round(time.Millisecond).String())
		// Lower bound: the attempt waited for its timeout (the answer was
		// lost, not refused). Upper bound: generous, a loaded machine.
		if gap < workerAPITimeout-200*time.Millisecond {
			t.Errorf("attempt %d came %s after attempt %d: sooner than the state API timeout %s", calls[i].Attempt, gap, calls[i-1].Attempt, workerAPITimeout)
		}
		if gap > workerAPITimeout+workerBackoff+30*time.Second {
			t.Errorf("attempt %d came %s after attempt %d: an attempt outlived its timeout %s by far", calls[i].Attempt, gap, calls[i-1].Attempt, workerAPITimeout)
		}
	}
	fmt.Printf("worker link: latency and bandwidth completed with one attempt; resets %d attempts; black hole %d attempts %s apart (timeout %s, backoff %s), completed after the heal\n",
		len(attempts("link-reset")), len(calls), gaps, workerAPITimeout, workerBackoff)
}
