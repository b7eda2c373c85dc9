package sqlite

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
)

// startTx inserts a new run and its first execution, in a start's order,
// and asks for the read of its first call, counting the calls of done in
// *calls and keeping the read in *got.
func startTx(ctx context.Context, tx engine.Tx, runID string, mu *sync.Mutex, calls *int, got **engine.CallRead) error {
	at := time.UnixMilli(1_800_000_000_123)
	if err := tx.ExecutionInsert(ctx, []*engine.Execution{{RunID: runID, ExecutionID: "S1-1", StateID: "S1",
		Status: engine.ExecWaitUntil, CreatedAt: at, Data: []byte(`{}`)}}); err != nil {
		return err
	}
	if err := tx.RunInsert(ctx, &engine.Run{RunID: runID, WorkflowID: "wf-" + runID, WorkflowType: "T",
		Status: engine.RunRunning, StartedAt: at, Data: []byte(`{"v":1}`)}); err != nil {
		return err
	}
	if err := tx.DataAttributeUpsert(ctx, runID, []*engine.Attribute{{Key: "k", Value: []byte(`1`)}}); err != nil {
		return err
	}
	tx.(engine.CallPrefetcher).ReadForCallAfterCommit(runID, "S1-1", func(cr *engine.CallRead) {
		mu.Lock()
		defer mu.Unlock()
		*calls++
		*got = cr
	})
	return nil
}

// TestReadForCallAfterCommitInABatch: Update functions committed together
// each keep their own rows and reads. Of two functions batched together,
// one failing, only the other's read is handed over, once, although the
// batch ran it twice (without savepoints, then with them); and a read of
// a run that another function of the batch wrote to is left to the
// engine.
func TestReadForCallAfterCommitInABatch(t *testing.T) {
	ctx := context.Background()
	s := openMigrated(t, true)
	errBoom := errors.New("boom")

	var (
		mu               sync.Mutex
		callsA, callsB   int
		gotA, gotB       *engine.CallRead
		errA, errB, errC error
		wg               sync.WaitGroup
	)
	release, blocker := holdWriter(s)
	wg.Add(2)
	go func() {
		defer wg.Done()
		errA = s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
			return startTx(ctx, tx, "run-a", &mu, &callsA, &gotA)
		})
	}()
	waitQueued(t, s, 1)
	go func() {
		defer wg.Done()
		errB = s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
			if err := startTx(ctx, tx, "run-b", &mu, &callsB, &gotB); err != nil {
				return err
			}
			return errBoom
		})
	}()
	waitQueued(t, s, 2)
	close(release)
	if err := <-blocker; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if errA != nil || !errors.Is(errB, errBoom) {
		t.Fatalf("Update errors %v and %v, want nil and %v", errA, errB, errBoom)
	}
	if callsA != 1 || callsB != 0 {
		t.Fatalf("reads handed over %d and %d times, want once and never", callsA, callsB)
	}
	want, err := s.ReadForCall(ctx, "run-a", "S1-1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotA, want) {
		t.Fatalf("handed over %+v, ReadForCall reads %+v", gotA, want)
	}
	if cr, err := s.ReadForCall(ctx, "run-b", "S1-1"); err != nil || cr.Run != nil {
		t.Fatalf("the failed function's run: %+v, %v; want none", cr, err)
	}

	// A function batched after run-c's start writes to run-c: the start's
	// read is no longer what a read after the commit returns.
	callsA, gotA = 0, nil
	release, blocker = holdWriter(s)
	wg.Add(2)
	go func() {
		defer wg.Done()
		errA = s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
			return startTx(ctx, tx, "run-c", &mu, &callsA, &gotA)
		})
	}()
	waitQueued(t, s, 1)
	go func() {
		defer wg.Done()
		errC = s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
			return tx.DataAttributeUpsert(ctx, "run-c", []*engine.Attribute{{Key: "k", Value: []byte(`2`)}})
		})
	}()
	waitQueued(t, s, 2)
	close(release)
	if err := <-blocker; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if errA != nil || errC != nil {
		t.Fatalf("Update errors %v and %v", errA, errC)
	}
	if callsA != 0 {
		t.Fatalf("a read of a run another function of the batch wrote to was handed over: %+v", gotA)
	}
}

// TestReadForCallAfterCommitLeftToTheEngine: SQLite answers only the
// reads its rows born answer; any other is left to the engine (done is not
// called): a run updated after its insert, an execution updated, a run the
// transaction did not create, a transaction that failed.
func TestReadForCallAfterCommitLeftToTheEngine(t *testing.T) {
	ctx := context.Background()
	s := openMigrated(t, true)
	var (
		mu    sync.Mutex
		calls int
		got   *engine.CallRead
	)
	cases := []struct {
		name  string
		write func(ctx context.Context, tx engine.Tx, runID string) error
	}{
		{"run updated", func(ctx context.Context, tx engine.Tx, runID string) error {
			return tx.RunUpdate(ctx, &engine.Run{RunID: runID, Status: engine.RunRunning, Data: []byte(`{"v":2}`)})
		}},
		{"execution updated", func(ctx context.Context, tx engine.Tx, runID string) error {
			return tx.ExecutionUpdate(ctx, &engine.Execution{RunID: runID, ExecutionID: "S1-1", Status: engine.ExecWaiting})
		}},
		{"failed", func(ctx context.Context, tx engine.Tx, runID string) error { return errors.New("stop") }},
	}
	for i, c := range cases {
		runID := string(rune('p' + i))
		err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
			if err := startTx(ctx, tx, runID, &mu, &calls, &got); err != nil {
				return err
			}
			return c.write(ctx, tx, runID)
		})
		if (err != nil) != (c.name == "failed") || calls != 0 {
			t.Fatalf("%s: err %v, read handed over %+v", c.name, err, got)
		}
	}
	// A run created by an earlier transaction.
	if err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
		return startTx(ctx, tx, "old", &mu, &calls, &got)
	}); err != nil || calls != 1 {
		t.Fatalf("start: err %v, reads handed over %d, want 1", err, calls)
	}
	err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
		if err := tx.ExecutionInsert(ctx, []*engine.Execution{{RunID: "old", ExecutionID: "S2-1", StateID: "S2", Status: engine.ExecWaitUntil}}); err != nil {
			return err
		}
		tx.(engine.CallPrefetcher).ReadForCallAfterCommit("old", "S2-1", func(*engine.CallRead) { calls++ })
		return nil
	})
	if err != nil || calls != 1 {
		t.Fatalf("run not created by the transaction: err %v, reads handed over %d, want 1 (the start's)", err, calls)
	}
}
