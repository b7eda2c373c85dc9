package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
)

// TestReadRun: one statement finds a run by id or a workflow's current
// run, and says ErrNotFound for a missing run, a missing workflow and a
// workflow without a current run.
func TestReadRun(t *testing.T) {
	ctx := context.Background()
	s := pgtest.NewStore(t)
	at := time.UnixMilli(time.Now().UnixMilli())
	for _, id := range []string{"run-1", "run-2"} {
		run := &engine.Run{RunID: id, WorkflowID: "wf-1", WorkflowType: "T", Status: engine.RunRunning, StartedAt: at, Data: []byte(`{}`)}
		if err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
			if _, err := tx.WorkflowLock(ctx, "wf-1"); err != nil {
				return err
			}
			if err := tx.RunInsert(ctx, run); err != nil {
				return err
			}
			return tx.WorkflowSetCurrentRun(ctx, "wf-1", id)
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
		_, err := tx.WorkflowLock(ctx, "wf-empty") // a row without a current run
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ workflowID, runID, want string }{
		{"wf-1", "", "run-2"},
		{"wf-1", "run-1", "run-1"},
		{"wf-1", "run-9", ""},
		{"wf-9", "", ""},
		{"wf-empty", "", ""},
	} {
		r, err := s.ReadRun(ctx, c.workflowID, c.runID)
		switch {
		case c.want == "" && !errors.Is(err, engine.ErrNotFound):
			t.Errorf("ReadRun(%q, %q) = %+v, %v; want ErrNotFound", c.workflowID, c.runID, r, err)
		case c.want != "" && (err != nil || r.RunID != c.want || r.WorkflowID != "wf-1" || r.Status != engine.RunRunning):
			t.Errorf("ReadRun(%q, %q) = %+v, %v; want run %s", c.workflowID, c.runID, r, err, c.want)
		}
	}
}
