// Package extstore is the server's external payload store (iWF's
// "external storage"): the engine writes payloads larger than a threshold
// to it and keeps their references in its rows (see engine/payloads.go).
//
// It implements engine.PayloadStore on gocloud.dev/blob buckets, opened by
// URL with internal/archive's opener (file:///dir, s3://bucket?region=…,
// gs://bucket, azblob://container). One bucket is active: new payloads are
// written to it. Others, named by --external-storage-read-url, are read
// only: payloads written while an older store was active stay readable
// after the active one changes. Each store has an id, which is the
// extStoreId of the references to its objects.
//
// An object holds a payload's data as it is (the encoded object's data
// string, not JSON): the encoding stays in the row. The package imports the
// engine (for its interface and errors) and internal/archive.
package extstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/archive"
)

// Location is one external store: its id and its bucket's URL.
type Location struct {
	ID  string
	URL string
}

// MaxIDBytes bounds a store id.
const MaxIDBytes = 64

// CheckID reports a store id that is empty, longer than MaxIDBytes or
// holds a byte other than an ASCII letter, a digit, '-', '_' or '.'.
func CheckID(id string) error {
	if id == "" || len(id) > MaxIDBytes {
		return fmt.Errorf("store id %q: want 1 to %d characters", id, MaxIDBytes)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("store id %q: only letters, digits, '-', '_' and '.' are allowed", id)
		}
	}
	return nil
}

// ParseLocation reads a store given as ID=URL, such as
// s3-main=s3://bucket?region=eu-west-1. The id comes first because a URL
// may hold '=' in its query. Errors do not echo the URL, which may hold a
// secret.
func ParseLocation(s string) (Location, error) {
	s = strings.TrimSpace(s)
	id, raw, ok := strings.Cut(s, "=")
	id = strings.TrimSpace(id)
	if !ok || strings.Contains(id, "://") || strings.Contains(id, "?") {
		return Location{}, errors.New("want ID=URL, such as s3-main=s3://bucket?region=eu-west-1 or local=file:///var/lib/iwf/payloads")
	}
	if err := CheckID(id); err != nil {
		return Location{}, err
	}
	raw = strings.TrimSpace(raw)
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return Location{}, fmt.Errorf("store %s: want a URL with a scheme, such as file:///var/lib/iwf/payloads or s3://bucket?region=eu-west-1", id)
	}
	switch u.Scheme {
	case "file", "s3", "gs", "azblob":
	default:
		return Location{}, fmt.Errorf("store %s: unsupported scheme %q: want file, s3, gs or azblob", id, u.Scheme)
	}
	return Location{ID: id, URL: raw}, nil
}

// String is the location as ID=URL, with the URL redacted for logs.
func (l Location) String() string { return l.ID + "=" + archive.Redact(l.URL) }

// Store is a set of opened external stores.
type Store struct {
	active  string
	ids     []string
	buckets map[string]*blob.Bucket
	// opTimeout bounds each Put, Get and Delete (OperationTimeout).
	opTimeout time.Duration
}

// OperationTimeout bounds one Put, Get or Delete of a whole object, so
// that a store that hangs, or a client that retries without end (the GCS
// client retries a read that a 5xx answers until its context ends), fails
// the operation: the engine then retries it as it retries any store
// trouble (a worker call a second later, an API call by its client).
// A minute moves the largest payload a request can carry (64 MiB by
// default) at about 1 MiB/s. PutStream is bound by its request instead.
const OperationTimeout = time.Minute

var _ engine.PayloadStore = (*Store)(nil)

// openTimeout bounds the check that a bucket can be reached at start.
const openTimeout = 30 * time.Second

// Open opens the active store (none when active.ID is "": then the
// stores are only read) and the read-only ones. Ids must be unique. The
// active bucket must answer: a server that could not write its payloads
// refuses to start.
func Open(ctx context.Context, active Location, reads []Location) (*Store, error) {
	s := &Store{active: active.ID, buckets: map[string]*blob.Bucket{}, opTimeout: OperationTimeout}
	all := reads
	if active.ID != "" {
		all = append([]Location{active}, reads...)
	}
	for _, l := range all {
		if err := CheckID(l.ID); err != nil {
			s.Close()
			return nil, fmt.Errorf("external storage: %w", err)
		}
		if _, dup := s.buckets[l.ID]; dup {
			s.Close()
			return nil, fmt.Errorf("external storage: the store id %q is given twice", l.ID)
		}
		b, err := archive.OpenBucket(ctx, l.URL)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("external storage %s: %w", l.ID, err)
		}
		s.buckets[l.ID] = b
		s.ids = append(s.ids, l.ID)
	}
	if active.ID != "" {
		cctx, cancel := context.WithTimeout(ctx, openTimeout)
		ok, err := s.buckets[active.ID].IsAccessible(cctx)
		cancel()
		if err != nil || !ok {
			s.Close()
			if err == nil {
				err = errors.New("the bucket does not exist")
			}
			return nil, fmt.Errorf("external storage %s: %w", active, err)
		}
	}
	return s, nil
}

// Close closes the buckets.
func (s *Store) Close() error {
	var errs []error
	for _, b := range s.buckets {
		errs = append(errs, b.Close())
	}
	return errors.Join(errs...)
}

// ActiveID implements engine.PayloadStore.
func (s *Store) ActiveID() string { return s.active }

// StoreIDs implements engine.PayloadStore.
func (s *Store) StoreIDs() []string { return slices.Clone(s.ids) }

// putChunk is how much of a payload is copied at a time on its way to
// the bucket: the data is a string, and the writer takes bytes.
const putChunk = 1 << 20

// Put implements engine.PayloadStore. The object appears whole or not at
// all: a write that fails or is cancelled is abandoned.
func (s *Store) Put(ctx context.Context, path, data string) error {
	b := s.buckets[s.active]
	if b == nil {
		return fmt.Errorf("%w: no active store", engine.ErrPayloadStoreUnknown)
	}
	wctx, cancel := context.WithTimeout(ctx, s.opTimeout)
	defer cancel()
	w, err := b.NewWriter(wctx, path, &blob.WriterOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return err
	}
	for len(data) > 0 {
		n := min(len(data), putChunk)
		if _, err := w.Write([]byte(data[:n])); err != nil {
			cancel() // abandons the write
			_ = w.Close()
			return err
		}
		data = data[n:]
	}
	return w.Close()
}

// PutStream implements engine.PayloadStore: it copies what r reads to
// the bucket's writer, holding no more of it than the writer buffers: one
// upload part at a time (the driver's default part: 8 MiB on S3, a 16 MiB
// chunk on GCS, an 8 MiB block on Azure; a 1 MiB copy buffer on file://).
// The object appears whole or not at all: a write whose reader or bucket
// fails, or whose ctx ends, is abandoned.
func (s *Store) PutStream(ctx context.Context, path string, r io.Reader) error {
	b := s.buckets[s.active]
	if b == nil {
		return fmt.Errorf("%w: no active store", engine.ErrPayloadStoreUnknown)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// One part in flight: parts uploaded side by side would each be
	// buffered, several times what a request body holds otherwise.
	w, err := b.NewWriter(wctx, path, &blob.WriterOptions{ContentType: "application/octet-stream", MaxConcurrency: 1})
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, r); err != nil {
		cancel() // abandons the write
		_ = w.Close()
		return err
	}
	return w.Close()
}

// Get implements engine.PayloadStore.
func (s *Store) Get(ctx context.Context, storeID, path string) (string, error) {
	b := s.buckets[storeID]
	if b == nil {
		return "", fmt.Errorf("%w: %q", engine.ErrPayloadStoreUnknown, storeID)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opTimeout)
	defer cancel()
	r, err := b.NewReader(ctx, path, nil)
	if err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return "", fmt.Errorf("%w: %s", engine.ErrPayloadMissing, err)
		}
		return "", err
	}
	defer r.Close()
	var sb strings.Builder
	if n := r.Size(); n > 0 {
		sb.Grow(int(n))
	}
	if _, err := io.Copy(&sb, r); err != nil {
		return "", err
	}
	return sb.String(), nil
}

// Delete implements engine.PayloadStore.
func (s *Store) Delete(ctx context.Context, storeID, path string) error {
	b := s.buckets[storeID]
	if b == nil {
		return fmt.Errorf("%w: %q", engine.ErrPayloadStoreUnknown, storeID)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opTimeout)
	defer cancel()
	if err := b.Delete(ctx, path); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return err
	}
	return nil
}
