package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/iwf-server/iwf-server/engine"
)

// TestBackgroundCheckpoint: commits do not checkpoint (the write connection
// has wal_autocheckpoint=0); the checkpointer copies the WAL into the
// database file after them.
func TestBackgroundCheckpoint(t *testing.T) {
	type outcome struct {
		frames, copied int
		err            error
	}
	outcomes := make(chan outcome, 100)
	checkpointHook = func(frames, copied int, err error) {
		select {
		case outcomes <- outcome{frames, copied, err}:
		default:
		}
	}
	t.Cleanup(func() { checkpointHook = nil })
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "iwf.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var auto int
	if err := s.w.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&auto); err != nil {
		t.Fatal(err)
	}
	if auto != 0 {
		t.Fatalf("write connection: wal_autocheckpoint = %d, want 0", auto)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
			return tx.DataAttributeUpsert(ctx, "run", []*engine.Attribute{{Key: "k", Value: []byte{byte('0' + i%10)}}})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The checkpointer runs after commits; wait for one that found frames
	// in the WAL and copied them all (nothing reads here, so none is held
	// back).
	for o := range outcomes {
		if o.err != nil {
			t.Fatalf("checkpoint: %v", o.err)
		}
		if o.frames > 0 && o.copied == o.frames {
			return
		}
	}
}
