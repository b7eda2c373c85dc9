package extstore_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/extstore"
)

func TestParseLocation(t *testing.T) {
	for _, c := range []struct{ in, id, url string }{
		{"main=file:///var/lib/iwf", "main", "file:///var/lib/iwf"},
		{" s3-main = s3://bucket?region=eu-west-1&endpoint=http://x ", "s3-main", "s3://bucket?region=eu-west-1&endpoint=http://x"},
		{"a.b_c-1=gs://b", "a.b_c-1", "gs://b"},
		{"az=azblob://container", "az", "azblob://container"},
	} {
		l, err := extstore.ParseLocation(c.in)
		if err != nil || l.ID != c.id || l.URL != c.url {
			t.Errorf("ParseLocation(%q) = %+v, %v; want %s %s", c.in, l, err, c.id, c.url)
		}
	}
	for _, in := range []string{
		"s3://bucket?region=x",      // no id: the '=' is the query's
		"file:///dir",               // no id
		"=file:///dir",              // empty id
		"a b=file:///dir",           // a space in the id
		"main=bucket-with-secret",   // no scheme
		"main=http://example.com/x", // not a blob scheme
		strings.Repeat("x", 65) + "=file:///d",
	} {
		if _, err := extstore.ParseLocation(in); err == nil {
			t.Errorf("ParseLocation(%q) accepted", in)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseLocation(%q): the error echoes the URL: %v", in, err)
		}
	}
}

// roundTrip writes, reads and deletes objects of the active store s.
func roundTrip(t *testing.T, s *extstore.Store) {
	t.Helper()
	ctx := context.Background()
	big := strings.Repeat("0123456789abcdef", 1<<17) + "tail" // 2 MiB and a bit: several chunks
	for path, data := range map[string]string{"wf/a": "small", "wf/b": big, "wf/empty": ""} {
		if err := s.Put(ctx, path, data); err != nil {
			t.Fatalf("Put %s: %v", path, err)
		}
		got, err := s.Get(ctx, s.ActiveID(), path)
		if err != nil || got != data {
			t.Fatalf("Get %s: %d bytes, %v; want %d bytes", path, len(got), err, len(data))
		}
	}
	if _, err := s.Get(ctx, s.ActiveID(), "wf/none"); !errors.Is(err, engine.ErrPayloadMissing) {
		t.Fatalf("Get of a missing object: %v, want ErrPayloadMissing", err)
	}
	if _, err := s.Get(ctx, "other", "wf/a"); !errors.Is(err, engine.ErrPayloadStoreUnknown) {
		t.Fatalf("Get from an unknown store: %v, want ErrPayloadStoreUnknown", err)
	}
	if err := s.Delete(ctx, s.ActiveID(), "wf/a"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if err := s.Delete(ctx, s.ActiveID(), "wf/a"); err != nil {
		t.Fatalf("Delete of a deleted object: %v, want none", err)
	}
	if _, err := s.Get(ctx, s.ActiveID(), "wf/a"); !errors.Is(err, engine.ErrPayloadMissing) {
		t.Fatalf("Get after Delete: %v", err)
	}
}

func TestFile(t *testing.T) {
	dir := t.TempDir()
	s, err := extstore.Open(context.Background(), extstore.Location{ID: "local", URL: "file://" + dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	roundTrip(t, s)
	if _, err := os.Stat(filepath.Join(dir, "wf", "b")); err != nil {
		t.Fatalf("the object is not a file under the bucket's directory: %v", err)
	}
}

// TestReadStores: an older store stays readable beside the active one,
// and ids are unique.
func TestReadStores(t *testing.T) {
	ctx := context.Background()
	oldDir, newDir := t.TempDir(), t.TempDir()
	old, err := extstore.Open(ctx, extstore.Location{ID: "old", URL: "file://" + oldDir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Put(ctx, "wf/x", "from the old store"); err != nil {
		t.Fatal(err)
	}
	old.Close()
	s, err := extstore.Open(ctx, extstore.Location{ID: "new", URL: "file://" + newDir},
		[]extstore.Location{{ID: "old", URL: "file://" + oldDir}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.Get(ctx, "old", "wf/x"); err != nil || got != "from the old store" {
		t.Fatalf("Get from the read store: %q, %v", got, err)
	}
	if ids := s.StoreIDs(); len(ids) != 2 || ids[0] != "new" || ids[1] != "old" {
		t.Fatalf("StoreIDs = %v", ids)
	}
	if _, err := extstore.Open(ctx, extstore.Location{ID: "a", URL: "file://" + newDir},
		[]extstore.Location{{ID: "a", URL: "file://" + oldDir}}); err == nil {
		t.Fatal("two stores with one id were accepted")
	}
	// Read stores only: nothing is active.
	ro, err := extstore.Open(ctx, extstore.Location{}, []extstore.Location{{ID: "old", URL: "file://" + oldDir}})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if ro.ActiveID() != "" {
		t.Fatalf("ActiveID of read stores = %q", ro.ActiveID())
	}
	if err := ro.Put(ctx, "wf/y", "x"); !errors.Is(err, engine.ErrPayloadStoreUnknown) {
		t.Fatalf("Put without an active store: %v", err)
	}
}

// TestOpenRefusesAMissingBucket: a server whose active store cannot be
// reached does not start.
func TestOpenRefusesAMissingBucket(t *testing.T) {
	_, err := extstore.Open(context.Background(), extstore.Location{ID: "x", URL: "file://" + filepath.Join(t.TempDir(), "none")}, nil)
	if err == nil {
		t.Fatal("a bucket that does not exist was opened")
	}
}

// flaky wraps an S3 handler: while failing is set, a PUT fails after the
// server has read part of its body (a store that breaks mid-write), and
// every other request fails at once, with a 503.
type flaky struct {
	next    http.Handler
	failing atomic.Bool
	puts    atomic.Int64
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.failing.Load() {
		if r.Method == http.MethodPut {
			f.puts.Add(1)
			_, _ = io.CopyN(io.Discard, r.Body, 1<<10) // part of the object arrives
		}
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>ServiceUnavailable</Code><Message>down</Message></Error>`)
		return
	}
	f.next.ServeHTTP(w, r)
}

// s3Store starts an in-process S3 (gofakes3) behind a flaky handler and
// opens it as the active store, with credentials from the environment as
// --external-storage-url takes them.
func s3Store(t *testing.T) (*extstore.Store, *flaky, *s3mem.Backend) {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket("iwf-payloads"); err != nil {
		t.Fatal(err)
	}
	f := &flaky{next: gofakes3.New(backend).Server()}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	l, err := extstore.ParseLocation("s3-test=s3://iwf-payloads?endpoint=" + srv.URL + "&region=us-east-1&use_path_style=true")
	if err != nil {
		t.Fatal(err)
	}
	s, err := extstore.Open(context.Background(), l, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, f, backend
}

func TestS3(t *testing.T) {
	s, _, _ := s3Store(t)
	roundTrip(t, s)
}

// TestS3FailsMidWrite: a store that breaks while an object is written
// fails the Put, leaves no object behind, and works again once it is
// back; reads and deletes fail while it is down.
func TestS3FailsMidWrite(t *testing.T) {
	ctx := context.Background()
	s, f, backend := s3Store(t)
	if err := s.Put(ctx, "wf/kept", "before the outage"); err != nil {
		t.Fatal(err)
	}
	f.failing.Store(true)
	big := strings.Repeat("x", 256<<10)
	if err := s.Put(ctx, "wf/broken", big); err == nil {
		t.Fatal("a write to a failing store succeeded")
	}
	if f.puts.Load() == 0 {
		t.Fatal("the write never reached the store")
	}
	if _, err := s.Get(ctx, s.ActiveID(), "wf/kept"); err == nil || errors.Is(err, engine.ErrPayloadMissing) {
		t.Fatalf("Get from a failing store: %v, want an error other than ErrPayloadMissing", err)
	}
	if err := s.Delete(ctx, s.ActiveID(), "wf/kept"); err == nil {
		t.Fatal("a delete on a failing store succeeded")
	}
	f.failing.Store(false)
	if _, err := backend.HeadObject("iwf-payloads", "wf/broken"); err == nil {
		t.Fatal("the failed write left an object")
	}
	if got, err := s.Get(ctx, s.ActiveID(), "wf/kept"); err != nil || got != "before the outage" {
		t.Fatalf("Get after the outage: %q, %v", got, err)
	}
	if err := s.Put(ctx, "wf/broken", big); err != nil {
		t.Fatalf("Put after the outage: %v", err)
	}
	if got, err := s.Get(ctx, s.ActiveID(), "wf/broken"); err != nil || got != big {
		t.Fatalf("Get of the rewritten object: %d bytes, %v", len(got), err)
	}
}
