package engine

// The tests of this package check every run's live-execution count
// (record.Run.Live) against the store: each graceful completion lists the
// live executions as well and every list is compared with the count, a
// mismatch panics (verifyLiveCount).
func init() { checkLiveCount = true }
