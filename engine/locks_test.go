package engine_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

func counterPolicy() *iwfapi.PersistenceLoadingPolicy {
	return &iwfapi.PersistenceLoadingPolicy{
		PersistenceLoadingType: ptr(iwfapi.PersistenceLoadingTypeLoadPartialWithExclusiveLock),
		LockingKeys:            &[]string{"counter"},
	}
}

func readCounter(kvs []iwfapi.KeyValue) int {
	for _, kv := range kvs {
		if deref(kv.Key) == "counter" && kv.Value != nil {
			n, _ := strconv.Atoi(deref(kv.Value.Data))
			return n
		}
	}
	return 0
}

func TestExclusiveLocksSerialiseStateAPIs(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		const n = 5
		h.worker.state("Fan", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			var moves []iwfapi.StateMovement
			for i := 0; i < n; i++ {
				moves = append(moves, iwfapi.StateMovement{StateId: "Inc", StateOptions: &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true), DataAttributesLoadingPolicy: counterPolicy()}})
			}
			return decide(moves...), 200
		}})
		h.worker.state("Inc", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			c := readCounter(deref(req.DataObjects))
			time.Sleep(30 * time.Millisecond) // widen the window for a lost update
			resp := decide(next(engine.GracefulCompletingState, nil))
			resp.UpsertDataObjects = &[]iwfapi.KeyValue{{Key: ptr("counter"), Value: obj(strconv.Itoa(c + 1))}}
			return resp, 200
		}})
		h.start("wf-lock", "Fan", nil, func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
		})
		if got := h.result("wf-lock"); got.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			t.Fatalf("status %s", got.WorkflowStatus)
		}
		das, err := h.eng.GetDataAttributes(context.Background(), iwfapi.WorkflowGetDataObjectsRequest{WorkflowId: "wf-lock", Keys: &[]string{"counter"}})
		if err != nil || readCounter(deref(das.Objects)) != n {
			t.Fatalf("counter = %s, want %d (%v)", mustJSON(das), n, err)
		}
	})
}

func TestLockingRPCFailsFastWhileAStateHoldsTheLock(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		entered, release := make(chan struct{}), make(chan struct{})
		h.worker.state("Hold", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			close(entered)
			<-release
			return decide(next(engine.DeadEndState, nil)), 200
		}})
		h.worker.rpc("inc", func(req iwfapi.WorkflowWorkerRpcRequest) (iwfapi.WorkflowWorkerRpcResponse, int) {
			c := readCounter(deref(req.DataAttributes))
			return iwfapi.WorkflowWorkerRpcResponse{UpsertDataAttributes: &[]iwfapi.KeyValue{{Key: ptr("counter"), Value: obj(strconv.Itoa(c + 1))}}}, 200
		})
		h.start("wf-lock-rpc", "Hold", nil, func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true), DataAttributesLoadingPolicy: counterPolicy()}
		})
		<-entered
		rpc := iwfapi.WorkflowRpcRequest{WorkflowId: "wf-lock-rpc", RpcName: "inc", DataAttributesLoadingPolicy: counterPolicy()}
		if _, err := h.eng.InvokeRPC(ctx, rpc); engine.CodeOf(err) != engine.CodeLocked {
			t.Fatalf("locking RPC while locked: %v, want locked", err)
		}
		// A non-locking RPC ignores the lock.
		if _, err := h.eng.InvokeRPC(ctx, iwfapi.WorkflowRpcRequest{WorkflowId: "wf-lock-rpc", RpcName: "inc"}); err != nil {
			t.Fatalf("non-locking RPC: %v", err)
		}
		close(release)
		h.eventually("lock released", func() bool {
			_, err := h.eng.InvokeRPC(ctx, rpc)
			return err == nil
		})
		das, _ := h.eng.GetDataAttributes(ctx, iwfapi.WorkflowGetDataObjectsRequest{WorkflowId: "wf-lock-rpc"})
		if c := readCounter(deref(das.Objects)); c != 2 {
			t.Fatalf("counter %d, want 2", c)
		}
	})
}

// TestLockingRPCWhoseLockExpiredAppliesNothing: an RPC's locks expire (its
// timeout plus the lease after it took them) so that a node that died
// holding them does not block the keys for ever. When the RPC itself is
// still alive past that moment and another locking RPC has taken the keys
// and applied its answer, the first one's answer — computed from the value
// it loaded before — must not be applied: that would be a lost update (two
// increments both returning 1). It is refused with the locked error, and
// only the second increment counts.
func TestLockingRPCWhoseLockExpiredAppliesNothing(t *testing.T) {
	forEachStoreWith(t, func(c *engine.Config) { c.Clock = &shiftClock{} }, func(t *testing.T, h *harness) {
		ctx := context.Background()
		clock := h.clock.(*shiftClock)
		h.worker.state("Park", parkState())
		h.start("wf-lock-expired", "Park", nil, func(r *iwfapi.WorkflowStartRequest) { r.WorkflowTimeoutSeconds = 3600 })
		rpc := func(who string) iwfapi.WorkflowRpcRequest {
			return iwfapi.WorkflowRpcRequest{WorkflowId: "wf-lock-expired", RpcName: "inc", Input: obj(who),
				TimeoutSeconds: ptr(int32(1)), DataAttributesLoadingPolicy: counterPolicy()}
		}
		var second error
		h.worker.rpc("inc", func(req iwfapi.WorkflowWorkerRpcRequest) (iwfapi.WorkflowWorkerRpcResponse, int) {
			c := readCounter(deref(req.DataAttributes))
			if deref(req.Input.Data) == "first" {
				// The first RPC stalls past its lock's expiry (1 s + the
				// lease), and a second one takes the lock and applies.
				clock.offset.Add(int64(time.Minute))
				_, second = h.eng.InvokeRPC(ctx, rpc("second"))
			}
			up := obj(strconv.Itoa(c + 1))
			return iwfapi.WorkflowWorkerRpcResponse{UpsertDataAttributes: &[]iwfapi.KeyValue{{Key: ptr("counter"), Value: up}}, Output: up}, 200
		})
		_, first := h.eng.InvokeRPC(ctx, rpc("first"))
		if second != nil {
			t.Fatalf("the second RPC, once the first one's lock expired: %v", second)
		}
		if engine.CodeOf(first) != engine.CodeLocked {
			t.Fatalf("the first RPC, whose lock was taken over: %v, want locked", first)
		}
		das, err := h.eng.GetDataAttributes(ctx, iwfapi.WorkflowGetDataObjectsRequest{WorkflowId: "wf-lock-expired"})
		if c := readCounter(deref(das.Objects)); err != nil || c != 1 {
			t.Fatalf("counter %d (%v), want 1: only the second increment applied", c, err)
		}
		// The keys are free again: the second RPC released them, and the
		// refused one took nothing with it.
		if _, err := h.eng.InvokeRPC(ctx, rpc("third")); err != nil {
			t.Fatalf("a third RPC: %v", err)
		}
	})
}
