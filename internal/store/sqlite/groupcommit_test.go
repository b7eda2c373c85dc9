package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/iwf-server/iwf-server/engine"
)

// TestGroupCommitIsolatesFailures runs many concurrent Updates, so that the
// writer batches them, where every third one fails after writing: exactly
// the others' writes must persist.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	s := newStore(t, filepath.Join(t.TempDir(), "iwf.db"))
	ctx := context.Background()
	errBoom := errors.New("boom")
	const n = 300
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs[i] = s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
				if err := tx.DataAttributeUpsert(ctx, "run", []*engine.Attribute{{Key: fmt.Sprintf("k%03d", i), Value: []byte(`1`)}}); err != nil {
					return err
				}
				if i%3 == 0 {
					return errBoom
				}
				return nil
			})
		}(i)
	}
	wg.Wait()
	var attrs []*engine.Attribute
	if err := s.View(ctx, func(ctx context.Context, tx engine.ReadTx) (err error) {
		attrs, err = tx.DataAttributeGet(ctx, "run", nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, a := range attrs {
		got[a.Key] = true
	}
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("k%03d", i)
		if i%3 == 0 {
			if !errors.Is(errs[i], errBoom) || got[key] {
				t.Fatalf("update %d: err %v, persisted %v; want boom and nothing persisted", i, errs[i], got[key])
			}
		} else if errs[i] != nil || !got[key] {
			t.Fatalf("update %d: err %v, persisted %v; want success", i, errs[i], got[key])
		}
	}
}
