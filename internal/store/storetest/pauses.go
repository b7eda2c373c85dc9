package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
)

// pauseTests cover the paused scopes (engine.Pause) and the parked tasks:
// a parked task is out of every claim, keeps its attempt, is counted per
// mark and made due again in id order at the given pace; a resume that
// deletes a scope never leaves behind a task parked for it.
var pauseTests = []struct {
	name string
	fn   func(t *testing.T, s engine.Store)
}{
	{"PauseScopes", testPauseScopes},
	{"TaskParkUnpark", testTaskParkUnpark},
	{"PauseHoldAgainstDelete", testPauseHoldAgainstDelete},
}

func pauseList(t *testing.T, s engine.Store) []*engine.Pause {
	t.Helper()
	var out []*engine.Pause
	view(t, s, func(ctx context.Context, tx engine.ReadTx) (err error) {
		out, err = tx.PauseList(ctx)
		return err
	})
	return out
}

func parkedCount(t *testing.T, s engine.Store) map[string]int {
	t.Helper()
	var out map[string]int
	view(t, s, func(ctx context.Context, tx engine.ReadTx) (err error) {
		out, err = tx.TaskParkedCount(ctx)
		return err
	})
	return out
}

func testPauseScopes(t *testing.T, s engine.Store) {
	equal(t, "no pauses", len(pauseList(t, s)), 0)
	a := &engine.Pause{Scope: "type:Order", Reason: "worker down", By: "oncall", At: at(time.Second)}
	b := &engine.Pause{Scope: "host:blue.internal:8803", By: "", At: at(2 * time.Second)}
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		for _, p := range []*engine.Pause{a, b} {
			ok, err := tx.PauseInsert(ctx, p)
			if err != nil {
				return err
			}
			equal(t, "insert "+p.Scope, ok, true)
		}
		// A scope paused already is left as it is.
		ok, err := tx.PauseInsert(ctx, &engine.Pause{Scope: "type:Order", Reason: "other", At: at(3 * time.Second)})
		equal(t, "second insert", ok, false)
		return err
	})
	want := []*engine.Pause{
		{Scope: b.Scope, At: ms(b.At)},
		{Scope: a.Scope, Reason: a.Reason, By: a.By, At: ms(a.At)},
	}
	equal(t, "list, by scope", pauseList(t, s), want)
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		held, err := tx.PauseHold(ctx, []string{"type:Order", "type:Other", "host:green.internal:8803"})
		equal(t, "held", held, want[1:])
		if err != nil {
			return err
		}
		held, err = tx.PauseHold(ctx, nil)
		equal(t, "held of none", len(held), 0)
		return err
	})
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		ok, err := tx.PauseDelete(ctx, "type:Order")
		equal(t, "delete", ok, true)
		if err != nil {
			return err
		}
		ok, err = tx.PauseDelete(ctx, "type:Order")
		equal(t, "delete again", ok, false)
		return err
	})
	equal(t, "list after delete", pauseList(t, s), want[:1])
}

func testTaskParkUnpark(t *testing.T, s engine.Store) {
	far := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	now := at(time.Hour)
	lease := func(tk *engine.Task, owner string) *engine.Task {
		tk.LeaseOwner, tk.LeaseExpiresAt = owner, tk.DueAt.Add(time.Minute)
		return tk
	}
	r1a := lease(newTask("r1", "S1-1", engine.TaskWaitUntil, at(0)), "n1")
	r1b := lease(newTask("r1", "S2-1", engine.TaskExecute, at(time.Second)), "n1")
	r2a := lease(newTask("r2", "S1-1", engine.TaskExecute, at(0)), "n1")
	r2a.Attempt = 3
	r3a := lease(newTask("r3", "S1-1", engine.TaskExecute, at(0)), "n1")
	other := newTask("r9", "", engine.TaskTimer, at(0))
	insertTasks(t, s, r1a, r1b, r2a, r3a, other)
	park := func(tk *engine.Task, owner, mark string) bool {
		var ok bool
		update(t, s, func(ctx context.Context, tx engine.Tx) (err error) {
			ok, err = tx.TaskPark(ctx, tk.ID, owner, mark, far)
			return err
		})
		return ok
	}
	equal(t, "park without the lease", park(r1a, "n2", "run"), false)
	for _, p := range []struct {
		tk   *engine.Task
		mark string
	}{{r1a, "run"}, {r1b, "run"}, {r2a, "type:T"}, {r3a, "type:T"}} {
		equal(t, "park "+p.tk.RunID+" "+p.tk.ExecutionID, park(p.tk, "n1", p.mark), true)
	}
	equal(t, "park again (unleased now)", park(r1a, "n1", "run"), false)
	got := taskByID(t, s, "r2", r2a.ID)
	equal(t, "parked task", []any{got.DueAt, got.LeaseOwner, got.LeaseExpiresAt, got.Attempt}, []any{far, "", time.Time{}, 3})
	equal(t, "parked counts", parkedCount(t, s), map[string]int{"run": 2, "type:T": 2})
	// No claim ever reaches a parked task, whatever its lease was.
	claimed := claim(t, s, engine.TaskClaimParams{Owner: "n3", Now: now, DueBefore: at(100 * 24 * time.Hour), LeaseDuration: time.Minute})
	equal(t, "claimed", len(claimed), 1)
	equal(t, "claimed task", claimed[0].ID, other.ID)

	// A run's parked tasks, leased to the resuming owner, due at once.
	var out []*engine.Task
	update(t, s, func(ctx context.Context, tx engine.Tx) (err error) {
		out, err = tx.TaskUnpark(ctx, engine.TaskUnparkParams{Parked: "run", RunID: "r1", Due: now, Owner: "n1", LeaseDuration: time.Minute})
		return err
	})
	equal(t, "unparked of r1", len(out), 2)
	for i, tk := range out {
		equal(t, "unparked id", tk.ID, []int64{r1a.ID, r1b.ID}[i])
		equal(t, "unparked task", []any{tk.DueAt, tk.LeaseOwner, tk.LeaseExpiresAt, tk.Attempt, tk.Kind},
			[]any{ms(now), "n1", ms(now.Add(time.Minute)), 1, []engine.TaskKind{engine.TaskWaitUntil, engine.TaskExecute}[i]})
	}
	equal(t, "listed as returned", taskByID(t, s, "r1", r1b.ID), out[1])
	equal(t, "parked counts after the run's", parkedCount(t, s), map[string]int{"type:T": 2})

	// A scope's, paced: one every 250 ms, unleased, the first at once;
	// a limit takes the oldest first.
	update(t, s, func(ctx context.Context, tx engine.Tx) (err error) {
		out, err = tx.TaskUnpark(ctx, engine.TaskUnparkParams{Parked: "type:T", Due: now, Step: 250 * time.Millisecond, Limit: 1})
		return err
	})
	equal(t, "first of the scope", len(out), 1)
	equal(t, "first of the scope", []any{out[0].ID, out[0].DueAt, out[0].LeaseOwner, out[0].Attempt}, []any{r2a.ID, ms(now), "", 3})
	update(t, s, func(ctx context.Context, tx engine.Tx) (err error) {
		out, err = tx.TaskUnpark(ctx, engine.TaskUnparkParams{Parked: "type:T", Due: now.Add(250 * time.Millisecond), Step: 250 * time.Millisecond})
		return err
	})
	equal(t, "rest of the scope", len(out), 1)
	equal(t, "rest of the scope", []any{out[0].ID, out[0].DueAt}, []any{r3a.ID, ms(now.Add(250 * time.Millisecond))})
	equal(t, "nothing parked", len(parkedCount(t, s)), 0)
	update(t, s, func(ctx context.Context, tx engine.Tx) (err error) {
		out, err = tx.TaskUnpark(ctx, engine.TaskUnparkParams{Due: now})
		return err
	})
	equal(t, "unpark of nothing", len(out), 0)

	// The pace counts from the first: ten at 4 per second are 250 ms apart.
	var ten []*engine.Task
	for i := 0; i < 10; i++ {
		ten = append(ten, lease(newTask("r5", "S1-"+string(rune('a'+i)), engine.TaskExecute, at(0)), "n1"))
	}
	insertTasks(t, s, ten...)
	for _, tk := range ten {
		park(tk, "n1", "host:h:1")
	}
	update(t, s, func(ctx context.Context, tx engine.Tx) (err error) {
		out, err = tx.TaskUnpark(ctx, engine.TaskUnparkParams{Parked: "host:h:1", Due: now, Step: 250 * time.Millisecond})
		return err
	})
	equal(t, "paced", len(out), 10)
	for i, tk := range out {
		equal(t, "paced order", tk.ID, ten[i].ID)
		equal(t, "paced due", tk.DueAt, ms(now.Add(time.Duration(i)*250*time.Millisecond)))
	}
}

// testPauseHoldAgainstDelete: a transaction that parks a task for a scope
// it holds (PauseHold) and a resume that deletes the scope and makes its
// parked tasks due, run at the same time, never leave the task parked:
// either the resume waits for the park and finds the task, or the park
// waits for the resume and finds no scope.
func testPauseHoldAgainstDelete(t *testing.T, s engine.Store) {
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		_, err := tx.PauseInsert(ctx, &engine.Pause{Scope: "type:T", At: at(0)})
		return err
	})
	tk := newTask("r1", "S1-1", engine.TaskExecute, at(0))
	tk.LeaseOwner, tk.LeaseExpiresAt = "n1", at(time.Minute)
	insertTasks(t, s, tk)
	// Buffered: the park signals once without waiting for the reader, and
	// a signal sent before the reader is ready is not lost.
	held := make(chan struct{}, 1)
	resumeDone := make(chan struct{})
	var resumeErr error
	parked := make(chan error, 1)
	go func() {
		parked <- s.Update(context.Background(), func(ctx context.Context, tx engine.Tx) error {
			ps, err := tx.PauseHold(ctx, []string{"type:T"})
			if err != nil || len(ps) == 0 {
				return err
			}
			select {
			case held <- struct{}{}:
			default:
			}
			// Give the resume the chance to run first: should nothing
			// hold it off, it deletes the scope before the task is
			// parked, and the task stays parked for good.
			select {
			case <-resumeDone:
			case <-time.After(200 * time.Millisecond):
			}
			_, err = tx.TaskPark(ctx, tk.ID, "n1", "type:T", time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC))
			return err
		})
	}()
	select {
	case <-held:
	case err := <-parked:
		t.Fatalf("the park ended before it held the scope: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the park did not hold the scope within 20s")
	}
	go func() {
		defer close(resumeDone)
		resumeErr = s.Update(context.Background(), func(ctx context.Context, tx engine.Tx) error {
			if _, err := tx.PauseDelete(ctx, "type:T"); err != nil {
				return err
			}
			_, err := tx.TaskUnpark(ctx, engine.TaskUnparkParams{Parked: "type:T", Due: at(time.Hour)})
			return err
		})
	}()
	select {
	case err := <-parked:
		if err != nil {
			t.Fatalf("park: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the park did not finish within 20s (deadlock?)")
	}
	waitDone(t, "resume", resumeDone)
	if resumeErr != nil {
		t.Fatalf("resume: %v", resumeErr)
	}
	equal(t, "parked after park and resume", len(parkedCount(t, s)), 0)
	equal(t, "pauses after resume", len(pauseList(t, s)), 0)
}
