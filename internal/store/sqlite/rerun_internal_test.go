package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/storetest"
)

// TestUpdateRerun makes the group commit run a function twice: the function
// shares a batch with one that fails after writing, so the batch is rolled
// back and run again with a savepoint around each function.
func TestUpdateRerun(t *testing.T) {
	ctx := context.Background()
	s := openMigrated(t, true)
	storetest.UpdateRerun(t, s, func(t *testing.T, _ engine.Store, fn func(ctx context.Context, tx engine.Tx) error) error {
		// Hold the writer so that the next two calls queue up as one batch,
		// the function under test first.
		release, blocker := holdWriter(s)
		result := make(chan error, 1)
		go func() { result <- s.Update(ctx, fn) }()
		waitQueued(t, s, 1)
		errBoom := errors.New("boom")
		failed := make(chan error, 1)
		go func() {
			failed <- s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
				if err := tx.DataAttributeUpsert(ctx, "rerun-run", []*engine.Attribute{{Key: "failed", Value: []byte(`1`)}}); err != nil {
					return err
				}
				return errBoom
			})
		}()
		waitQueued(t, s, 2)
		close(release)
		if err := <-blocker; err != nil {
			t.Errorf("blocking Update: %v", err)
		}
		if err := <-failed; !errors.Is(err, errBoom) {
			t.Errorf("failing Update returned %v, want its own error", err)
		}
		return <-result
	})
}

// waitQueued waits until n Update calls wait for the writer.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	s.writes.waitLen(n)
}

// openMigrated opens a migrated store in a temporary directory; with
// closeAtEnd it is closed when the test ends.
func openMigrated(t testing.TB, closeAtEnd bool) *Store {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "iwf.db"))
	if err != nil {
		t.Fatal(err)
	}
	if closeAtEnd {
		t.Cleanup(func() { s.Close() })
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// holdWriter runs an Update that holds the writer until release is
// closed; blocker receives its result. It returns once the writer is held.
func holdWriter(s *Store) (release chan struct{}, blocker chan error) {
	started := make(chan struct{})
	release, blocker = make(chan struct{}), make(chan error, 1)
	go func() {
		blocker <- s.Update(context.Background(), func(ctx context.Context, tx engine.Tx) error {
			close(started)
			<-release
			return nil
		})
	}()
	<-started
	return release, blocker
}
