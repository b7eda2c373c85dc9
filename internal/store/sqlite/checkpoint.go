package sqlite

// Checkpoints in the background.
//
// In WAL mode a commit appends the transaction's pages to the -wal file,
// and a checkpoint copies them back into the database file, with an fsync
// of each. SQLite runs that checkpoint inside the commit that takes the WAL
// past wal_autocheckpoint pages (1,000 by default), on the committing
// connection: here the single writer, which every Update waits for. Under
// load that was about a sixth of the writer's time (make bench W1 @64 on
// SQLite: commits slower than 1 ms took 350 ms of every 2 s), time in which
// no other transaction could commit.
//
// So the writer's connection checkpoints only as a safety net
// (walSafetyPages), and a connection of its own checkpoints after commits,
// at most once per checkpointPause, in PASSIVE mode: it copies what no
// reader still needs, waits for no one and blocks no one, and runs beside
// the writer on another core. When a checkpoint has copied the whole WAL,
// the writer's next transaction starts the file over from its beginning.
// Under continuous writes the writer has often appended more by then (an
// earlier trial with no checkpoint on the writer at all saw the WAL grow
// to 2 GB); the writer's own checkpoint at walSafetyPages then has little
// left to copy, and the transaction after it starts the WAL over, so the
// WAL stays under about 40 MB. The durability of a commit is that of the
// store's synchronous level either way: with NORMAL a checkpoint is when
// the WAL reaches the disk; with FULL each commit has already fsynced it,
// and the checkpointer's connection, which has the same level, also syncs
// the database file after copying.

import (
	"context"
	"database/sql"
	"sync/atomic"
	"time"
)

const (
	// walSafetyPages is the writer's own wal_autocheckpoint: it checkpoints
	// in its commit only when the background checkpoints fall this far
	// behind (40 MB of 4 KiB pages).
	walSafetyPages = 10_000
	// checkpointPause is the least time between two background
	// checkpoints, so that one checkpoint (and its fsyncs) serves the
	// commits of that time.
	checkpointPause = 100 * time.Millisecond
)

// checkpointer runs PASSIVE checkpoints on its own connection after the
// writer commits.
type checkpointer struct {
	db   *sql.DB
	wake chan struct{}
	stop chan struct{}
	done chan struct{}
	// pokes counts the commits that asked for a checkpoint.
	pokes atomic.Int64
	// after, when set (tests), is called after each checkpoint with its
	// outcome: how many pokes came before it began, the WAL's pages and
	// how many of them are in the database file.
	after atomic.Pointer[func(pokes int64, walPages, copied int, err error)]
}

func newCheckpointer(db *sql.DB) *checkpointer {
	c := &checkpointer{db: db, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

// poke asks for a checkpoint; it never blocks.
func (c *checkpointer) poke() {
	if c == nil {
		return
	}
	c.pokes.Add(1)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *checkpointer) run() {
	defer close(c.done)
	for {
		select {
		case <-c.stop:
			return
		case <-c.wake:
		}
		c.checkpoint()
		// Commits during the pause leave a poke that starts the next
		// checkpoint right after it.
		select {
		case <-c.stop:
			return
		case <-time.After(checkpointPause):
		}
	}
}

// checkpoint runs one PASSIVE checkpoint. A failure is left to the next
// one, and to the writer's own checkpoint should they all fail.
func (c *checkpointer) checkpoint() {
	var busy, walPages, copied int
	pokes := c.pokes.Load()
	err := c.db.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &walPages, &copied)
	if after := c.after.Load(); after != nil {
		(*after)(pokes, walPages, copied, err)
	}
}

// close stops the checkpointer and closes its connection.
func (c *checkpointer) close() error {
	if c == nil {
		return nil
	}
	close(c.stop)
	<-c.done
	return c.db.Close()
}
