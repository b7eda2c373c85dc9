package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
)

// batchTests cover the batch tables: batches and their items, the lease a
// runner holds, and finishing an item exactly once.
var batchTests = []struct {
	name string
	fn   func(t *testing.T, s engine.Store)
}{
	{"BatchRoundTrip", testBatchRoundTrip},
	{"BatchItems", testBatchItems},
	{"BatchItemFinishOnce", testBatchItemFinishOnce},
	{"BatchSetState", testBatchSetState},
	{"BatchClaimLease", testBatchClaimLease},
	{"BatchClaimConcurrent", testBatchClaimConcurrent},
	{"BatchClaimCancelsAbandonedStart", testBatchClaimCancelsAbandoned},
}

func newBatch(id string, state engine.BatchState) *engine.Batch {
	return &engine.Batch{ID: id, Query: "IwfWorkflowType = 'A'", Operation: "terminate", Options: []byte(`{"v":1}`),
		Reason: "bad deploy", RPS: 12.5, State: state, CreatedBy: "ops", CreatedAt: at(0), UpdatedAt: at(0)}
}

func insertBatch(t *testing.T, s engine.Store, b *engine.Batch, runs int) {
	t.Helper()
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		if err := tx.BatchInsert(ctx, b); err != nil {
			return err
		}
		var items []*engine.BatchItem
		for i := 1; i <= runs; i++ {
			items = append(items, &engine.BatchItem{Seq: int64(i), WorkflowID: fmt.Sprintf("wf-%d", i), RunID: fmt.Sprintf("run-%d", i)})
		}
		return tx.BatchItemInsert(ctx, b.ID, items)
	})
}

func getBatch(t *testing.T, s engine.Store, id string) *engine.Batch {
	t.Helper()
	var b *engine.Batch
	view(t, s, func(ctx context.Context, tx engine.ReadTx) error {
		var err error
		b, err = tx.BatchGet(ctx, id)
		return err
	})
	return b
}

func testBatchRoundTrip(t *testing.T, s engine.Store) {
	in := newBatch("b1", engine.BatchRunning)
	insertBatch(t, s, in, 3)
	if in.Seq <= 0 {
		t.Fatalf("BatchInsert set Seq %d, want > 0", in.Seq)
	}
	got := getBatch(t, s, "b1")
	want := *in
	want.CreatedAt, want.UpdatedAt, want.Matched = ms(in.CreatedAt), ms(in.UpdatedAt), 3
	if got.ID != want.ID || got.Query != want.Query || got.Operation != want.Operation || string(got.Options) != string(want.Options) ||
		got.Reason != want.Reason || got.RPS != want.RPS || got.State != want.State || got.CreatedBy != want.CreatedBy ||
		!got.CreatedAt.Equal(want.CreatedAt) || got.Matched != 3 || got.Done != 0 || got.Failed != 0 || got.Seq != in.Seq ||
		!got.ClosedAt.IsZero() || got.LeaseOwner != "" {
		t.Fatalf("BatchGet = %+v, want %+v", got, want)
	}
	view(t, s, func(ctx context.Context, tx engine.ReadTx) error {
		_, err := tx.BatchGet(ctx, "absent")
		if !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("BatchGet(absent) = %v, want ErrNotFound", err)
		}
		return nil
	})
	insertBatch(t, s, newBatch("b2", engine.BatchRunning), 0)
	insertBatch(t, s, newBatch("b3", engine.BatchCompleted), 0)
	view(t, s, func(ctx context.Context, tx engine.ReadTx) error {
		all, err := tx.BatchList(ctx, 0, 0)
		if err != nil {
			return err
		}
		if len(all) != 3 || all[0].ID != "b3" || all[2].ID != "b1" {
			t.Fatalf("BatchList = %v, want b3, b2, b1", batchIDs(all))
		}
		page, err := tx.BatchList(ctx, all[0].Seq, 1)
		if err != nil {
			return err
		}
		if len(page) != 1 || page[0].ID != "b2" {
			t.Errorf("BatchList(before b3, 1) = %v, want b2", batchIDs(page))
		}
		return nil
	})
}

func batchIDs(bs []*engine.Batch) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b.ID)
	}
	return out
}

func testBatchItems(t *testing.T, s engine.Store) {
	insertBatch(t, s, newBatch("b1", engine.BatchRunning), 5)
	insertBatch(t, s, newBatch("other", engine.BatchRunning), 2)
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		if err := tx.BatchItemInsert(ctx, "b1", []*engine.BatchItem{{Seq: 6, WorkflowID: "wf-6", RunID: "run-6"}}); err != nil {
			return err
		}
		if ok, err := tx.BatchItemFinish(ctx, "b1", 2, engine.BatchItemFailed, "gone", at(time.Second)); err != nil || !ok {
			return fmt.Errorf("BatchItemFinish = %v, %v", ok, err)
		}
		ok, err := tx.BatchItemFinish(ctx, "b1", 4, engine.BatchItemDone, "", at(time.Second))
		if err != nil || !ok {
			return fmt.Errorf("BatchItemFinish = %v, %v", ok, err)
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx engine.ReadTx) error {
		all, err := tx.BatchItemList(ctx, "b1", "", 0, 0)
		if err != nil {
			return err
		}
		if len(all) != 6 {
			t.Fatalf("BatchItemList = %d items, want 6", len(all))
		}
		for i, it := range all {
			if it.Seq != int64(i+1) || it.BatchID != "b1" || it.RunID != fmt.Sprintf("run-%d", i+1) || it.WorkflowID != fmt.Sprintf("wf-%d", i+1) {
				t.Errorf("item %d = %+v", i, it)
			}
		}
		if all[1].Status != engine.BatchItemFailed || all[1].Failure != "gone" || all[3].Status != engine.BatchItemDone || all[0].Status != engine.BatchItemPending {
			t.Errorf("statuses = %+v %+v %+v", all[0], all[1], all[3])
		}
		pending, err := tx.BatchItemList(ctx, "b1", engine.BatchItemPending, 1, 2)
		if err != nil {
			return err
		}
		if len(pending) != 2 || pending[0].Seq != 3 || pending[1].Seq != 5 {
			t.Errorf("pending after 1, limit 2 = %+v, want seq 3, 5", pending)
		}
		b, err := tx.BatchGet(ctx, "b1")
		if err != nil {
			return err
		}
		if b.Matched != 6 || b.Done != 1 || b.Failed != 1 || !b.UpdatedAt.Equal(ms(at(time.Second))) {
			t.Errorf("counters = %d/%d/%d updated %v, want 6/1/1", b.Matched, b.Done, b.Failed, b.UpdatedAt)
		}
		return nil
	})
}

func testBatchItemFinishOnce(t *testing.T, s engine.Store) {
	insertBatch(t, s, newBatch("b1", engine.BatchRunning), 2)
	// Concurrent finishers of one item: exactly one succeeds.
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.Update(context.Background(), func(ctx context.Context, tx engine.Tx) error {
				ok, err := tx.BatchItemFinish(ctx, "b1", 1, engine.BatchItemDone, "", at(0))
				if err != nil {
					return err
				}
				if !ok {
					return errNotPending
				}
				return nil
			})
			if err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
			} else if !errors.Is(err, errNotPending) {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d finishers succeeded, want 1", wins)
	}
	// A cancelled batch finishes nothing.
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		_, err := tx.BatchSetState(ctx, "b1", []engine.BatchState{engine.BatchRunning}, engine.BatchCancelled, "", at(0))
		return err
	})
	err := s.Update(ctxT(t), func(ctx context.Context, tx engine.Tx) error {
		ok, err := tx.BatchItemFinish(ctx, "b1", 2, engine.BatchItemDone, "", at(0))
		if err == nil && ok {
			return errors.New("finished an item of a cancelled batch")
		}
		return errNotPending // roll back whatever it changed
	})
	if !errors.Is(err, errNotPending) {
		t.Fatal(err)
	}
	b := getBatch(t, s, "b1")
	if b.Done != 1 || b.Failed != 0 {
		t.Errorf("counters = %d/%d, want 1/0", b.Done, b.Failed)
	}
}

var errNotPending = errors.New("not pending")

func testBatchSetState(t *testing.T, s engine.Store) {
	b := newBatch("b1", engine.BatchStarting)
	b.LeaseOwner, b.LeaseExpiresAt = "n1", at(time.Minute)
	insertBatch(t, s, b, 1)
	set := func(from []engine.BatchState, to engine.BatchState, msg string) bool {
		var ok bool
		update(t, s, func(ctx context.Context, tx engine.Tx) error {
			var err error
			ok, err = tx.BatchSetState(ctx, "b1", from, to, msg, at(time.Hour))
			return err
		})
		return ok
	}
	if set([]engine.BatchState{engine.BatchRunning}, engine.BatchCompleted, "") {
		t.Fatal("BatchSetState moved a starting batch from running")
	}
	if !set([]engine.BatchState{engine.BatchStarting}, engine.BatchRunning, "") {
		t.Fatal("BatchSetState(starting → running) = false")
	}
	if got := getBatch(t, s, "b1"); got.State != engine.BatchRunning || !got.ClosedAt.IsZero() || got.LeaseOwner != "n1" {
		t.Fatalf("after running: %+v", got)
	}
	if !set([]engine.BatchState{engine.BatchStarting, engine.BatchRunning}, engine.BatchCancelled, "by hand") {
		t.Fatal("BatchSetState(running → cancelled) = false")
	}
	got := getBatch(t, s, "b1")
	if got.State != engine.BatchCancelled || got.Message != "by hand" || !got.ClosedAt.Equal(ms(at(time.Hour))) || got.LeaseOwner != "" || !got.LeaseExpiresAt.IsZero() {
		t.Fatalf("after cancel: %+v", got)
	}
}

func claimBatch(t *testing.T, s engine.Store, owner string, now time.Time) *engine.Batch {
	t.Helper()
	var b *engine.Batch
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		var err error
		b, err = tx.BatchClaim(ctx, owner, now, time.Minute)
		return err
	})
	return b
}

func testBatchClaimLease(t *testing.T, s engine.Store) {
	insertBatch(t, s, newBatch("done", engine.BatchCompleted), 0)
	insertBatch(t, s, newBatch("b1", engine.BatchRunning), 1)
	insertBatch(t, s, newBatch("b2", engine.BatchRunning), 1)
	if b := claimBatch(t, s, "n1", at(0)); b == nil || b.ID != "b1" || b.LeaseOwner != "n1" || !b.LeaseExpiresAt.Equal(ms(at(time.Minute))) {
		t.Fatalf("first claim = %+v, want b1 leased to n1", b)
	}
	if b := claimBatch(t, s, "n2", at(time.Second)); b == nil || b.ID != "b2" {
		t.Fatalf("second claim = %+v, want b2", b)
	}
	if b := claimBatch(t, s, "n3", at(2*time.Second)); b != nil {
		t.Fatalf("third claim = %+v, want none", b)
	}
	var renewed, stolen bool
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		var err error
		if renewed, err = tx.BatchRenew(ctx, "b1", "n1", at(10*time.Minute)); err != nil {
			return err
		}
		stolen, err = tx.BatchRenew(ctx, "b2", "n1", at(10*time.Minute))
		return err
	})
	if !renewed || stolen {
		t.Fatalf("BatchRenew own = %v, other's = %v; want true, false", renewed, stolen)
	}
	// b2's lease expires at 1m1s; b1's was renewed to 10m.
	if b := claimBatch(t, s, "n3", at(2*time.Minute)); b == nil || b.ID != "b2" || b.LeaseOwner != "n3" {
		t.Fatalf("claim after expiry = %+v, want b2 for n3", b)
	}
	var n int64
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		var err error
		n, err = tx.BatchRelease(ctx, "n1", "")
		return err
	})
	if n != 1 {
		t.Fatalf("BatchRelease(n1) = %d, want 1", n)
	}
	if b := claimBatch(t, s, "n4", at(2*time.Minute)); b == nil || b.ID != "b1" {
		t.Fatalf("claim after release = %+v, want b1", b)
	}
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		var err error
		n, err = tx.BatchRelease(ctx, "", "")
		return err
	})
	if n != 2 {
		t.Fatalf("BatchRelease(all) = %d, want 2", n)
	}
}

func testBatchClaimConcurrent(t *testing.T, s engine.Store) {
	const batches = 6
	for i := 0; i < batches; i++ {
		insertBatch(t, s, newBatch(fmt.Sprintf("b%d", i), engine.BatchRunning), 1)
	}
	var mu sync.Mutex
	seen := map[string]string{}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(owner string) {
			defer wg.Done()
			for {
				var b *engine.Batch
				err := s.Update(context.Background(), func(ctx context.Context, tx engine.Tx) error {
					var err error
					b, err = tx.BatchClaim(ctx, owner, at(0), time.Minute)
					return err
				})
				if err != nil {
					t.Error(err)
					return
				}
				if b == nil {
					return
				}
				mu.Lock()
				if prev, ok := seen[b.ID]; ok {
					t.Errorf("%s claimed by %s and %s", b.ID, prev, owner)
				}
				seen[b.ID] = owner
				mu.Unlock()
			}
		}(fmt.Sprintf("n%d", w))
	}
	wg.Wait()
	if len(seen) != batches {
		t.Fatalf("claimed %d batches, want %d", len(seen), batches)
	}
}

func testBatchClaimCancelsAbandoned(t *testing.T, s engine.Store) {
	live := newBatch("live", engine.BatchStarting)
	live.LeaseOwner, live.LeaseExpiresAt = "n1", at(time.Hour)
	insertBatch(t, s, live, 1)
	dead := newBatch("dead", engine.BatchStarting)
	dead.LeaseOwner, dead.LeaseExpiresAt = "n2", at(time.Second)
	insertBatch(t, s, dead, 1)
	if b := claimBatch(t, s, "n3", at(time.Minute)); b != nil {
		t.Fatalf("claimed %+v: starting batches are not claimable", b)
	}
	if b := getBatch(t, s, "live"); b.State != engine.BatchStarting {
		t.Errorf("live starting batch became %s", b.State)
	}
	b := getBatch(t, s, "dead")
	if b.State != engine.BatchCancelled || b.Message == "" || b.ClosedAt.IsZero() {
		t.Errorf("abandoned starting batch = %+v, want cancelled with a message", b)
	}
}
