package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/postgres"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
)

// feedListener collects what a store's ListenChanges delivers.
type feedListener struct {
	t  *testing.T
	ch chan engine.Changes
}

func listen(t *testing.T, s *postgres.Store) *feedListener {
	ctx, cancel := context.WithCancel(context.Background())
	l := &feedListener{t: t, ch: make(chan engine.Changes, 1000)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.ListenChanges(ctx, func(c engine.Changes) { l.ch <- c })
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return l
}

// next returns the next delivery, failing the test after 30 s.
func (l *feedListener) next() engine.Changes {
	l.t.Helper()
	select {
	case c := <-l.ch:
		return c
	case <-time.After(30 * time.Second):
		l.t.Fatal("no change delivered within 30 s")
		return engine.Changes{}
	}
}

// until returns the deliveries up to and including the first that cond
// accepts.
func (l *feedListener) until(cond func(engine.Changes) bool) []engine.Changes {
	l.t.Helper()
	var got []engine.Changes
	for {
		c := l.next()
		got = append(got, c)
		if cond(c) {
			return got
		}
	}
}

func hasKey(c engine.Changes, key string) bool {
	for _, k := range c.Keys {
		if k == key {
			return true
		}
	}
	return false
}

// ready publishes probes from pub until l receives one: then l's LISTEN is
// in place. It reports whether l received a Missed on the way.
func ready(t *testing.T, pub *postgres.Store, l *feedListener) (missed bool) {
	t.Helper()
	for i := 0; ; i++ {
		pub.PublishChanges(engine.Changes{Keys: []string{fmt.Sprintf("probe-%d", i)}})
		select {
		case c := <-l.ch:
			missed = missed || c.Missed
			if len(c.Keys) > 0 && strings.HasPrefix(c.Keys[0], "probe-") {
				return missed
			}
		case <-time.After(50 * time.Millisecond):
		}
		if i > 600 {
			t.Fatal("the listener received no probe within 30 s")
		}
	}
}

// TestChangeFeed checks the PostgreSQL change feed between two stores on
// one schema: announcements of the other store arrive, keys and the tasks
// flag intact, many keys split over several notifications; a store does not
// hear itself nor a store of another schema; a lost listening connection is
// reported as Missed and listening resumes.
func TestChangeFeed(t *testing.T) {
	stores := pgtest.NewStores(t, 2)
	a, b := stores[0], stores[1]
	other := pgtest.NewStore(t)
	l := listen(t, a)
	ready(t, b, l)

	// Own and other-schema announcements, sent before b's marker, are never
	// delivered.
	a.PublishChanges(engine.Changes{Keys: []string{"own"}, Tasks: true})
	other.PublishChanges(engine.Changes{Keys: []string{"other-schema"}})
	postgres.FlushChanges(a)
	postgres.FlushChanges(other)
	b.PublishChanges(engine.Changes{Keys: []string{"run-1", "workflow:wf 1"}})
	got := l.until(func(c engine.Changes) bool { return hasKey(c, "run-1") })
	for _, c := range got {
		if hasKey(c, "own") || hasKey(c, "other-schema") || c.Tasks {
			t.Fatalf("delivered %+v: own or other-schema announcement", c)
		}
	}
	if last := got[len(got)-1]; !hasKey(last, "workflow:wf 1") || last.Missed {
		t.Fatalf("got %+v, want run-1 and workflow:wf 1 in one announcement", last)
	}

	b.PublishChanges(engine.Changes{Tasks: true})
	if c := l.until(func(c engine.Changes) bool { return c.Tasks }); len(c[len(c)-1].Keys) != 0 {
		t.Fatalf("tasks announcement carries keys %v", c[len(c)-1].Keys)
	}

	// 40 keys of 1,000 bytes exceed one notification's payload.
	want := map[string]bool{}
	var keys []string
	for i := 0; i < 40; i++ {
		k := strings.Repeat(string(rune('a'+i%26)), 999) + string(rune('A'+i))
		keys = append(keys, k)
		want[k] = true
	}
	b.PublishChanges(engine.Changes{Keys: keys})
	notices := 0
	for len(want) > 0 {
		c := l.next()
		if len(c.Keys) > 0 && len(c.Keys[0]) == 1000 {
			notices++ // not a late probe
		}
		for _, k := range c.Keys {
			delete(want, k)
		}
	}
	if notices < 2 {
		t.Fatalf("40 keys of 1 kB arrived in %d notification(s), want them split", notices)
	}

	// Kill the listening connection: the listener reconnects, says Missed,
	// and hears b again.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var killed int
	if err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE query LIKE 'LISTEN %' AND pid IN (SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid())
		AND query LIKE '%' || $1 || '%'`, postgres.ChannelName(a)).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed != 1 {
		t.Fatalf("terminated %d listening connections, want 1", killed)
	}
	l.until(func(c engine.Changes) bool { return c.Missed })
	ready(t, b, l)
}

// TestChangeFeedAlone: a listening store that has heard no other process
// for PresenceTTL sends no change notifications; once another store starts
// listening (and says hello), it publishes again, Missed first.
func TestChangeFeedAlone(t *testing.T) {
	stores := pgtest.NewStores(t, 2)
	a, b := stores[0], stores[1]
	var offset atomic.Int64
	postgres.SetFeedClock(a, func() time.Time { return time.Now().Add(time.Duration(offset.Load())) })
	la := listen(t, a)
	ready(t, b, la) // a listens; b does not, so it always publishes
	// ready may have sent more probes than a heard: each one a hears marks
	// b present, also after the clock moves. A last notice, heard after
	// every earlier one, says none is left on the way.
	b.PublishChanges(engine.Changes{Keys: []string{"last"}})
	la.until(func(c engine.Changes) bool { return slices.Contains(c.Keys, "last") })

	// Nothing heard for longer than PresenceTTL: a is alone.
	offset.Store(int64(2 * postgres.PresenceTTL))
	before, wakes := postgres.ChangesSent(a), postgres.PublisherWakes(a)
	for range 3 {
		a.PublishChanges(engine.Changes{Keys: []string{"alone"}, Tasks: true})
	}
	postgres.FlushChanges(a)
	if sent := postgres.ChangesSent(a) - before; sent != 0 {
		t.Fatalf("a store alone on its channel sent %d change notifications, want 0", sent)
	}
	// Nor does it wake its publisher, a goroutine per commit for nothing.
	if woke := postgres.PublisherWakes(a) - wakes; woke != 0 {
		t.Fatalf("a store alone on its channel woke its publisher %d times for 3 changes, want 0", woke)
	}

	// b starts listening: its hello reaches a, which publishes again, and
	// says Missed first: it held back changes that b, had it been listening
	// with its own notices lost, would not have heard.
	lb := listen(t, b)
	if !ready(t, a, lb) {
		t.Fatal("a held back changes while alone, yet b heard no Missed before a's next change")
	}
	if postgres.ChangesSent(a) == before {
		t.Fatal("b heard a, yet a counted no notification sent")
	}
}
