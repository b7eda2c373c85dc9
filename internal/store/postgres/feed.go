package postgres

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/engine"
)

// The change feed (engine.ChangeFeed) runs on PostgreSQL's LISTEN/NOTIFY,
// on two connections of its own beside the pool:
//
//   - the publisher sends what this process committed, batched: whatever
//     accumulates while one batch is on the wire goes in the next, so under
//     load there is far less than one notification per transaction. Its
//     session runs with synchronous_commit off: a notification is a hint,
//     and the commit of its (tiny) transaction then waits for no disk
//     flush. Notifications are not sent inside the engine's transactions on
//     purpose: PostgreSQL serialises the commits of notifying transactions
//     on one lock per database, which would undo the group commit of the
//     engine's transactions;
//   - the listener LISTENs on the channel and hands each notification of
//     another process to the engine.
//
// The channel is per schema, so stores in different schemas of one
// database do not hear each other. A process skips its own notifications
// by the sender's backend PID.

// maxPayload keeps a notification below PostgreSQL's limit of 8,000 bytes.
const maxPayload = 7_000

// maxPending bounds the keys waiting to be published; beyond it the next
// notification says "missed" instead, and every listener re-checks.
const maxPending = 20_000

// feed implements engine.ChangeFeed for a Store.
type feed struct {
	connConfig *pgx.ConnConfig // the pool's, for the two connections
	channel    string

	mu      sync.Mutex
	keys    map[string]struct{}
	tasks   bool
	missed  bool
	started bool
	closed  bool
	kick    chan struct{}
	done    chan struct{}
	// queued counts PublishChanges calls, handled those whose announcements
	// were sent or given up; sentCond is signalled when handled advances.
	queued, handled uint64
	sentCond        *sync.Cond

	publisherPID atomic.Uint32
}

func newFeed(cfg *pgx.ConnConfig, schema string) *feed {
	f := &feed{
		connConfig: cfg,
		channel:    channelName(schema),
		keys:       map[string]struct{}{},
		kick:       make(chan struct{}, 1),
		done:       make(chan struct{}),
	}
	f.sentCond = sync.NewCond(&f.mu)
	return f
}

// channelName is the notification channel of a schema: a fixed prefix and
// a hash, so that it is a valid identifier of any schema name.
func channelName(schema string) string {
	h := fnv.New64a()
	h.Write([]byte(schema))
	return "iwf_changes_" + hex.EncodeToString(h.Sum(nil))
}

// notice is the payload of one notification.
type notice struct {
	Keys   []string `json:"k,omitempty"`
	Tasks  bool     `json:"t,omitempty"`
	Missed bool     `json:"m,omitempty"`
}

// PublishChanges implements engine.ChangeFeed.
func (s *Store) PublishChanges(c engine.Changes) {
	f := s.feed
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	for _, k := range c.Keys {
		if len(f.keys) >= maxPending {
			f.missed = true
			break
		}
		f.keys[k] = struct{}{}
	}
	f.tasks = f.tasks || c.Tasks
	f.missed = f.missed || c.Missed
	f.queued++
	if !f.started {
		f.started = true
		go f.publish()
	}
	f.mu.Unlock()
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// take empties the pending announcements into payloads; gen is the count
// of PublishChanges calls they cover.
func (f *feed) take() (payloads []string, gen uint64, closed bool) {
	f.mu.Lock()
	keys, tasks, missed := f.keys, f.tasks, f.missed
	closed, gen = f.closed, f.queued
	if len(keys) > 0 {
		f.keys = map[string]struct{}{}
	}
	f.tasks, f.missed = false, false
	f.mu.Unlock()
	if missed {
		return []string{encodeNotice(notice{Missed: true})}, gen, closed
	}
	var n notice
	size := 0
	for k := range keys {
		if size+len(k)+8 > maxPayload && len(n.Keys) > 0 {
			payloads = append(payloads, encodeNotice(n))
			n, size = notice{}, 0
		}
		n.Keys = append(n.Keys, k)
		size += len(k) + 8 // quotes, comma and JSON escapes of ordinary ids
	}
	if tasks {
		n.Tasks = true
	}
	if len(n.Keys) > 0 || n.Tasks {
		payloads = append(payloads, encodeNotice(n))
	}
	return payloads, gen, closed
}

// markHandled records that the announcements of the first gen
// PublishChanges calls were sent (or given up).
func (f *feed) markHandled(gen uint64) {
	f.mu.Lock()
	if gen > f.handled {
		f.handled = gen
	}
	f.mu.Unlock()
	f.sentCond.Broadcast()
}

// flush waits until every announcement published before the call was sent
// or given up. Tests use it to order announcements.
func (f *feed) flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	want := f.queued
	for f.handled < want && !(f.closed && !f.started) {
		f.sentCond.Wait()
	}
}

func encodeNotice(n notice) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// publish sends pending announcements until the store closes, then sends
// what is left (with a short deadline) and closes its connection.
func (f *feed) publish() {
	defer close(f.done)
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			conn.Close(ctx)
			cancel()
		}
	}()
	var retryAt time.Time
	for {
		<-f.kick
		payloads, gen, closed := f.take()
		if len(payloads) > 0 && time.Now().After(retryAt) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			var err error
			if conn == nil {
				conn, err = f.connect(ctx, map[string]string{"synchronous_commit": "off"})
				if err == nil {
					f.publisherPID.Store(conn.PgConn().PID())
				}
			}
			if err == nil {
				b := &pgx.Batch{}
				for _, p := range payloads {
					b.Queue(`SELECT pg_notify($1, $2)`, f.channel, p)
				}
				err = conn.SendBatch(ctx, b).Close()
			}
			cancel()
			if err != nil {
				// Lost: say so with the next notification, and do not try
				// to reconnect for a second.
				if conn != nil {
					conn.Close(context.Background())
					conn = nil
				}
				retryAt = time.Now().Add(time.Second)
				f.mu.Lock()
				f.missed = true
				f.mu.Unlock()
			}
		} else if len(payloads) > 0 {
			f.mu.Lock()
			f.missed = true
			f.mu.Unlock()
		}
		f.markHandled(gen)
		if closed {
			return
		}
	}
}

// close stops the publisher after it sent what is pending.
func (f *feed) close() {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.closed = true
	started := f.started
	f.mu.Unlock()
	if !started {
		return
	}
	select {
	case f.kick <- struct{}{}:
	default:
	}
	select {
	case <-f.done:
	case <-time.After(7 * time.Second):
	}
}

// connect opens a connection of the feed's own, with extra session
// settings.
func (f *feed) connect(ctx context.Context, params map[string]string) (*pgx.Conn, error) {
	cfg := f.connConfig.Copy()
	for k, v := range params {
		cfg.RuntimeParams[k] = v
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// ListenChanges implements engine.ChangeFeed: it LISTENs on the schema's
// channel on a connection of its own, reconnecting after a pause when the
// connection fails, and reports a reconnection as Missed.
func (s *Store) ListenChanges(ctx context.Context, fn func(engine.Changes)) {
	f := s.feed
	first := true
	pause := 100 * time.Millisecond
	for ctx.Err() == nil {
		conn, err := f.connect(ctx, nil)
		if err == nil {
			_, err = conn.Exec(ctx, `LISTEN `+pgx.Identifier{f.channel}.Sanitize())
		}
		if err == nil {
			if !first {
				// Announcements made while there was no connection are lost.
				fn(engine.Changes{Missed: true})
			}
			pause = 100 * time.Millisecond
			err = f.receive(ctx, conn, fn)
		}
		if conn != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			conn.Close(cctx)
			cancel()
		}
		if ctx.Err() != nil {
			return
		}
		first = false
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if pause < 5*time.Second {
			pause *= 2
		}
	}
}

// receive hands the notifications of other processes to fn until the
// connection fails or ctx ends.
func (f *feed) receive(ctx context.Context, conn *pgx.Conn, fn func(engine.Changes)) error {
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.PID == f.publisherPID.Load() {
			continue // our own
		}
		var no notice
		if err := json.Unmarshal([]byte(n.Payload), &no); err != nil {
			no = notice{Missed: true} // not ours to read: re-check everything
		}
		fn(engine.Changes{Keys: no.Keys, Tasks: no.Tasks, Missed: no.Missed})
	}
}
