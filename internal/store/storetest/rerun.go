package storetest

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
)

// Rerunner makes a store run fn more than once inside one Update call, by
// whatever the store does when a transaction must be repeated (a deadlock
// retry, a group commit re-run after a neighbour failed), and returns that
// Update's error. Each store's tests provide one. The function given to
// Update may wrap fn (to set up the repeat) but must call fn once per run.
type Rerunner func(t *testing.T, s engine.Store, fn func(ctx context.Context, tx engine.Tx) error) error

// UpdateRerun checks the half of the Update contract that a re-run
// function relies on: when a store runs a transaction function more than
// once, the writes of every run but the last are rolled back, so nothing
// outside the transaction sees two runs. The function writes through every
// kind of append and upsert, numbering each run.
func UpdateRerun(t *testing.T, s engine.Store, rerun Rerunner) {
	const runID = "rerun-run"
	var runs atomic.Int32
	fn := func(ctx context.Context, tx engine.Tx) error {
		n := runs.Add(1)
		v := []byte(strconv.Itoa(int(n)))
		if err := tx.MessageAppend(ctx, []*engine.Message{{RunID: runID, Kind: engine.ChannelSignal, Channel: "c", Value: v, CreatedAt: base}}); err != nil {
			return err
		}
		if err := tx.HistoryAppend(ctx, []*engine.HistoryEvent{{RunID: runID, At: base, Type: "Run", Data: v}}); err != nil {
			return err
		}
		if err := tx.TaskInsert(ctx, []*engine.Task{newTask(runID, "", engine.TaskTimer, at(time.Duration(n)*time.Second))}); err != nil {
			return err
		}
		return tx.DataAttributeUpsert(ctx, runID, []*engine.Attribute{{Key: "k" + string(v), Value: v}})
	}
	if err := rerun(t, s, fn); err != nil {
		t.Fatalf("Update: %v", err)
	}
	n := int(runs.Load())
	if n < 2 {
		t.Fatalf("the store ran the function %d time(s); the rerunner must make it run at least twice", n)
	}
	last := strconv.Itoa(n)
	view(t, s, func(ctx context.Context, tx engine.ReadTx) error {
		msgs, err := tx.MessagePeek(ctx, runID, engine.ChannelSignal, "c", 0)
		if err != nil {
			return err
		}
		if len(msgs) != 1 || string(msgs[0].Value) != last {
			return fmt.Errorf("after %d runs the channel holds %s, want only the last run's message %s", n, show(msgs), last)
		}
		events, err := tx.HistoryList(ctx, runID, 0, 0)
		if err != nil {
			return err
		}
		if len(events) != 1 || string(events[0].Data) != last {
			return fmt.Errorf("after %d runs the history holds %s, want only the last run's event", n, show(events))
		}
		tasks, err := tx.TaskList(ctx, runID)
		if err != nil {
			return err
		}
		if len(tasks) != 1 || !tasks[0].DueAt.Equal(ms(at(time.Duration(n)*time.Second))) {
			return fmt.Errorf("after %d runs the run has tasks %s, want only the last run's", n, show(tasks))
		}
		attrs, err := tx.DataAttributeGet(ctx, runID, nil)
		if err != nil {
			return err
		}
		if len(attrs) != 1 || attrs[0].Key != "k"+last {
			return fmt.Errorf("after %d runs the data attributes are %s, want only the last run's", n, show(attrs))
		}
		return nil
	})
}
