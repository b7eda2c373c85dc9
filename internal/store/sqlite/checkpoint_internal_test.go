package sqlite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
)

// checkpointOutcome is what one background checkpoint reported.
type checkpointOutcome struct {
	pokes            int64
	walPages, copied int
	err              error
}

// TestBackgroundCheckpoint checks that commits are checkpointed by the
// background checkpointer, not by the writer (whose own threshold is
// walSafetyPages), and that a complete checkpoint lets the next write
// start the WAL over, so that it stays small.
func TestBackgroundCheckpoint(t *testing.T) {
	ctx := context.Background()
	s := openMigrated(t, true)
	var pages int
	if err := s.w.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if pages != walSafetyPages {
		t.Fatalf("writer's wal_autocheckpoint = %d, want %d", pages, walSafetyPages)
	}

	outcomes := make(chan checkpointOutcome, 1024)
	hook := func(pokes int64, walPages, copied int, err error) {
		outcomes <- checkpointOutcome{pokes, walPages, copied, err}
	}
	s.ckpt.after.Store(&hook)
	write := func(i int) {
		t.Helper()
		err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
			return tx.DataAttributeUpsert(ctx, "ckpt-run", []*engine.Attribute{{Key: fmt.Sprintf("k%d", i), Value: []byte(`"v"`)}})
		})
		if err != nil {
			t.Fatalf("Update %d: %v", i, err)
		}
	}
	// checkpointed waits for the checkpoint that follows every commit so
	// far and returns the WAL's size then; that checkpoint must have
	// copied all of it.
	checkpointed := func() int {
		t.Helper()
		commits := s.ckpt.pokes.Load()
		deadline := time.After(30 * time.Second) // a failure deadline only
		for {
			select {
			case o := <-outcomes:
				if o.err != nil {
					t.Fatalf("checkpoint: %v", o.err)
				}
				if o.pokes < commits {
					continue // it began before the last commit
				}
				if o.walPages == 0 || o.copied != o.walPages {
					t.Fatalf("checkpoint after the last commit copied %d of %d WAL pages, want all of at least 1", o.copied, o.walPages)
				}
				return o.walPages
			case <-deadline:
				t.Fatalf("no background checkpoint after commit %d", commits)
			}
		}
	}

	for i := range 50 {
		write(i)
	}
	if n := checkpointed(); n >= walSafetyPages {
		t.Fatalf("WAL of %d pages, want fewer than the writer's threshold %d", n, walSafetyPages)
	}
	// Everything is in the database file now, so each of two like writes
	// starts the WAL over: the second finds it no longer than the first.
	write(50)
	one := checkpointed()
	write(51)
	two := checkpointed()
	t.Logf("WAL pages after one write: %d, then %d", one, two)
	if two > one {
		t.Fatalf("WAL of %d pages after a write, %d after the one before: it did not start over", two, one)
	}
}
