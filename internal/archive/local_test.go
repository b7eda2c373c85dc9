package archive_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/archivedoc"
	"github.com/iwf-server/iwf-server/internal/archive"
)

// TestLocalReadsWhatTheServerWrites: archivedoc.Local, which the command
// line uses to read a file:// archive without gocloud.dev, finds every
// object that a Bucket wrote through the fileblob driver the server links
// — ids whose keys the driver escapes on disk included — reads it whole,
// and picks the newest run of an id by its close time, as the Bucket
// does, not by the file's time.
func TestLocalReadsWhatTheServerWrites(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, url := range []string{"file://" + dir, "file://" + dir + "?metadata=skip"} {
		b, err := archive.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		ids := []string{"a/b", "a%2Fb", "a b", ".", "..", "x/../y", "ü?#&=+", strings.Repeat("long/", 200),
			"__0x2f__", "a__0x41__b", "tab\there", "line\nfeed", "nul\x00x", "trailing/", "//", "..%2F", "<>:\"|?*\\", "é__0x__"}
		if strings.Contains(url, "metadata=skip") {
			ids = []string{"no metadata"}
		}
		runIDs := []string{"run-late-closed", "run-early-closed", "__0x2f__", "a/b", "..", "ü"}
		for _, id := range ids {
			// Written in this order, the run that closed last has the
			// oldest file.
			for i, runID := range runIDs {
				closed := int64(9000 - i*1000)
				if i == 0 {
					closed = 10_000
				}
				r := &archive.Run{WorkflowID: id, RunID: runID, Status: "COMPLETED", ClosedMs: closed, Input: &archivedoc.Value{Data: ptr(id + "|" + runID)}}
				if err := b.Put(ctx, r, pages(3, 2, 0, nil)); err != nil {
					t.Fatalf("put %q %q: %v", id, runID, err)
				}
				if i == 0 {
					// Files a second apart at least, whatever the file
					// system's time resolution.
					old := time.Now().Add(-time.Hour)
					path := findObject(t, dir, id, runID)
					if err := os.Chtimes(path, old, old); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		b.Close()

		local, err := archivedoc.OpenLocal(url)
		if err != nil {
			t.Fatal(err)
		}
		again, err := archive.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			for _, runID := range runIDs {
				var events int
				r, err := local.Read(ctx, id, runID, func(archivedoc.Event) error { events++; return nil })
				if err != nil || r.WorkflowID != id || r.RunID != runID || *r.Input.Data != id+"|"+runID || r.HistoryEvents != 3 || events != 3 {
					t.Fatalf("local read of %q %q: %+v, %d events, %v", id, runID, r, events, err)
				}
			}
			newest, n, err := local.Newest(ctx, id)
			if err != nil || n != len(runIDs) || (!strings.Contains(url, "metadata=skip") && newest != "run-late-closed") {
				t.Fatalf("%s: local Newest of %q: %q of %d, %v; want the run that closed last of %d", url, id, newest, n, err, len(runIDs))
			}
			// The bucket agrees, but where the driver cannot list: it looks
			// for a workflow's objects under the unescaped prefix, so an id
			// holding an escape of its own ("__0x2f__") lists nothing.
			wantNewest, wantN, wantErr := again.Newest(ctx, id)
			if wantErr == nil && (newest != wantNewest || n != wantN) {
				t.Fatalf("%s: local Newest of %q: %q of %d; the bucket's: %q of %d", url, id, newest, n, wantNewest, wantN)
			}
			if wantErr != nil && !strings.Contains(id, "__0x") {
				t.Fatalf("%s: the bucket's Newest of %q: %v", url, id, wantErr)
			}
			if _, err := local.Read(ctx, id, "never", nil); !errors.Is(err, archive.ErrNotFound) {
				t.Fatalf("local read of a run not archived: %v", err)
			}
		}
		again.Close()
		if _, _, err := local.Newest(ctx, "never"); !errors.Is(err, archive.ErrNotFound) {
			t.Fatalf("local Newest of an id not archived: %v", err)
		}
	}

	// A directory that does not exist: an error, unless the URL would
	// create it; then nothing is archived.
	if _, err := archivedoc.OpenLocal("file://" + filepath.Join(dir, "none")); err == nil {
		t.Fatal("opened a directory that does not exist")
	}
	empty, err := archivedoc.OpenLocal("file://" + filepath.Join(dir, "none") + "?create_dir=1")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := empty.Newest(ctx, "a"); !errors.Is(err, archive.ErrNotFound) {
		t.Fatalf("Newest in a directory to be created: %v", err)
	}
	if _, err := archivedoc.OpenLocal("s3://bucket?region=eu-west-1"); err == nil {
		t.Fatal("OpenLocal took an s3:// URL")
	}
}

// findObject returns the file the Bucket wrote for a run: the only one
// whose object decodes to it.
func findObject(t *testing.T, dir, workflowID, runID string) string {
	t.Helper()
	var found string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, archivedoc.KeySuffix) {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return nil
		}
		defer f.Close()
		if r, err := archivedoc.Decode(f, nil); err == nil && r.WorkflowID == workflowID && r.RunID == runID {
			found = p
		}
		return nil
	})
	if found == "" {
		t.Fatalf("no file holds run %q of %q", runID, workflowID)
	}
	return found
}
