package postgres_test

import (
	"sync/atomic"
	"testing"

	"github.com/iwf-server/iwf-server/internal/store/postgres"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
	"github.com/iwf-server/iwf-server/internal/store/storetest"
)

// TestTaskTakeExpecting: the checks of TaskTakeExpecting travel with the
// commit (one round trip for the whole transaction); when they hold, the
// task is removed and the transaction's writes kept; when the run, the
// task or the execution is not as expected, the commit fails with
// engine.ErrUnexpected and nothing of the transaction is kept.
func TestTaskTakeExpecting(t *testing.T) {
	var trips atomic.Int64
	s, _ := pgtest.NewStoreWith(t, postgres.WithRoundTripCounter(&trips))
	storetest.TaskTakeExpecting(t, s, trips.Load)
}
