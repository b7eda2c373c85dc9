package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// printJSON prints a JSON answer pretty-printed.
func printJSON(w io.Writer, raw []byte) error {
	var b bytes.Buffer
	if err := json.Indent(&b, bytes.TrimSpace(raw), "", "  "); err != nil {
		return fmt.Errorf("the server's answer is not JSON: %v", err)
	}
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}

// printValueJSON prints v as indented JSON.
func printValueJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// kv is a key-value block: keys aligned, multi-line values indented under
// their first line.
type kv struct{ rows [][2]string }

func (b *kv) add(key, value string) { b.rows = append(b.rows, [2]string{key, value}) }

// addIf adds the row when value is not empty.
func (b *kv) addIf(key, value string) {
	if value != "" {
		b.add(key, value)
	}
}

func (b *kv) write(w io.Writer) {
	width := 0
	for _, r := range b.rows {
		width = max(width, len(r[0])+1)
	}
	for _, r := range b.rows {
		lines := strings.Split(r[1], "\n")
		fmt.Fprintf(w, "%-*s %s\n", width, r[0]+":", lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(w, "%*s %s\n", width, "", l)
		}
	}
}

// table writes aligned columns.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		if c == "" {
			c = "-"
		}
		// Tabs and newlines would break the columns.
		cells[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// formatMillis formats Unix milliseconds as RFC 3339 in local time; zero
// or absent is "-".
func formatMillis(ms *int64) string {
	if ms == nil || *ms == 0 {
		return "-"
	}
	return time.UnixMilli(*ms).Local().Format(time.RFC3339)
}

// formatMillisPrecise is formatMillis with milliseconds, for history
// events, many of which share a second.
func formatMillisPrecise(ms int64) string {
	return time.UnixMilli(ms).Local().Format("2006-01-02T15:04:05.000Z07:00")
}

// formatObject renders an EncodedObject: JSON data pretty-printed, any
// other encoding as its text followed by the encoding's name.
func formatObject(o *iwfapi.EncodedObject) string {
	if o == nil {
		return "-"
	}
	if o.ExtStoreId != nil && *o.ExtStoreId != "" {
		return fmt.Sprintf("(stored externally in %s at %s)", *o.ExtStoreId, deref(o.ExtPath))
	}
	data, enc := deref(o.Data), deref(o.Encoding)
	if enc == "json" || enc == "" {
		var b bytes.Buffer
		if json.Indent(&b, []byte(data), "", "  ") == nil {
			return b.String()
		}
	}
	if enc == "" {
		return data
	}
	return fmt.Sprintf("%s (encoding %s)", data, enc)
}

// compactJSON renders v as one line of JSON.
func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// jsonObject reads a JSON value given on the command line into an
// EncodedObject with encoding "json"; empty is nil.
func jsonObject(flagName, value string) (*iwfapi.EncodedObject, error) {
	if value == "" {
		return nil, nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(value)); err != nil {
		return nil, usagef("--%s: not JSON (%v); a string is written with its quotes, e.g. '\"text\"'", flagName, err)
	}
	data, enc := b.String(), "json"
	return &iwfapi.EncodedObject{Encoding: &enc, Data: &data}, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func ptr[T any](v T) *T { return &v }

// optional returns a pointer to s, or nil when s is empty.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
