//go:build unix

package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/internal/store/sqlite"
)

// TestOneOwnerPerFile: while a store has a file open, a second Open of it
// fails at once, naming the owner's pid, and changes nothing; once the
// owner closes, the file opens again.
func TestOneOwnerPerFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "iwf.db")
	first := newStore(t, path)
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}

	second, err := sqlite.Open(ctx, path)
	if err == nil {
		second.Close()
		t.Fatal("a second Open of an owned file succeeded")
	}
	want := fmt.Sprintf("is in use by another iwf-server (pid %d)", os.Getpid())
	if !errors.Is(err, sqlite.ErrInUse) || !strings.Contains(err.Error(), want) {
		t.Fatalf("second Open: %v; want ErrInUse and %q", err, want)
	}
	if after, err := os.Stat(path); err != nil || !after.ModTime().Equal(info.ModTime()) || after.Size() != info.Size() {
		t.Fatalf("the refused Open touched the database file: %v", err)
	}
	if err := first.Ping(ctx); err != nil {
		t.Fatalf("the owner stopped working: %v", err)
	}

	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("Open after the owner closed: %v", err)
	}
	again.Close()
}
