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
//
// A process alone on its channel sends no announcements: nobody would
// hear them, and they cost a transaction, a wake-up of every listening
// backend and a read in this process (about 5% of the CPU of a workflow
// on a single node). Presence is announced on the channel itself: a
// process whose listener connects says hello, every process that hears a
// hello answers "here", and every listening process says "here" every
// presenceEvery. A process publishes its changes while it is not
// listening (it cannot know), within presenceGrace of its listener
// connecting, and within presenceTTL of hearing another process; so a
// process that joins is heard from its hello on, and one that leaves
// stops being written to presenceTTL later.
//
// A process that held back changes because it heard nobody says Missed
// with its first notification once it hears another process again, and
// sends it at once: the other may have been listening all along with its
// own announcements lost on the way (a link that carried notices to it but
// not from it), and its long polls would otherwise trust what they knew
// before the changes held back.

// maxPayload keeps a notification below PostgreSQL's limit of 8,000 bytes.
const maxPayload = 7_000

// maxPending bounds the keys waiting to be published; beyond it the next
// notification says "missed" instead, and every listener re-checks.
const maxPending = 20_000

// presenceEvery is how often a listening process says it is there;
// presenceTTL how long after the last word from another process a process
// goes on publishing. presenceGrace is how long it publishes after its
// listener connected without having heard anyone: the others answer its
// hello at once, so this only covers the notifications' round trip.
const (
	presenceEvery = 10 * time.Second
	presenceTTL   = 3 * presenceEvery
	presenceGrace = 2 * time.Second
)

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

	// now is time.Now; tests replace it.
	now func() time.Time
	// listening is the time (unix ns) the listener connected, 0 while it
	// is not connected; heard the time another process was last heard.
	listening, heard atomic.Int64
	// hello and here (under mu) are presence notices to send.
	hello, here bool
	// skipped (under mu): changes were held back because nobody seemed to
	// listen; the next notification sent says Missed.
	skipped bool
	// sent counts the change notifications sent, wakes the publisher's
	// wake-ups (tests).
	sent, wakes atomic.Int64
}

func newFeed(cfg *pgx.ConnConfig, schema string) *feed {
	f := &feed{
		connConfig: cfg,
		channel:    channelName(schema),
		keys:       map[string]struct{}{},
		kick:       make(chan struct{}, 1),
		done:       make(chan struct{}),
		now:        time.Now,
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
	// Hello says that the sender's listener just connected; Here answers
	// a hello and says, every presenceEvery, that the sender listens.
	Hello bool `json:"h,omitempty"`
	Here  bool `json:"p,omitempty"`
}

// PublishChanges implements engine.ChangeFeed. Alone on the channel it
// holds the changes back at once (holdBack), as take would: a goroutine
// wake-up of the publisher per commit, for nothing, is saved.
func (s *Store) PublishChanges(c engine.Changes) {
	f := s.feed
	if !f.othersMayListen() {
		if f.holdBack(c) {
			return
		}
	}
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
	f.startLocked()
	f.mu.Unlock()
	f.kickPublisher()
}

// holdBack records c as held back by a process that hears nobody (the
// next notification says Missed) and reports true; false when another
// process was heard meanwhile, and c must be published. The second look
// pairs with resumeAfterSkip: a process heard after the first look either
// finds skipped set, or is seen by the second.
func (f *feed) holdBack(c engine.Changes) bool {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return true
	}
	if len(c.Keys) > 0 || c.Tasks || c.Missed {
		f.skipped = true
	}
	f.mu.Unlock()
	return !f.othersMayListen()
}

// startLocked starts the publisher unless it runs; f.mu is held.
func (f *feed) startLocked() {
	if !f.started {
		f.started = true
		go f.publish()
	}
}

// kickPublisher wakes the publisher.
func (f *feed) kickPublisher() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// announce queues a presence notice: hello, or here.
func (f *feed) announce(hello bool) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	if hello {
		f.hello = true
	} else {
		f.here = true
	}
	f.startLocked()
	f.mu.Unlock()
	f.kickPublisher()
}

// resumeAfterSkip wakes the publisher when changes were held back while
// nobody seemed to listen: another process was just heard, and the
// publisher's next notification says Missed.
func (f *feed) resumeAfterSkip() {
	f.mu.Lock()
	skipped := f.skipped && !f.closed
	f.mu.Unlock()
	if skipped {
		f.kickPublisher()
	}
}

// othersMayListen reports whether another process may hear this one's
// announcements (see the comment at the top).
func (f *feed) othersMayListen() bool {
	since := f.listening.Load()
	if since == 0 {
		return true
	}
	now := f.now().UnixNano()
	return now-since < int64(presenceGrace) || now-f.heard.Load() < int64(presenceTTL)
}

// take empties the pending announcements into payloads; gen is the count
// of PublishChanges calls they cover.
func (f *feed) take() (payloads []string, gen uint64, closed bool) {
	f.mu.Lock()
	keys, tasks, missed := f.keys, f.tasks, f.missed
	closed, gen = f.closed, f.queued
	if len(keys) > 0 {
		f.keys = map[string]struct{}{}
	} else {
		// The empty map stays f's: PublishChanges writes into it once
		// the lock is let go, so it must not be read below.
		keys = nil
	}
	f.tasks, f.missed = false, false
	if f.hello || f.here {
		payloads = append(payloads, encodeNotice(notice{Hello: f.hello, Here: f.here}))
		f.hello, f.here = false, false
	}
	f.mu.Unlock()
	if !f.othersMayListen() {
		if len(keys) > 0 || tasks || missed {
			f.mu.Lock()
			f.skipped = true
			f.mu.Unlock()
		}
		return payloads, gen, closed
	}
	f.mu.Lock()
	if f.skipped {
		missed, f.skipped = true, false
	}
	f.mu.Unlock()
	changes := changePayloads(keys, tasks, missed)
	f.sent.Add(int64(len(changes)))
	return append(payloads, changes...), gen, closed
}

// changePayloads encodes pending announcements as notifications of at
// most maxPayload bytes; missed replaces them all with one Missed.
func changePayloads(keys map[string]struct{}, tasks, missed bool) []string {
	if missed {
		return []string{encodeNotice(notice{Missed: true})}
	}
	var payloads []string
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
	return payloads
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
		f.wakes.Add(1)
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
				// One statement for the lot: a pg_notify each, in order,
				// in one transaction, as a batch of one statement each
				// was, for the backend's work of one statement.
				if len(payloads) == 1 {
					_, err = conn.Exec(ctx, `SELECT pg_notify($1, $2)`, f.channel, payloads[0])
				} else {
					_, err = conn.Exec(ctx, `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS u(p)`, f.channel, payloads)
				}
			}
			cancel()
			if err != nil {
				// Lost: say so with the next notification, and do not try
				// to reconnect for a second.
				if conn != nil {
					conn.Close(context.Background())
					conn = nil
					// The backend's PID may go to another process's
					// connection: the listener must not skip that one's
					// notifications as this process's own.
					f.publisherPID.Store(0)
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
	beating := make(chan struct{})
	defer func() { <-beating }()
	go func() {
		defer close(beating)
		t := time.NewTicker(presenceEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if f.listening.Load() != 0 {
					f.announce(false)
				}
			}
		}
	}()
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
			f.listening.Store(f.now().UnixNano())
			f.announce(true)
			err = f.receive(ctx, conn, fn)
			f.listening.Store(0)
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
		f.heard.Store(f.now().UnixNano())
		f.resumeAfterSkip()
		var no notice
		if err := json.Unmarshal([]byte(n.Payload), &no); err != nil {
			no = notice{Missed: true} // not ours to read: re-check everything
		}
		if no.Hello {
			f.announce(false)
		}
		if len(no.Keys) > 0 || no.Tasks || no.Missed {
			fn(engine.Changes{Keys: no.Keys, Tasks: no.Tasks, Missed: no.Missed})
		}
	}
}
