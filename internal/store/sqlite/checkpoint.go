package sqlite

import (
	"context"
	"database/sql"
	"time"
)

// checkpointInterval is the least time between two background checkpoints.
// At W1 @64 of make bench about 100 ms of commits leave a few thousand
// pages in the WAL for the next checkpoint to copy.
const checkpointInterval = 100 * time.Millisecond

// checkpointer copies the WAL into the database file off the writer's
// path. The write connection runs with wal_autocheckpoint=0, so a commit
// never stops to copy pages and sync the database file; after a commit the
// writer wakes this goroutine, which runs a PASSIVE checkpoint on its own
// connection (it neither waits for nor blocks the writer or the readers)
// and then rests checkpointInterval. When a checkpoint has copied the
// whole WAL, the writer's next transaction starts the WAL file over, as
// with automatic checkpoints. A checkpoint that fails or cannot finish
// (a reader still needs old frames) leaves its frames in the WAL for the
// next one: nothing is lost either way, and the WAL stays durable.
type checkpointer struct {
	db   *sql.DB       // one connection to the database file
	wake chan struct{} // holds a token while commits wait for a checkpoint
	stop chan struct{}
	done chan struct{}
	// after, when set (tests), is called with each checkpoint's outcome:
	// the WAL's frames, how many of them are in the database file, and
	// the error.
	after func(frames, copied int, err error)
}

func newCheckpointer(db *sql.DB, after func(frames, copied int, err error)) *checkpointer {
	c := &checkpointer{db: db, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), after: after}
	go c.run()
	return c
}

// committed tells the checkpointer that the WAL has grown.
func (c *checkpointer) committed() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *checkpointer) run() {
	defer close(c.done)
	rest := time.NewTimer(0)
	<-rest.C
	for {
		select {
		case <-c.wake:
		case <-c.stop:
			return
		}
		// A checkpoint that could not finish is retried after the next
		// commit; the outcome only goes to tests.
		var busy, frames, copied int
		err := c.db.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &copied)
		if c.after != nil {
			c.after(frames, copied, err)
		}
		rest.Reset(checkpointInterval)
		select {
		case <-rest.C:
		case <-c.stop:
			return
		}
	}
}

// close stops the goroutine and closes its connection. The last connection
// to close checkpoints what is left and removes the WAL file.
func (c *checkpointer) close() error {
	close(c.stop)
	<-c.done
	return c.db.Close()
}
