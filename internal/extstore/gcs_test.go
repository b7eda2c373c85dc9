package extstore_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/extstore"
)

// flakyGCS wraps a GCS JSON API handler: while failing is set, an upload
// (a POST or PUT with a body) fails after the server has read part of it
// (a store that breaks mid-write), and every other request fails at once,
// with a 503. Each failed read is sent on gets, when it is set.
type flakyGCS struct {
	next    http.Handler
	failing atomic.Bool
	uploads atomic.Int64
	gets    chan struct{}
}

func (f *flakyGCS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.failing.Load() {
		switch r.Method {
		case http.MethodPost, http.MethodPut:
			f.uploads.Add(1)
			_, _ = io.CopyN(io.Discard, r.Body, 1<<10) // part of the object arrives
		case http.MethodGet:
			if f.gets != nil {
				select {
				case f.gets <- struct{}{}:
				default:
				}
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":{"code":503,"message":"down"}}`)
		return
	}
	f.next.ServeHTTP(w, r)
}

// gcsStore starts an in-process GCS (fake-gcs-server's JSON API) behind a
// flaky handler and opens it as the active store by its gs:// URL, as
// --external-storage-url does: gocloud's gcsblob sends a gs:// bucket's
// requests to STORAGE_EMULATOR_HOST, without credentials, when it is set.
func gcsStore(t *testing.T) (*extstore.Store, *flakyGCS, *fakestorage.Server) {
	t.Helper()
	s, f, fake, _ := gcsStoreServer(t)
	return s, f, fake
}

// gcsStoreServer is gcsStore, with the HTTP server in front of the fake.
func gcsStoreServer(t *testing.T) (*extstore.Store, *flakyGCS, *fakestorage.Server, *httptest.Server) {
	t.Helper()
	f := &flakyGCS{}
	srv := httptest.NewUnstartedServer(f)
	host := srv.Listener.Addr().String()
	// The GCS client reads objects through the XML API, which the fake
	// serves on its public host only.
	fake, err := fakestorage.NewServerWithOptions(fakestorage.Options{NoListener: true, PublicHost: host})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Stop)
	fake.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "iwf-payloads"})
	f.next = fake.HTTPHandler()
	srv.Start()
	t.Cleanup(srv.Close)
	t.Setenv("STORAGE_EMULATOR_HOST", host)
	l, err := extstore.ParseLocation("gcs-test=gs://iwf-payloads")
	if err != nil {
		t.Fatal(err)
	}
	s, err := extstore.Open(context.Background(), l, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, f, fake, srv
}

func TestGCS(t *testing.T) {
	s, _, fake := gcsStore(t)
	roundTrip(t, s)
	o, err := fake.GetObject("iwf-payloads", "wf/b")
	if err != nil || len(o.Content) != 2<<20+len("tail") {
		t.Fatalf("the object as GCS holds it: %d bytes, %v", len(o.Content), err)
	}
}

// TestGCSOpenRefusesAMissingBucket: a gs:// store whose bucket does not
// exist is not opened.
func TestGCSOpenRefusesAMissingBucket(t *testing.T) {
	gcsStore(t) // sets STORAGE_EMULATOR_HOST
	if _, err := extstore.Open(context.Background(), extstore.Location{ID: "x", URL: "gs://no-such-bucket"}, nil); err == nil {
		t.Fatal("a bucket that does not exist was opened")
	}
}

// TestGCSFailsMidWrite: a store that breaks while an object is written
// fails the Put, leaves no object behind, and works again once it is
// back; a delete fails while it is down, and a read, which the GCS client
// retries, fails when its context ends.
func TestGCSFailsMidWrite(t *testing.T) {
	ctx := context.Background()
	s, f, fake := gcsStore(t)
	if err := s.Put(ctx, "wf/kept", "before the outage"); err != nil {
		t.Fatal(err)
	}
	f.gets = make(chan struct{}, 1)
	f.failing.Store(true)
	big := strings.Repeat("x", 256<<10)
	if err := s.Put(ctx, "wf/broken", big); err == nil {
		t.Fatal("a write to a failing store succeeded")
	}
	if f.uploads.Load() == 0 {
		t.Fatal("the write never reached the store")
	}
	if err := s.Delete(ctx, s.ActiveID(), "wf/kept"); err == nil {
		t.Fatal("a delete on a failing store succeeded")
	}
	// The GCS client retries a read that a 503 answers until its context
	// ends: the read is cancelled once the store has refused it twice.
	gctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := s.Get(gctx, s.ActiveID(), "wf/kept")
		done <- err
	}()
	<-f.gets
	<-f.gets
	cancel()
	if err := <-done; err == nil || errors.Is(err, engine.ErrPayloadMissing) {
		t.Fatalf("Get from a failing store: %v, want an error other than ErrPayloadMissing", err)
	}
	f.failing.Store(false)
	if _, err := fake.GetObject("iwf-payloads", "wf/broken"); err == nil {
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

// TestGCSReadGivesUp: a read from a store that keeps failing, which the
// GCS client would retry until its context ends, fails once
// OperationTimeout has passed, even when the caller's context has no
// deadline (a worker call's task): the engine then retries it itself.
func TestGCSReadGivesUp(t *testing.T) {
	s, f, _ := gcsStore(t)
	ctx := context.Background()
	if err := s.Put(ctx, "wf/kept", "before the outage"); err != nil {
		t.Fatal(err)
	}
	extstore.SetOperationTimeout(s, 300*time.Millisecond)
	f.failing.Store(true)
	_, err := s.Get(ctx, s.ActiveID(), "wf/kept")
	if err == nil || errors.Is(err, engine.ErrPayloadMissing) {
		t.Fatalf("Get from a store that keeps failing: %v, want an error other than ErrPayloadMissing", err)
	}
	if err := s.Delete(ctx, s.ActiveID(), "wf/kept"); err == nil {
		t.Fatal("a delete on a failing store succeeded")
	}
	f.failing.Store(false)
	if got, err := s.Get(ctx, s.ActiveID(), "wf/kept"); err != nil || got != "before the outage" {
		t.Fatalf("Get once the store is back: %q, %v", got, err)
	}
}

// TestGCSStopped: a write to a store that is gone (nothing listens at its
// address any more) fails; it is not retried without end.
func TestGCSStopped(t *testing.T) {
	ctx := context.Background()
	s, _, _, srv := gcsStoreServer(t)
	if err := s.Put(ctx, "wf/a", "up"); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if err := s.Put(ctx, "wf/b", strings.Repeat("x", 256<<10)); err == nil {
		t.Fatal("a write to a stopped store succeeded")
	}
	if err := s.Delete(ctx, s.ActiveID(), "wf/a"); err == nil {
		t.Fatal("a delete on a stopped store succeeded")
	}
}
