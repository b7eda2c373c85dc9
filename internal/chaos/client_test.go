package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/internal/crashtest"
)

// cluster is the server processes of one run and the faults done to them.
type cluster struct {
	nodes []*crashtest.Server

	mu     sync.Mutex
	paused map[*crashtest.Server]bool
	faults []fault
}

// fault is one fault and when it lasted, from the moment it struck until the
// system was whole again (a killed node restarted, a paused one resumed and
// a lease duration past, in which it finishes calls it had taken before the
// pause, the disk's space given back). A repeated worker call is explained by a fault
// that overlaps the time from the earlier call's arrival to the repeat's: a
// call sent by a process just before it was killed may reach the worker's
// handler a moment after the kill.
type fault struct {
	start, end time.Time
	kind       string
}

func newCluster(nodes ...*crashtest.Server) *cluster {
	return &cluster{nodes: nodes, paused: map[*crashtest.Server]bool{}}
}

// record notes that a fault of kind strikes now; call the function it
// returns when the fault is over.
func (c *cluster) record(kind string) (over func()) {
	return c.recordLingering(kind, 0)
}

// recordLingering is record for a fault whose effects outlast it: it
// counts as lasting until linger after over is called.
func (c *cluster) recordLingering(kind string, linger time.Duration) (over func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults = append(c.faults, fault{start: time.Now(), kind: kind})
	i := len(c.faults) - 1
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.faults[i].end = time.Now().Add(linger)
	}
}

// faultBetween reports whether a fault lasted into the time from a to b.
func (c *cluster) faultBetween(a, b time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range c.faults {
		end := f.end
		if end.IsZero() {
			end = time.Now()
		}
		if !end.Before(a) && !f.start.After(b) {
			return true
		}
	}
	return false
}

func (c *cluster) count(kind string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, f := range c.faults {
		if f.kind == kind {
			n++
		}
	}
	return n
}

// pick returns a node that runs and is not paused, for a client call.
func (c *cluster) pick() *crashtest.Server {
	for {
		c.mu.Lock()
		var up []*crashtest.Server
		for _, n := range c.nodes {
			if !c.paused[n] && n.Running() {
				up = append(up, n)
			}
		}
		c.mu.Unlock()
		if len(up) > 0 {
			return up[rand.IntN(len(up))]
		}
		time.Sleep(20 * time.Millisecond) // all nodes restarting: try again
	}
}

func (c *cluster) setPaused(n *crashtest.Server, p bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paused[n] = p
}

// workflow is what a client did to one workflow and what the server
// acknowledged.
type workflow struct {
	id, kind string
	// started is set when a start was acknowledged (200, or 400 "already
	// started" after an attempt whose answer was lost).
	started bool
	// signals are the values sent to the workflow, one per attempt;
	// signalAcked is the one answered 200 ("" when the acknowledgement was
	// lost and a read showed an earlier attempt had arrived).
	signals     []string
	signalAcked string
	// rpcAcked and rpcLost are the ids of the RPCs answered 200 and of
	// those whose answer was lost.
	rpcAcked, rpcLost []string
	// baseRun is the run a reset started from; resetAcked and stopAcked
	// say the reset or stop was answered 200.
	baseRun               string
	resetAcked, stopAcked bool
	// probe is set for a workflow the disk-full fault tried to start.
	probe bool
	// err is why the script could not be completed.
	err error
}

// driver runs client scripts against a cluster.
type driver struct {
	c      *cluster
	worker *crashtest.Worker
	// onErr, when set, is told of every failed attempt of retry (the soak
	// counts them).
	onErr func(what string, err error)
}

// call runs one API call with retries: op answers done when the call took
// effect (or nothing is left to do), an error to try again.
func (d *driver) retry(what string, op func(ctx context.Context, srv *crashtest.Server) (bool, error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		srv := d.c.pick()
		callCtx, cancelCall := context.WithTimeout(ctx, time.Minute)
		done, err := op(callCtx, srv)
		cancelCall()
		if done {
			return nil
		}
		last = err
		if d.onErr != nil && err != nil {
			d.onErr(what, err)
		}
		time.Sleep(20 * time.Millisecond) // a fault is under way; try again
	}
	return fmt.Errorf("%s: gave up after %s: %v", what, opTimeout, last)
}

// run executes the script of one workflow.
func (d *driver) run(wf *workflow) {
	wf.err = d.script(wf)
}

func (d *driver) script(wf *workflow) error {
	if err := d.start(wf); err != nil {
		return err
	}
	switch wf.kind {
	case kindMixed:
		for i := range 2 {
			if err := d.rpc(wf, i); err != nil {
				return err
			}
		}
		if err := d.signal(wf, "sig"); err != nil {
			return err
		}
	case kindReset, kindStop:
		if err := d.waitFor(wf, "W-1 waiting", func(dd *crashtest.Dump) bool {
			for _, x := range dd.Executions {
				if x.ExecutionID == "W-1" && x.Status == "WAITING" {
					return true
				}
			}
			return false
		}); err != nil {
			return err
		}
		if wf.kind == kindStop {
			return d.stop(wf)
		}
		if err := d.reset(wf); err != nil {
			return err
		}
		if err := d.signal(wf, "go"); err != nil {
			return err
		}
	}
	return nil
}

// startRequest is the start request of wf.
func (d *driver) startRequest(wf *workflow) iwfapi.WorkflowStartRequest {
	opts := &iwfapi.WorkflowStartOptions{IdReusePolicy: ptr(iwfapi.IDReusePolicyDisallowReuse)}
	if wf.kind == kindRetry {
		opts.RetryPolicy = &iwfapi.WorkflowRetryPolicy{InitialIntervalSeconds: ptr(int32(1)), MaximumAttempts: ptr(int32(2))}
	}
	return iwfapi.WorkflowStartRequest{
		WorkflowId: wf.id, IwfWorkflowType: "Chaos", IwfWorkerUrl: d.worker.URL(),
		WorkflowTimeoutSeconds: 1800, StartStateId: ptr("S"), StateInput: crashtest.Object(wf.kind),
		WorkflowStartOptions: opts,
	}
}

// start starts wf, unless a probe of the disk-full fault did.
func (d *driver) start(wf *workflow) error {
	if wf.started {
		return nil
	}
	req := d.startRequest(wf)
	// A probe whose start failed may still have committed.
	attempts := 0
	if wf.probe {
		attempts = 1
	}
	return d.retry("start "+wf.id, func(ctx context.Context, srv *crashtest.Server) (bool, error) {
		attempts++
		resp, err := srv.Client().StartWorkflowWithResponse(ctx, req)
		if err != nil {
			return false, err
		}
		switch {
		case resp.StatusCode() == http.StatusOK:
			wf.started = true
			return true, nil
		case attempts > 1 && resp.StatusCode() == http.StatusBadRequest && strings.Contains(string(resp.Body), "ALREADY_STARTED"):
			wf.started = true // an earlier attempt committed; its answer was lost
			return true, nil
		}
		return false, fmt.Errorf("%d %s", resp.StatusCode(), resp.Body)
	})
}

func (d *driver) rpc(wf *workflow, i int) error {
	n := 0
	return d.retry("rpc "+wf.id, func(ctx context.Context, srv *crashtest.Server) (bool, error) {
		id := fmt.Sprintf("%d-%d", i, n)
		n++
		resp, err := srv.Client().ExecuteWorkflowRpcWithResponse(ctx, iwfapi.WorkflowRpcRequest{
			WorkflowId: wf.id, RpcName: "bump", Input: crashtest.Object(id), TimeoutSeconds: ptr(int32(30)),
		})
		if err == nil && resp.StatusCode() == http.StatusOK {
			wf.rpcAcked = append(wf.rpcAcked, id)
			return true, nil
		}
		wf.rpcLost = append(wf.rpcLost, id)
		if err != nil {
			return false, err
		}
		return false, fmt.Errorf("%d %s", resp.StatusCode(), resp.Body)
	})
}

// signal sends one signal. When an attempt's answer is lost, a read of the
// history tells whether it arrived before another attempt is made.
func (d *driver) signal(wf *workflow, channel string) error {
	return d.retry("signal "+wf.id, func(ctx context.Context, srv *crashtest.Server) (bool, error) {
		if len(wf.signals) > 0 {
			dd, err := crashtest.ReadDump(srv, wf.id)
			if err != nil {
				return false, err
			}
			if len(signalsIn(dd)) > 0 {
				return true, nil
			}
		}
		value := fmt.Sprintf("%s-%s-%d", channel, wf.id, len(wf.signals))
		wf.signals = append(wf.signals, value)
		resp, err := srv.Client().SignalWorkflowWithResponse(ctx, iwfapi.WorkflowSignalRequest{
			WorkflowId: wf.id, SignalChannelName: channel, SignalValue: crashtest.Object(value),
		})
		if err != nil {
			return false, err
		}
		if resp.StatusCode() == http.StatusOK {
			wf.signalAcked = value
			return true, nil
		}
		return false, fmt.Errorf("%d %s", resp.StatusCode(), resp.Body)
	})
}

func (d *driver) currentRun(ctx context.Context, srv *crashtest.Server, id string) (iwfapi.WorkflowGetResponse, error) {
	resp, err := srv.Client().GetWorkflowWithResponse(ctx, iwfapi.WorkflowGetRequest{WorkflowId: id})
	if err != nil {
		return iwfapi.WorkflowGetResponse{}, err
	}
	if resp.JSON200 == nil {
		return iwfapi.WorkflowGetResponse{}, fmt.Errorf("get %s: %d %s", id, resp.StatusCode(), resp.Body)
	}
	return *resp.JSON200, nil
}

func (d *driver) reset(wf *workflow) error {
	tried := false
	return d.retry("reset "+wf.id, func(ctx context.Context, srv *crashtest.Server) (bool, error) {
		cur, err := d.currentRun(ctx, srv, wf.id)
		if err != nil {
			return false, err
		}
		if wf.baseRun == "" {
			wf.baseRun = cur.WorkflowRunId
		} else if tried && cur.WorkflowRunId != wf.baseRun {
			return true, nil // an attempt whose answer was lost took effect
		}
		tried = true
		resp, err := srv.Client().ResetWorkflowWithResponse(ctx, iwfapi.WorkflowResetRequest{
			WorkflowId: wf.id, WorkflowRunId: ptr(wf.baseRun), ResetType: iwfapi.WorkflowResetTypeStateId, StateId: ptr("W"),
		})
		if err != nil {
			return false, err
		}
		if resp.StatusCode() == http.StatusOK {
			wf.resetAcked = true
			return true, nil
		}
		return false, fmt.Errorf("%d %s", resp.StatusCode(), resp.Body)
	})
}

func (d *driver) stop(wf *workflow) error {
	tried := false
	return d.retry("stop "+wf.id, func(ctx context.Context, srv *crashtest.Server) (bool, error) {
		if tried {
			cur, err := d.currentRun(ctx, srv, wf.id)
			if err != nil {
				return false, err
			}
			if cur.WorkflowStatus != iwfapi.WorkflowStatusRunning {
				return true, nil // an attempt whose answer was lost took effect
			}
		}
		tried = true
		resp, err := srv.Client().StopWorkflowWithResponse(ctx, iwfapi.WorkflowStopRequest{
			WorkflowId: wf.id, StopType: ptr(iwfapi.WorkflowStopTypeCancel),
		})
		if err != nil {
			return false, err
		}
		if resp.StatusCode() == http.StatusOK {
			wf.stopAcked = true
			return true, nil
		}
		return false, fmt.Errorf("%d %s", resp.StatusCode(), resp.Body)
	})
}

// waitFor reads the workflow's dump until cond holds.
func (d *driver) waitFor(wf *workflow, what string, cond func(*crashtest.Dump) bool) error {
	return d.retry(wf.id+": wait for "+what, func(ctx context.Context, srv *crashtest.Server) (bool, error) {
		dd, err := crashtest.ReadDump(srv, wf.id)
		if err != nil {
			return false, err
		}
		if cond(dd) {
			return true, nil
		}
		time.Sleep(30 * time.Millisecond) // poll the dump again
		return false, fmt.Errorf("not yet: %s", dd.Status)
	})
}

// await waits until the workflow's current run has closed.
func (d *driver) await(id string) (iwfapi.WorkflowGetResponse, error) {
	var out iwfapi.WorkflowGetResponse
	err := d.retry("await "+id, func(ctx context.Context, srv *crashtest.Server) (bool, error) {
		resp, err := srv.Client().GetWorkflowWithWaitWithResponse(ctx, iwfapi.WorkflowGetRequest{
			WorkflowId: id, WaitTimeSeconds: ptr(int32(20)), NeedsResults: ptr(true),
		})
		if err != nil {
			return false, err
		}
		if r := resp.JSON200; r != nil && r.WorkflowStatus != iwfapi.WorkflowStatusRunning {
			out = *r
			return true, nil
		}
		return false, fmt.Errorf("%d %s", resp.StatusCode(), resp.Body)
	})
	return out, err
}

// signalsIn lists the signal values the run's history records, in order.
func signalsIn(dd *crashtest.Dump) []string {
	var out []string
	for _, e := range dd.History {
		if e.Type != "ExternalInput" && e.Type != "SignalReceived" {
			continue
		}
		var data struct {
			Signal *struct {
				Value *iwfapi.EncodedObject `json:"signalValue"`
			} `json:"signal"`
			Value *iwfapi.EncodedObject `json:"signalValue"`
		}
		_ = json.Unmarshal(e.Data, &data)
		switch {
		case data.Signal != nil:
			out = append(out, dataOf(data.Signal.Value))
		case e.Type == "SignalReceived":
			out = append(out, dataOf(data.Value))
		}
	}
	return out
}
