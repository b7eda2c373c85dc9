package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/auth"
)

// memSpill is a spill function that keeps what it is given in memory.
type memSpill struct {
	mu      sync.Mutex
	objects map[string]string // by path
	fail    error             // returned after reading, when set
	readErr error             // the error the last reader returned
}

func (m *memSpill) spill(r io.Reader) (engine.PayloadRef, error) {
	b, err := io.ReadAll(r)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.readErr = err
		return engine.PayloadRef{}, err
	}
	if m.fail != nil {
		return engine.PayloadRef{}, m.fail
	}
	if m.objects == nil {
		m.objects = map[string]string{}
	}
	ref := engine.PayloadRef{StoreID: "mem", Path: fmt.Sprintf("_request/%d", len(m.objects))}
	m.objects[ref.Path] = string(b)
	return ref, nil
}

// readers are the ways a test feeds a body: at once, a byte at a time
// (every escape and character split across reads), in halves.
var readers = map[string]func(string) io.Reader{
	"whole":   func(s string) io.Reader { return strings.NewReader(s) },
	"onebyte": func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
	"half":    func(s string) io.Reader { return iotest.HalfReader(strings.NewReader(s)) },
}

// rewrite runs rewriteBody on body with each reader, checks that they all
// give the same answer, and returns it with what was spilled.
func rewrite(t *testing.T, body string, threshold int) (string, map[string]string, error) {
	t.Helper()
	var (
		first       string
		firstSpill  map[string]string
		firstErr    error
		firstReader string
	)
	for _, name := range []string{"whole", "onebyte", "half"} {
		m := &memSpill{}
		out, refs, err := rewriteBody(readers[name](body), threshold, m.spill)
		if err == nil && len(refs) != len(m.objects) {
			t.Fatalf("%s: %d references returned, %d objects written", name, len(refs), len(m.objects))
		}
		if firstReader == "" {
			first, firstSpill, firstErr, firstReader = string(out), m.objects, err, name
			continue
		}
		if string(out) != first || !reflect.DeepEqual(m.objects, firstSpill) || fmt.Sprint(err) != fmt.Sprint(firstErr) {
			t.Fatalf("read %s: %s %v; read %s: %s %v", firstReader, first, firstErr, name, out, err)
		}
	}
	return first, firstSpill, firstErr
}

// decode decodes JSON into generic values.
func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatalf("not JSON: %v: %.200s", err, s)
	}
	return v
}

// restore puts the spilled data back in the place of the references to
// it, and reports how many it put back.
func restore(v any, objects map[string]string) (any, int) {
	n := 0
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			if p, ok := x["extPath"].(string); ok && x["extStoreId"] == "mem" {
				if data, ok := objects[p]; ok {
					delete(x, "extPath")
					delete(x, "extStoreId")
					x["data"] = data
					n++
				}
			}
			for k, c := range x {
				x[k] = walk(c)
			}
		case []any:
			for i, c := range x {
				x[i] = walk(c)
			}
		}
		return v
	}
	return walk(v), n
}

// checkSame fails the test unless out, with the spilled data put back,
// decodes to what in does, and every object was put back once.
func checkSame(t *testing.T, in, out string, objects map[string]string) {
	t.Helper()
	got, n := restore(decode(t, out), objects)
	if n != len(objects) {
		t.Errorf("%d of the %d objects are referred to", n, len(objects))
	}
	if want := decode(t, in); !reflect.DeepEqual(got, want) {
		t.Errorf("the rewritten body decodes to\n%.300v\nwant\n%.300v", got, want)
	}
}

// jsonString returns s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestRewriteBodyEscapes: a data string over the threshold is streamed
// unescaped, every escape decoded wherever the reads split it, and the
// body that is left refers to it in its place.
func TestRewriteBodyEscapes(t *testing.T) {
	const threshold = 64
	// Every escape JSON has, and characters of 2, 3 and 4 bytes, raw and
	// escaped (a surrogate pair).
	piece := `a\"b\\c\/d\be\ff\ng\rh\ti\u00e9j\u20ack\ud83d\ude00l` + "é€😀" + `\u0000m`
	raw := strings.Repeat(piece, 20)
	var want string
	if err := json.Unmarshal([]byte(`"`+raw+`"`), &want); err != nil {
		t.Fatal(err)
	}
	body := `{"workflowId":"w","signalChannelName":"c","signalValue":{"encoding":"json","data":"` + raw + `"}}`
	out, objects, err := rewrite(t, body, threshold)
	if err != nil {
		t.Fatal(err)
	}
	if len(objects) != 1 || objects["_request/0"] != want {
		t.Fatalf("spilled %q, want %q", objects, want)
	}
	if wantOut := `{"workflowId":"w","signalChannelName":"c","signalValue":{"encoding":"json","extStoreId":"mem","extPath":"_request/0"}}`; out != wantOut {
		t.Fatalf("rewritten:\n%s\nwant\n%s", out, wantOut)
	}
	checkSame(t, body, out, objects)
}

// TestRewriteBodyThreshold: data of at most threshold bytes, unescaped,
// stays in the body as it was sent (its escapes too); one byte more is
// streamed. A character, escaped or not, that straddles the threshold
// goes whole to the object.
func TestRewriteBodyThreshold(t *testing.T) {
	const threshold = 32
	for _, tc := range []struct {
		name    string
		data    string // raw, as in the JSON
		spilled bool
	}{
		{"under", strings.Repeat("x", threshold-1), false},
		{"at", strings.Repeat("x", threshold), false},
		{"over", strings.Repeat("x", threshold+1), true},
		{"at with escapes", strings.Repeat(`\n`, threshold), false}, // 64 bytes raw, 32 unescaped
		{"over with escapes", strings.Repeat(`\n`, threshold+1), true},
		{"at with \\u", strings.Repeat(`\u0041`, threshold), false},
		{"empty", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"workflowId":"w","objects":[{"key":"k","value":{"data":"` + tc.data + `"}}]}`
			out, objects, err := rewrite(t, body, threshold)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(objects) == 1; got != tc.spilled {
				t.Fatalf("spilled %v, want %v: %s", got, tc.spilled, out)
			}
			if !tc.spilled && out != body {
				t.Fatalf("a short data string was changed:\n%s\nwant\n%s", out, body)
			}
			checkSame(t, body, out, objects)
		})
	}
	// A character of 2, 3 and 4 bytes, raw or escaped, at every place
	// around the threshold.
	for _, ch := range []string{"é", "€", "😀", `\u00e9`, `\u20ac`, `\ud83d\ude00`} {
		for k := 0; k <= 5; k++ {
			data := strings.Repeat("x", threshold-k) + ch + "tail"
			body := `{"input":{"data":"` + data + `"}}`
			out, objects, err := rewrite(t, body, threshold)
			if err != nil {
				t.Fatalf("%s at %d: %v", ch, k, err)
			}
			checkSame(t, body, out, objects)
		}
	}
}

// TestRewriteBodyEncodedObjects: the data members of every encoded object
// of the request bodies are streamed (a start's input and data
// attributes, a signal's value, published values, an RPC's input); a
// "data" member anywhere else is not, whatever its size.
func TestRewriteBodyEncodedObjects(t *testing.T) {
	const threshold = 16
	big := func(what string) string { return what + strings.Repeat("-", threshold) }
	start := fmt.Sprintf(`{"workflowId":"w","iwfWorkflowType":"T","iwfWorkerUrl":"http://w","workflowTimeoutSeconds":0,
		"stateInput":{"encoding":"json","data":%q},
		"stateOptions":{"data":%q,"dataAttributesLoadingPolicy":{"persistenceLoadingType":"LOAD_ALL_WITHOUT_LOCKING"}},
		"workflowStartOptions":{"dataAttributes":[{"key":"a","value":{"data":%q}},{"key":"b","value":{"data":"small"}},{"key":"c","value":{"data":null}}],
			"searchAttributes":[{"key":"k","valueType":"KEYWORD","stringValue":%q}]},
		"data":%q}`, big("input"), big("not a payload"), big("attribute"), big("keyword"), big("top level"))
	out, objects, err := rewrite(t, start, threshold)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range objects {
		got = append(got, v)
	}
	sort.Strings(got)
	if want := []string{big("attribute"), big("input")}; !slices.Equal(got, want) {
		t.Fatalf("spilled %q, want %q", got, want)
	}
	checkSame(t, start, out, objects)

	for _, body := range []string{
		fmt.Sprintf(`{"workflowId":"w","signalChannelName":"c","signalValue":{"data":%q}}`, big("signal")),
		fmt.Sprintf(`{"workflowId":"w","messages":[{"channelName":"c","value":{"data":%q}},{"channelName":"d","value":{"data":%q}}]}`, big("one"), big("two")),
		fmt.Sprintf(`{"workflowId":"w","rpcName":"r","input":{"data":%q},"timeoutSeconds":3}`, big("rpc")),
	} {
		out, objects, err := rewrite(t, body, threshold)
		if err != nil {
			t.Fatal(err)
		}
		if len(objects) != strings.Count(body, strings.Repeat("-", threshold)) {
			t.Errorf("%d objects from %s", len(objects), body)
		}
		checkSame(t, body, out, objects)
	}
}

// TestRewriteBodyReferenceBeside: data sent beside a reference (as an API
// answer shows a payload) is what counts: once the data is streamed, the
// reference the client sent, before or after it, is left out, so that
// the body names only the new object. Members match as encoding/json
// matches them to fields, whatever their case.
func TestRewriteBodyReferenceBeside(t *testing.T) {
	const threshold = 8
	data := strings.Repeat("d", 20)
	for _, tc := range []struct{ in, want string }{
		{`{"value":{"encoding":"json","data":"` + data + `","extStoreId":"old","extPath":"w/x"}}`,
			`{"value":{"encoding":"json","extStoreId":"mem","extPath":"_request/0"}}`},
		{`{"value":{"extStoreId":"old","extPath":"w/x","data":"` + data + `","encoding":"json"}}`,
			`{"value":{"extStoreId":"mem","extPath":"_request/0","encoding":"json"}}`},
		{`{"value":{"extPath":"w/x","encoding":"json","EXTSTOREID":"old","Data":"` + data + `"}}`,
			`{"value":{"encoding":"json","extStoreId":"mem","extPath":"_request/0"}}`},
		{`{"value":{"Data":"` + data + `","extPath":{"not":"a string"}}}`,
			`{"value":{"extStoreId":"mem","extPath":"_request/0"}}`},
		{`{"value":{"data":"short","data":"short"}}`, `{"value":{"data":"short","data":"short"}}`},
		{`{"Value":{"data":"` + data + `"}, "x" : [ 1 , -2.5e3 , true , null , "s" ] }`,
			`{"Value":{"extStoreId":"mem","extPath":"_request/0"},"x":[1,-2.5e3,true,null,"s"]}`},
		{`{"value":{"data":12345678901234567890}}`, `{"value":{"data":12345678901234567890}}`},
	} {
		out, objects, err := rewrite(t, tc.in, threshold)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if out != tc.want {
			t.Errorf("%s\nrewritten to %s\nwant         %s", tc.in, out, tc.want)
		}
		if len(objects) > 0 && objects["_request/0"] != data {
			t.Errorf("%s: spilled %q", tc.in, objects)
		}
	}
	// Two data members, one of them streamed: refused, whichever comes
	// first (the last would count when decoded, not the reference).
	for _, body := range []string{
		`{"value":{"data":"` + data + `","data":"short"}}`,
		`{"value":{"data":"short","DATA":"` + data + `"}}`,
		`{"value":{"data":null,"data":"` + data + `"}}`,
		`{"value":{"data":"` + data + `","data":null}}`,
	} {
		_, _, err := rewrite(t, body, threshold)
		var be *bodyError
		if !errors.As(err, &be) || !strings.Contains(be.detail, "more than one data member") {
			t.Errorf("%s: %v", body, err)
		}
	}
}

// TestRewriteBodyInvalid: what encoding/json would refuse or silently
// change is refused, with a message that says what and where, whether the
// fault is in the part of a string held, in the part streamed or
// elsewhere; a fault in a streamed string fails its stream to the store,
// so that no object is written whole. (A fault after a string streamed
// whole leaves its object to the payload sweep.)
func TestRewriteBodyInvalid(t *testing.T) {
	const threshold = 8
	long := strings.Repeat("x", 40)
	for _, tc := range []struct{ body, want string }{
		{`{"value":{"data":"` + long + `\x` + long + `"}}`, `invalid escape "\\x"`},
		{`{"value":{"data":"` + long + `\u12g4"}}`, `invalid escape "\\u12g4"`},
		{`{"value":{"data":"` + long + `\ud800"}}`, `unpaired UTF-16 surrogate \ud800`},
		{`{"value":{"data":"` + long + `\ud800\u0041"}}`, `unpaired UTF-16 surrogate \ud800`},
		{`{"value":{"data":"` + long + `\udc00"}}`, `unpaired UTF-16 surrogate \udc00`},
		{`{"value":{"data":"ab\ud800"}}`, `unpaired UTF-16 surrogate \ud800`},
		{`{"value":{"data":"` + long + "\x01" + `"}}`, `invalid control character '\x01' in a string`},
		{`{"value":{"data":"` + long + "\xff" + `"}}`, `not valid UTF-8`},
		{`{"value":{"data":"` + long + "\xe2\x82" + `"}}`, `not valid UTF-8`},
		{`{"value":{"data":"` + long, `unexpected end of JSON input in a string`},
		{`{"value":{"data":"` + long + `"`, `unexpected end of JSON input`}, // after the string: written
		{`{"value":{"data":"` + long + `\`, `unexpected end of JSON input in a string`},
		{`{"value":{"data":"` + long + `\u00`, `unexpected end of JSON input in a string`},
		{`{"key" 1}`, `invalid character '1' after an object member name`},
		{`{"a":1,}`, `invalid character '}' looking for the beginning of an object member name`},
		{`{"a":[1 2]}`, `invalid character '2' after an array element`},
		{`{"a":tru}`, `invalid literal "tru"`},
		{`{"a":01}`, `invalid literal "01"`},
		{`{"a":1} x`, `invalid character 'x' after the top-level value`},
		{`{"a":'s'}`, `invalid character '\'' looking for the beginning of a value`},
		{strings.Repeat("[", maxSpillDepth+1), `nests more than 10000 levels`},
	} {
		for name, rd := range readers {
			m := &memSpill{}
			_, _, err := rewriteBody(rd(tc.body), threshold, m.spill)
			var be *bodyError
			if !errors.As(err, &be) || !strings.Contains(be.detail, tc.want) {
				t.Errorf("%.60q read %s: %v, want a body error with %q", tc.body, name, err, tc.want)
			}
			if len(m.objects) != 0 && !strings.HasSuffix(tc.body, `"`) {
				t.Errorf("%.60q: written %q", tc.body, m.objects)
			}
		}
	}
	// The error names the place.
	_, _, err := rewriteBody(strings.NewReader(`{"a":1,"b":?}`), threshold, (&memSpill{}).spill)
	if err == nil || !strings.Contains(err.Error(), "at byte 12") {
		t.Errorf("no place: %v", err)
	}
}

// TestRewriteBodyFailures: a body that cannot be read, and a store that
// fails, end the rewrite with their own errors.
func TestRewriteBodyFailures(t *testing.T) {
	const threshold = 8
	body := `{"value":{"data":"` + strings.Repeat("x", 100) + `"}}`
	cut := errors.New("connection reset")
	m := &memSpill{}
	_, _, err := rewriteBody(io.MultiReader(strings.NewReader(body[:50]), iotest.ErrReader(cut)), threshold, m.spill)
	var re *readError
	if !errors.As(err, &re) || !errors.Is(err, cut) || m.readErr == nil {
		t.Fatalf("a body cut while streamed: %v (the store's reader saw %v)", err, m.readErr)
	}
	down := engine.Errorf(engine.CodeUnavailable, "down")
	_, _, err = rewriteBody(strings.NewReader(body), threshold, (&memSpill{fail: down}).spill)
	if !errors.Is(err, down) {
		t.Fatalf("a failed store: %v", err)
	}
}

// TestEncodedObjectMembers: the rewriter's lists match the spec: the
// operations of spillPaths are those whose request bodies hold encoded
// objects (but the batch start, whose value outlives the request, and
// encodedobject/load, which stores nothing); in their bodies every
// encoded object is the value of a member of encodedObjectMembers, and
// "data" is a member of encoded objects only.
func TestEncodedObjectMembers(t *testing.T) {
	spec, err := iwfapi.GetSwagger()
	if err != nil {
		t.Fatal(err)
	}
	encoded := spec.Components.Schemas["EncodedObject"].Value
	var holds func(s *openapi3.Schema, seen map[*openapi3.Schema]bool) bool
	holds = func(s *openapi3.Schema, seen map[*openapi3.Schema]bool) bool {
		if s == nil || seen[s] {
			return false
		}
		seen[s] = true
		if s == encoded {
			return true
		}
		found := false
		for _, p := range s.Properties {
			found = holds(p.Value, seen) || found
		}
		if s.Items != nil {
			found = holds(s.Items.Value, seen) || found
		}
		if s.AdditionalProperties.Schema != nil {
			found = holds(s.AdditionalProperties.Schema.Value, seen) || found
		}
		return found
	}
	// check walks a request schema: the members holding encoded objects
	// and the "data" members.
	var check func(path, where string, s *openapi3.Schema, seen map[*openapi3.Schema]bool)
	check = func(path, where string, s *openapi3.Schema, seen map[*openapi3.Schema]bool) {
		if s == nil || s == encoded || seen[s] {
			return
		}
		seen[s] = true
		if s.AdditionalProperties.Schema != nil && holds(s.AdditionalProperties.Schema.Value, map[*openapi3.Schema]bool{}) {
			t.Errorf("%s: %s is a map of encoded objects, whose keys the rewriter cannot tell from members", path, where)
		}
		for name, p := range s.Properties {
			if name == "data" {
				t.Errorf("%s: %s.data is not an encoded object's", path, where)
			}
			isObject := p.Value == encoded
			listed := slices.ContainsFunc(encodedObjectMembers, func(m string) bool { return strings.EqualFold(m, name) })
			if isObject && !listed {
				t.Errorf("%s: %s.%s is an encoded object, missing from encodedObjectMembers", path, where, name)
			}
			if listed && !isObject && holds(p.Value, map[*openapi3.Schema]bool{}) {
				t.Errorf("%s: %s.%s is named as an encoded object but holds others", path, where, name)
			}
			check(path, where+"."+name, p.Value, seen)
			if p.Value.Items != nil {
				check(path, where+"."+name+"[]", p.Value.Items.Value, seen)
			}
		}
	}
	var storing []string
	for path, item := range spec.Paths.Map() {
		op := item.Post
		if op == nil || op.RequestBody == nil || !slices.Contains(op.Tags, "server") {
			continue // the worker API's operations are the worker's to serve
		}
		s := op.RequestBody.Value.Content.Get("application/json").Schema.Value
		if !holds(s, map[*openapi3.Schema]bool{}) {
			continue
		}
		if path == apiPrefix+"batch/start" || path == encodedObjectLoadPath {
			continue
		}
		storing = append(storing, path)
		check(path, "body", s, map[*openapi3.Schema]bool{})
	}
	var listed []string
	for p := range spillPaths {
		listed = append(listed, p)
	}
	sort.Strings(storing)
	sort.Strings(listed)
	if !slices.Equal(storing, listed) {
		t.Errorf("operations storing encoded objects: %v; spillPaths: %v", storing, listed)
	}
}

// spillRecorder is a Spiller that keeps objects in memory and counts
// its calls.
type spillRecorder struct {
	memSpill
	threshold int
	calls     int
}

func (s *spillRecorder) SpillThreshold() int { return s.threshold }

func (s *spillRecorder) SpillPayload(_ context.Context, r io.Reader) (engine.PayloadRef, error) {
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
	return s.spill(r)
}

// spillService records the signal it receives.
type spillService struct {
	Service
	got  iwfapi.WorkflowSignalRequest
	held []byte
}

func (s *spillService) SignalWorkflow(ctx context.Context, req iwfapi.WorkflowSignalRequest) error {
	s.got, s.held = req, infoFrom(ctx).rawBody()
	return nil
}

// TestSpillBody: through the handler, a body with a big payload reaches
// the operation with a reference in its place, whether its length is
// known or not; a short one, a body of another operation, a caller
// without the right to the operation and a body over the limit write
// nothing; a failed store is a 503.
func TestSpillBody(t *testing.T) {
	const threshold = 1 << 10
	data := strings.Repeat("s", 10*threshold)
	signal := `{"workflowId":"w","signalChannelName":"c","signalValue":{"encoding":"json","data":"` + data + `"}}`
	role := auth.RoleAll
	guard := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), auth.Principal{Actor: "a", Role: role})))
		})
	}
	setup := func(t *testing.T, limit int64) (http.Handler, *spillService, *spillRecorder) {
		svc := &spillService{}
		sp := &spillRecorder{threshold: threshold}
		h, err := NewHandler(svc, Options{Spill: sp, MaxBodyBytes: limit, ExternalStorage: true, Guard: guard})
		if err != nil {
			t.Fatal(err)
		}
		return h, svc, sp
	}
	post := func(h http.Handler, path, body string, chunked bool) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		if chunked {
			req = httptest.NewRequest(http.MethodPost, path, io.NopCloser(strings.NewReader(body)))
			req.ContentLength = -1
		}
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}

	for _, chunked := range []bool{false, true} {
		h, svc, sp := setup(t, 1<<20)
		if rec := post(h, "/api/v1/workflow/signal", signal, chunked); rec.Code != 200 {
			t.Fatalf("signal: %d %s", rec.Code, rec.Body)
		}
		v := svc.got.SignalValue
		if v == nil || v.Data != nil || deref(v.ExtStoreId) != "mem" || deref(v.ExtPath) != "_request/0" || deref(v.Encoding) != "json" {
			t.Fatalf("the operation got %+v", v)
		}
		if sp.objects["_request/0"] != data || svc.held != nil {
			t.Fatalf("written %d bytes; held %d", len(sp.objects["_request/0"]), len(svc.held))
		}
	}

	// A short body is read as it is.
	h, svc, sp := setup(t, 1<<20)
	short := `{"workflowId":"w","signalChannelName":"c","signalValue":{"data":"` + strings.Repeat("s", threshold-100) + `"}}`
	if rec := post(h, "/api/v1/workflow/signal", short, false); rec.Code != 200 || sp.calls != 0 || svc.got.SignalValue.Data == nil {
		t.Fatalf("a short signal: %d, %d spills", rec.Code, sp.calls)
	}
	// Another operation's body is not rewritten, whatever it holds.
	search := `{"query":"","pageSize":1,"data":"` + data + `","value":{"data":"` + data + `"}}`
	if rec := post(h, "/api/v1/batch/start", search, false); sp.calls != 0 {
		t.Fatalf("batch/start: %d %s, %d spills", rec.Code, rec.Body, sp.calls)
	}
	// A caller who may not signal writes nothing.
	role = auth.RoleReader
	if rec := post(h, "/api/v1/workflow/signal", signal, false); rec.Code != http.StatusForbidden || sp.calls != 0 {
		t.Fatalf("a reader's signal: %d %s, %d spills", rec.Code, rec.Body, sp.calls)
	}
	role = auth.RoleAll
	// Over the limit, while streamed: 413, and the object is not written.
	h, _, sp = setup(t, int64(len(signal)-10))
	if rec := post(h, "/api/v1/workflow/signal", signal, true); rec.Code != http.StatusRequestEntityTooLarge || len(sp.objects) != 0 {
		t.Fatalf("over the limit: %d %s, %d objects", rec.Code, rec.Body, len(sp.objects))
	}
	// Invalid JSON in the streamed part: 400.
	h, _, sp = setup(t, 1<<20)
	bad := strings.Replace(signal, "ssss", `ss\q`, 1)
	if rec := post(h, "/api/v1/workflow/signal", bad, false); rec.Code != http.StatusBadRequest ||
		!strings.Contains(rec.Body.String(), `malformed JSON: invalid escape`) || len(sp.objects) != 0 {
		t.Fatalf("an invalid escape: %d %s", rec.Code, rec.Body)
	}
	// Invalid UTF-8 in the streamed part: 400, as in a body held whole.
	bad = strings.Replace(signal, "ssss", "ss\xff", 1)
	if rec := post(h, "/api/v1/workflow/signal", bad, false); rec.Code != http.StatusBadRequest ||
		!strings.Contains(rec.Body.String(), `not valid UTF-8`) {
		t.Fatalf("invalid UTF-8: %d %s", rec.Code, rec.Body)
	}
	// A store that fails: 503, with Retry-After.
	sp.fail = engine.Errorf(engine.CodeUnavailable, "down")
	if rec := post(h, "/api/v1/workflow/signal", signal, false); rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("a failed store: %d %s", rec.Code, rec.Body)
	}
}

// TestSpillOff: without a Spiller, or with its threshold 0 (the external
// stores are only read), bodies are read whole, as they were sent.
func TestSpillOff(t *testing.T) {
	signal := `{"workflowId":"w","signalChannelName":"c","signalValue":{"data":"` + strings.Repeat("s", 5000) + `"}}`
	for _, sp := range []Spiller{nil, &spillRecorder{threshold: 0}} {
		svc := &spillService{}
		h, err := NewHandler(svc, Options{Spill: sp, MaxBodyBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, "/api/v1/workflow/signal", bytes.NewReader([]byte(signal)))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 || len(deref(svc.got.SignalValue.Data)) != 5000 {
			t.Fatalf("%T: %d %s", sp, rec.Code, rec.Body)
		}
	}
}

// fuzzSpillStore is the store id of FuzzRewriteBody's objects: not one a
// fuzzed body is likely to name.
const fuzzSpillStore = "fuzz-spill-7c1e"

// fuzzBody holds every place of an encoded object in the request bodies
// of spillPaths.
type fuzzBody struct {
	WorkflowID           string                               `json:"workflowId"`
	StateInput           *iwfapi.EncodedObject                `json:"stateInput"`
	SignalValue          *iwfapi.EncodedObject                `json:"signalValue"`
	Input                *iwfapi.EncodedObject                `json:"input"`
	Objects              []iwfapi.KeyValue                    `json:"objects"`
	Messages             []iwfapi.InterStateChannelPublishing `json:"messages"`
	WorkflowStartOptions *iwfapi.WorkflowStartOptions         `json:"workflowStartOptions"`
}

// settle gives b's encoded objects the meaning the engine gives them:
// the data of a reference to objects is put in its place, and data sent
// beside a reference is what counts.
func (b *fuzzBody) settle(objects map[string]string) {
	all := []*iwfapi.EncodedObject{b.StateInput, b.SignalValue, b.Input}
	for _, kv := range b.Objects {
		all = append(all, kv.Value)
	}
	for _, m := range b.Messages {
		all = append(all, m.Value)
	}
	if o := b.WorkflowStartOptions; o != nil && o.DataAttributes != nil {
		for _, kv := range *o.DataAttributes {
			all = append(all, kv.Value)
		}
	}
	for _, v := range all {
		if v == nil {
			continue
		}
		if v.Data == nil && deref(v.ExtStoreId) == fuzzSpillStore {
			if data, ok := objects[deref(v.ExtPath)]; ok {
				v.Data = &data
			}
		}
		if v.Data != nil {
			v.ExtStoreId, v.ExtPath = nil, nil
		}
	}
}

// duplicateMembers reports whether an object of the JSON body has a
// member twice (names folded as encoding/json folds them): encoding/json
// merges such members in ways that are not the rewriter's business.
func duplicateMembers(body []byte) bool {
	d := json.NewDecoder(bytes.NewReader(body))
	type frame struct {
		object, wantKey bool
		names           map[string]bool
	}
	var stack []*frame
	for {
		tok, err := d.Token()
		if err != nil {
			return false
		}
		if delim, ok := tok.(json.Delim); ok {
			switch delim {
			case '{', '[':
				if n := len(stack); n > 0 && stack[n-1].object {
					stack[n-1].wantKey = true
				}
				stack = append(stack, &frame{object: delim == '{', wantKey: delim == '{', names: map[string]bool{}})
			default:
				stack = stack[:len(stack)-1]
				if n := len(stack); n > 0 && stack[n-1].object {
					stack[n-1].wantKey = true
				}
			}
			continue
		}
		if n := len(stack); n > 0 && stack[n-1].object {
			f := stack[n-1]
			if f.wantKey {
				name := strings.ToLower(tok.(string))
				if f.names[name] {
					return true
				}
				f.names[name] = true
				f.wantKey = false
			} else {
				f.wantKey = true
			}
		}
	}
}

// FuzzRewriteBody checks the rewriter against encoding/json: a body that
// encoding/json accepts (valid UTF-8, without unpaired surrogate escapes,
// which checkBody refuses) is rewritten without error but for an encoded
// object with a streamed data member and another one; the rewritten body
// is JSON; and, decoded and with the streamed data put back, it means
// what the body did. Errors are one line.
func FuzzRewriteBody(f *testing.F) {
	for _, s := range []string{
		`{"workflowId":"w","signalChannelName":"c","signalValue":{"encoding":"json","data":"0123456789\n\u00e9\ud83d\ude00"}}`,
		`{"workflowId":"w","stateInput":{"data":"abcdefghijkl","extStoreId":"s","extPath":"p"},"workflowStartOptions":{"dataAttributes":[{"key":"k","value":{"data":"0123456789"}}]}}`,
		`{"objects":[{"key":"k","value":{"extPath":"p","Data":"\"\\\/\b\f\n\r\t0123"}}],"input":{"data":null}}`,
		`{"messages":[{"channelName":"c","value":{"data":"short"}},{"value":{"data":"a longer string"}}]} `,
		`[1,-2.5e+3,true,false,null,"s",{"input":{"data":""}}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		m := &memSpill{}
		spill := func(r io.Reader) (engine.PayloadRef, error) {
			ref, err := m.spill(r)
			ref.StoreID = fuzzSpillStore
			return ref, err
		}
		out, _, err := rewriteBody(bytes.NewReader(body), 8, spill)
		accepted := json.Valid(body) && utf8.Valid(body) && checkEscapes(body) == nil
		if err != nil {
			if strings.ContainsAny(err.Error(), "\r\n") {
				t.Fatalf("%q: a multi-line error: %v", body, err)
			}
			if accepted && err != errTwoData {
				t.Fatalf("%q: encoding/json accepts it, the rewriter says %v", body, err)
			}
			return
		}
		if !accepted && len(bytes.TrimSpace(body)) > 0 {
			t.Fatalf("%q: rewritten to %q, but encoding/json refuses it", body, out)
		}
		if len(out) > 0 && !json.Valid(out) {
			t.Fatalf("%q: rewritten to %q, not JSON", body, out)
		}
		if !accepted || duplicateMembers(body) {
			return
		}
		var want, got fuzzBody
		werr := json.Unmarshal(body, &want)
		gerr := json.Unmarshal(out, &got)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%q: decoding %v; rewritten to %q: decoding %v", body, werr, out, gerr)
		}
		if werr != nil {
			return
		}
		want.settle(nil)
		got.settle(m.objects)
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("%q\nrewritten to %q\nmeans %s\nwant  %s", body, out, mustJSON(got), mustJSON(want))
		}
	})
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
