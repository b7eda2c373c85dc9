package console

// Formatting for the templates: times (RFC 3339 in a <time> element, which
// a few lines of script show in the browser's zone, plus relative text),
// durations, and values pretty-printed with long ones folded.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// foldChars and foldLines decide when a value is folded into <details>.
const (
	foldChars = 240
	foldLines = 8
)

func (c *console) funcs() template.FuncMap {
	return template.FuncMap{
		"when":     c.when,
		"ms":       func(ms int64) time.Time { return time.UnixMilli(ms) },
		"msp":      func(ms *int64) time.Time { return time.UnixMilli(deref(ms)) },
		"duration": humanDuration,
		"pretty":   prettyAny,
		"value":    encodedValue,
		"style":    barStyle,
		"lower":    strings.ToLower,
		"join":     strings.Join,
		"deref":    func(s *string) string { return deref(s) },
		"derefi":   func(i *int32) int32 { return deref(i) },
		"add":      func(a, b int) int { return a + b },
		"num":      thousands,
		"num64":    func(n int64) string { return thousands(int(n)) },
		"paging": func(l listInfo, what string) pagingView {
			return pagingView{L: l, What: what}
		},
		"runurl": c.runURL,
		"actor":  actorOf,
		"since": func(t time.Time) string {
			return humanDuration(c.opts.Now().Sub(t))
		},
	}
}

// when renders a time as a <time> element: RFC 3339 for the machine (the
// page's script rewrites the text in the browser's zone), UTC text for a
// page without script, and how long ago (or how far ahead) it is.
func (c *console) when(t time.Time) template.HTML {
	if t.IsZero() || t.UnixMilli() == 0 {
		return "—"
	}
	rel := relative(c.opts.Now(), t)
	return template.HTML(fmt.Sprintf(`<time datetime="%s" title="%s">%s</time> <span class="rel">(%s)</span>`,
		t.UTC().Format(time.RFC3339Nano), t.UTC().Format(time.RFC3339), t.UTC().Format("2006-01-02 15:04:05 UTC"), template.HTMLEscapeString(rel)))
}

// relative says how long ago t was, or how far ahead it is.
func relative(now, t time.Time) string {
	d := now.Sub(t)
	if d < 0 {
		return "in " + humanDuration(-d)
	}
	if d < time.Second {
		return "just now"
	}
	return humanDuration(d) + " ago"
}

// humanDuration writes a duration with one or two units: "850 ms", "3 s",
// "4 min 12 s", "2 h 5 min", "3 d 4 h".
func humanDuration(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	case d < time.Minute:
		s := d.Seconds()
		if s < 10 {
			return strconv.FormatFloat(math.Floor(s*10)/10, 'f', -1, 64) + " s"
		}
		return strconv.Itoa(int(s)) + " s"
	case d < time.Hour:
		return two(int(d/time.Minute), "min", int(d%time.Minute/time.Second), "s")
	case d < 48*time.Hour:
		return two(int(d/time.Hour), "h", int(d%time.Hour/time.Minute), "min")
	default:
		return two(int(d/(24*time.Hour)), "d", int(d%(24*time.Hour)/time.Hour), "h")
	}
}

func two(a int, ua string, b int, ub string) string {
	if b == 0 {
		return fmt.Sprintf("%d %s", a, ua)
	}
	return fmt.Sprintf("%d %s %d %s", a, ua, b, ub)
}

// shown is a value ready for a page: pretty text, and a one-line summary
// when it is long enough to fold.
type shown struct {
	Text     string
	Summary  string
	Folded   bool
	Encoding string
	Empty    bool
}

// prettyAny pretty-prints any JSON-able value.
func prettyAny(v any) shown {
	if v == nil {
		return shown{Empty: true, Text: "null"}
	}
	if raw, ok := v.(json.RawMessage); ok {
		return prettyJSON(raw)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fold(fmt.Sprint(v))
	}
	return prettyJSON(b)
}

// prettyJSON indents JSON text; other text is shown as it is.
func prettyJSON(b []byte) shown {
	var out bytes.Buffer
	if err := json.Indent(&out, bytes.TrimSpace(b), "", "  "); err != nil {
		return fold(string(b))
	}
	return fold(out.String())
}

// encodedValue shows an EncodedObject: its data pretty-printed when it is
// JSON, with its encoding.
func encodedValue(v *iwfapi.EncodedObject) shown {
	if v == nil {
		return shown{Empty: true, Text: "(none)"}
	}
	var s shown
	data := deref(v.Data)
	if json.Valid([]byte(data)) && strings.TrimSpace(data) != "" {
		s = prettyJSON([]byte(data))
	} else {
		s = fold(data)
	}
	s.Encoding = deref(v.Encoding)
	if v.ExtStoreId != nil || v.ExtPath != nil {
		s.Encoding += fmt.Sprintf(" (external: %s %s)", deref(v.ExtStoreId), deref(v.ExtPath))
	}
	return s
}

// fold decides whether a text is long enough to fold, and summarises it.
func fold(text string) shown {
	s := shown{Text: text}
	if len(text) > foldChars || strings.Count(text, "\n") >= foldLines {
		s.Folded = true
		line := strings.Join(strings.Fields(text), " ")
		if r := []rune(line); len(r) > 100 {
			line = string(r[:100]) + "…"
		}
		s.Summary = fmt.Sprintf("%s (%d bytes)", line, len(text))
	}
	return s
}

// barStyle places a timeline bar; only numbers go into the CSS.
func barStyle(b bar) template.CSS {
	return template.CSS(fmt.Sprintf("left:%.3f%%;width:%.3f%%", b.Left, b.Width))
}

// pathf formats an SVG path from integers only.
func pathf(format string, args ...int) string {
	a := make([]any, len(args))
	for i, v := range args {
		a[i] = v
	}
	return fmt.Sprintf(format, a...)
}

// str, integer and boolean read loosely typed JSON fields.
func str(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case nil:
		return ""
	default:
		return fmt.Sprint(t)
	}
}

func integer(v any) int {
	switch t := v.(type) {
	case float64:
		return int(t)
	case int:
		return t
	case int64:
		return int(t)
	case json.Number:
		n, _ := t.Int64()
		return int(n)
	}
	return 0
}

func boolean(v any) bool {
	b, _ := v.(bool)
	return b
}

// pagingView is what the "paging" template shows: a list's paging and
// what its entries are.
type pagingView struct {
	L    listInfo
	What string
}

// thousands writes n with a comma between groups of three digits.
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// actorOf returns who made a run event, as its data records it (the
// "actor" member of stop, reset and external input events), or "".
func actorOf(data any) string {
	m, ok := data.(map[string]any)
	if !ok {
		return ""
	}
	a, _ := m["actor"].(string)
	return a
}
