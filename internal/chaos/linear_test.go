package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/crashtest"
)

// The linearizability workload. Beside the mixed workload of a chaos run,
// concurrent clients call a few long-lived workflows, each call through a
// node picked at random, and record when each call was made, when it
// returned and what it returned. The checker (linearcheck_test.go) then
// asks porcupine whether the histories are linearizable with respect to
// three models, one partition per workflow and attribute:
//
//	counter  "ctr":  the RPC "incr" under LOAD_PARTIAL_WITH_EXCLUSIVE_LOCK on
//	                 "ctr"; its worker handler reads the value it was given
//	                 and answers value+1, as an upsert and as its output.
//	register "reg":  dataobjects/set of a value no other call writes, and
//	                 dataobjects/get.
//	signals  "sigs": signals on "tick", and dataobjects/get of "sigs", which
//	                 the state LC increments once per signal it consumes.
//
// A call that timed out, whose connection was cut, or that the server
// answered with a 5xx is indeterminate: it may or may not have taken effect,
// at any time after it was made (the models carry it as a pending effect
// from its invocation on; see linearcheck_test.go). The client that made it
// goes on as a new client, as Jepsen's do. A 4xx is a call that definitely
// took no effect; it stays in the history as such. A call whose connection
// was refused was never sent: it is made again.

// linearPlan is the linearizability workload of a chaos run.
type linearPlan struct {
	// store names the store in the summary line.
	store string
	// workflows and clients (per workflow) of the workload.
	workflows, clients int
	// ops is the number of operations per workflow (CHAOS_LINEAR); 0 runs
	// the clients while the plan's faults strike.
	ops int
}

// linearFor is the workload of a run on store: CHAOS_LINEAR operations per
// workflow, or (by default, the `make test` size) as many as the clients
// make while the faults strike.
func linearFor(t *testing.T, store string) *linearPlan {
	p := &linearPlan{store: store, workflows: 3, clients: 3}
	if v := os.Getenv("CHAOS_LINEAR"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("CHAOS_LINEAR=%q: want a positive number", v)
		}
		p.ops = n
	}
	return p
}

// The names of the linear workflows' worker parts and attributes.
const (
	linearType   = "Linear"
	linearState  = "LC"
	linearRPC    = "incr"
	linearSignal = "tick"
	keyCounter   = "ctr"
	keyRegister  = "reg"
	keySignals   = "sigs"
)

// linearCallTimeout bounds one call of the linear clients: longer than a
// pause past the lease, so that a call to a node that is paused completes
// when it resumes.
const linearCallTimeout = 15 * time.Second

// linearRPCTimeout is the incr RPC's timeoutSeconds: its locks expire this
// long plus the lease after they were taken, when the node that took them
// died.
const linearRPCTimeout = 2

// rpcAnswers are the values the worker's incr handler answered, per call:
// an increment whose outcome the client does not know took effect with one
// of them, or not at all (no answer, no effect).
type rpcAnswers struct {
	mu sync.Mutex
	m  map[string][]string
}

func (a *rpcAnswers) add(id, value string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.m[id] = append(a.m[id], value)
}

func (a *rpcAnswers) of(id string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.m[id]...)
}

// registerLinear registers the state and the RPC of the linear workflows.
func registerLinear(w *crashtest.Worker) *rpcAnswers {
	answers := &rpcAnswers{m: map[string][]string{}}
	w.State(linearState, crashtest.State{
		WaitUntil: func(*iwfapi.WorkflowStateStartRequest) *iwfapi.WorkflowStateStartResponse {
			return &iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
				CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
				SignalCommands:     &[]iwfapi.SignalCommand{{CommandId: ptr("t"), SignalChannelName: linearSignal}},
			}}
		},
		Execute: func(req *iwfapi.WorkflowStateDecideRequest) *iwfapi.WorkflowStateDecideResponse {
			return decide([]iwfapi.KeyValue{crashtest.Incr(req.DataObjects, keySignals)}, iwfapi.StateMovement{StateId: linearState})
		},
	})
	w.RPCHandler(linearRPC, func(req *iwfapi.WorkflowWorkerRpcRequest) *iwfapi.WorkflowWorkerRpcResponse {
		up := crashtest.Incr(req.DataAttributes, keyCounter)
		answers.add(dataOf(req.Input), dataOf(up.Value))
		return &iwfapi.WorkflowWorkerRpcResponse{UpsertDataAttributes: &[]iwfapi.KeyValue{up}, Output: up.Value}
	})
	return answers
}

// linWorkflow is one workflow of the linear workload and its history.
type linWorkflow struct {
	id     string
	issued atomic.Int64 // operations begun
	seq    atomic.Int64 // for unique values and ids

	mu  sync.Mutex
	ops []porcupine.Operation
}

// linearRun is the linear workload of one chaos run.
type linearRun struct {
	d       *driver
	plan    linearPlan
	answers *rpcAnswers
	// unlocked makes incr load "ctr" without a lock (the test that shows
	// what the checker finds then).
	unlocked bool
	// rpcTimeout is incr's timeoutSeconds (linearRPCTimeout).
	rpcTimeout int32

	began, ended time.Time
	stopping     atomic.Bool
	clientIDs    atomic.Int64
	unsent       atomic.Int64 // calls refused a connection, made again
	workflows    []*linWorkflow
	wg           sync.WaitGroup
}

// newLinearRun registers the workload on the driver's worker and starts its
// workflows.
func newLinearRun(d *driver, p linearPlan, prefix string) (*linearRun, error) {
	l := &linearRun{d: d, plan: p, answers: registerLinear(d.worker), rpcTimeout: linearRPCTimeout, began: time.Now()}
	for i := range p.workflows {
		wf := &linWorkflow{id: fmt.Sprintf("linear-%s-%d", prefix, i)}
		if err := l.start(wf); err != nil {
			return nil, err
		}
		l.workflows = append(l.workflows, wf)
	}
	return l, nil
}

// start starts a linear workflow; its one state waits for signals forever.
func (l *linearRun) start(wf *linWorkflow) error {
	attempts := 0
	return l.d.retry("start "+wf.id, func(ctx context.Context, srv *crashtest.Server) (bool, error) {
		attempts++
		resp, err := srv.Client().StartWorkflowWithResponse(ctx, iwfapi.WorkflowStartRequest{
			WorkflowId: wf.id, IwfWorkflowType: linearType, IwfWorkerUrl: l.d.worker.URL(),
			WorkflowTimeoutSeconds: 24 * 3600, StartStateId: ptr(linearState),
			WorkflowStartOptions: &iwfapi.WorkflowStartOptions{IdReusePolicy: ptr(iwfapi.IDReusePolicyDisallowReuse)},
		})
		if err != nil {
			return false, err
		}
		switch {
		case resp.StatusCode() == http.StatusOK:
			return true, nil
		case attempts > 1 && resp.StatusCode() == http.StatusBadRequest && strings.Contains(string(resp.Body), "ALREADY_STARTED"):
			return true, nil // an earlier attempt committed; its answer was lost
		}
		return false, fmt.Errorf("%d %s", resp.StatusCode(), resp.Body)
	})
}

// run starts the clients: plan.clients per workflow.
func (l *linearRun) run() {
	for _, wf := range l.workflows {
		for range l.plan.clients {
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				l.client(wf)
			}()
		}
	}
}

// done reports whether the clients have begun every operation of the plan
// (at once, for a plan without a number of operations: its clients stop
// when the faults do).
func (l *linearRun) done() bool {
	for _, wf := range l.workflows {
		if wf.issued.Load() < int64(l.plan.ops) {
			return false
		}
	}
	return true
}

// finish waits for the clients (stopping them first when the plan has no
// number of operations), and reads each workflow's signal count once every
// signal that arrived was consumed.
func (l *linearRun) finish() error {
	if l.plan.ops == 0 {
		l.stopping.Store(true)
	}
	l.wg.Wait()
	l.ended = time.Now()
	for _, wf := range l.workflows {
		if err := l.settle(wf); err != nil {
			return err
		}
	}
	return nil
}

// client makes random operations on wf until the plan's are made or the
// run stops.
func (l *linearRun) client(wf *linWorkflow) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	client := int(l.clientIDs.Add(1) - 1)
	for !l.stopping.Load() {
		if l.plan.ops > 0 && wf.issued.Add(1) > int64(l.plan.ops) {
			return
		}
		var o outcome
		switch r := rng.IntN(100); {
		case r < 35:
			o = l.incr(wf, client)
		case r < 55:
			o = l.set(wf, client)
		case r < 75:
			o = l.get(wf, client)
		case r < 87:
			o = l.signal(wf, client)
		default:
			o = l.count(wf, client, false)
		}
		if o == opIndeterminate {
			client = int(l.clientIDs.Add(1) - 1) // the client "crashed": a new one goes on
		}
		if o != opOK {
			time.Sleep(20 * time.Millisecond) // a fault or a lock: back off, as a real client would
		}
	}
}

// answer is what a call's function tells of the server's answer.
type answer struct {
	status int
	body   []byte
	value  string // what the operation returned, on a 2xx
}

// call makes one API call through a node picked at random and records it
// in wf's history: in is the operation, do the call. A call whose
// connection was refused reached no server: it is made again, through a
// node picked anew, and only the call that reached one is recorded.
func (l *linearRun) call(wf *linWorkflow, client int, in linInput, do func(ctx context.Context, c *iwfapi.ClientWithResponses) (answer, error)) outcome {
	for {
		srv := l.d.c.pick()
		ctx, cancel := context.WithTimeout(context.Background(), linearCallTimeout)
		call := time.Since(l.began).Nanoseconds()
		a, err := do(ctx, srv.Client())
		ret := time.Since(l.began).Nanoseconds()
		cancel()
		if refused(err) {
			l.unsent.Add(1)
			time.Sleep(20 * time.Millisecond) // the node is restarting; try again
			continue
		}
		out := linOutput{Outcome: classify(a.status, err), Value: a.value}
		switch {
		case out.Outcome == opOK:
		case err != nil:
			out.Value, out.Err = "", fmt.Sprintf("%s: %v", srv.Name(), err)
		default:
			out.Value, out.Err = "", fmt.Sprintf("%s: %d %s", srv.Name(), a.status, truncated(string(a.body), 200))
		}
		if out.Outcome == opIndeterminate {
			// It may take effect at any moment from now on, or never: the
			// models carry it as a pending effect from its invocation.
			ret = call
		}
		wf.mu.Lock()
		wf.ops = append(wf.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
		wf.mu.Unlock()
		return out.Outcome
	}
}

// refused reports whether a call failed to connect: it was never sent.
func refused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func truncated(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// classify tells what the answer to a call that was sent says about its
// effect.
func classify(status int, err error) outcome {
	switch {
	case err != nil:
		return opIndeterminate // timed out or cut: the answer is unknown
	case status >= 200 && status < 300:
		return opOK
	case status >= 400 && status < 500:
		return opFailed // refused (450: the key is locked)
	default:
		return opIndeterminate // a 5xx may come after a commit
	}
}

func (l *linearRun) incr(wf *linWorkflow, client int) outcome {
	id := fmt.Sprintf("%s-i%d", wf.id, wf.seq.Add(1))
	policy := &iwfapi.PersistenceLoadingPolicy{
		PersistenceLoadingType: ptr(iwfapi.PersistenceLoadingTypeLoadPartialWithExclusiveLock),
		PartialLoadingKeys:     &[]string{keyCounter}, LockingKeys: &[]string{keyCounter},
	}
	if l.unlocked {
		policy = &iwfapi.PersistenceLoadingPolicy{
			PersistenceLoadingType: ptr(iwfapi.PersistenceLoadingTypeLoadPartialWithoutLocking),
			PartialLoadingKeys:     &[]string{keyCounter},
		}
	}
	return l.call(wf, client, linInput{Kind: opIncr, WF: wf.id, Key: keyCounter, ID: id},
		func(ctx context.Context, c *iwfapi.ClientWithResponses) (answer, error) {
			resp, err := c.ExecuteWorkflowRpcWithResponse(ctx, iwfapi.WorkflowRpcRequest{
				WorkflowId: wf.id, RpcName: linearRPC, Input: crashtest.Object(id),
				TimeoutSeconds: ptr(l.rpcTimeout), DataAttributesLoadingPolicy: policy,
			})
			if err != nil {
				return answer{}, err
			}
			a := answer{status: resp.StatusCode(), body: resp.Body}
			if resp.JSON200 != nil {
				a.value = dataOf(resp.JSON200.Output)
			}
			return a, nil
		})
}

func (l *linearRun) set(wf *linWorkflow, client int) outcome {
	value := fmt.Sprintf("v%d", wf.seq.Add(1))
	return l.call(wf, client, linInput{Kind: opSet, WF: wf.id, Key: keyRegister, Value: value},
		func(ctx context.Context, c *iwfapi.ClientWithResponses) (answer, error) {
			resp, err := c.SetWorkflowDataObjectsWithResponse(ctx, iwfapi.WorkflowSetDataObjectsRequest{
				WorkflowId: wf.id, Objects: &[]iwfapi.KeyValue{{Key: ptr(keyRegister), Value: crashtest.Object(value)}},
			})
			if err != nil {
				return answer{}, err
			}
			return answer{status: resp.StatusCode(), body: resp.Body}, nil
		})
}

func (l *linearRun) get(wf *linWorkflow, client int) outcome {
	return l.call(wf, client, linInput{Kind: opGet, WF: wf.id, Key: keyRegister}, readAttr(wf.id, keyRegister))
}

func (l *linearRun) signal(wf *linWorkflow, client int) outcome {
	value := fmt.Sprintf("s%d", wf.seq.Add(1))
	return l.call(wf, client, linInput{Kind: opSignal, WF: wf.id, Key: keySignals, Value: value},
		func(ctx context.Context, c *iwfapi.ClientWithResponses) (answer, error) {
			resp, err := c.SignalWorkflowWithResponse(ctx, iwfapi.WorkflowSignalRequest{
				WorkflowId: wf.id, SignalChannelName: linearSignal, SignalValue: crashtest.Object(value),
			})
			if err != nil {
				return answer{}, err
			}
			return answer{status: resp.StatusCode(), body: resp.Body}, nil
		})
}

// count reads the signal count; settled says every signal that arrived had
// been consumed when the read was made.
func (l *linearRun) count(wf *linWorkflow, client int, settled bool) outcome {
	return l.call(wf, client, linInput{Kind: opCount, WF: wf.id, Key: keySignals, Settled: settled}, readAttr(wf.id, keySignals))
}

// readAttr is a dataobjects/get of one key: its value, "" when absent.
func readAttr(id, key string) func(ctx context.Context, c *iwfapi.ClientWithResponses) (answer, error) {
	return func(ctx context.Context, c *iwfapi.ClientWithResponses) (answer, error) {
		resp, err := c.GetWorkflowDataObjectsWithResponse(ctx, iwfapi.WorkflowGetDataObjectsRequest{WorkflowId: id, Keys: &[]string{key}})
		if err != nil {
			return answer{}, err
		}
		a := answer{status: resp.StatusCode(), body: resp.Body}
		if resp.JSON200 != nil {
			for _, kv := range deref(resp.JSON200.Objects) {
				if deref(kv.Key) == key {
					a.value = dataOf(kv.Value)
				}
			}
		}
		return a, nil
	}
}

// settle waits until wf's state waits for a signal with none buffered
// (every signal that arrived was counted), then reads the count: that read
// must equal the number of signals that arrived. Reads that fail are
// recorded as such, and the wait and the read are tried again.
func (l *linearRun) settle(wf *linWorkflow) error {
	client := int(l.clientIDs.Add(1) - 1)
	quiet := func(dd *crashtest.Dump) bool {
		if deref(dd.Signals[linearSignal].Size) != 0 {
			return false
		}
		live := 0
		for _, x := range dd.Executions {
			switch engine.ExecutionStatus(x.Status) {
			case engine.ExecWaiting:
				live++
			case engine.ExecWaitUntil, engine.ExecExecute:
				return false
			}
		}
		return live == 1
	}
	deadline := time.Now().Add(opTimeout)
	for time.Now().Before(deadline) {
		if err := l.d.waitFor(&workflow{id: wf.id, kind: linearType}, "every signal counted", quiet); err != nil {
			return err
		}
		if l.count(wf, client, true) == opOK {
			return nil
		}
		client = int(l.clientIDs.Add(1) - 1)
	}
	return fmt.Errorf("%s: no settled read of the signal count within %s", wf.id, opTimeout)
}

// history is every operation of the run.
func (l *linearRun) history() []porcupine.Operation {
	var out []porcupine.Operation
	for _, wf := range l.workflows {
		wf.mu.Lock()
		out = append(out, wf.ops...)
		wf.mu.Unlock()
	}
	// An increment whose outcome is unknown took effect with a value the
	// worker answered for it, or not at all.
	for i, op := range out {
		in, o := op.Input.(linInput), op.Output.(linOutput)
		if in.Kind == opIncr && o.Outcome == opIndeterminate {
			o.Maybe = l.answers.of(in.ID)
			out[i].Output = o
		}
	}
	return out
}

// faultsDuring lists the faults that struck while the clients ran, as
// kind:count sorted by kind, e.g. "cut:2,kill:7".
func faultsDuring(c *cluster, from, to time.Time) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := map[string]int{}
	var kinds []string
	for _, f := range c.faults {
		if f.start.Before(from) || f.start.After(to) {
			continue
		}
		if n[f.kind] == 0 {
			kinds = append(kinds, f.kind)
		}
		n[f.kind]++
	}
	sort.Strings(kinds)
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s:%d", k, n[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// report checks the run's histories and prints the summary line.
func (l *linearRun) report(t testing.TB, c *cluster) linearResult {
	res := checkLinear(t, l.plan.store, l.history())
	if res.violations > 0 {
		t.Errorf("linearizability: %d violations on %s (the smallest failing histories are above)", res.violations, l.plan.store)
	}
	if res.unknown > 0 {
		t.Errorf("linearizability: porcupine could not decide %d models on %s in time", res.unknown, l.plan.store)
	}
	fmt.Printf("linearizability: store=%s faults=%s ops=%d indeterminate=%d violations=%d\n",
		l.plan.store, faultsDuring(c, l.began, l.ended), res.ops, res.indeterminate, res.violations)
	t.Logf("linearizability: %d workflows, %d clients each, %s of operations; %d answered 4xx (450: locked), %d not sent (connection refused) and made again",
		len(l.workflows), l.plan.clients, l.ended.Sub(l.began).Round(time.Millisecond), res.failed, l.unsent.Load())
	return res
}

// TestLinearRPCLocking shows what the checker finds when two increments
// overlap: the first one's worker call is held until the second has been
// answered. With the exclusive lock the second is refused (450) and the
// history is linearizable; without it both read the same value, both
// answer value+1, and the checker reports the lost update.
func TestLinearRPCLocking(t *testing.T) {
	t.Setenv("CHAOS_LINEAR_DIR", t.TempDir()) // for the visualization of the lost update
	srv := crashtest.StartServer(t, crashtest.Options{Bin: serverBin, DB: crashtest.SQLiteDB(t), LogLevel: "info"})
	for _, unlocked := range []bool{false, true} {
		name := "locked"
		if unlocked {
			name = "unlocked"
		}
		t.Run(name, func(t *testing.T) {
			w := crashtest.NewWorker(t)
			d := &driver{c: newCluster(srv), worker: w}
			l, err := newLinearRun(d, linearPlan{store: "sqlite", workflows: 1}, name)
			if err != nil {
				t.Fatal(err)
			}
			l.unlocked = unlocked
			l.rpcTimeout = 60 // the held call waits for the second one, on a machine however loaded
			wf := l.workflows[0]
			hold := w.Hold(1, crashtest.Match(wf.id, linearRPC, crashtest.RPC))
			first := make(chan outcome, 1)
			go func() { first <- l.incr(wf, 0) }()
			hold.Wait(t, 1, time.Minute)
			second := l.incr(wf, 1)
			hold.Release()
			if o := <-first; o != opOK {
				t.Fatalf("the held increment: %v", o)
			}
			l.ended = time.Now()
			hist := l.history()
			res := checkLinear(t, "sqlite-"+name, hist)
			if unlocked {
				if second != opOK {
					t.Fatalf("the second increment without a lock: %v, want ok", second)
				}
				if res.violations != 1 {
					t.Fatalf("%d violations, want 1 (a lost update)", res.violations)
				}
				return
			}
			for _, op := range hist {
				if o := op.Output.(linOutput); op.ClientId == 1 && (second != opFailed || !strings.Contains(o.Err, ": 450 ")) {
					t.Fatalf("the second increment under the lock: %+v, want a 450", o)
				}
			}
			if res.violations != 0 {
				t.Fatalf("%d violations, want none", res.violations)
			}
		})
	}
}
