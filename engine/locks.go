package engine

import (
	"context"
	"time"

	"github.com/iwf-server/iwf-server/engine/internal/record"
)

// Locks on data and search attribute keys (iWF §7.3). A state API whose
// loading policy locks keys waits until no one else holds them, holds them
// across all its retries, and releases them in the transaction that applies
// its answer (or ends it). A locking RPC does not wait: it answers 450.
// Locks live in the run's data, so they survive restarts; an RPC's locks
// carry an expiry in case its server process dies while holding them, and
// an RPC that outlives its locks, taken over by another call, applies
// nothing (invokeRPC).

// lockRetry is how soon a state API blocked by a lock tries again.
const lockRetry = 50 * time.Millisecond

func lockingKeys(p *record.LoadingPolicy) []string {
	if isLocking(p) {
		return slice(p.LockingKeys)
	}
	return nil
}

// lockKeys lists the lock names a pair of policies asks for.
func lockKeys(da, sa *record.LoadingPolicy) []string {
	var keys []string
	for _, k := range lockingKeys(da) {
		keys = append(keys, "da:"+k)
	}
	for _, k := range lockingKeys(sa) {
		keys = append(keys, "sa:"+k)
	}
	return keys
}

// tryLock takes all keys for holder, or none when another live holder has
// one of them. Re-taking one's own locks succeeds.
func tryLock(rd *record.Run, keys []string, holder string, expires int64, nowMs int64) bool {
	for _, k := range keys {
		if h, ok := rd.Locks[k]; ok && h.Holder != holder && (h.Expires == 0 || h.Expires > nowMs) {
			return false
		}
	}
	if len(keys) > 0 && rd.Locks == nil {
		rd.Locks = map[string]record.LockHolder{}
	}
	for _, k := range keys {
		rd.Locks[k] = record.LockHolder{Holder: holder, Expires: expires}
	}
	return true
}

// holdsAll reports whether holder holds every key.
func holdsAll(rd *record.Run, keys []string, holder string) bool {
	for _, k := range keys {
		if rd.Locks[k].Holder != holder {
			return false
		}
	}
	return true
}

// unlock releases every lock of holder.
func unlock(rd *record.Run, holder string) {
	for k, h := range rd.Locks {
		if h.Holder == holder {
			delete(rd.Locks, k)
		}
	}
}

func apiLockHolder(executionID string, kind TaskKind) string {
	return executionID + "/" + string(kind)
}

// acquireAPILocks takes the locks a state API call needs. It reports false
// when they are held by others; the task is then rescheduled shortly.
func (e *Engine) acquireAPILocks(ctx context.Context, task *Task, keys []string) (bool, error) {
	acquired := false
	err := e.update(ctx, func(t *txn) error {
		acquired = false
		run, err := t.tx.RunLock(t.ctx, task.RunID)
		if err != nil || run.Status != RunRunning {
			return err
		}
		rd, err := decodeRun(run)
		if err != nil {
			return err
		}
		if tryLock(rd, keys, apiLockHolder(task.ExecutionID, task.Kind), 0, unixMs(t.now)) {
			acquired = true
			return t.forRun(run, rd).save()
		}
		return t.reschedule(task, t.now.Add(lockRetry), task.Attempt)
	})
	return acquired, err
}
