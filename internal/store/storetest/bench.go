package storetest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
)

// Bench measures the transactions the engine runs most: a state step (lock
// the run, read and update executions, swap a task, append history and
// consume a message, about ten statements) and a task claim. Each
// goroutine of b.RunParallel works on its own runs. newStore must return a
// fresh, migrated store.
func Bench(b *testing.B, newStore func(b *testing.B) engine.Store) {
	b.Run("StateStep", func(b *testing.B) {
		s := newStore(b)
		ctx := context.Background()
		var seq atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			run := fmt.Sprintf("run-%d", seq.Add(1))
			if err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
				if err := tx.RunInsert(ctx, &engine.Run{RunID: run, WorkflowID: "wf-" + run, WorkflowType: "T", Status: engine.RunRunning, StartedAt: time.Now(), Data: []byte(`{}`)}); err != nil {
					return err
				}
				return tx.ExecutionInsert(ctx, []*engine.Execution{{RunID: run, ExecutionID: "S-0", StateID: "S", Status: engine.ExecExecute, CreatedAt: time.Now()}})
			}); err != nil {
				b.Error(err)
				return
			}
			for i := 1; pb.Next(); i++ {
				prev, next := fmt.Sprintf("S-%d", i-1), fmt.Sprintf("S-%d", i)
				err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
					r, err := tx.RunLock(ctx, run)
					if err != nil {
						return err
					}
					e, err := tx.ExecutionGet(ctx, run, prev)
					if err != nil {
						return err
					}
					e.Status, e.Data = engine.ExecCompleted, []byte(`{"output":1}`)
					if err := tx.ExecutionUpdate(ctx, e); err != nil {
						return err
					}
					if err := tx.ExecutionInsert(ctx, []*engine.Execution{{RunID: run, ExecutionID: next, StateID: "S", Status: engine.ExecExecute, CreatedAt: time.Now()}}); err != nil {
						return err
					}
					if err := tx.TaskDeleteByExecution(ctx, run, prev); err != nil {
						return err
					}
					if err := tx.TaskInsert(ctx, []*engine.Task{{RunID: run, WorkflowID: r.WorkflowID, ExecutionID: next, Kind: engine.TaskExecute, DueAt: time.Now(), Attempt: 1, FirstAttemptAt: time.Now(), LeaseOwner: "bench", LeaseExpiresAt: time.Now().Add(time.Minute)}}); err != nil {
						return err
					}
					msgs, err := tx.MessagePeek(ctx, run, engine.ChannelInternal, "c", 1)
					if err != nil {
						return err
					}
					if len(msgs) > 0 {
						if err := tx.MessageDelete(ctx, []int64{msgs[0].ID}); err != nil {
							return err
						}
					}
					if err := tx.HistoryAppend(ctx, []*engine.HistoryEvent{
						{RunID: run, At: time.Now(), Type: "StateCompleted", ExecutionID: prev},
						{RunID: run, At: time.Now(), Type: "StateStarted", ExecutionID: next},
					}); err != nil {
						return err
					}
					r.Data = []byte(`{"step":1}`)
					return tx.RunUpdate(ctx, r)
				})
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("TaskClaim", func(b *testing.B) {
		s := newStore(b)
		ctx := context.Background()
		const batch = 10
		now := time.Now()
		tasks := make([]*engine.Task, 0, b.N*batch)
		for i := 0; i < b.N*batch; i++ {
			tasks = append(tasks, &engine.Task{RunID: fmt.Sprintf("r%d", i), WorkflowID: "wf", Kind: engine.TaskTimer, DueAt: now, Attempt: 1})
		}
		for len(tasks) > 0 {
			n := min(len(tasks), 1000)
			if err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error { return tx.TaskInsert(ctx, tasks[:n]) }); err != nil {
				b.Fatal(err)
			}
			tasks = tasks[n:]
		}
		var seq atomic.Int64
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			owner := fmt.Sprintf("owner-%d", seq.Add(1))
			for pb.Next() {
				if _, err := s.TaskClaim(ctx, engine.TaskClaimParams{Owner: owner, Now: now, DueBefore: now, LeaseDuration: time.Minute, Limit: batch}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
