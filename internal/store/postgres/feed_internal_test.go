package postgres

import (
	"sync"
	"testing"
)

// TestTakeSharesNoMap: take must not read, after it lets the lock go, a
// map that PublishChanges goes on writing. It once kept the feed's empty
// key map and ranged over it unlocked: a data race (go test -race), and
// at worst the runtime's fatal "concurrent map iteration and map write".
func TestTakeSharesNoMap(t *testing.T) {
	f := newFeed(nil, "s")
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() { // PublishChanges' write, without starting a publisher
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			f.mu.Lock()
			if i%2 == 0 {
				f.keys["k"] = struct{}{}
			} else {
				delete(f.keys, "k")
			}
			f.mu.Unlock()
		}
	}()
	for range 20000 {
		f.take()
	}
	close(stop)
	wg.Wait()
}
