// Package archive writes closed workflow runs to a blob store before
// retention deletes them, and reads them back.
//
// It is the one seam between the server and object storage: a bucket is
// opened by URL through gocloud.dev/blob, whose drivers for the local file
// system (file:///dir), Amazon S3 and S3-compatible stores
// (s3://bucket?region=…&endpoint=…), Google Cloud Storage (gs://bucket)
// and Azure Blob Storage (azblob://container) are linked in.
//
// An archived run is one gzip-compressed JSON object (Run, with the run's
// whole history as its "history" array) under the key Key(workflowID,
// runID). The engine writes it (engine/archive.go); the command line reads
// it back (iwf workflow get|history --archived). The package imports the
// wire types of api/iwfapi and nothing of the server.
package archive

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
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

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// ErrNotFound is returned when no archived run matches.
var ErrNotFound = errors.New("archive: no archived run")

// Run is the archived document without its history; the engine owns its
// shape (engine.ArchivedRun).
type Run = engine.ArchivedRun

// Format is the version of the archived document this package writes.
const Format = engine.ArchiveFormat

// Key is the object key of a run: workflows/<escaped workflow id>/<run
// id>.json.gz. The workflow id is path-escaped (a "/" in it becomes %2F,
// and a "." %2E), so every id yields a valid key of its own; an id whose escaped form is longer than 400 bytes is replaced by
// "!sha256-" and its SHA-256 in hex, which no escaped id can equal ("!"
// is always escaped), to stay within the key length of every store.
func Key(workflowID, runID string) string {
	return prefix(workflowID) + url.PathEscape(runID) + ".json.gz"
}

// prefix is the key prefix of a workflow id's runs.
func prefix(workflowID string) string {
	// Dots are escaped too: "." and ".." are no names, and a name that
	// ends in ".." is not what every driver lists under.
	esc := strings.ReplaceAll(url.PathEscape(workflowID), ".", "%2E")
	if len(esc) > 400 {
		sum := sha256.Sum256([]byte(workflowID))
		esc = "!sha256-" + hex.EncodeToString(sum[:])
	}
	return "workflows/" + esc + "/"
}

// closedMeta is the metadata key that holds a run's close time (unix ms),
// so that the newest run of an id is found without reading its object.
const closedMeta = "closed-ms"

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
	b, err := blob.OpenBucket(ctx, withLocalTemp(rawURL))
	if err != nil {
		return nil, fmt.Errorf("archive: opening %s: %w", Redact(rawURL), err)
	}
	return &Bucket{b: b}, nil
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
func (b *Bucket) Put(ctx context.Context, r *Run, next func(context.Context) ([]iwfapi.WorkflowHistoryEvent, error)) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := b.b.NewWriter(wctx, Key(r.WorkflowID, r.RunID), &blob.WriterOptions{
		ContentType: "application/gzip",
		Metadata:    map[string]string{closedMeta: strconv.FormatInt(r.ClosedMs, 10)},
	})
	if err != nil {
		return err
	}
	if err := Encode(ctx, w, r, next); err != nil {
		cancel() // abandons the write
		_ = w.Close()
		return err
	}
	return w.Close()
}

// Encode writes the gzip-compressed document of r and the events next
// returns to w.
func Encode(ctx context.Context, w io.Writer, r *Run, next func(context.Context) ([]iwfapi.WorkflowHistoryEvent, error)) error {
	zw := gzip.NewWriter(w)
	bw := bufio.NewWriterSize(zw, 64<<10)
	r.Format = Format
	r.HistoryEvents = 0
	// The summary's fields without the history's length, which is known
	// only at the end: every key appears once in the document.
	head, err := json.Marshal(summary{Run: r})
	if err != nil {
		return err
	}
	// The summary's fields, then the history, then its length.
	bw.Write(head[:len(head)-1])
	bw.WriteString(`,"history":[`)
	n := 0
	for {
		events, err := next(ctx)
		if err != nil {
			return err
		}
		if len(events) == 0 {
			break
		}
		for _, ev := range events {
			b, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			if n > 0 {
				bw.WriteByte(',')
			}
			bw.WriteByte('\n')
			bw.Write(b)
			n++
		}
	}
	r.HistoryEvents = n
	fmt.Fprintf(bw, "\n],\"historyEvents\":%d}\n", n)
	if err := bw.Flush(); err != nil {
		return err
	}
	return zw.Close()
}

// summary is the head of a document: Run's fields without
// "historyEvents" (the outer field, always nil, hides the embedded one).
type summary struct {
	*Run
	HistoryEvents *int `json:"historyEvents,omitempty"`
}

// ErrStop, returned by Decode's onEvent, ends the reading there: Decode
// then returns the run as read so far — its summary, which the document
// holds before the history, with HistoryEvents 0 — and a nil error.
var ErrStop = errors.New("archive: stop reading")

// Decode reads a document written by Encode from r (gzip-compressed),
// calling onEvent with each history event in order (nil: the events are
// skipped), and returns the run. It holds one event at a time. A key
// that appears twice takes its last value: documents written by earlier
// releases carry "historyEvents" as 0 before the history and as the
// count after it.
func Decode(r io.Reader, onEvent func(iwfapi.WorkflowHistoryEvent) error) (*Run, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("archive: not a gzip object: %w", err)
	}
	defer zr.Close()
	dec := json.NewDecoder(bufio.NewReader(zr))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("archive: not an archived run (%v)", err)
	}
	fields := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("archive: reading the document: %w", err)
		}
		key, _ := t.(string)
		if key != "history" {
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return nil, fmt.Errorf("archive: reading %s: %w", key, err)
			}
			fields[key] = v
			continue
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('[') {
			return nil, fmt.Errorf("archive: the history is not an array (%v)", err)
		}
		for dec.More() {
			if onEvent == nil {
				var skip json.RawMessage
				if err := dec.Decode(&skip); err != nil {
					return nil, fmt.Errorf("archive: reading the history: %w", err)
				}
				continue
			}
			var ev iwfapi.WorkflowHistoryEvent
			if err := dec.Decode(&ev); err != nil {
				return nil, fmt.Errorf("archive: reading the history: %w", err)
			}
			if err := onEvent(ev); errors.Is(err, ErrStop) {
				return decodeHead(fields)
			} else if err != nil {
				return nil, err
			}
		}
		if _, err := dec.Token(); err != nil {
			return nil, fmt.Errorf("archive: reading the history: %w", err)
		}
	}
	return decodeHead(fields)
}

// decodeHead decodes the summary's fields of a document.
func decodeHead(fields map[string]json.RawMessage) (*Run, error) {
	head, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	var run Run
	if err := json.Unmarshal(head, &run); err != nil {
		return nil, fmt.Errorf("archive: reading the summary: %w", err)
	}
	if run.Format > Format {
		return nil, fmt.Errorf("archive: the document's format %d is newer than this program's (%d)", run.Format, Format)
	}
	return &run, nil
}

// Read reads the archived run runID of workflowID, as Decode does.
// ErrNotFound says there is none.
func (b *Bucket) Read(ctx context.Context, workflowID, runID string, onEvent func(iwfapi.WorkflowHistoryEvent) error) (*Run, error) {
	rd, err := b.b.NewReader(ctx, Key(workflowID, runID), nil)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, fmt.Errorf("%w of workflow %s with run id %s", ErrNotFound, workflowID, runID)
	}
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	return Decode(rd, onEvent)
}

// Newest returns the run id of the archived run of workflowID that closed
// last, and how many runs of it are archived. ErrNotFound says there is
// none.
func (b *Bucket) Newest(ctx context.Context, workflowID string) (string, int, error) {
	p := prefix(workflowID)
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
		name, ok := strings.CutSuffix(strings.TrimPrefix(obj.Key, p), ".json.gz")
		if obj.IsDir || !ok {
			continue
		}
		runID, err := url.PathUnescape(name)
		if err != nil {
			continue
		}
		ms := obj.ModTime.UnixMilli()
		if a, err := b.b.Attributes(ctx, obj.Key); err == nil {
			if v, err := strconv.ParseInt(a.Metadata[closedMeta], 10, 64); err == nil {
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
