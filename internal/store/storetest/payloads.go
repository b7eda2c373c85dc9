package storetest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
)

// payloadTests cover the records of external objects (engine.PayloadRef):
// pending, kept by runs and batches, shared by runs started from others
// or signalled by a batch, unreferenced when their runs are deleted or
// their batch closes, and forgotten.
var payloadTests = []struct {
	name string
	fn   func(t *testing.T, s engine.Store)
}{
	{"PayloadLifecycle", testPayloadLifecycle},
	{"PayloadKeepAfterExpire", testPayloadKeepAfterExpire},
	{"PayloadKeepRollsBack", testPayloadKeepRollsBack},
	{"PayloadBatchClosed", testPayloadBatchClosed},
}

func payloadList(t *testing.T, s engine.Store, runID string) []engine.PayloadRef {
	t.Helper()
	var out []engine.PayloadRef
	view(t, s, func(ctx context.Context, tx engine.ReadTx) error {
		var err error
		out, err = tx.PayloadList(ctx, runID)
		return err
	})
	return out
}

func payloadOrphans(t *testing.T, s engine.Store, stores ...string) []engine.PayloadRef {
	t.Helper()
	var out []engine.PayloadRef
	view(t, s, func(ctx context.Context, tx engine.ReadTx) error {
		var err error
		out, err = tx.PayloadOrphans(ctx, stores, 100)
		return err
	})
	return out
}

func payloadAdd(t *testing.T, s engine.Store, now time.Time, refs ...engine.PayloadRef) {
	t.Helper()
	update(t, s, func(ctx context.Context, tx engine.Tx) error { return tx.PayloadAdd(ctx, refs, now) })
}

func payloadKeep(s engine.Store, runID string, paths ...string) error {
	return s.Update(context.Background(), func(ctx context.Context, tx engine.Tx) error {
		return tx.PayloadKeep(ctx, runID, paths)
	})
}

func payloadExpire(t *testing.T, s engine.Store, before time.Time) int {
	t.Helper()
	var n int
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		var err error
		n, err = tx.PayloadExpire(ctx, before, 100)
		return err
	})
	return n
}

func testPayloadLifecycle(t *testing.T, s engine.Store) {
	ctx := ctxT(t)
	a, b := engine.PayloadRef{StoreID: "s1", Path: "wf/a"}, engine.PayloadRef{StoreID: "s1", Path: "wf/b"}
	for _, id := range []string{"r1", "r2", "r3"} {
		insertRun(t, s, newRun(id))
	}
	payloadAdd(t, s, at(0), a, b)
	equal(t, "pending objects are nobody's orphans", len(payloadOrphans(t, s, "s1")), 0)
	if err := payloadKeep(s, "r1", a.Path, b.Path); err != nil {
		t.Fatalf("PayloadKeep: %v", err)
	}
	equal(t, "r1 keeps both", payloadList(t, s, "r1"), []engine.PayloadRef{a, b})
	if err := payloadKeep(s, "r2", a.Path); !errors.Is(err, engine.ErrPayloadGone) {
		t.Fatalf("PayloadKeep of an object another run keeps: %v, want ErrPayloadGone", err)
	}
	equal(t, "kept records do not expire", payloadExpire(t, s, at(time.Hour)), 0)
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		// r2 shares a (and is given nothing for a path no run keeps);
		// r3 gets all of r1's.
		if err := tx.PayloadLink(ctx, "r2", []string{a.Path, "wf/unknown"}, at(time.Minute)); err != nil {
			return err
		}
		if err := tx.PayloadLink(ctx, "r2", []string{a.Path}, at(time.Minute)); err != nil {
			return err // twice: no error, no second record
		}
		return tx.PayloadCopy(ctx, "r1", "r3", at(time.Minute))
	})
	equal(t, "r2 shares a", payloadList(t, s, "r2"), []engine.PayloadRef{a})
	equal(t, "r3 shares both", payloadList(t, s, "r3"), []engine.PayloadRef{a, b})

	// Deleting runs unreferences their records; an object goes once no
	// run keeps it.
	closeRun(t, s, "r1", "Type", at(time.Hour))
	closeRun(t, s, "r3", "Type", at(time.Hour))
	if n, err := s.RunsDelete(ctx, []string{"r1", "r3"}); err != nil || n != 2 {
		t.Fatalf("RunsDelete = %d, %v", n, err)
	}
	equal(t, "a deleted run keeps nothing", len(payloadList(t, s, "r1")), 0)
	equal(t, "b is kept by no run", payloadOrphans(t, s, "s1", "s2"), []engine.PayloadRef{b})
	equal(t, "orphans of other stores", len(payloadOrphans(t, s, "s2")), 0)
	closeRun(t, s, "r2", "Type", at(time.Hour))
	if n, err := s.RunsDelete(ctx, []string{"r2"}); err != nil || n != 1 {
		t.Fatalf("RunsDelete r2 = %d, %v", n, err)
	}
	orphans := payloadOrphans(t, s, "s1")
	if len(orphans) != 2 {
		t.Fatalf("orphans after the last run went: %s", show(orphans))
	}
	update(t, s, func(ctx context.Context, tx engine.Tx) error { return tx.PayloadForget(ctx, []string{a.Path, b.Path}) })
	equal(t, "forgotten", len(payloadOrphans(t, s, "s1")), 0)
}

// testPayloadKeepAfterExpire: a pending record older than the sweep's
// bound is unreferenced, and a transaction that would keep it fails and
// keeps nothing.
func testPayloadKeepAfterExpire(t *testing.T, s engine.Store) {
	insertRun(t, s, newRun("r1"))
	old, recent := engine.PayloadRef{StoreID: "s1", Path: "wf/old"}, engine.PayloadRef{StoreID: "s1", Path: "wf/recent"}
	payloadAdd(t, s, at(0), old)
	payloadAdd(t, s, at(2*time.Hour), recent)
	equal(t, "expired", payloadExpire(t, s, at(time.Hour)), 1)
	equal(t, "expired again", payloadExpire(t, s, at(time.Hour)), 0)
	if err := payloadKeep(s, "r1", recent.Path, old.Path); !errors.Is(err, engine.ErrPayloadGone) {
		t.Fatalf("PayloadKeep of an expired object: %v, want ErrPayloadGone", err)
	}
	equal(t, "nothing kept", len(payloadList(t, s, "r1")), 0)
	equal(t, "the expired object is an orphan", payloadOrphans(t, s, "s1"), []engine.PayloadRef{old})
	if err := payloadKeep(s, "r1", recent.Path); err != nil {
		t.Fatalf("PayloadKeep of the recent one: %v", err)
	}
	equal(t, "kept", payloadList(t, s, "r1"), []engine.PayloadRef{recent})
}

// testPayloadKeepRollsBack: a transaction that keeps objects and then
// fails leaves them pending.
func testPayloadKeepRollsBack(t *testing.T, s engine.Store) {
	insertRun(t, s, newRun("r1"))
	p := engine.PayloadRef{StoreID: "s1", Path: "wf/p"}
	payloadAdd(t, s, at(0), p)
	boom := errors.New("boom")
	err := s.Update(context.Background(), func(ctx context.Context, tx engine.Tx) error {
		if err := tx.PayloadKeep(ctx, "r1", []string{p.Path}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update: %v", err)
	}
	equal(t, "nothing kept", len(payloadList(t, s, "r1")), 0)
	if err := payloadKeep(s, "r1", p.Path); err != nil {
		t.Fatalf("PayloadKeep after the rollback: %v", err)
	}
	equal(t, "kept", payloadList(t, s, "r1"), []engine.PayloadRef{p})
}

// testPayloadBatchClosed: the object a batch keeps (its signal value,
// under engine.BatchPayloadOwner) stays while the batch is starting or
// running, and becomes the runs' alone once it closes, however it
// closes: by BatchSetState, or by a claim that gives up an abandoned
// start.
func testPayloadBatchClosed(t *testing.T, s engine.Store) {
	ctx := ctxT(t)
	insertRun(t, s, newRun("r1"))
	done, abandoned, running := engine.PayloadRef{StoreID: "s1", Path: "b/done"}, engine.PayloadRef{StoreID: "s1", Path: "b/abandoned"}, engine.PayloadRef{StoreID: "s1", Path: "b/running"}
	payloadAdd(t, s, at(0), done, abandoned, running)
	for _, b := range []struct {
		id    string
		state engine.BatchState
		ref   engine.PayloadRef
	}{{"b-done", engine.BatchRunning, done}, {"b-abandoned", engine.BatchStarting, abandoned}, {"b-running", engine.BatchRunning, running}} {
		insertBatch(t, s, newBatch(b.id, b.state), 1)
		if err := payloadKeep(s, engine.BatchPayloadOwner(b.id), b.ref.Path); err != nil {
			t.Fatalf("PayloadKeep for batch %s: %v", b.id, err)
		}
	}
	// r1 was signalled by b-done: it links the object.
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		return tx.PayloadLink(ctx, "r1", []string{done.Path}, at(time.Minute))
	})
	equal(t, "r1 shares b-done's object", payloadList(t, s, "r1"), []engine.PayloadRef{done})
	equal(t, "objects of open batches are nobody's orphans", len(payloadOrphans(t, s, "s1")), 0)

	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		ok, err := tx.BatchSetState(ctx, "b-done", []engine.BatchState{engine.BatchRunning}, engine.BatchCompleted, "", at(time.Hour))
		if err == nil && !ok {
			err = errors.New("BatchSetState = false")
		}
		return err
	})
	equal(t, "b-done keeps nothing once closed", len(payloadList(t, s, engine.BatchPayloadOwner("b-done"))), 0)
	equal(t, "r1 still keeps b-done's object", payloadList(t, s, "r1"), []engine.PayloadRef{done})
	equal(t, "no orphan while r1 keeps it", len(payloadOrphans(t, s, "s1")), 0)

	// A claim long after the abandoned start's lease expired cancels it.
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		_, err := tx.BatchClaim(ctx, "node", at(24*time.Hour), time.Minute)
		return err
	})
	if b := getBatch(t, s, "b-abandoned"); b.State != engine.BatchCancelled {
		t.Fatalf("the abandoned start is %s", b.State)
	}
	equal(t, "the abandoned start's object is an orphan", payloadOrphans(t, s, "s1"), []engine.PayloadRef{abandoned})
	equal(t, "the running batch still keeps its object", payloadList(t, s, engine.BatchPayloadOwner("b-running")), []engine.PayloadRef{running})

	closeRun(t, s, "r1", "Type", at(time.Hour))
	if n, err := s.RunsDelete(ctx, []string{"r1"}); err != nil || n != 1 {
		t.Fatalf("RunsDelete = %d, %v", n, err)
	}
	orphans := payloadOrphans(t, s, "s1")
	slices.SortFunc(orphans, func(a, b engine.PayloadRef) int { return strings.Compare(a.Path, b.Path) })
	equal(t, "b-done's object goes with the last run", orphans, []engine.PayloadRef{abandoned, done})
}
