package extstore_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/iwf-server/iwf-server/internal/extstore"
)

// TestPutStream: an object streamed from a reader reads back whole; one
// whose reader fails half way is not written at all, and the reader's
// error is returned; so is one whose store fails while it is written.
func TestPutStream(t *testing.T) {
	ctx := context.Background()
	data := strings.Repeat("0123456789abcdef", 1<<17) + "tail" // 2 MiB and a bit
	cut := errors.New("the body was cut")
	half := func() io.Reader {
		return io.MultiReader(strings.NewReader(data[:1<<20]), iotest.ErrReader(cut))
	}

	t.Run("file", func(t *testing.T) {
		dir := t.TempDir()
		s, err := extstore.Open(ctx, extstore.Location{ID: "local", URL: "file://" + dir}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.PutStream(ctx, "_request/a", iotest.HalfReader(strings.NewReader(data))); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Get(ctx, "local", "_request/a"); err != nil || got != data {
			t.Fatalf("Get: %d bytes, %v", len(got), err)
		}
		if err := s.PutStream(ctx, "_request/b", half()); !errors.Is(err, cut) {
			t.Fatalf("a reader that fails: %v", err)
		}
		entries, err := os.ReadDir(filepath.Join(dir, "_request"))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Name() != "a" && e.Name() != "a.attrs" {
				t.Errorf("the failed write left %s", e.Name())
			}
		}
	})

	t.Run("s3", func(t *testing.T) {
		s, f, backend := s3Store(t)
		if err := s.PutStream(ctx, "_request/a", strings.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Get(ctx, s.ActiveID(), "_request/a"); err != nil || got != data {
			t.Fatalf("Get: %d bytes, %v", len(got), err)
		}
		if err := s.PutStream(ctx, "_request/b", half()); !errors.Is(err, cut) {
			t.Fatalf("a reader that fails: %v", err)
		}
		if _, err := backend.HeadObject("iwf-payloads", "_request/b"); err == nil {
			t.Fatal("a write whose reader failed left an object")
		}
		f.failing.Store(true)
		if err := s.PutStream(ctx, "_request/c", strings.NewReader(data)); err == nil {
			t.Fatal("a write to a failing store succeeded")
		}
		f.failing.Store(false)
		if _, err := backend.HeadObject("iwf-payloads", "_request/c"); err == nil {
			t.Fatal("a write to a failing store left an object")
		}
	})
}
