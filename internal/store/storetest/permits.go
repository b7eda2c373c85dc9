package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
)

// permitTests check engine.PermitStore: the count of a concurrency limit,
// its FIFO queue, leases that expire and are renewed, a rate limit's
// token bucket, and acquisitions racing each other.
var permitTests = []struct {
	name string
	fn   func(t *testing.T, s engine.Store)
}{
	{"PermitConcurrencyFIFO", testPermitConcurrencyFIFO},
	{"PermitLeaseExpiryAndRenewal", testPermitLease},
	{"PermitRate", testPermitRate},
	{"PermitReleaseAndWaiting", testPermitReleaseAndWaiting},
	{"PermitConcurrentAcquire", testPermitConcurrentAcquire},
}

func permitStore(t *testing.T, s engine.Store) engine.PermitStore {
	t.Helper()
	ps, ok := s.(engine.PermitStore)
	if !ok {
		t.Skip("the store keeps no permits")
	}
	return ps
}

// acquire asks for a permit of a concurrency limit of n (rate 0) or of a
// rate limit (n 0) at now, for waiter w of owner, waiting since since.
func acquire(t *testing.T, ps engine.PermitStore, key string, n int, rate float64, w int64, owner string, since, now time.Time) engine.PermitGrant {
	t.Helper()
	g, err := ps.PermitAcquire(ctxT(t), engine.PermitRequest{Key: key, Waiter: w, Owner: owner, WaitingSince: since, Now: now,
		LeaseDuration: 10 * time.Second, Concurrency: n, Rate: rate, Burst: 1})
	if err != nil {
		t.Fatalf("PermitAcquire %s waiter %d: %v", key, w, err)
	}
	return g
}

func granted(t *testing.T, what string, g engine.PermitGrant, want bool) {
	t.Helper()
	if g.Granted != want {
		t.Fatalf("%s: granted %v, want %v (%+v)", what, g.Granted, want, g)
	}
}

func testPermitConcurrencyFIFO(t *testing.T, s engine.Store) {
	ps := permitStore(t, s)
	const k = "worker:w:1"
	granted(t, "1st", acquire(t, ps, k, 2, 0, 1, "a", at(0), at(0)), true)
	g := acquire(t, ps, k, 2, 0, 2, "b", at(1*time.Millisecond), at(1*time.Millisecond))
	granted(t, "2nd", g, true)
	equal(t, "free after the 2nd", g.Free, 0)
	granted(t, "3rd (full)", acquire(t, ps, k, 2, 0, 3, "a", at(2*time.Millisecond), at(2*time.Millisecond)), false)
	// Asking again for a held permit is granted without taking another.
	granted(t, "1st again", acquire(t, ps, k, 2, 0, 1, "a", at(5*time.Millisecond), at(5*time.Millisecond)), true)
	// Another key counts apart.
	granted(t, "other key", acquire(t, ps, "type:T", 1, 0, 3, "a", at(2*time.Millisecond), at(2*time.Millisecond)), true)
	// Waiter 4 began to wait before waiter 3: it is served first.
	g = acquire(t, ps, k, 2, 0, 4, "b", at(-time.Second), at(3*time.Millisecond))
	granted(t, "4th (full)", g, false)
	if _, err := ps.PermitRelease(ctxT(t), "a", []int64{1}); err != nil {
		t.Fatal(err)
	}
	g = acquire(t, ps, k, 2, 0, 3, "a", at(time.Hour), at(4*time.Millisecond)) // keeps its first WaitingSince
	granted(t, "3rd with 4th ahead", g, false)
	equal(t, "waiters ahead of the 3rd", g.Ahead, 1)
	granted(t, "4th after a release", acquire(t, ps, k, 2, 0, 4, "b", at(-time.Second), at(5*time.Millisecond)), true)
	granted(t, "3rd still behind", acquire(t, ps, k, 2, 0, 3, "a", at(2*time.Millisecond), at(6*time.Millisecond)), false)
	if _, err := ps.PermitRelease(ctxT(t), "b", []int64{2}); err != nil {
		t.Fatal(err)
	}
	granted(t, "3rd at last", acquire(t, ps, k, 2, 0, 3, "a", at(2*time.Millisecond), at(7*time.Millisecond)), true)
}

func testPermitLease(t *testing.T, s engine.Store) {
	ps := permitStore(t, s)
	const k = "worker:w:2"
	granted(t, "a holds", acquire(t, ps, k, 1, 0, 1, "a", at(0), at(0)), true)
	granted(t, "b waits", acquire(t, ps, k, 1, 0, 2, "b", at(time.Millisecond), at(time.Millisecond)), false)
	// a renews at 8s: its lease runs to 18s; b's row is renewed too.
	held, err := ps.PermitRenew(ctxT(t), "a", []int64{1, 2}, at(8*time.Second), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "held permits renewed", held, []int64{1})
	if held, err = ps.PermitRenew(ctxT(t), "b", []int64{2}, at(8*time.Second), 10*time.Second); err != nil || len(held) != 0 {
		t.Fatalf("renewing a waiting row: %v %v", held, err)
	}
	granted(t, "b at 12s (a renewed)", acquire(t, ps, k, 1, 0, 2, "b", at(time.Millisecond), at(12*time.Second)), false)
	// a stops renewing (it died): at 19s its permit is b's.
	granted(t, "b at 19s", acquire(t, ps, k, 1, 0, 2, "b", at(time.Millisecond), at(19*time.Second)), true)
	if held, err = ps.PermitRenew(ctxT(t), "a", []int64{1}, at(19*time.Second), 10*time.Second); err != nil || len(held) != 0 {
		t.Fatalf("renewing an expired permit: %v %v", held, err)
	}
	// A waiter's row that is not renewed expires as well: it no longer
	// stands ahead.
	granted(t, "c waits", acquire(t, ps, k, 1, 0, 3, "c", at(20*time.Second), at(20*time.Second)), false)
	granted(t, "d waits behind c", acquire(t, ps, k, 1, 0, 4, "d", at(21*time.Second), at(21*time.Second)), false)
	if _, err := ps.PermitRelease(ctxT(t), "b", nil); err != nil {
		t.Fatal(err)
	}
	g := acquire(t, ps, k, 1, 0, 4, "d", at(21*time.Second), at(25*time.Second))
	granted(t, "d behind c's live row", g, false)
	equal(t, "ahead of d", g.Ahead, 1)
	granted(t, "d once c's row expired", acquire(t, ps, k, 1, 0, 4, "d", at(21*time.Second), at(31*time.Second)), true)
	// The same waiter under another owner (its task taken over) does not
	// take over a live row: the permit is never counted twice.
	granted(t, "waiter 4 under owner e, d's row live", acquire(t, ps, k, 1, 0, 4, "e", at(21*time.Second), at(35*time.Second)), false)
	// Once the row expired, the new owner takes the waiter's place.
	granted(t, "waiter 4 under owner e", acquire(t, ps, k, 1, 0, 4, "e", at(21*time.Second), at(42*time.Second)), true)
}

func testPermitRate(t *testing.T, s engine.Store) {
	ps := permitStore(t, s)
	const k = "rate:w:3"
	granted(t, "first token", acquire(t, ps, k, 0, 2, 1, "a", at(0), at(0)), true)
	g := acquire(t, ps, k, 0, 2, 2, "a", at(0), at(0))
	granted(t, "second at once", g, false)
	if g.RetryAfter <= 0 || g.RetryAfter > 500*time.Millisecond {
		t.Fatalf("RetryAfter %s, want (0, 500ms]", g.RetryAfter)
	}
	g = acquire(t, ps, k, 0, 2, 3, "b", at(time.Millisecond), at(time.Millisecond))
	granted(t, "third at once", g, false)
	if g.Ahead != 1 || g.RetryAfter <= 500*time.Millisecond || g.RetryAfter > time.Second {
		t.Fatalf("third: %+v, want 1 ahead, RetryAfter in (500ms, 1s]", g)
	}
	// At 500ms one token is there: the oldest waiter takes it, not the third.
	granted(t, "third at 500ms", acquire(t, ps, k, 0, 2, 3, "b", at(time.Millisecond), at(500*time.Millisecond)), false)
	granted(t, "second at 500ms", acquire(t, ps, k, 0, 2, 2, "a", at(0), at(500*time.Millisecond)), true)
	granted(t, "third at 999ms", acquire(t, ps, k, 0, 2, 3, "b", at(time.Millisecond), at(999*time.Millisecond)), false)
	granted(t, "third at 1s", acquire(t, ps, k, 0, 2, 3, "b", at(time.Millisecond), at(time.Second)), true)
	// The bucket holds one token at most: after a pause of 10s, one call
	// goes at once, the next waits.
	granted(t, "after a pause", acquire(t, ps, k, 0, 2, 4, "a", at(11*time.Second), at(11*time.Second)), true)
	granted(t, "burst of one", acquire(t, ps, k, 0, 2, 5, "a", at(11*time.Second), at(11*time.Second)), false)
}

func testPermitReleaseAndWaiting(t *testing.T, s engine.Store) {
	ps := permitStore(t, s)
	granted(t, "a type", acquire(t, ps, "type:T", 1, 0, 1, "a", at(0), at(0)), true)
	granted(t, "a worker", acquire(t, ps, "worker:w:4", 1, 0, 1, "a", at(0), at(0)), true)
	granted(t, "b waits", acquire(t, ps, "type:T", 1, 0, 2, "b", at(time.Second), at(time.Second)), false)
	w, err := ps.PermitWaiting(ctxT(t), []int64{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "waiting", w, map[int64]engine.PermitWait{2: {Key: "type:T", Since: ms(at(time.Second))}})
	keys, err := ps.PermitRelease(ctxT(t), "a", []int64{1})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "released keys", keys, []string{"type:T", "worker:w:4"})
	if keys, err = ps.PermitRelease(ctxT(t), "a", []int64{1}); err != nil || len(keys) != 0 {
		t.Fatalf("releasing again: %v %v", keys, err)
	}
	granted(t, "c", acquire(t, ps, "worker:w:4", 1, 0, 3, "c", at(0), at(0)), true)
	n, err := ps.PermitReleaseOthers(ctxT(t), "c")
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "rows of others released", n, int64(1))
	if w, err = ps.PermitWaiting(ctxT(t), []int64{2}); err != nil || len(w) != 0 {
		t.Fatalf("waiting after ReleaseOthers: %v %v", w, err)
	}
	granted(t, "d waits for c", acquire(t, ps, "worker:w:4", 1, 0, 4, "d", at(0), at(0)), false)
	if keys, err = ps.PermitRelease(ctxT(t), "c", nil); err != nil {
		t.Fatal(err)
	}
	equal(t, "keys of all c's rows", keys, []string{"worker:w:4"})
	granted(t, "d", acquire(t, ps, "worker:w:4", 1, 0, 4, "d", at(0), at(0)), true)
}

func testPermitConcurrentAcquire(t *testing.T, s engine.Store) {
	ps := permitStore(t, s)
	const n, waiters = 3, 24
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		got   []int64
		errs  []error
		start = make(chan struct{})
	)
	for i := 1; i <= waiters; i++ {
		wg.Add(1)
		go func(w int64) {
			defer wg.Done()
			<-start
			g, err := ps.PermitAcquire(context.Background(), engine.PermitRequest{Key: "type:C", Waiter: w, Owner: fmt.Sprint("node", w%2),
				WaitingSince: at(0), Now: at(0), LeaseDuration: time.Minute, Concurrency: n})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else if g.Granted {
				got = append(got, w)
			}
		}(int64(i))
	}
	close(start)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	waitDone(t, "concurrent acquisitions", done)
	if len(errs) > 0 {
		t.Fatalf("PermitAcquire: %v", errs)
	}
	if len(got) != n {
		t.Fatalf("%d permits granted (%v), limit %d", len(got), got, n)
	}
}
