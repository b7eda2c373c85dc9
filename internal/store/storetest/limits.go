package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/search"
)

// limitTests check how a store reports a request it cannot serve: a
// context that ended is engine.CodeDeadlineExceeded, a statement beyond the
// database's limits engine.CodeInvalidArgument, and neither says the store
// is unavailable; the store answers the next request.
var limitTests = []struct {
	name string
	fn   func(t *testing.T, s engine.Store)
}{
	{"EndedContextIsDeadlineExceeded", testEndedContext},
	{"TooManyValuesIsInvalidArgument", testTooManyValues},
}

// wantCode fails unless err carries code and does not say the store is
// unavailable.
func wantCode(t *testing.T, what string, err error, code engine.ErrorCode) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %s", what, code)
	}
	if got := engine.CodeOf(err); got != code {
		t.Fatalf("%s: code %s (%v), want %s", what, got, err, code)
	}
	if engine.IsUnavailable(err) {
		t.Fatalf("%s: %v says the store is unavailable", what, err)
	}
}

// stillAnswers checks that s serves a read and a write after a failed
// request.
func stillAnswers(t *testing.T, s engine.Store, runID string) {
	t.Helper()
	insertRun(t, s, newRun(runID))
	if got := getRun(t, s, runID); got.RunID != runID {
		t.Fatalf("RunGet(%s) = %s", runID, got.RunID)
	}
}

func testEndedContext(t *testing.T, s engine.Store) {
	read := func(ctx context.Context, tx engine.ReadTx) error {
		_, err := tx.RunGet(ctx, "r-none")
		return err
	}
	write := func(ctx context.Context, tx engine.Tx) error { return tx.RunInsert(ctx, newRun("r-ended")) }

	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	err := s.View(expired, read)
	wantCode(t, "View with an expired context", err, engine.CodeDeadlineExceeded)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("View with an expired context: %v does not match context.DeadlineExceeded", err)
	}
	err = s.Update(expired, write)
	wantCode(t, "Update with an expired context", err, engine.CodeDeadlineExceeded)

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	err = s.View(cancelled, read)
	wantCode(t, "View with a cancelled context", err, engine.CodeDeadlineExceeded)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("View with a cancelled context: %v does not match context.Canceled", err)
	}
	err = s.Update(cancelled, write)
	wantCode(t, "Update with a cancelled context", err, engine.CodeDeadlineExceeded)

	// Nothing of the failed write was kept.
	view(t, s, func(ctx context.Context, tx engine.ReadTx) error {
		_, err := tx.RunGet(ctx, "r-ended")
		isNotFound(t, "RunGet of the write under an ended context", err)
		return nil
	})
	stillAnswers(t, s, "r-after")
}

// tooManyValues is more values than either database binds in one
// statement (PostgreSQL: 65535; SQLite: 32766).
const tooManyValues = 70000

func testTooManyValues(t *testing.T, s engine.Store) {
	values := make([]any, tooManyValues)
	for i := range values {
		values[i] = fmt.Sprintf("wf-%d", i)
	}
	q := &search.Query{
		Filter: &search.Cond{Field: search.Field{Builtin: search.BuiltinWorkflowID, Type: search.Keyword}, Op: search.In, Values: values},
		Limit:  10,
	}
	err := s.View(ctxT(t), func(ctx context.Context, tx engine.ReadTx) error {
		_, err := tx.RunSearch(ctx, q)
		return err
	})
	wantCode(t, fmt.Sprintf("a search for %d workflow ids", tooManyValues), err, engine.CodeInvalidArgument)
	stillAnswers(t, s, "r-after")
}
