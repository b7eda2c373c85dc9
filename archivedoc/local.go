package archivedoc

// Reading a file:// archive directly, without gocloud.dev: the server
// writes such an archive through gocloud.dev/blob's fileblob driver
// (internal/archive), which keeps each object as a file under the
// directory at its key's path, with the key's characters a file system
// cannot hold escaped, and the object's metadata in a sidecar file
// "<path>.attrs". Local reads that layout; a test in internal/archive
// checks it against the driver the server links.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Local is a file:// archive, read from its directory.
type Local struct {
	dir string // absolute; "" for a directory that does not exist yet (create_dir)
}

// OpenLocal opens the archive at a file:// URL as the server's fileblob
// driver reads it: file:///dir, file://localhost/dir, or file://./dir for
// a relative one; the query's settings concern writing and are ignored.
// The directory must exist, unless the URL says create_dir (it is then
// read as empty). Any other scheme is an error.
func OpenLocal(rawURL string) (*Local, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("archive: the archive's URL is not valid: %w", err)
	}
	if u.Scheme != "file" {
		return nil, fmt.Errorf("archive: %s:// is not a local archive (file:///dir)", u.Scheme)
	}
	path := u.Path
	// As fileblob: the host "." means a relative path; elsewhere than
	// on Unix the leading "/" is dropped.
	if u.Host == "." || os.PathSeparator != '/' {
		path = strings.TrimPrefix(path, "/")
	}
	dir, err := filepath.Abs(filepath.FromSlash(path))
	if err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist) && u.Query().Get("create_dir") != "":
		return &Local{}, nil
	case err != nil:
		return nil, fmt.Errorf("archive: %w", err)
	case !info.IsDir():
		return nil, fmt.Errorf("archive: %s is not a directory", dir)
	}
	return &Local{dir: dir}, nil
}

// Close releases nothing; it is there to match a bucket's.
func (l *Local) Close() error { return nil }

// Read reads the archived run runID of workflowID, as Decode does.
// ErrNotFound says there is none.
func (l *Local) Read(ctx context.Context, workflowID, runID string, onEvent func(Event) error) (*Run, error) {
	notFound := fmt.Errorf("%w of workflow %s with run id %s", ErrNotFound, workflowID, runID)
	if l.dir == "" {
		return nil, notFound
	}
	f, err := os.Open(filepath.Join(l.dir, escapeKey(Key(workflowID, runID))))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, notFound
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.IsDir() {
		return nil, notFound
	}
	return Decode(f, onEvent)
}

// Newest returns the run id of the archived run of workflowID that closed
// last (by the close time the object's metadata holds, else the file's
// time), and how many runs of it are archived. ErrNotFound says there is
// none.
func (l *Local) Newest(ctx context.Context, workflowID string) (string, int, error) {
	notFound := fmt.Errorf("%w of workflow %s", ErrNotFound, workflowID)
	if l.dir == "" {
		return "", 0, notFound
	}
	dir := filepath.Join(l.dir, escapeKey(strings.TrimSuffix(Prefix(workflowID), "/")))
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return "", 0, notFound
	}
	if err != nil {
		return "", 0, err
	}
	var best string
	var bestMs int64
	n := 0
	for _, e := range entries {
		if e.IsDir() || strings.HasSuffix(e.Name(), attrsSuffix) {
			continue
		}
		name, ok := strings.CutSuffix(unescapeKey(e.Name()), KeySuffix)
		if !ok {
			continue
		}
		runID, err := url.PathUnescape(name)
		if err != nil {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // gone meanwhile
		}
		ms := info.ModTime().UnixMilli()
		if v, ok := closedMs(filepath.Join(dir, e.Name())); ok {
			ms = v
		}
		n++
		if best == "" || ms > bestMs || (ms == bestMs && runID > best) {
			best, bestMs = runID, ms
		}
	}
	if n == 0 {
		return "", 0, notFound
	}
	return best, n, nil
}

// attrsSuffix names fileblob's sidecar file of an object's attributes.
const attrsSuffix = ".attrs"

// closedMs reads the close time from the metadata of the object at path.
func closedMs(path string) (int64, bool) {
	b, err := os.ReadFile(path + attrsSuffix)
	if err != nil {
		return 0, false
	}
	var attrs struct {
		Metadata map[string]string `json:"user.metadata"`
	}
	if json.Unmarshal(b, &attrs) != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(attrs.Metadata[ClosedMeta], 10, 64)
	return v, err == nil
}

// escapeKey is fileblob's mapping of a key to a relative path: the runes
// a file system cannot hold at their place are written __0x<hex>__, and
// so is the start of any text that reads as such an escape.
func escapeKey(key string) string {
	r := []rune(key)
	var b strings.Builder
	for i, c := range r {
		if mustEscape(r, i) || isEscape(r, i) {
			fmt.Fprintf(&b, "__%#x__", c)
			continue
		}
		b.WriteRune(c)
	}
	s := b.String()
	if os.PathSeparator != '/' {
		s = strings.ReplaceAll(s, "/", string(os.PathSeparator))
	}
	return s
}

// mustEscape reports whether fileblob escapes r[i].
func mustEscape(r []rune, i int) bool {
	c := r[i]
	switch {
	case c < 32:
		return true
	case os.PathSeparator != '/' && c == os.PathSeparator:
		return true
	case i > 1 && c == '/' && r[i-1] == '.' && r[i-2] == '.': // "../"
		return true
	case i > 0 && c == '/' && r[i-1] == '/': // "//"
		return true
	case c == '/' && i == len(r)-1: // a trailing slash
		return true
	case os.PathSeparator == '\\' && strings.ContainsRune(`><:"|?*`, c):
		return true
	}
	return false
}

// unescapeKey reverses escapeKey for one name.
func unescapeKey(name string) string {
	r := []rune(name)
	var b strings.Builder
	for i := 0; i < len(r); i++ {
		if c, end, ok := unescapeAt(r, i); ok {
			b.WriteRune(c)
			i = end
			continue
		}
		b.WriteRune(r[i])
	}
	return b.String()
}

// isEscape reports whether an escape starts at r[i].
func isEscape(r []rune, i int) bool {
	_, _, ok := unescapeAt(r, i)
	return ok
}

// unescapeAt reads an escape __0x<hex>__ at r[i]: the rune and the index
// of its last character.
func unescapeAt(r []rune, i int) (rune, int, bool) {
	const open = "__0x"
	for j := range len(open) {
		if i+j >= len(r) || r[i+j] != rune(open[j]) {
			return 0, 0, false
		}
	}
	j := i + len(open)
	start := j
	for j < len(r) && r[j] != '_' {
		j++
	}
	if j+1 >= len(r) || r[j] != '_' || r[j+1] != '_' {
		return 0, 0, false
	}
	v, err := strconv.ParseInt(string(r[start:j]), 16, 32)
	if err != nil {
		return 0, 0, false
	}
	return rune(v), j + 1, true
}
