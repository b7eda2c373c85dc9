package postgres

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// A database that stops answering without closing its connections (a
// "black hole": a dead NAT entry, a partition, a proxy that accepts and
// never forwards) would hold every statement in flight until its context
// ends, and the engine's own transactions carry no deadline. The liveness
// watch bounds that: a probe on a connection of its own runs SELECT 1 every
// probe interval; when it has no answer within the liveness timeout, the
// store
//
//   - marks the database down: new connections are refused at once (every
//     operation fails with engine.UnavailableError, which the API answers
//     503) instead of waiting on a connect that cannot complete;
//   - closes the sockets of every connection of the pool and of the change
//     feed, so that the statements waiting on them fail at once (as for a
//     cut connection) and nothing waits for an answer that will not come.
//
// The probe goes on connecting and asking; at its first answer the
// database is up again and the pool makes new connections on demand.
// Whatever a statement under way had written is either committed or not,
// as for any lost connection: leases and tasks are fenced in the database,
// so a node that was cut off can complete nothing it no longer owns.
//
// Besides, every socket has TCP keepalive and TCP_USER_TIMEOUT (Linux)
// set to the liveness timeout, so that the kernel too gives up on a peer
// that stopped acknowledging (a real partition), and a connect has the
// liveness timeout unless the URL sets connect_timeout.

// DefaultLivenessTimeout is how long the database may leave the liveness
// probe unanswered before the store treats it as down.
const DefaultLivenessTimeout = 10 * time.Second

// errUnresponsive is the cause of the errors while the database is down.
var errUnresponsive = errors.New("the database did not answer the liveness probe in time; connections are refused until it answers")

// WithLivenessTimeout sets how long the database may leave the liveness
// probe unanswered before the store treats it as down (see liveness.go);
// DefaultLivenessTimeout without it. d < 0 turns the watch off.
func WithLivenessTimeout(d time.Duration) Option {
	return func(o *options) { o.liveness = d }
}

// liveness watches that the database answers, and holds the sockets of the
// store's connections so that it can close them when it does not.
type liveness struct {
	timeout, interval time.Duration
	dialer            *net.Dialer
	probeCfg          *pgx.ConnConfig

	down      atomic.Bool
	downSince atomic.Int64 // unix ns of the last transition to down
	upSince   atomic.Int64 // unix ns of the last transition to up

	mu    sync.Mutex
	conns map[*trackedConn]struct{}

	stop chan struct{}
	done chan struct{}
}

func newLiveness(timeout time.Duration) *liveness {
	l := &liveness{
		timeout:  timeout,
		interval: min(time.Second, max(timeout/3, 100*time.Millisecond)),
		conns:    map[*trackedConn]struct{}{},
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	l.dialer = &net.Dialer{
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: timeout / 2, Interval: max(timeout/6, time.Second), Count: 3},
		Control:         userTimeoutControl(timeout),
	}
	return l
}

// dial is the DialFunc of the pool's and the change feed's connections:
// refused while the database is down, tracked otherwise.
func (l *liveness) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if l.down.Load() {
		return nil, &net.OpError{Op: "dial", Net: network, Err: errUnresponsive}
	}
	c, err := l.dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, l: l}
	l.mu.Lock()
	l.conns[tc] = struct{}{}
	l.mu.Unlock()
	return tc, nil
}

// start runs the probe until close.
func (l *liveness) start() {
	go l.run()
}

func (l *liveness) close() {
	close(l.stop)
	<-l.done
}

func (l *liveness) run() {
	defer close(l.done)
	// A probe under way ends with close, not after its timeout.
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	go func() {
		select {
		case <-l.stop:
			cancelBase()
		case <-base.Done():
		}
	}()
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close(context.Background())
		}
	}()
	tick := time.NewTicker(l.interval)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(base, l.timeout)
		err := func() error {
			if conn == nil {
				c, err := pgx.ConnectConfig(ctx, l.probeCfg)
				if err != nil {
					return err
				}
				conn = c
			}
			var one int
			return conn.QueryRow(ctx, `SELECT 1`).Scan(&one)
		}()
		// Read before cancel, which would set ctx.Err() in any case.
		timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded)
		cancel()
		if base.Err() != nil {
			return
		}
		if err != nil {
			if conn != nil {
				_ = conn.Close(context.Background())
				conn = nil
			}
			if timedOut || l.down.Load() {
				// No answer in time, or still none: down. A probe that
				// failed fast (a refused connection, a restarted
				// server) leaves the state to the pool's own errors.
				l.setDown()
			}
			continue
		}
		l.setUp()
	}
}

// setDown marks the database down and closes every tracked socket.
func (l *liveness) setDown() {
	if !l.down.Swap(true) {
		l.downSince.Store(time.Now().UnixNano())
	}
	l.mu.Lock()
	conns := make([]*trackedConn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

func (l *liveness) setUp() {
	if l.down.Swap(false) {
		l.upSince.Store(time.Now().UnixNano())
	}
}

// trackedConn is a socket of the store, forgotten when closed.
type trackedConn struct {
	net.Conn
	l    *liveness
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// DatabaseDown reports whether the liveness probe currently finds the
// database unresponsive, and since when.
func (s *Store) DatabaseDown() (down bool, since time.Time) {
	if s.live == nil {
		return false, time.Time{}
	}
	if !s.live.down.Load() {
		return false, time.Time{}
	}
	return true, time.Unix(0, s.live.downSince.Load())
}

// Now reads the database server's clock (clock_timestamp()), the clock by
// which every node of a cluster can agree on time (see internal/dbclock).
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var us int64
	if err := s.pool.QueryRow(ctx, `SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint`).Scan(&us); err != nil {
		return time.Time{}, classify(ctx, err)
	}
	return time.UnixMicro(us), nil
}
