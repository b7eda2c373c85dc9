package storetest

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
)

// limitSettingTests check the limit table (engine.LimitSetting*) and the
// reads of the live executions of open runs (engine.ReadTx.LiveExecutions,
// WaitingExecutions).
var limitSettingTests = []struct {
	name string
	fn   func(t *testing.T, s engine.Store)
}{
	{"LimitSettings", testLimitSettings},
	{"LimitSettingSeedRace", testLimitSettingSeedRace},
	{"LiveExecutions", testLiveExecutions},
	{"LiveExecutionsBound", testLiveExecutionsBound},
}

func listLimitSettings(t *testing.T, s engine.Store, limit int) []*engine.LimitSetting {
	t.Helper()
	var out []*engine.LimitSetting
	view(t, s, func(ctx context.Context, tx engine.ReadTx) error {
		var err error
		out, err = tx.LimitSettingList(ctx, limit)
		return err
	})
	return out
}

func testLimitSettings(t *testing.T, s engine.Store) {
	if got := listLimitSettings(t, s, 10); len(got) != 0 {
		t.Fatalf("a new store lists %s", show(got))
	}
	a := &engine.LimitSetting{Key: "worker:w:80", Value: 5, Source: engine.LimitSourceFlag, UpdatedAt: at(0)}
	b := &engine.LimitSetting{Key: "rate:w:80", Value: 0.25, Source: engine.LimitSourceAPI, UpdatedBy: "ops", UpdatedAt: at(time.Second)}
	var wrote []bool
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		wrote = wrote[:0]
		for _, x := range []*engine.LimitSetting{a, b} {
			w, err := tx.LimitSettingSeed(ctx, x)
			if err != nil {
				return err
			}
			wrote = append(wrote, w)
		}
		return nil
	})
	equal(t, "seeds written", wrote, []bool{true, true})
	want := func(x engine.LimitSetting) *engine.LimitSetting { x.UpdatedAt = ms(x.UpdatedAt); return &x }
	equal(t, "rows by key", listLimitSettings(t, s, 10), []*engine.LimitSetting{want(*b), want(*a)})
	equal(t, "rows, the first", listLimitSettings(t, s, 1), []*engine.LimitSetting{want(*b)})

	// A seed leaves a key that has a row alone; a put writes over it, a
	// removal keeps the row with no value, and a seed leaves that too.
	seedAgain := &engine.LimitSetting{Key: "worker:w:80", Value: 9, Source: engine.LimitSourceFlag, UpdatedAt: at(2 * time.Second)}
	put := &engine.LimitSetting{Key: "worker:w:80", Value: 0, Source: engine.LimitSourceAPI, UpdatedBy: "alice", UpdatedAt: at(3 * time.Second)}
	removed := &engine.LimitSetting{Key: "rate:w:80", Removed: true, Source: engine.LimitSourceAPI, UpdatedBy: "bob", UpdatedAt: at(4 * time.Second)}
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		w, err := tx.LimitSettingSeed(ctx, seedAgain)
		if err != nil || w {
			return fmt.Errorf("seed over a row: wrote %v, %v", w, err)
		}
		if err := tx.LimitSettingPut(ctx, put); err != nil {
			return err
		}
		return tx.LimitSettingPut(ctx, removed)
	})
	equal(t, "rows after put and removal", listLimitSettings(t, s, 10), []*engine.LimitSetting{want(*removed), want(*put)})
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		w, err := tx.LimitSettingSeed(ctx, &engine.LimitSetting{Key: "rate:w:80", Value: 3, Source: engine.LimitSourceFlag, UpdatedAt: at(5 * time.Second)})
		if err != nil || w {
			return fmt.Errorf("seed over a removed limit: wrote %v, %v", w, err)
		}
		return nil
	})
	equal(t, "a removed limit stays removed", listLimitSettings(t, s, 10)[0], want(*removed))
	// Keys are compared byte by byte.
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		return tx.LimitSettingPut(ctx, &engine.LimitSetting{Key: "type:Ünïcode", Value: 1, Source: engine.LimitSourceAPI, UpdatedAt: at(0)})
	})
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		return tx.LimitSettingPut(ctx, &engine.LimitSetting{Key: "type:Z", Value: 1, Source: engine.LimitSourceAPI, UpdatedAt: at(0)})
	})
	var keys []string
	for _, r := range listLimitSettings(t, s, 10) {
		keys = append(keys, r.Key)
	}
	equal(t, "keys in byte order", keys, []string{"rate:w:80", "type:Z", "type:Ünïcode", "worker:w:80"})
}

// testLimitSettingSeedRace: two transactions seeding one key (two nodes
// starting together) both succeed, and one of them wrote.
func testLimitSettingSeedRace(t *testing.T, s engine.Store) {
	const n = 4
	wrote := make(chan bool, n)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			var w bool
			err := s.Update(ctxT(t), func(ctx context.Context, tx engine.Tx) error {
				var err error
				w, err = tx.LimitSettingSeed(ctx, &engine.LimitSetting{Key: "type:T", Value: float64(i + 1), Source: engine.LimitSourceFlag, UpdatedAt: at(0)})
				return err
			})
			errs <- err
			wrote <- w && err == nil
		}()
	}
	writers := 0
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		if <-wrote {
			writers++
		}
	}
	if writers != 1 {
		t.Fatalf("%d seeds wrote, want 1", writers)
	}
	if got := listLimitSettings(t, s, 10); len(got) != 1 {
		t.Fatalf("rows %s", show(got))
	}
}

// liveFixture stores, for LiveExecutions: runs of types A and B, open and
// closed, with executions in every status and pending calls, one of them
// parked (held by a pause), and a parked task that is not a call.
func liveFixture(t *testing.T, s engine.Store) {
	t.Helper()
	run := func(id, typ string, start time.Duration, closed bool) *engine.Run {
		r := newRun(id)
		r.WorkflowType, r.StartedAt = typ, at(start)
		if closed {
			r.Status, r.ClosedAt = engine.RunCompleted, at(start+time.Hour)
		}
		return r
	}
	x := func(runID, execID, state string, st engine.ExecutionStatus, created time.Duration, data string) *engine.Execution {
		var d []byte
		if data != "" {
			d = []byte(data)
		}
		return &engine.Execution{RunID: runID, ExecutionID: execID, StateID: state, Status: st, CreatedAt: at(created), Data: d}
	}
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		for _, r := range []*engine.Run{
			run("a1", "A", 3*time.Second, false), run("a2", "A", 1*time.Second, false), run("a3", "A", 2*time.Second, false),
			run("a-closed", "A", 0, true), run("b1", "B", 0, false), run("a4", "A", 4*time.Second, false),
		} {
			if err := tx.RunInsert(ctx, r); err != nil {
				return err
			}
		}
		if err := tx.ExecutionInsert(ctx, []*engine.Execution{
			x("a1", "S1-1", "S1", engine.ExecCompleted, 0, ""),
			x("a1", "S2-1", "S2", engine.ExecWaiting, 10*time.Second, `{"w":1}`),
			x("a1", "S3-1", "S3", engine.ExecExecute, 11*time.Second, ""),
			x("a2", "S1-1", "S1", engine.ExecWaitUntil, 12*time.Second, ""),
			x("a2", "S2-1", "S2", engine.ExecWaiting, 13*time.Second, `{"w":2}`),
			x("a3", "S1-1", "S1", engine.ExecFailed, 0, ""),
			x("a-closed", "S1-1", "S1", engine.ExecAbandoned, 0, ""),
			x("b1", "S1-1", "S1", engine.ExecWaitUntil, 0, ""),
			x("a4", "S2-1", "S2", engine.ExecWaiting, 14*time.Second, `{"w":4}`),
			x("a4", "S3-1", "S3", engine.ExecExecute, 15*time.Second, ""),
		}); err != nil {
			return err
		}
		return tx.TaskInsert(ctx, []*engine.Task{
			{RunID: "a1", WorkflowID: "wf-a1", ExecutionID: "S3-1", Kind: engine.TaskExecute, DueAt: at(0), Attempt: 3},
			{RunID: "a2", WorkflowID: "wf-a2", ExecutionID: "S1-1", Kind: engine.TaskWaitUntil, DueAt: at(0), Attempt: 1},
		})
	})
	leased := func(tk *engine.Task) *engine.Task {
		tk.LeaseOwner, tk.LeaseExpiresAt = "n1", at(time.Minute)
		return tk
	}
	timer := leased(&engine.Task{RunID: "a1", WorkflowID: "wf-a1", ExecutionID: "S2-1", Kind: engine.TaskTimer, DueAt: at(0), Attempt: 7})
	held := leased(&engine.Task{RunID: "a4", WorkflowID: "wf-a4", ExecutionID: "S3-1", Kind: engine.TaskExecute, DueAt: at(0), Attempt: 2})
	insertTasks(t, s, timer, held)
	far := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		for _, p := range []struct {
			tk   *engine.Task
			mark string
		}{{held, "type:A"}, {timer, "run"}} {
			if ok, err := tx.TaskPark(ctx, p.tk.ID, "n1", p.mark, far); err != nil || !ok {
				return fmt.Errorf("park task %d: %v, %v", p.tk.ID, ok, err)
			}
		}
		return nil
	})
}

// liveRow is a LiveExecution as the tests compare it.
type liveRow struct {
	Type, Run, Exec, State, Status string
	Started, Created               time.Time
	Attempt                        int
	Parked                         string
}

func liveRows(xs []*engine.LiveExecution) []liveRow {
	out := make([]liveRow, len(xs))
	for i, x := range xs {
		out[i] = liveRow{x.WorkflowType, x.RunID, x.ExecutionID, x.StateID, string(x.Status), x.RunStartedAt, x.CreatedAt, x.Attempt, x.Parked}
		if x.WorkflowID != "wf-"+x.RunID {
			out[i].Run += " (workflow id " + x.WorkflowID + ")"
		}
	}
	return out
}

// byRunThenExec sorts rows by run (in the order of the runs given) and
// execution id: LiveExecutions orders runs, not the executions within one.
func byRunThenExec(rows []liveRow, runs []string) []liveRow {
	pos := map[string]int{}
	for i, r := range runs {
		pos[r] = i
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].Run != rows[j].Run {
			return pos[rows[i].Run] < pos[rows[j].Run]
		}
		return rows[i].Exec < rows[j].Exec
	})
	return rows
}

func liveExecutions(t *testing.T, s engine.Store, typ string, maxRuns int) []*engine.LiveExecution {
	t.Helper()
	var out []*engine.LiveExecution
	view(t, s, func(ctx context.Context, tx engine.ReadTx) error {
		var err error
		out, err = tx.LiveExecutions(ctx, typ, maxRuns)
		return err
	})
	return out
}

func testLiveExecutions(t *testing.T, s engine.Store) {
	liveFixture(t, s)
	order := []string{"a2", "a3", "a1", "a4"} // the runs of A by start
	got := byRunThenExec(liveRows(liveExecutions(t, s, "A", 10)), order)
	want := []liveRow{
		{"A", "a2", "S1-1", "S1", "WAIT_UNTIL", ms(at(time.Second)), ms(at(12 * time.Second)), 1, ""},
		{"A", "a2", "S2-1", "S2", "WAITING", ms(at(time.Second)), ms(at(13 * time.Second)), 0, ""},
		{"A", "a3", "", "", "", ms(at(2 * time.Second)), time.Time{}, 0, ""},
		// a1's timer task is neither its attempt nor its parked mark.
		{"A", "a1", "S2-1", "S2", "WAITING", ms(at(3 * time.Second)), ms(at(10 * time.Second)), 0, ""},
		{"A", "a1", "S3-1", "S3", "EXECUTE", ms(at(3 * time.Second)), ms(at(11 * time.Second)), 3, ""},
		{"A", "a4", "S2-1", "S2", "WAITING", ms(at(4 * time.Second)), ms(at(14 * time.Second)), 0, ""},
		{"A", "a4", "S3-1", "S3", "EXECUTE", ms(at(4 * time.Second)), ms(at(15 * time.Second)), 2, "type:A"},
	}
	equal(t, "live executions of A", got, want)

	all := byRunThenExec(liveRows(liveExecutions(t, s, "", 10)), append([]string{"b1"}, order...))
	if len(all) != len(want)+1 || all[0].Run != "b1" || all[0].Type != "B" || !reflect.DeepEqual(all[1:], want) {
		t.Fatalf("live executions of every type: %s", show(all))
	}
	// The bound takes the oldest runs of every type: b1, then a2.
	if two := liveRows(liveExecutions(t, s, "", 2)); len(two) != 3 {
		t.Fatalf("the two oldest runs of every type: %s", show(two))
	}
	// The bound counts runs: the two oldest runs of A.
	two := liveRows(liveExecutions(t, s, "A", 2))
	equal(t, "the two oldest runs of A", byRunThenExec(two, []string{"a2", "a3"}), want[:3])
	if got := liveExecutions(t, s, "None", 10); len(got) != 0 {
		t.Fatalf("a type without runs: %s", show(liveRows(got)))
	}

	var waiting []*engine.Execution
	view(t, s, func(ctx context.Context, tx engine.ReadTx) error {
		var err error
		waiting, err = tx.WaitingExecutions(ctx, "A", 10, 10)
		return err
	})
	data := map[string]string{}
	for _, x := range waiting {
		if x.StateID != "S2" || x.Status != engine.ExecWaiting || x.ExecutionID != "S2-1" {
			t.Fatalf("waiting execution %s", show(x))
		}
		data[x.RunID] = string(x.Data)
	}
	equal(t, "waiting executions' data by run", data, map[string]string{"a1": `{"w":1}`, "a2": `{"w":2}`, "a4": `{"w":4}`})
	view(t, s, func(ctx context.Context, tx engine.ReadTx) error {
		var err error
		waiting, err = tx.WaitingExecutions(ctx, "A", 1, 10)
		return err
	})
	if len(waiting) != 1 || waiting[0].RunID != "a2" {
		t.Fatalf("waiting executions of the oldest run: %s", show(waiting))
	}
	view(t, s, func(ctx context.Context, tx engine.ReadTx) error {
		var err error
		waiting, err = tx.WaitingExecutions(ctx, "A", 10, 2)
		return err
	})
	if len(waiting) != 2 {
		t.Fatalf("waiting executions, at most 2: %s", show(waiting))
	}
}

// testLiveExecutionsBound: a type with many closed runs and a few open
// ones returns the open ones, and the bound holds however many there are.
func testLiveExecutionsBound(t *testing.T, s engine.Store) {
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		for i := range 300 {
			r := newRun(fmt.Sprintf("r%03d", i))
			r.WorkflowType, r.StartedAt = "T", at(time.Duration(i)*time.Millisecond)
			if i%3 != 0 {
				r.Status, r.ClosedAt = engine.RunCompleted, at(time.Hour)
			}
			if err := tx.RunInsert(ctx, r); err != nil {
				return err
			}
			if err := tx.ExecutionInsert(ctx, []*engine.Execution{{RunID: r.RunID, ExecutionID: "S-1", StateID: "S",
				Status: engine.ExecWaiting, CreatedAt: at(0)}}); err != nil {
				return err
			}
		}
		return nil
	})
	runIDs := func(xs []*engine.LiveExecution) []string {
		var out []string
		for _, x := range xs {
			out = append(out, x.RunID)
		}
		sort.Strings(out)
		return out
	}
	var open []string
	for i := 0; i < 300; i += 3 {
		open = append(open, fmt.Sprintf("r%03d", i))
	}
	equal(t, "open runs of T", runIDs(liveExecutions(t, s, "T", 1000)), open)
	equal(t, "the 7 oldest open runs of T", runIDs(liveExecutions(t, s, "T", 7)), open[:7])
}
