package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/iwf-server/iwf-server/engine"
)

// TestWriterServesMostUrgentFirst holds the writer, queues Update calls of
// every priority in the reverse of their urgency, and checks that the
// writer then runs them most urgent first, oldest first within a priority.
func TestWriterServesMostUrgentFirst(t *testing.T) {
	ctx := context.Background()
	s := openMigrated(t, true)
	release, blocker := holdWriter(s)

	var (
		mu  sync.Mutex
		ran []string
		wg  sync.WaitGroup
	)
	queued := 0
	for p := engine.NumPriorities - 1; p >= 0; p-- {
		for i := range 2 {
			name := fmt.Sprintf("p%d-%d", p, i)
			pctx := engine.WithPriority(ctx, engine.Priority(p))
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := s.Update(pctx, func(ctx context.Context, tx engine.Tx) error {
					mu.Lock()
					ran = append(ran, name)
					mu.Unlock()
					return nil
				})
				if err != nil {
					t.Errorf("Update %s: %v", name, err)
				}
			}()
			// One at a time, so that the queue order within a priority
			// is known.
			queued++
			waitQueued(t, s, queued)
		}
	}
	close(release)
	if err := <-blocker; err != nil {
		t.Fatalf("blocking Update: %v", err)
	}
	wg.Wait()
	var want []string
	for p := range engine.NumPriorities {
		want = append(want, fmt.Sprintf("p%d-0", p), fmt.Sprintf("p%d-1", p))
	}
	if fmt.Sprint(ran) != fmt.Sprint(want) {
		t.Fatalf("ran %v, want %v", ran, want)
	}
}

// TestUpdateAfterClose: a call queued when the store closes runs or gets an
// error instead of waiting for ever, and a call after Close fails.
func TestUpdateAfterClose(t *testing.T) {
	ctx := context.Background()
	s := openMigrated(t, false)
	release, blocker := holdWriter(s)
	queuedErr := make(chan error, 1)
	go func() {
		queuedErr <- s.Update(ctx, func(ctx context.Context, tx engine.Tx) error { return nil })
	}()
	waitQueued(t, s, 1)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	// Close waits for the writer, which is held by the blocker: release it
	// once Close has begun (the closing channel is closed).
	<-s.closing
	close(release)
	if err := <-blocker; err != nil {
		t.Fatalf("blocking Update: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	// The queued call either ran before the writer saw the close or was
	// refused; it must not hang.
	if err := <-queuedErr; err != nil && err != errClosed {
		t.Fatalf("queued Update: %v, want nil or %v", err, errClosed)
	}
	if err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error { return nil }); err == nil {
		t.Fatal("Update after Close succeeded")
	}
}

// TestUpdateFinishesAfterCallerCancels: once the writer has begun a
// function, the caller's cancellation no longer stops its statements (they
// run without the driver's per-statement interrupt watcher); the function
// completes and its writes commit. A call cancelled before the writer gets
// to it is not run.
func TestUpdateFinishesAfterCallerCancels(t *testing.T) {
	s := openMigrated(t, true)
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "kept"))
	err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
		cancel()
		if ctx.Value(ctxKey{}) != "kept" {
			return fmt.Errorf("the function's context lost the caller's values")
		}
		return tx.DataAttributeUpsert(ctx, "cancel-run", []*engine.Attribute{{Key: "k", Value: []byte(`1`)}})
	})
	if err != nil {
		t.Fatalf("Update whose caller cancelled during the function: %v, want nil", err)
	}
	var got []*engine.Attribute
	if err := s.View(context.Background(), func(ctx context.Context, tx engine.ReadTx) (err error) {
		got, err = tx.DataAttributeGet(ctx, "cancel-run", nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || string(got[0].Value) != "1" {
		t.Fatalf("stored attributes %v, want k=1", got)
	}
	ran := false
	if err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error { ran = true; return nil }); err == nil || ran {
		t.Fatalf("Update with a cancelled context: err %v, ran %v; want an error and not run", err, ran)
	}
}

type ctxKey struct{}

// TestCloseWaitsForUpdateOnCaller: an Update on an idle store runs on its
// caller's goroutine, not the writer's; Close still waits for it, its
// writes commit, and the calls after it are refused.
func TestCloseWaitsForUpdateOnCaller(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "iwf.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	started, release, result := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		result <- s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
			if err := tx.DataAttributeUpsert(ctx, "close-run", []*engine.Attribute{{Key: "k", Value: []byte(`1`)}}); err != nil {
				return err
			}
			close(started)
			<-release
			return nil
		})
	}()
	<-started
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	<-s.closing
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while an Update was running", err)
	default:
	}
	close(release)
	if err := <-result; err != nil {
		t.Fatalf("Update running when Close began: %v, want nil", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error { return nil }); err == nil {
		t.Fatal("Update after Close succeeded")
	}
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got []*engine.Attribute
	if err := s.View(ctx, func(ctx context.Context, tx engine.ReadTx) (err error) {
		got, err = tx.DataAttributeGet(ctx, "close-run", nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || string(got[0].Value) != "1" {
		t.Fatalf("after reopening: attributes %v, want k=1", got)
	}
}
