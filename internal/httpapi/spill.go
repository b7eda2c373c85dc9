package httpapi

// Streaming the big payloads of a request body to the external store.
//
// With external storage on, a request body may be far larger than the
// 4 MiB it is held to without (Options.MaxBodyBytes). Held whole, a body
// would be in memory three times over: its bytes, the validator's decoded
// copy and the request's decoded struct. Instead, the body of an operation
// that stores encoded objects (spillPaths) goes through a rewriter before
// it is held: the JSON is copied through, and the data string of an
// encoded object longer than the engine's payload threshold is streamed,
// unescaped, to a new object of the external store (Spiller.SpillPayload)
// and replaced by the reference to it, {"extStoreId":…,"extPath":…}. What
// is held is the rewritten body, small; the references go to the engine in
// the request's context (engine.WithSpilledPayloads), which keeps them for
// the run as objects written for this request.
//
// The rewriter holds at most threshold+1 unescaped bytes of a string
// before it decides; the blob store's writer buffers what it sends (1 MiB
// for file://, a part for the cloud stores). It reads the body after the
// access check, so that a caller without the right to the operation writes
// nothing to the store.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/iwf-server/iwf-server/engine"
)

// Spiller writes the big payloads of request bodies to the external
// store as the bodies arrive; *engine.Engine implements it.
type Spiller interface {
	// SpillThreshold is the length of data (bytes, unescaped) above which
	// a payload goes to the external store; 0 turns streaming off.
	SpillThreshold() int
	// SpillPayload writes what r reads, to its end, as a new object of
	// the external store and returns its reference.
	SpillPayload(ctx context.Context, r io.Reader) (engine.PayloadRef, error)
}

// spillPaths are the operations whose request bodies hold encoded objects
// that the engine stores for a run: a start's input and data attributes,
// a signal's value, published values, written attributes, an RPC's
// input. A batch start is not among them: its signal value is stored with
// the batch and applied to runs later, beyond the request.
var spillPaths = map[string]bool{
	apiPrefix + "workflow/start":                    true,
	apiPrefix + "workflow/signal":                   true,
	apiPrefix + "workflow/publishToInternalChannel": true,
	apiPrefix + "workflow/dataobjects/set":          true,
	apiPrefix + "workflow/rpc":                      true,
}

// encodedObjectMembers are the names of the members whose values are
// encoded objects (iwfapi.EncodedObject) in the request bodies of
// spillPaths: only in such an object is a "data" member a payload. Names
// are matched as encoding/json matches them to fields, case-insensitively.
var encodedObjectMembers = []string{"stateInput", "signalValue", "value", "input"}

// maxSpillDepth bounds the nesting of a rewritten body, as encoding/json
// bounds what it decodes.
const maxSpillDepth = 10000

// spillReadBuffer is the rewriter's read buffer.
const spillReadBuffer = 32 << 10

// spillConfig is the streaming of request bodies in force: nil when off.
type spillConfig struct {
	sp        Spiller
	threshold int
}

// newSpillConfig returns the streaming sp asks for, nil for none.
func newSpillConfig(sp Spiller) *spillConfig {
	if sp == nil {
		return nil
	}
	t := sp.SpillThreshold()
	if t <= 0 {
		return nil
	}
	return &spillConfig{sp: sp, threshold: t}
}

// applies reports whether r's body is streamed through the rewriter: a
// JSON body of one of spillPaths that may hold a data string over the
// threshold (a longer body, or one of unknown length). A shorter body
// cannot, and is read as every other one.
func (c *spillConfig) applies(r *http.Request) bool {
	return c != nil && r.Method == http.MethodPost && spillPaths[r.URL.Path] &&
		r.Body != nil && r.Body != http.NoBody &&
		(r.ContentLength < 0 || r.ContentLength > int64(c.threshold)) &&
		isJSON(r.Header.Get("Content-Type"))
}

// spillBody reads the bodies that readBody left to it (spillConfig.applies)
// through the rewriter, at most limit bytes of them, and then holds the
// rewritten body as readBody holds others. The references to the objects
// written go to the request's context (engine.WithSpilledPayloads).
func (h *handler) spillBody(limit int64, spill *spillConfig) func(http.Handler) http.Handler {
	tooLarge := fmt.Sprintf("request body too large: the limit is %d bytes", limit)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !spill.applies(r) {
				next.ServeHTTP(w, r)
				return
			}
			ctx := r.Context()
			body, refs, err := rewriteBody(http.MaxBytesReader(w, r.Body, limit), spill.threshold,
				func(data io.Reader) (engine.PayloadRef, error) { return spill.sp.SpillPayload(ctx, data) })
			var (
				be     *bodyError
				re     *readError
				tooBig *http.MaxBytesError
			)
			switch {
			case err == nil:
			case errors.As(err, &be):
				writeError(w, http.StatusBadRequest, be.detail)
				return
			case errors.As(err, &tooBig):
				writeError(w, http.StatusRequestEntityTooLarge, tooLarge)
				return
			case errors.As(err, &re):
				writeError(w, http.StatusBadRequest, "cannot read the request body: "+readFailure(re.err))
				return
			default: // the engine's: the store
				h.handleServiceError(w, r, err)
				return
			}
			if err := checkBody(body); err != nil {
				writeError(w, http.StatusBadRequest, "invalid request: "+err.Error())
				return
			}
			held := &heldBody{b: body}
			infoFrom(ctx).body = held
			r = r.WithContext(engine.WithSpilledPayloads(ctx, refs))
			r.ContentLength = int64(len(body))
			r.Body = held.reader()
			r.GetBody = func() (io.ReadCloser, error) { return held.reader(), nil }
			next.ServeHTTP(w, r)
		})
	}
}

// bodyError is a request body the rewriter refuses (malformed JSON, bytes
// that are not UTF-8): 400 with its detail.
type bodyError struct{ detail string }

func (e *bodyError) Error() string { return e.detail }

// readError is a failure to read the body: the client's connection, the
// size limit.
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// rewriteBody copies the JSON body src reads, with every data string of an
// encoded object longer than threshold (unescaped) streamed to spill and
// replaced by the reference spill returns. It returns the rewritten body
// and the references, in order. Insignificant white space is left out.
// Errors are a *bodyError, a *readError or spill's.
func rewriteBody(src io.Reader, threshold int, spill func(io.Reader) (engine.PayloadRef, error)) ([]byte, []engine.PayloadRef, error) {
	p := &rewriter{src: bufio.NewReaderSize(src, spillReadBuffer), threshold: threshold, spill: spill}
	c, err := p.nonSpace()
	if errors.Is(err, io.EOF) {
		return nil, nil, nil // empty: validation answers it
	}
	if err != nil {
		return nil, nil, err
	}
	if err := p.value(c, 0, false); err != nil {
		return nil, nil, err
	}
	if c, err := p.nonSpace(); err == nil {
		return nil, nil, p.syntax("invalid character %q after the top-level value", c)
	} else if !errors.Is(err, io.EOF) {
		return nil, nil, err
	}
	return p.out, p.refs, nil
}

// rewriter is one run of rewriteBody.
type rewriter struct {
	src       *bufio.Reader
	off       int64 // bytes of the body consumed
	out       []byte
	threshold int
	spill     func(io.Reader) (engine.PayloadRef, error)
	refs      []engine.PayloadRef
	prefix    []byte     // the first threshold+1 bytes of a data string
	scratch   [4096]byte // decoded strings that are copied raw
}

// syntax is the error of malformed JSON at the current offset.
func (p *rewriter) syntax(format string, args ...any) error {
	return &bodyError{detail: fmt.Sprintf("invalid request schema: malformed JSON: %s (at byte %d of the body)", fmt.Sprintf(format, args...), p.off)}
}

// readFailed returns the error of a read that found no byte where one was
// needed.
func (p *rewriter) readFailed(err error) error {
	if errors.Is(err, io.EOF) {
		return p.syntax("unexpected end of JSON input")
	}
	return &readError{err: err}
}

// nonSpace reads the next byte that is not white space; io.EOF at the end
// of the body, a *readError on a failed read.
func (p *rewriter) nonSpace() (byte, error) {
	for {
		c, err := p.src.ReadByte()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return 0, io.EOF
			}
			return 0, &readError{err: err}
		}
		p.off++
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c, nil
		}
	}
}

// needed is nonSpace where the JSON cannot end.
func (p *rewriter) needed() (byte, error) {
	c, err := p.nonSpace()
	if err != nil {
		return 0, p.readFailed(err)
	}
	return c, nil
}

// value copies the value that begins with c. encoded says it is at the
// place of an encoded object.
func (p *rewriter) value(c byte, depth int, encoded bool) error {
	switch {
	case c == '{':
		return p.object(depth+1, encoded)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		return p.copyString()
	case c == '-' || c >= '0' && c <= '9' || c == 't' || c == 'f' || c == 'n':
		return p.literal(c)
	}
	return p.syntax("invalid character %q looking for the beginning of a value", c)
}

func (p *rewriter) tooDeep(depth int) error {
	if depth > maxSpillDepth {
		return &bodyError{detail: fmt.Sprintf("invalid request schema: the request body nests more than %d levels", maxSpillDepth)}
	}
	return nil
}

func (p *rewriter) array(depth int) error {
	if err := p.tooDeep(depth); err != nil {
		return err
	}
	p.out = append(p.out, '[')
	c, err := p.needed()
	if err != nil {
		return err
	}
	if c == ']' {
		p.out = append(p.out, ']')
		return nil
	}
	for {
		if err := p.value(c, depth, false); err != nil {
			return err
		}
		if c, err = p.needed(); err != nil {
			return err
		}
		switch c {
		case ']':
			p.out = append(p.out, ']')
			return nil
		case ',':
			p.out = append(p.out, ',')
		default:
			return p.syntax("invalid character %q after an array element", c)
		}
		if c, err = p.needed(); err != nil {
			return err
		}
	}
}

// The kinds of object members the rewriter tells apart.
const (
	memberOther   = iota
	memberData    // data, in an encoded object
	memberRef     // extStoreId or extPath, in an encoded object
	memberEncoded // a member whose value is an encoded object
)

func memberKind(name string, encoded bool) int {
	if encoded {
		switch {
		case strings.EqualFold(name, "data"):
			return memberData
		case strings.EqualFold(name, "extStoreId"), strings.EqualFold(name, "extPath"):
			return memberRef
		}
	}
	for _, m := range encodedObjectMembers {
		if strings.EqualFold(name, m) {
			return memberEncoded
		}
	}
	return memberOther
}

// span is a member copied to out: from its leading comma (if any) to the
// end of its value.
type span struct{ start, end int }

// object copies an object. In an encoded object, a data string over the
// threshold is streamed out and replaced by its reference; the extStoreId
// and extPath members sent beside it, before or after, are left out, as
// the engine ignores them beside data that was sent. Such an object may
// have no other data member (which of two counts is the decoder's
// business, and the reference would not be the last): a *bodyError.
func (p *rewriter) object(depth int, encoded bool) error {
	if err := p.tooDeep(depth); err != nil {
		return err
	}
	p.out = append(p.out, '{')
	start := len(p.out)
	var (
		refs     []span // in an encoded object: its extStoreId and extPath members
		spilled  bool   // its data was streamed
		withData bool   // it has a data member
	)
	c, err := p.needed()
	if err != nil {
		return err
	}
	if c == '}' {
		p.out = append(p.out, '}')
		return nil
	}
	for {
		if c != '"' {
			return p.syntax("invalid character %q looking for the beginning of an object member name", c)
		}
		memberStart := len(p.out)
		if len(p.out) > start {
			p.out = append(p.out, ',')
		}
		name, err := p.key()
		if err != nil {
			return err
		}
		if c, err = p.needed(); err != nil {
			return err
		}
		if c != ':' {
			return p.syntax("invalid character %q after an object member name", c)
		}
		p.out = append(p.out, ':')
		if c, err = p.needed(); err != nil {
			return err
		}
		kind := memberKind(name, encoded)
		if kind == memberData && spilled {
			return errTwoData
		}
		switch {
		case kind == memberData && c == '"':
			ref, ok, err := p.dataString(!withData)
			if err != nil {
				return err
			}
			if ok {
				p.replace(start, memberStart, refs, ref)
				refs, spilled = nil, true
			}
			withData = true
		case kind == memberData:
			if err := p.value(c, depth, false); err != nil {
				return err
			}
			withData = true
		case kind == memberRef && spilled:
			if err := p.value(c, depth, false); err != nil {
				return err
			}
			p.out = p.out[:memberStart]
		case kind == memberRef:
			if err := p.value(c, depth, false); err != nil {
				return err
			}
			refs = append(refs, span{memberStart, len(p.out)})
		default:
			if err := p.value(c, depth, kind == memberEncoded); err != nil {
				return err
			}
		}
		if c, err = p.needed(); err != nil {
			return err
		}
		switch c {
		case '}':
			p.out = append(p.out, '}')
			return nil
		case ',':
		default:
			return p.syntax("invalid character %q after an object member", c)
		}
		if c, err = p.needed(); err != nil {
			return err
		}
	}
}

// errTwoData refuses an encoded object with a data member streamed and
// another one.
var errTwoData = &bodyError{detail: "invalid request: an encoded object has more than one data member"}

// replace puts the reference ref in the place of the data member that
// begins at memberStart, in the object whose members begin at start, and
// leaves out the members of cuts.
func (p *rewriter) replace(start, memberStart int, cuts []span, ref engine.PayloadRef) {
	p.out = p.out[:memberStart]
	for i := len(cuts) - 1; i >= 0; i-- {
		p.out = append(p.out[:cuts[i].start], p.out[cuts[i].end:]...)
	}
	if len(p.out) > start && p.out[start] == ',' { // the first member was left out
		p.out = append(p.out[:start], p.out[start+1:]...)
	}
	if len(p.out) > start {
		p.out = append(p.out, ',')
	}
	id, _ := json.Marshal(ref.StoreID)
	path, _ := json.Marshal(ref.Path)
	p.out = append(p.out, `"extStoreId":`...)
	p.out = append(p.out, id...)
	p.out = append(p.out, `,"extPath":`...)
	p.out = append(p.out, path...)
}

// literal copies a number, true, false or null that begins with c.
func (p *rewriter) literal(c byte) error {
	start := len(p.out)
	p.out = append(p.out, c)
	for {
		b, err := p.src.ReadByte()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return &readError{err: err}
		}
		if !(b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b == '.' || b == '+' || b == '-') {
			_ = p.src.UnreadByte()
			break
		}
		p.off++
		p.out = append(p.out, b)
	}
	if tok := p.out[start:]; !validLiteral(tok) {
		return p.syntax("invalid literal %.40q", tok)
	}
	return nil
}

// validLiteral reports whether tok is true, false, null or a JSON number.
func validLiteral(tok []byte) bool {
	switch string(tok) {
	case "true", "false", "null":
		return true
	}
	i := 0
	if i < len(tok) && tok[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(tok) && tok[i] >= '0' && tok[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(tok) && tok[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(tok) && tok[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(tok) && (tok[i] == 'e' || tok[i] == 'E') {
		i++
		if i < len(tok) && (tok[i] == '+' || tok[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(tok)
}

// copyString copies a string whose opening quote was read, as it is.
func (p *rewriter) copyString() error {
	p.out = append(p.out, '"')
	s := strReader{p: p, raw: true}
	for {
		_, err := s.Read(p.scratch[:])
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// maxMemberName is the longest member name key decodes: longer ones are
// none the rewriter looks for.
const maxMemberName = 64

// key copies a member name whose opening quote was read, and returns it
// decoded ("" when longer than maxMemberName).
func (p *rewriter) key() (string, error) {
	p.out = append(p.out, '"')
	s := strReader{p: p, raw: true}
	var name [maxMemberName]byte
	n, long := 0, false
	for {
		buf := name[n:]
		full := len(buf) == 0
		if full {
			buf = p.scratch[:]
		}
		k, err := s.Read(buf)
		if full {
			long = long || k > 0
		} else {
			n += k
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", err
		}
	}
	if long {
		return "", nil
	}
	return string(name[:n]), nil
}

// dataString handles the data string of an encoded object, whose opening
// quote was read: a string of at most threshold bytes (unescaped) is
// copied as it is; a longer one is streamed to spill, and ok reports the
// reference that takes its place (errTwoData unless first, the object's
// first data member). At most threshold+1 bytes are held.
func (p *rewriter) dataString(first bool) (ref engine.PayloadRef, ok bool, err error) {
	rawStart := len(p.out)
	p.out = append(p.out, '"')
	s := &strReader{p: p, raw: true}
	if p.prefix == nil {
		p.prefix = make([]byte, 0, p.threshold+1)
	}
	prefix := p.prefix[:0]
	for len(prefix) < cap(prefix) {
		n, err := s.Read(prefix[len(prefix):cap(prefix)])
		prefix = prefix[:len(prefix)+n]
		if errors.Is(err, io.EOF) {
			return engine.PayloadRef{}, false, nil // short: copied
		}
		if err != nil {
			return engine.PayloadRef{}, false, err
		}
	}
	if !first {
		return engine.PayloadRef{}, false, errTwoData
	}
	p.out, s.raw = p.out[:rawStart], false
	ref, err = p.spill(io.MultiReader(bytes.NewReader(prefix), s))
	if s.err != nil {
		return engine.PayloadRef{}, false, s.err // the body's fault, not the store's
	}
	if err != nil {
		return engine.PayloadRef{}, false, err
	}
	if !s.done {
		return engine.PayloadRef{}, false, errors.New("httpapi: a streamed payload was not read to its end")
	}
	p.refs = append(p.refs, ref)
	return ref, true, nil
}

// strReader reads the content of a JSON string, unescaped, from the
// rewriter's source, whose opening quote was read, up to its closing
// quote (then io.EOF). With raw, the bytes it consumes, the closing quote
// included, are copied to the rewriter's out. It refuses, with a
// *bodyError, what encoding/json would refuse or silently change:
// control characters, unknown escapes, bytes that are not UTF-8, unpaired
// UTF-16 surrogates (as checkBody does).
type strReader struct {
	p       *rewriter
	raw     bool
	done    bool   // the closing quote was read
	pend    []byte // decoded bytes not yet returned, in pendBuf
	pendBuf [utf8.UTFMax]byte
	err     error
}

func (s *strReader) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n := 0
	for n < len(b) {
		if len(s.pend) > 0 {
			k := copy(b[n:], s.pend)
			s.pend = s.pend[k:]
			n += k
			continue
		}
		if s.done || s.err != nil {
			break
		}
		k, err := s.chunk(b[n:])
		n += k
		if err != nil {
			s.err = err
		}
	}
	switch {
	case n > 0:
		return n, nil
	case s.err != nil:
		return 0, s.err
	}
	return 0, io.EOF
}

// consume takes raw, the next bytes of the source, as read.
func (s *strReader) consume(raw []byte) {
	if s.raw {
		s.p.out = append(s.p.out, raw...)
	}
	s.p.off += int64(len(raw))
	_, _ = s.p.src.Discard(len(raw))
}

// peek returns the next n bytes of the source, or fewer at its end: an
// error when the body ends before need of them, or a read fails.
func (s *strReader) peek(n, need int) ([]byte, error) {
	w, err := s.p.src.Peek(n)
	if err != nil && !errors.Is(err, io.EOF) {
		return w, &readError{err: err}
	}
	if len(w) < need {
		return w, s.p.syntax("unexpected end of JSON input in a string")
	}
	return w, nil
}

// chunk decodes what the source holds of the string into b: a run of
// plain bytes, or one escape, one character or the closing quote.
func (s *strReader) chunk(b []byte) (int, error) {
	if _, err := s.peek(1, 1); err != nil {
		return 0, err
	}
	win, _ := s.p.src.Peek(s.p.src.Buffered())
	i := 0
	for i < len(win) && i < len(b) {
		c := win[i]
		if c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' {
			b[i] = c
			i++
			continue
		}
		if c < utf8.RuneSelf || !utf8.FullRune(win[i:]) {
			break
		}
		r, size := utf8.DecodeRune(win[i:])
		if r == utf8.RuneError && size <= 1 {
			return 0, s.notUTF8(i)
		}
		if i+size > len(b) {
			break
		}
		copy(b[i:], win[i:i+size])
		i += size
	}
	if i > 0 {
		s.consume(win[:i])
		return i, nil
	}
	switch c := win[0]; {
	case c == '"':
		s.consume(win[:1])
		s.done = true
		return 0, nil
	case c == '\\':
		return s.escape(b)
	case c < 0x20:
		return 0, s.p.syntax("invalid control character %q in a string", c)
	}
	// A character split across reads, or one longer than b.
	w, err := s.p.src.Peek(utf8.UTFMax)
	if !utf8.FullRune(w) && err != nil && !errors.Is(err, io.EOF) {
		return 0, &readError{err: err}
	}
	r, size := utf8.DecodeRune(w)
	if r == utf8.RuneError && size <= 1 {
		return 0, s.notUTF8(0)
	}
	return s.emit(b, w[:size], w[:size]), nil
}

// emit consumes raw and returns decoded in b, what does not fit kept for
// the next Read.
func (s *strReader) emit(b, raw, decoded []byte) int {
	k := copy(b, decoded)
	s.pend = append(s.pendBuf[:0], decoded[k:]...)
	s.consume(raw)
	return k
}

func (s *strReader) notUTF8(at int) error {
	s.p.off += int64(at)
	return &bodyError{detail: "invalid request: the request body is not valid UTF-8"}
}

// escape decodes the escape at the source's head.
func (s *strReader) escape(b []byte) (int, error) {
	w, err := s.peek(2, 2)
	if err != nil {
		return 0, err
	}
	var one [1]byte
	switch w[1] {
	case '"', '\\', '/':
		one[0] = w[1]
	case 'b':
		one[0] = '\b'
	case 'f':
		one[0] = '\f'
	case 'n':
		one[0] = '\n'
	case 'r':
		one[0] = '\r'
	case 't':
		one[0] = '\t'
	case 'u':
		return s.escapeU(b)
	default:
		return 0, s.p.syntax("invalid escape %q in a string", w[:2])
	}
	return s.emit(b, w[:2], one[:]), nil
}

// escapeU decodes a \uXXXX escape, or two that make a surrogate pair.
func (s *strReader) escapeU(b []byte) (int, error) {
	w, err := s.peek(6, 6)
	if err != nil {
		return 0, err
	}
	r, ok := hexRune(w[2:6])
	if !ok {
		return 0, s.p.syntax("invalid escape %q in a string", w[:6])
	}
	size := 6
	if utf16.IsSurrogate(r) {
		if r < 0xdc00 { // high: a low one must follow
			w, err = s.peek(12, 6)
			if err != nil {
				return 0, err
			}
			if len(w) >= 12 && w[6] == '\\' && w[7] == 'u' {
				if lo, ok := hexRune(w[8:12]); ok && lo >= 0xdc00 && lo <= 0xdfff {
					r, size = utf16.DecodeRune(r, lo), 12
				}
			}
		}
		if size == 6 {
			return 0, &bodyError{detail: fmt.Sprintf("invalid request: the request body has an unpaired UTF-16 surrogate \\u%04x", r)}
		}
	}
	var dec [utf8.UTFMax]byte
	return s.emit(b, w[:size], utf8.AppendRune(dec[:0], r)), nil
}

// hexRune decodes four hexadecimal digits.
func hexRune(h []byte) (rune, bool) {
	var r rune
	for _, c := range h {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
