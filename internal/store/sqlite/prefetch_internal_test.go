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
// a run that another function of the batch wrote to is made again at the
// end of the transaction, with that write.
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

	// A function batched after run-c's start writes to run-c: the rows the
	// start wrote are no longer what a read after the commit returns, and
	// the read is made at the end of the transaction.
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
	if callsA != 1 {
		t.Fatalf("the read of a run another function of the batch wrote to was handed over %d times, want once", callsA)
	}
	if want, err := s.ReadForCall(ctx, "run-c", "S1-1"); err != nil || !reflect.DeepEqual(gotA, want) {
		t.Fatalf("handed over %+v, ReadForCall reads %+v (%v)", gotA, want, err)
	}
	if v := string(gotA.DataAttributes[0].Value); v != "2" {
		t.Fatalf("handed over data attribute k = %s, want the batch's last write, 2", v)
	}
}

// TestReadForCallAfterCommitAtTheEnd: a read its rows born do not answer
// (a run updated after its insert, an execution updated, a run the
// transaction did not create) is made at the end of the transaction when
// no other Update waits, and is then what ReadForCall returns after the
// commit; with another Update waiting it is left to the engine (done is
// not called), as it is for a transaction that failed.
func TestReadForCallAfterCommitAtTheEnd(t *testing.T) {
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
		calls, got = 0, nil
		err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
			if err := startTx(ctx, tx, runID, &mu, &calls, &got); err != nil {
				return err
			}
			return c.write(ctx, tx, runID)
		})
		if c.name == "failed" {
			if err == nil || calls != 0 {
				t.Fatalf("%s: err %v, read handed over %+v", c.name, err, got)
			}
			continue
		}
		if err != nil || calls != 1 {
			t.Fatalf("%s: err %v, read handed over %d times, want once", c.name, err, calls)
		}
		if want, err := s.ReadForCall(ctx, runID, "S1-1"); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: handed over %+v, ReadForCall reads %+v (%v)", c.name, got, want, err)
		}
	}

	// A run created by an earlier transaction.
	if err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
		return startTx(ctx, tx, "old", &mu, &calls, &got)
	}); err != nil {
		t.Fatal(err)
	}
	next := func(executionID string) (*engine.CallRead, int, error) {
		var (
			read *engine.CallRead
			n    int
		)
		err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
			read, n = nil, 0
			if err := tx.ExecutionInsert(ctx, []*engine.Execution{{RunID: "old", ExecutionID: executionID, StateID: "S2", Status: engine.ExecWaitUntil}}); err != nil {
				return err
			}
			tx.(engine.CallPrefetcher).ReadForCallAfterCommit("old", executionID, func(cr *engine.CallRead) { read, n = cr, n+1 })
			return nil
		})
		return read, n, err
	}
	read, n, err := next("S2-1")
	if err != nil || n != 1 {
		t.Fatalf("run not created by the transaction: err %v, read handed over %d times, want once", err, n)
	}
	if want, err := s.ReadForCall(ctx, "old", "S2-1"); err != nil || !reflect.DeepEqual(read, want) || read.Execution.ExecutionID != "S2-1" {
		t.Fatalf("run not created by the transaction: handed over %+v, ReadForCall reads %+v (%v)", read, want, err)
	}

	// Another Update waits when the transaction ends: the read stays off
	// the writer.
	queued := make(chan error, 1)
	var (
		n2   int
		err2 error
	)
	err2 = s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
		n2 = 0
		if err := tx.ExecutionInsert(ctx, []*engine.Execution{{RunID: "old", ExecutionID: "S2-2", StateID: "S2", Status: engine.ExecWaitUntil}}); err != nil {
			return err
		}
		tx.(engine.CallPrefetcher).ReadForCallAfterCommit("old", "S2-2", func(*engine.CallRead) { n2++ })
		if len(queued) == 0 && s.writes.empty() {
			go func() { queued <- s.Update(ctx, func(context.Context, engine.Tx) error { return nil }) }()
			waitQueued(t, s, 1)
		}
		return nil
	})
	if err := <-queued; err != nil {
		t.Fatal(err)
	}
	if err2 != nil || n2 != 0 {
		t.Fatalf("with another Update waiting: err %v, read handed over %d times, want never", err2, n2)
	}
}
