// Package archive writes closed workflow runs to a blob store before
// retention deletes them, and reads them back.
//
// It is the one seam between the server and object storage: a bucket is
// opened by URL (OpenBucket, which the external payload store of
// internal/extstore uses too) through gocloud.dev/blob, whose drivers for
// the local file system (file:///dir), Amazon S3 and S3-compatible stores
// (s3://bucket?region=…&endpoint=…), Google Cloud Storage (gs://bucket)
// and Azure Blob Storage (azblob://container) are linked in.
//
// An archived run is one gzip-compressed JSON object under the key
// Key(workflowID, runID): the document of package archivedoc, whose
// types, encoding and keys this package uses. The engine writes it
// (engine/archive.go) and the console reads it back through a Bucket; the
// command line, which links no cloud SDK, reads a file:// archive with
// archivedoc.OpenLocal. The package imports nothing of the server.
package archive

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"

	"gocloud.dev/blob"
	// The drivers that --archive-url schemes name.
	_ "gocloud.dev/blob/azureblob"
	_ "gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/gcsblob"
	_ "gocloud.dev/blob/s3blob"
	"gocloud.dev/gcerrors"

	"github.com/iwf-server/iwf-server/archivedoc"
)

// ErrNotFound is returned when no archived run matches
// (archivedoc.ErrNotFound).
var ErrNotFound = archivedoc.ErrNotFound

// ErrStop, returned by Read's onEvent, ends the reading there
// (archivedoc.ErrStop).
var ErrStop = archivedoc.ErrStop

// Run is the archived document without its history (archivedoc.Run).
type Run = archivedoc.Run

// Event is a history event of an archived run (archivedoc.Event).
type Event = archivedoc.Event

// Format is the version of the archived document this package writes.
const Format = archivedoc.Format

// Key is the object key of a run (archivedoc.Key).
func Key(workflowID, runID string) string { return archivedoc.Key(workflowID, runID) }

// Bucket is an opened archive.
type Bucket struct {
	b *blob.Bucket
}

// Open opens the archive at a gocloud.dev/blob URL: file:///dir,
// s3://bucket?region=R[&endpoint=URL&use_path_style=true],
// gs://bucket, azblob://container.
//
// A file:// archive writes each object's temporary file next to it
// (gocloud's no_tmp_dir) unless the URL says otherwise: the default, a
// file in os.TempDir renamed into place, fails with "invalid cross-device
// link" whenever the archive is on another file system than /tmp (a
// mounted volume), and every run would stay unarchived and undeleted.
func Open(ctx context.Context, rawURL string) (*Bucket, error) {
	b, err := OpenBucket(ctx, rawURL)
	if err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	return &Bucket{b: b}, nil
}

// OpenBucket opens the gocloud.dev/blob bucket at rawURL as Open does (a
// file:// bucket writes its temporary files next to its objects): the one
// opener of the server's buckets, which internal/extstore uses too. The
// error names the URL redacted.
func OpenBucket(ctx context.Context, rawURL string) (*blob.Bucket, error) {
	b, err := blob.OpenBucket(ctx, withLocalTemp(rawURL))
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", Redact(rawURL), err)
	}
	return b, nil
}

// withLocalTemp adds no_tmp_dir=1 to a file:// URL that does not set it.
func withLocalTemp(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "file" {
		return rawURL
	}
	q := u.Query()
	if _, set := q["no_tmp_dir"]; set {
		return rawURL
	}
	q.Set("no_tmp_dir", "1")
	u.RawQuery = q.Encode()
	return u.String()
}

// Redact returns a URL for logs and errors: without user information,
// and with the values of its query parameters, other than the few that
// name a place, replaced by "redacted".
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(invalid URL)"
	}
	u.User = nil
	q := u.Query()
	for k := range q {
		switch k {
		case "region", "endpoint", "use_path_style", "create_dir", "no_tmp_dir", "metadata":
		default:
			q.Set(k, "redacted")
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// Close releases the bucket.
func (b *Bucket) Close() error { return b.b.Close() }

// Put writes the object of run r, replacing the one written before, if
// any: r, then the history events that next returns, page by page, until
// it returns none. The object is written only when everything was: an
// error from next or from the store leaves no object behind (and an
// object written before as it was). r.HistoryEvents is set to the number
// of events written.
func (b *Bucket) Put(ctx context.Context, r *Run, next func(context.Context) ([]Event, error)) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := b.b.NewWriter(wctx, Key(r.WorkflowID, r.RunID), &blob.WriterOptions{
		ContentType: "application/gzip",
		Metadata:    map[string]string{archivedoc.ClosedMeta: strconv.FormatInt(r.ClosedMs, 10)},
	})
	if err != nil {
		return err
	}
	if err := archivedoc.Encode(ctx, w, r, next); err != nil {
		cancel() // abandons the write
		_ = w.Close()
		return err
	}
	return w.Close()
}

// Read reads the archived run runID of workflowID, as archivedoc.Decode
// does. ErrNotFound says there is none.
func (b *Bucket) Read(ctx context.Context, workflowID, runID string, onEvent func(Event) error) (*Run, error) {
	rd, err := b.b.NewReader(ctx, Key(workflowID, runID), nil)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, fmt.Errorf("%w of workflow %s with run id %s", ErrNotFound, workflowID, runID)
	}
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	return archivedoc.Decode(rd, onEvent)
}

// Newest returns the run id of the archived run of workflowID that closed
// last, and how many runs of it are archived. ErrNotFound says there is
// none.
func (b *Bucket) Newest(ctx context.Context, workflowID string) (string, int, error) {
	p := archivedoc.Prefix(workflowID)
	it := b.b.List(&blob.ListOptions{Prefix: p, Delimiter: "/"})
	var best string
	var bestMs int64
	n := 0
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", 0, err
		}
		name, ok := strings.CutSuffix(strings.TrimPrefix(obj.Key, p), archivedoc.KeySuffix)
		if obj.IsDir || !ok {
			continue
		}
		runID, err := url.PathUnescape(name)
		if err != nil {
			continue
		}
		ms := obj.ModTime.UnixMilli()
		if a, err := b.b.Attributes(ctx, obj.Key); err == nil {
			if v, err := strconv.ParseInt(a.Metadata[archivedoc.ClosedMeta], 10, 64); err == nil {
				ms = v
			}
		}
		n++
		if best == "" || ms > bestMs || (ms == bestMs && runID > best) {
			best, bestMs = runID, ms
		}
	}
	if n == 0 {
		return "", 0, fmt.Errorf("%w of workflow %s", ErrNotFound, workflowID)
	}
	return best, n, nil
}
