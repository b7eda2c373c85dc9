package archive_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/iwf-server/iwf-server/archivedoc"
	"github.com/iwf-server/iwf-server/internal/archive"
)

func ptr[T any](v T) *T { return &v }

// pages returns a next function that yields n events, size at a time, and
// fails with err (when not nil) once it has yielded failAfter.
func pages(n, size, failAfter int, err error) func(context.Context) ([]archive.Event, error) {
	sent := 0
	return func(context.Context) ([]archive.Event, error) {
		if err != nil && sent >= failAfter {
			return nil, err
		}
		var page []archive.Event
		for ; sent < n && len(page) < size; sent++ {
			page = append(page, archive.Event{EventID: int64(sent + 1), TimestampMs: int64(sent), EventType: "E", Data: json.RawMessage(`{"i":` + strconv.Itoa(sent) + `}`)})
		}
		return page, nil
	}
}

// roundTrip writes runs to b and reads them back: every event in order,
// the newest run of an id, an object written again replaced, a write that
// failed leaving the object before it as it was, distinct ids in
// distinct keys.
func roundTrip(t *testing.T, b *archive.Bucket) {
	ctx := context.Background()
	ids := []string{"a/b", "a%2Fb", "a b", ".", "..", "x/../y", "ü?#&=+", strings.Repeat("long/", 200)}
	for i, id := range ids {
		r := &archive.Run{WorkflowID: id, RunID: "run-1", Status: "COMPLETED", ClosedMs: 1000, Input: &archivedoc.Value{Data: ptr(id)}}
		if err := b.Put(ctx, r, pages(i+1, 2, 0, nil)); err != nil {
			t.Fatalf("put %q: %v", id, err)
		}
		if r.HistoryEvents != i+1 {
			t.Fatalf("put %q: HistoryEvents %d, want %d", id, r.HistoryEvents, i+1)
		}
	}
	for i, id := range ids {
		var got []int64
		r, err := b.Read(ctx, id, "run-1", func(ev archive.Event) error {
			if want := `{"i":` + strconv.Itoa(len(got)) + `}`; string(ev.Data) != want {
				return fmt.Errorf("event %d has data %s, want %s", ev.EventID, ev.Data, want)
			}
			got = append(got, ev.EventID)
			return nil
		})
		if err != nil || r.WorkflowID != id || *r.Input.Data != id || r.Format != archive.Format || r.HistoryEvents != i+1 || len(got) != i+1 || got[i] != int64(i+1) {
			t.Fatalf("read %q: %+v, events %v, %v", id, r, got, err)
		}
	}

	// A longer history, in pages, read back without its events.
	const id = "order-1"
	if err := b.Put(ctx, &archive.Run{WorkflowID: id, RunID: "run-1", ClosedMs: 5000}, pages(5000, 1000, 0, nil)); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, &archive.Run{WorkflowID: id, RunID: "run-2", ClosedMs: 7000}, pages(1, 1, 0, nil)); err != nil {
		t.Fatal(err)
	}
	if r, err := b.Read(ctx, id, "run-1", nil); err != nil || r.HistoryEvents != 5000 {
		t.Fatalf("read run-1: %+v, %v", r, err)
	}
	if newest, n, err := b.Newest(ctx, id); err != nil || newest != "run-2" || n != 2 {
		t.Fatalf("Newest: %s (%d), %v; want run-2 of 2", newest, n, err)
	}

	// Written again (a sweep that crashed after the write, before the
	// delete): replaced.
	if err := b.Put(ctx, &archive.Run{WorkflowID: id, RunID: "run-1", Status: "FAILED", ClosedMs: 5000}, pages(3, 2, 0, nil)); err != nil {
		t.Fatal(err)
	}
	if r, err := b.Read(ctx, id, "run-1", nil); err != nil || r.Status != "FAILED" || r.HistoryEvents != 3 {
		t.Fatalf("read run-1 written again: %+v, %v", r, err)
	}
	// A write that fails midway leaves the object before it whole, and
	// writes none where there was none.
	boom := errors.New("store unavailable")
	if err := b.Put(ctx, &archive.Run{WorkflowID: id, RunID: "run-1", ClosedMs: 5000}, pages(10, 2, 4, boom)); !errors.Is(err, boom) {
		t.Fatalf("failing put: %v", err)
	}
	if r, err := b.Read(ctx, id, "run-1", nil); err != nil || r.Status != "FAILED" || r.HistoryEvents != 3 {
		t.Fatalf("read run-1 after a failed write: %+v, %v", r, err)
	}
	if err := b.Put(ctx, &archive.Run{WorkflowID: id, RunID: "run-3", ClosedMs: 9000}, pages(10, 2, 4, boom)); !errors.Is(err, boom) {
		t.Fatalf("failing put: %v", err)
	}
	if _, err := b.Read(ctx, id, "run-3", nil); !errors.Is(err, archive.ErrNotFound) {
		t.Fatalf("read of a failed write: %v, want ErrNotFound", err)
	}
	if newest, _, err := b.Newest(ctx, id); err != nil || newest != "run-2" {
		t.Fatalf("Newest after a failed write: %s, %v", newest, err)
	}
	if _, _, err := b.Newest(ctx, "never"); !errors.Is(err, archive.ErrNotFound) {
		t.Fatalf("Newest of an unknown id: %v", err)
	}
}

func TestFile(t *testing.T) {
	dir := t.TempDir()
	b, err := archive.Open(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	roundTrip(t, b)
	// Every object lies under the bucket's directory: no id escaped it.
	var objects int
	filepath.WalkDir(filepath.Dir(dir), func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".json.gz") {
			if !strings.HasPrefix(p, filepath.Join(dir, "workflows")+string(filepath.Separator)) {
				t.Errorf("object outside the archive: %s", p)
			}
			objects++
		}
		return nil
	})
	if objects != 10 {
		t.Fatalf("%d objects, want 10", objects)
	}
}

// TestS3 runs the round trip on S3 through an in-process fake at a custom
// endpoint, with path-style addressing and credentials from the
// environment, as --archive-url takes them.
func TestS3(t *testing.T) {
	backend := s3mem.New()
	if err := backend.CreateBucket("iwf-archive"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	defer srv.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	b, err := archive.Open(context.Background(), "s3://iwf-archive?endpoint="+srv.URL+"&region=us-east-1&use_path_style=true")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	roundTrip(t, b)
}

func TestRedact(t *testing.T) {
	got := archive.Redact("s3://user:pw@bucket?region=eu-west-1&sas=secret")
	if strings.Contains(got, "pw") || strings.Contains(got, "secret") || !strings.Contains(got, "region=eu-west-1") {
		t.Fatalf("Redact: %s", got)
	}
}

// TestFileTempNextToObject: a file:// archive does not stage its objects in
// os.TempDir (a rename from there fails when the archive is a mounted
// volume on another file system); with TMPDIR pointing nowhere, writes
// still succeed. An explicit no_tmp_dir in the URL is left as given.
func TestFileTempNextToObject(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TMPDIR", filepath.Join(dir, "no-such-dir"))
	ctx := context.Background()
	b, err := archive.Open(ctx, "file://"+filepath.Join(dir, "archive")+"?create_dir=1")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Put(ctx, &archive.Run{WorkflowID: "wf", RunID: "run-1", ClosedMs: 1}, pages(3, 2, 0, nil)); err != nil {
		t.Fatalf("put with TMPDIR missing: %v", err)
	}
	if _, err := b.Read(ctx, "wf", "run-1", nil); err != nil {
		t.Fatalf("read back: %v", err)
	}
	explicit, err := archive.Open(ctx, "file://"+filepath.Join(dir, "archive")+"?no_tmp_dir=")
	if err != nil {
		t.Fatal(err)
	}
	defer explicit.Close()
	if err := explicit.Put(ctx, &archive.Run{WorkflowID: "wf", RunID: "run-2", ClosedMs: 2}, pages(3, 2, 0, nil)); err == nil {
		t.Fatal("put staged in a missing TMPDIR succeeded: the URL's own no_tmp_dir was not left as given")
	}
}
