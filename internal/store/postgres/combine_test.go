package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/postgres"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
)

// combineFixture is a store whose blind transactions commit one batch at
// a time, with runs run-0 … run-<n-1> stored.
type combineFixture struct {
	s     *postgres.Store
	conn  *pgx.Conn // a connection of the test's own on the store's schema
	at    time.Time
	runs  []*engine.Run
	queue chan int // the queue's length each time a transaction joins it
}

func newCombineFixture(t *testing.T, runs int) *combineFixture {
	t.Helper()
	s, schema := pgtest.NewStoreWith(t)
	f := &combineFixture{s: s, conn: pgtest.Conn(t, schema), at: time.UnixMilli(time.Now().UnixMilli()), queue: make(chan int, 64)}
	postgres.SetCombiner(s, 1, 16)
	postgres.OnCombinerQueue(s, func(n int) { f.queue <- n })
	for i := range runs {
		r := &engine.Run{RunID: fmt.Sprintf("run-%d", i), WorkflowID: fmt.Sprintf("wf-%d", i), WorkflowType: "T",
			Status: engine.RunRunning, StartedAt: f.at, Data: []byte(`{"v":0}`)}
		f.runs = append(f.runs, r)
		f.update(t, func(ctx context.Context, tx engine.Tx) error {
			if err := tx.RunInsert(ctx, r); err != nil {
				return err
			}
			return tx.WorkflowSetCurrentRun(ctx, r.WorkflowID, r.RunID)
		})
	}
	return f
}

func (f *combineFixture) update(t *testing.T, fn func(ctx context.Context, tx engine.Tx) error) {
	t.Helper()
	if err := f.s.Update(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
}

// mark is a blind transaction's write that leaves a trace: a history event
// of run named what.
func (f *combineFixture) mark(ctx context.Context, tx engine.Tx, run, what string) error {
	return tx.HistoryAppend(ctx, []*engine.HistoryEvent{{RunID: run, At: f.at, Type: what, Data: []byte(`{}`)}})
}

// touch is a blind transaction's update of run i, with data, that leaves
// the trace what.
func (f *combineFixture) touch(ctx context.Context, tx engine.Tx, i int, data, what string) error {
	r := *f.runs[i]
	r.Data = []byte(data)
	if err := tx.RunUpdate(ctx, &r); err != nil {
		return err
	}
	return f.mark(ctx, tx, r.RunID, what)
}

// marks returns the types of the history events stored, in order.
func (f *combineFixture) marks(t *testing.T) []string { return f.historyTypes(t, "type") }

// order returns the types of the history events stored, in the order
// they were inserted.
func (f *combineFixture) order(t *testing.T) []string { return f.historyTypes(t, "id") }

// historyTypes returns the types of the history events stored, ordered by
// the column by.
func (f *combineFixture) historyTypes(t *testing.T, by string) []string {
	t.Helper()
	rows, err := f.conn.Query(context.Background(), `SELECT type FROM history ORDER BY `+by)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// holdFirstCommit makes the store's first commit of blind transactions
// wait, holding its slot, until release is called; entered is closed once
// it waits. Later commits go on at once.
func (f *combineFixture) holdFirstCommit() (entered <-chan struct{}, release func()) {
	in, out := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	postgres.OnCombinerFlush(f.s, func() {
		if first.CompareAndSwap(false, true) {
			close(in)
			<-out
		}
	})
	return in, func() { close(out) }
}

// waitEntered waits until the held commit waits.
func waitEntered(t *testing.T, entered <-chan struct{}) {
	t.Helper()
	select {
	case <-entered:
	case <-time.After(time.Minute):
		t.Fatal("the first commit never began")
	}
}

// waitQueued waits until n transactions wait in the combiner's queue.
func (f *combineFixture) waitQueued(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case got := <-f.queue:
			if got == n {
				return
			}
		case <-timeout:
			t.Fatalf("the queue of blind transactions never reached %d", n)
		}
	}
}

// TestCombinerBatch: blind transactions that wait at once are committed in
// one PostgreSQL transaction; one that fails (an update that finds no row,
// a failed expectation, a duplicate key) fails alone and leaves nothing,
// the others commit with their call reads; one cancelled while it waits
// commits nothing.
func TestCombinerBatch(t *testing.T) {
	f := newCombineFixture(t, 4)
	ctx := context.Background()

	// The one commit slot is taken by a commit held before it sends.
	entered, release := f.holdFirstCommit()
	first := make(chan error, 1)
	go func() {
		first <- f.s.Update(ctx, func(ctx context.Context, tx engine.Tx) error { return f.touch(ctx, tx, 0, `{"v":1}`, "a") })
	}()
	waitEntered(t, entered)

	type outcome struct {
		name string
		err  error
	}
	outcomes := make(chan outcome, 8)
	var read atomic.Pointer[engine.CallRead]
	blind := func(name string, fn func(ctx context.Context, tx engine.Tx) error) {
		go func() { outcomes <- outcome{name, f.s.Update(ctx, fn)} }()
	}
	blind("b", func(ctx context.Context, tx engine.Tx) error {
		tx.(engine.CallPrefetcher).ReadForCallAfterCommit("run-1", "S-1", func(cr *engine.CallRead) { read.Store(cr) })
		return f.touch(ctx, tx, 1, `{"v":1}`, "b")
	})
	f.waitQueued(t, 1)
	blind("c (absent run)", func(ctx context.Context, tx engine.Tx) error {
		if err := f.mark(ctx, tx, "run-2", "c"); err != nil {
			return err
		}
		// The run sorts last in the batch: no statement behind its check
		// fails, so only that check can keep it from committing.
		return tx.RunUpdate(ctx, &engine.Run{RunID: "zz-absent", Status: engine.RunRunning, Data: []byte(`{}`)})
	})
	f.waitQueued(t, 2)
	blind("d (duplicate run)", func(ctx context.Context, tx engine.Tx) error {
		if err := f.mark(ctx, tx, "run-2", "d"); err != nil {
			return err
		}
		return tx.RunInsert(ctx, f.runs[2])
	})
	f.waitQueued(t, 3)
	blind("e (taken workflow id)", func(ctx context.Context, tx engine.Tx) error {
		if err := tx.(engine.WorkflowCreator).WorkflowCreateExpecting(ctx, "wf-3", "run-new"); err != nil {
			return err
		}
		return f.mark(ctx, tx, "run-new", "e")
	})
	f.waitQueued(t, 4)
	blind("f", func(ctx context.Context, tx engine.Tx) error {
		if err := tx.(engine.WorkflowCreator).WorkflowCreateExpecting(ctx, "wf-new", "run-new"); err != nil {
			return err
		}
		return f.mark(ctx, tx, "run-3", "f")
	})
	f.waitQueued(t, 5)
	cctx, cancel := context.WithCancel(ctx)
	cancelled := make(chan error, 1)
	go func() {
		cancelled <- f.s.Update(cctx, func(ctx context.Context, tx engine.Tx) error { return f.mark(ctx, tx, "run-3", "g") })
	}()
	f.waitQueued(t, 6)
	cancel()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Fatalf("a transaction cancelled in the queue: %v, want context.Canceled", err)
	}

	release()
	if err := <-first; err != nil {
		t.Fatalf("the transaction that held the slot: %v", err)
	}
	got := map[string]error{}
	for range 5 {
		o := <-outcomes
		got[o.name] = o.err
	}
	for name, want := range map[string]error{"b": nil, "f": nil, "c (absent run)": engine.ErrNotFound,
		"e (taken workflow id)": engine.ErrUnexpected} {
		if err := got[name]; !errors.Is(err, want) || (want == nil && err != nil) {
			t.Errorf("transaction %s: %v, want %v", name, err, want)
		}
	}
	if err := got["d (duplicate run)"]; err == nil {
		t.Error("transaction d (duplicate run) committed")
	}
	if batches, combined := postgres.CombinerStats(f.s); batches != 1 || combined != 2 {
		t.Errorf("%d commits of several transactions carrying %d, want 1 carrying b and f", batches, combined)
	}
	if m := fmt.Sprint(f.marks(t)); m != "[a b f]" {
		t.Errorf("history stored %s, want [a b f]: a failed or cancelled transaction left a write", m)
	}
	if cr := read.Load(); cr == nil || cr.Run == nil || string(cr.Run.Data) != `{"v":1}` {
		t.Errorf("the call read behind the batch's commit: %+v, want run-1 as b left it", cr)
	}
	var cur string
	if err := f.conn.QueryRow(ctx, `SELECT current_run_id FROM workflows WHERE workflow_id = 'wf-3'`).Scan(&cur); err != nil || cur != "run-3" {
		t.Errorf("wf-3 points at %q (%v), want run-3", cur, err)
	}
	if err := f.conn.QueryRow(ctx, `SELECT current_run_id FROM workflows WHERE workflow_id = 'wf-new'`).Scan(&cur); err != nil || cur != "run-new" {
		t.Errorf("wf-new points at %q (%v), want run-new", cur, err)
	}
}

// TestCombinerConcurrent: blind transactions from many goroutines on a few
// runs, two commits at a time: each commits exactly once, whatever batch
// it travels in.
func TestCombinerConcurrent(t *testing.T) {
	f := newCombineFixture(t, 4)
	postgres.OnCombinerQueue(f.s, nil)
	postgres.SetCombiner(f.s, 2, 8)
	const n = 400
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- f.s.Update(context.Background(), func(ctx context.Context, tx engine.Tx) error {
				return f.touch(ctx, tx, i%len(f.runs), fmt.Sprintf(`{"v":%d}`, i), fmt.Sprintf("m%03d", i))
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	marks := f.marks(t)
	if len(marks) != n {
		t.Fatalf("%d history events stored, want %d", len(marks), n)
	}
	for i, m := range marks {
		if want := fmt.Sprintf("m%03d", i); m != want {
			t.Fatalf("history event %d is %s, want %s: one transaction was lost or applied twice", i, m, want)
		}
	}
	batches, combined := postgres.CombinerStats(f.s)
	t.Logf("%d commits carried %d of the %d transactions", batches, combined, n)
}

// TestWorkflowCreateExpecting: the row of a new id is created with the
// transaction's commit, in its one round trip; a taken id fails the
// transaction with engine.ErrUnexpected and leaves nothing.
func TestWorkflowCreateExpecting(t *testing.T) {
	var trips atomic.Int64
	s, schema := pgtest.NewStoreWith(t, postgres.WithRoundTripCounter(&trips))
	conn := pgtest.Conn(t, schema)
	ctx := context.Background()
	at := time.UnixMilli(time.Now().UnixMilli())
	start := func(wf, run string) error {
		return s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
			if err := tx.(engine.WorkflowCreator).WorkflowCreateExpecting(ctx, wf, run); err != nil {
				return err
			}
			return tx.RunInsert(ctx, &engine.Run{RunID: run, WorkflowID: wf, WorkflowType: "T", Status: engine.RunRunning, StartedAt: at, Data: []byte(`{}`)})
		})
	}
	before := trips.Load()
	if err := start("wf", "run-a"); err != nil {
		t.Fatal(err)
	}
	if n := trips.Load() - before; n != 1 {
		t.Errorf("the start took %d round trips, want 1", n)
	}
	if err := start("wf", "run-b"); !errors.Is(err, engine.ErrUnexpected) {
		t.Fatalf("a start of a taken id: %v, want engine.ErrUnexpected", err)
	}
	var cur string
	var runs int
	if err := conn.QueryRow(ctx, `SELECT (SELECT current_run_id FROM workflows WHERE workflow_id = 'wf'), (SELECT count(*) FROM runs)`).
		Scan(&cur, &runs); err != nil {
		t.Fatal(err)
	}
	if cur != "run-a" || runs != 1 {
		t.Errorf("wf points at %q with %d runs stored, want run-a and 1", cur, runs)
	}
}

// TestCombinerPriority: queued blind transactions get the commit slot most
// urgent first (engine.Priority), oldest first within a priority; a start
// queued before them all commits after them all.
func TestCombinerPriority(t *testing.T) {
	f := newCombineFixture(t, 1)
	postgres.SetCombiner(f.s, 1, 1)
	ctx := context.Background()

	entered, release := f.holdFirstCommit()
	done := make(chan error, 8)
	blind := func(ctx context.Context, what string, lock bool) {
		go func() {
			done <- f.s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
				if lock {
					return f.touch(ctx, tx, 0, `{"v":0}`, what)
				}
				return f.mark(ctx, tx, "run-0", what)
			})
		}()
	}
	blind(ctx, "first", true)
	waitEntered(t, entered)
	for i, q := range []struct {
		what string
		prio engine.Priority
	}{{"start", engine.PriorityStart}, {"low-1", engine.PriorityLow}, {"normal", engine.PriorityNormal},
		{"urgent-1", engine.PriorityUrgent}, {"low-2", engine.PriorityLow}, {"urgent-2", engine.PriorityUrgent}} {
		blind(engine.WithPriority(ctx, q.prio), q.what, false)
		f.waitQueued(t, i+1)
	}
	release()
	for range 7 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if got, want := fmt.Sprint(f.order(t)), "[first urgent-1 urgent-2 normal low-1 low-2 start]"; got != want {
		t.Errorf("committed in the order %s, want %s", got, want)
	}
}

// TestCombinerLockHeldElsewhere: a transaction of a batch whose run is
// locked elsewhere for long leaves the batch, which commits without it;
// it then commits alone once the lock is released.
func TestCombinerLockHeldElsewhere(t *testing.T) {
	f := newCombineFixture(t, 2)
	ctx := context.Background()
	// The test's second connection holds run-1 throughout.
	other := pgtest.Conn(t, "public")
	var schema string
	if err := f.conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	held, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback(ctx)
	if _, err := held.Exec(ctx, `SELECT 1 FROM `+pgx.Identifier{schema, "runs"}.Sanitize()+` WHERE run_id = 'run-1' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}

	entered, release := f.holdFirstCommit()
	first := make(chan error, 1)
	go func() {
		first <- f.s.Update(ctx, func(ctx context.Context, tx engine.Tx) error { return f.touch(ctx, tx, 0, `{"v":0}`, "a") })
	}()
	waitEntered(t, entered)
	waiting, free := make(chan error, 1), make(chan error, 1)
	go func() {
		waiting <- f.s.Update(ctx, func(ctx context.Context, tx engine.Tx) error { return f.touch(ctx, tx, 1, `{"v":2}`, "b") })
	}()
	f.waitQueued(t, 1)
	go func() {
		free <- f.s.Update(ctx, func(ctx context.Context, tx engine.Tx) error { return f.mark(ctx, tx, "run-0", "c") })
	}()
	f.waitQueued(t, 2)
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	// c commits while run-1 is still held: b, whose statement waits for
	// it, left the batch.
	select {
	case err := <-free:
		if err != nil {
			t.Fatalf("the transaction batched with one that waits for a lock held elsewhere: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the transaction batched with one that waits for a lock held elsewhere is held up by it")
	}
	select {
	case err := <-waiting:
		t.Fatalf("the transaction that needs run-1 returned (%v) while run-1 is held", err)
	default:
	}
	if m := fmt.Sprint(f.marks(t)); m != "[a c]" {
		t.Errorf("history %s while run-1 is held, want [a c]", m)
	}
	if err := held.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-waiting; err != nil {
		t.Fatalf("the transaction that waited for run-1, once released: %v", err)
	}
	if m := fmt.Sprint(f.marks(t)); m != "[a b c]" {
		t.Errorf("history %s, want [a b c]", m)
	}
}

// holdEveryCommit makes each commit of blind transactions wait before it
// sends anything until released: it sends on entered once it waits, and
// goes on when release receives.
func (f *combineFixture) holdEveryCommit() (entered <-chan struct{}, release chan<- struct{}) {
	in, out := make(chan struct{}), make(chan struct{})
	postgres.OnCombinerFlush(f.s, func() {
		in <- struct{}{}
		<-out
	})
	return in, out
}

// TestCombinerRequestDeadline: a transaction whose context has a deadline
// (a client's request, such as a start) does not wait for its commit past
// the end of its context, whether it leads the commit or rides in another's;
// the commit goes on for the others, with its writes, and its slot is
// handed on.
func TestCombinerRequestDeadline(t *testing.T) {
	f := newCombineFixture(t, 1)
	postgres.SetCombiner(f.s, 1, 16)
	ctx := context.Background()
	entered, release := f.holdEveryCommit()
	request := func() (context.Context, context.CancelFunc) {
		return context.WithDeadline(engine.WithPriority(ctx, engine.PriorityStart), time.Now().Add(time.Hour))
	}
	update := func(ctx context.Context, what string) <-chan error {
		done := make(chan error, 1)
		go func() {
			done <- f.s.Update(ctx, func(ctx context.Context, tx engine.Tx) error { return f.mark(ctx, tx, "run-0", what) })
		}()
		return done
	}
	outcome := func(what string, done <-chan error) error {
		t.Helper()
		select {
		case err := <-done:
			return err
		case <-time.After(time.Minute):
			t.Fatalf("%s: Update never returned", what)
			return nil
		}
	}

	// A request that leads its commit returns when its context ends; its
	// commit, stopped or not by then, may or may not keep it.
	reqCtx, cancel := request()
	leader := update(reqCtx, "leader")
	<-entered
	cancel()
	if err := outcome("the leading request", leader); !errors.Is(err, context.Canceled) {
		t.Fatalf("a leading request whose context ended: %v, want context.Canceled", err)
	}
	release <- struct{}{}
	// An engine transaction commits once that commit has handed its slot
	// on; then the slot is free.
	sync := update(ctx, "sync")
	<-entered
	release <- struct{}{}
	if err := outcome("sync", sync); err != nil {
		t.Fatal(err)
	}
	for len(f.queue) > 0 {
		<-f.queue
	}

	// An engine transaction leads the next commit, held; a request and
	// another engine transaction queue.
	first := update(ctx, "first")
	<-entered
	reqCtx, cancel = request()
	defer cancel()
	rider := update(reqCtx, "rider")
	f.waitQueued(t, 1)
	second := update(ctx, "second")
	f.waitQueued(t, 2)
	// The first commit ends and hands its slot to the engine transaction,
	// whose commit takes the request along and is held.
	release <- struct{}{}
	if err := outcome("first", first); err != nil {
		t.Fatal(err)
	}
	<-entered
	cancel()
	if err := outcome("the riding request", rider); !errors.Is(err, context.Canceled) {
		t.Fatalf("a riding request whose context ended: %v, want context.Canceled", err)
	}
	release <- struct{}{}
	if err := outcome("second", second); err != nil {
		t.Fatal(err)
	}
	order := slices.DeleteFunc(f.order(t), func(what string) bool { return what == "leader" })
	if got, want := fmt.Sprint(order), "[sync first second rider]"; got != want {
		t.Errorf("stored %s (leaving out the leader), want %s: the commit carries a request that stopped waiting", got, want)
	}
}
