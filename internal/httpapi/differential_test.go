package httpapi_test

// TestStoresAgree drives the same API requests through a server on SQLite
// and one on PostgreSQL and requires the same answers and the same stored
// results. docs/compatibility.md ("The two stores answer alike") says what
// it covers, what it found and which differences it allows.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/crashtest"
	"github.com/iwf-server/iwf-server/internal/server"
	"github.com/iwf-server/iwf-server/iwftest"
)

// diffCase is one request of the differential test.
type diffCase struct {
	name, path string
	body       []byte
}

// diffServer is one of the two servers, with the run ids it has shown so
// far (replaced by their order of appearance, so that the two compare).
type diffServer struct {
	name string
	srv  *server.Server
	runs map[string]string
}

// diffClockStart is where both servers' clocks stand: one instant, so that
// every time either stores is the same.
var diffClockStart = time.Date(2025, time.March, 4, 5, 6, 7, 891234567, time.UTC)

func openDiffServer(t *testing.T, name, db string) *diffServer {
	t.Helper()
	srv, err := server.Open(context.Background(), db, server.Options{
		Engine: engine.Config{WorkerClient: fuzzWorker{}, MaxWait: 2 * time.Second,
			Clock: iwftest.NewFakeClock(diffClockStart)},
		NoMetrics: true,
	})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
	})
	if err := srv.Start(context.Background()); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return &diffServer{name: name, srv: srv, runs: map[string]string{}}
}

// do posts one request and waits until the engine has done what it
// caused; it returns the status and the body with run ids replaced.
func (d *diffServer) do(t *testing.T, path string, body []byte) (int, string) {
	t.Helper()
	status, b := post(d.srv.Handler, path, body)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.srv.Engine.WaitIdle(ctx); err != nil {
		t.Fatalf("%s: waiting for the engine after %s: %v", d.name, path, err)
	}
	return status, d.normalise(b)
}

var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// normalise replaces run ids (UUIDs) by "run-N" in the order this server
// first showed them, and a dump page's JSON document by its content with
// run ids replaced (its checksum, over the raw run ids, is dropped).
func (d *diffServer) normalise(b []byte) string {
	var dump struct {
		Checksum   string `json:"checksum"`
		TotalPages int    `json:"totalPages"`
		JSONData   string `json:"jsonData"`
	}
	if json.Unmarshal(b, &dump) == nil && dump.Checksum != "" && dump.JSONData != "" {
		b = []byte(fmt.Sprintf(`{"totalPages":%d,"jsonData":%s}`, dump.TotalPages, dump.JSONData))
	}
	return uuidRE.ReplaceAllStringFunc(string(b), func(id string) string {
		if n, ok := d.runs[id]; ok {
			return n
		}
		n := fmt.Sprintf("run-%d", len(d.runs)+1)
		d.runs[id] = n
		return n
	})
}

// diffReads are the reads that show what a workflow holds: its current
// run, its description, its data and search attributes and the whole
// internal dump (executions, channels, history).
func diffReads(id string, keys []searchKey) []diffCase {
	q, _ := json.Marshal(id)
	w := string(q)
	sk, _ := json.Marshal(keys)
	return []diffCase{
		{"get", "/api/v1/workflow/get", []byte(`{"workflowId":` + w + `,"needsResults":true}`)},
		{"describe", "/api/v1/workflow/describe", []byte(`{"workflowId":` + w + `}`)},
		{"dataobjects", "/api/v1/workflow/dataobjects/get", []byte(`{"workflowId":` + w + `,"keys":[]}`)},
		{"searchattributes", "/api/v1/workflow/searchattributes/get", []byte(`{"workflowId":` + w + `,"keys":` + string(sk) + `}`)},
		{"dump", "/api/v1/workflow/internal/dump", []byte(`{"workflowId":` + w + `,"workflowRunId":"","pageNum":0,"pageSizeInBytes":8388608}`)},
	}
}

// searchKey is a search attribute key and type a request named.
type searchKey struct {
	Key       string `json:"key"`
	ValueType string `json:"valueType"`
}

// named reads the workflow id and the search attribute keys a request
// body names, when it is a JSON object that names them.
func named(body []byte) (id string, ok bool, keys []searchKey) {
	var req struct {
		WorkflowID           *string     `json:"workflowId"`
		SearchAttributes     []searchKey `json:"searchAttributes"`
		WorkflowStartOptions *struct {
			SearchAttributes []searchKey `json:"searchAttributes"`
		} `json:"workflowStartOptions"`
	}
	if json.Unmarshal(body, &req) != nil || req.WorkflowID == nil {
		return "", false, nil
	}
	keys = req.SearchAttributes
	if req.WorkflowStartOptions != nil {
		keys = append(keys, req.WorkflowStartOptions.SearchAttributes...)
	}
	return *req.WorkflowID, true, keys
}

// diffDifference is one way the two servers answered differently.
type diffDifference struct {
	kind     string // "status", "answer", "stored", "error detail"
	caseName string
	what     string
}

// allowedDifferences are the differences between the stores that are
// intended, each documented in docs/compatibility.md ("The two stores
// answer alike"): match reports whether the difference d, for request
// body, is one. There are none today.
var allowedDifferences = []struct {
	name  string
	match func(d diffDifference, body []byte) bool
}{}

// TestStoresAgree posts the seeds and the corpus of FuzzAPIRequest and the
// edge cases of diffEdgeCases, in that order, to a server on SQLite and one
// on PostgreSQL (both with the fuzz test's in-process worker and one fake
// clock reading), and requires for every request the same status and,
// after the engine is idle, the same answer with run ids replaced; after
// every request that names a workflow, the same stored result read back
// through the API (get, describe, data and search attributes, dump); at
// the end, the same of every workflow any request named, and the same
// answers to searches over the attributes the edge cases stored.
func TestStoresAgree(t *testing.T) {
	lite := openDiffServer(t, "sqlite", "sqlite://"+filepath.Join(t.TempDir(), "iwf.db"))
	pg := openDiffServer(t, "postgres", crashtest.PostgresDB(t))

	var cases []diffCase
	for _, id := range fuzzStarted {
		cases = append(cases, diffCase{"start " + id, "/api/v1/workflow/start", fuzzStartBody(id)})
	}
	for i, e := range fuzzEndpoints {
		cases = append(cases, diffCase{fmt.Sprintf("seed %d", i), e.path, []byte(e.seed)})
	}
	for i, s := range fuzzNearMisses {
		cases = append(cases, diffCase{fmt.Sprintf("near miss %d", i), fuzzEndpoints[int(s.endpoint)%len(fuzzEndpoints)].path, []byte(s.body)})
	}
	cases = append(cases, corpusCases(t)...)
	cases = append(cases, diffEdgeCases()...)

	var diffs []diffDifference
	report := func(d diffDifference, body []byte) {
		for _, a := range allowedDifferences {
			if a.match(d, body) {
				t.Logf("allowed (%s): %s %s: %s", a.name, d.kind, d.caseName, d.what)
				return
			}
		}
		diffs = append(diffs, d)
	}
	ids := map[string][]searchKey{}
	for _, c := range cases {
		ls, lb := lite.do(t, c.path, c.body)
		ps, pb := pg.do(t, c.path, c.body)
		if testing.Verbose() {
			t.Logf("%s: sqlite %d, postgres %d: %s", c.name, ls, ps, short([]byte(pb)))
		}
		switch {
		case ls/100 != ps/100 || (ls >= 400 && ls != ps):
			report(diffDifference{"status", c.name, fmt.Sprintf("POST %s %s: sqlite %d %s, postgres %d %s", c.path, short(c.body), ls, short([]byte(lb)), ps, short([]byte(pb)))}, c.body)
		case ls < 300 && lb != pb:
			report(diffDifference{"answer", c.name, fmt.Sprintf("POST %s %s: sqlite %s, postgres %s", c.path, short(c.body), lb, pb)}, c.body)
		case ls >= 400 && lb != pb:
			report(diffDifference{"error detail", c.name, fmt.Sprintf("POST %s %s: sqlite %s, postgres %s", c.path, short(c.body), lb, pb)}, c.body)
		}
		id, ok, keys := named(c.body)
		if !ok {
			continue
		}
		if _, seen := ids[id]; !seen || (ls < 300 && ps < 300) {
			// The keys of a request both refused may be keys no read
			// takes (a NUL, say): the reads name only accepted ones.
			ids[id] = append(ids[id], keys...)
		}
		for _, r := range diffReads(id, ids[id]) {
			compareRead(t, lite, pg, c, r, report)
		}
	}
	// Everything any request named, once more at the end.
	sorted := make([]string, 0, len(ids))
	for id := range ids {
		sorted = append(sorted, id)
	}
	sort.Strings(sorted)
	for _, id := range sorted {
		c := diffCase{name: "final read of " + strconv.Quote(short([]byte(id))), body: []byte(`{}`)}
		for _, r := range diffReads(id, ids[id]) {
			compareRead(t, lite, pg, c, r, report)
		}
	}
	for _, q := range diffSearches() {
		c := diffCase{"search " + q, "/api/v1/workflow/search", []byte(`{"query":` + strconv.Quote(q) + `,"pageSize":1000}`)}
		ls, lb := lite.do(t, c.path, c.body)
		ps, pb := pg.do(t, c.path, c.body)
		if testing.Verbose() {
			t.Logf("%s: sqlite %d, postgres %d: %s", c.name, ls, ps, short([]byte(pb)))
		}
		if ls != ps || lb != pb {
			report(diffDifference{"answer", c.name, fmt.Sprintf("sqlite %d %s, postgres %d %s", ls, lb, ps, pb)}, c.body)
		}
	}
	t.Logf("%d requests, %d workflows read back, %d differences", len(cases), len(ids), len(diffs))
	for _, d := range diffs {
		t.Errorf("%s differs (%s): %s", d.kind, d.caseName, d.what)
	}
}

// compareRead makes one read-back request on both servers.
func compareRead(t *testing.T, lite, pg *diffServer, c, r diffCase, report func(diffDifference, []byte)) {
	t.Helper()
	ls, lb := lite.do(t, r.path, r.body)
	ps, pb := pg.do(t, r.path, r.body)
	if ls != ps || lb != pb {
		report(diffDifference{"stored", c.name, fmt.Sprintf("after POST %s %s, %s: sqlite %d, postgres %d: %s",
			c.path, short(c.body), r.name, ls, ps, firstDifference(lb, pb))}, c.body)
	}
}

// firstDifference shows where a and b first differ, with some context.
func firstDifference(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	from := max(0, i-120)
	cut := func(s string) string { return strconv.Quote(s[from:min(len(s), i+120)]) }
	return fmt.Sprintf("at byte %d: sqlite …%s…, postgres …%s…", i, cut(a), cut(b))
}

// short is b, quoted, cut to 300 bytes.
func short(b []byte) string {
	if len(b) > 300 {
		return strconv.Quote(string(b[:300])) + fmt.Sprintf("... (%d bytes)", len(b))
	}
	return strconv.Quote(string(b))
}

// corpusCases reads FuzzAPIRequest's corpus (testdata/fuzz/FuzzAPIRequest),
// in file name order.
func corpusCases(t *testing.T) []diffCase {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", "FuzzAPIRequest")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var cases []diffCase
	for _, e := range entries {
		endpoint, body, err := readCorpusFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		cases = append(cases, diffCase{"corpus " + e.Name(), fuzzEndpoints[int(endpoint)%len(fuzzEndpoints)].path, body})
	}
	return cases
}

// readCorpusFile reads a corpus file of FuzzAPIRequest: "go test fuzz v1",
// then byte('…') and []byte("…") in Go syntax.
func readCorpusFile(path string) (uint8, []byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, nil, err
	}
	if len(lines) != 3 || lines[0] != "go test fuzz v1" {
		return 0, nil, fmt.Errorf("not a corpus file of two values: %q", lines)
	}
	arg := func(line, prefix string) (string, error) {
		s, ok := strings.CutPrefix(line, prefix+"(")
		if !ok || !strings.HasSuffix(s, ")") {
			return "", fmt.Errorf("want %s(...): %q", prefix, line)
		}
		return strings.TrimSuffix(s, ")"), nil
	}
	var endpoint uint8
	if lit, err := arg(lines[1], "byte"); err == nil {
		r, _, tail, err := strconv.UnquoteChar(strings.TrimSuffix(strings.TrimPrefix(lit, "'"), "'"), '\'')
		if err != nil || tail != "" || r > 255 {
			return 0, nil, fmt.Errorf("byte literal %s: %v", lit, err)
		}
		endpoint = uint8(r)
	} else if lit, err2 := arg(lines[1], "uint8"); err2 == nil {
		n, err := strconv.ParseUint(lit, 0, 8)
		if err != nil {
			return 0, nil, err
		}
		endpoint = uint8(n)
	} else {
		return 0, nil, err
	}
	lit, err := arg(lines[2], "[]byte")
	if err != nil {
		return 0, nil, err
	}
	body, err := strconv.Unquote(lit)
	if err != nil {
		return 0, nil, fmt.Errorf("[]byte literal: %v", err)
	}
	return endpoint, []byte(body), nil
}

// diffEdgeCases are requests beyond the fuzz corpus: ids and keys with NUL
// bytes, invalid UTF-8, great lengths and unicode normalisation forms,
// empty strings, search attribute values at the edges of each type, and
// duplicate keys.
func diffEdgeCases() []diffCase {
	var cases []diffCase
	add := func(name, path, body string) {
		cases = append(cases, diffCase{name, path, []byte(body)})
	}
	start := func(name, idJSON string) {
		add(name, "/api/v1/workflow/start", `{"workflowId":`+idJSON+`,"iwfWorkflowType":"T","workflowTimeoutSeconds":0,"iwfWorkerUrl":"http://localhost:8803","startStateId":"S1"}`)
	}
	long := func(n int) string { return strings.Repeat("x", n) }

	// Workflow ids.
	start("id with NUL", `"edge-nul-\u0000-id"`)
	start("id with invalid UTF-8", "\"edge-bad-\xff\xfe-utf8\"")
	start("id with a lone surrogate escape", `"edge-\ud800-surrogate"`)
	start("id, composed é", `"edge-caf\u00e9"`)
	start("id, decomposed é", `"edge-cafe\u0301"`)
	start("empty id", `""`)
	start("id of 1000 bytes", `"edge-`+long(995)+`"`)
	start("id of 3000 bytes", `"edge-`+long(2995)+`"`)
	start("id of 100000 bytes", `"edge-`+long(99995)+`"`)
	start("id of one space", `" "`)
	add("signal to the NUL id", "/api/v1/workflow/signal", `{"workflowId":"edge-nul-\u0000-id","signalChannelName":"ch","signalValue":{"data":"1"}}`)
	add("get of a prefix of the NUL id", "/api/v1/workflow/get", `{"workflowId":"edge-nul-"}`)

	// Data attribute keys and values.
	setData := func(name, objects string) {
		add(name, "/api/v1/workflow/dataobjects/set", `{"workflowId":"edge-data","objects":`+objects+`}`)
	}
	start("workflow for data attributes", `"edge-data"`)
	setData("data key with NUL", `[{"key":"k-\u0000-nul","value":{"encoding":"json","data":"1"}}]`)
	setData("data key with invalid UTF-8", "[{\"key\":\"k-\xff\",\"value\":{\"data\":\"2\"}}]")
	setData("empty data key", `[{"key":"","value":{"data":"3"}}]`)
	setData("data key of 3000 bytes", `[{"key":"`+long(3000)+`","value":{"data":"4"}}]`)
	setData("data value with NUL", `[{"key":"v-nul","value":{"encoding":"json","data":"a\u0000b"}}]`)
	setData("data value, empty encoding and data", `[{"key":"v-empty","value":{"encoding":"","data":""}}]`)
	setData("data value absent", `[{"key":"v-absent"}]`)
	setData("duplicate data keys", `[{"key":"dup","value":{"data":"first"}},{"key":"dup","value":{"data":"second"}}]`)
	setData("composed and decomposed keys", `[{"key":"caf\u00e9","value":{"data":"composed"}},{"key":"cafe\u0301","value":{"data":"decomposed"}}]`)
	add("duplicate JSON members", "/api/v1/workflow/dataobjects/set", `{"workflowId":"edge-data","workflowId":"edge-data","objects":[{"key":"jm","value":{"data":"a"}}],"objects":[{"key":"jm","value":{"data":"b"}}]}`)
	add("data get of chosen keys", "/api/v1/workflow/dataobjects/get", `{"workflowId":"edge-data","keys":["dup","","missing","cafe\u0301"]}`)
	add("data get of a NUL key", "/api/v1/workflow/dataobjects/get", `{"workflowId":"edge-data","keys":["dup","k-\u0000-nul"]}`)
	add("data get of a key of 3000 bytes", "/api/v1/workflow/dataobjects/get", `{"workflowId":"edge-data","keys":["`+long(3000)+`"]}`)
	for _, policy := range []string{
		`{"persistenceLoadingType":"LOAD_PARTIAL_WITHOUT_LOCKING","partialLoadingKeys":["dup","k\u0000"]}`,
		`{"persistenceLoadingType":"LOAD_PARTIAL_WITH_EXCLUSIVE_LOCK","partialLoadingKeys":["dup"],"lockingKeys":["k\u0000"]}`,
		`{"persistenceLoadingType":"LOAD_ALL_WITH_PARTIAL_LOCK","lockingKeys":["` + long(3000) + `"]}`,
	} {
		add("rpc loading data "+short([]byte(policy)), "/api/v1/workflow/rpc", `{"workflowId":"edge-data","rpcName":"r","input":{"data":"x"},"timeoutSeconds":5,"dataAttributesLoadingPolicy":`+policy+`}`)
		add("rpc loading search attributes "+short([]byte(policy)), "/api/v1/workflow/rpc", `{"workflowId":"edge-data","rpcName":"r","input":{"data":"x"},"timeoutSeconds":5,"searchAttributesLoadingPolicy":`+policy+`}`)
	}
	add("start waiting for a NUL state's completion", "/api/v1/workflow/start", `{"workflowId":"edge-wait-nul","iwfWorkflowType":"T","workflowTimeoutSeconds":0,"iwfWorkerUrl":"http://localhost:8803","startStateId":"S1","workflowStartOptions":{"waitForCompletionStateIds":["S\u00001"],"waitForCompletionStateExecutionIds":["S1-1\u0000"]}}`)
	add("start waiting for a long state id's completion", "/api/v1/workflow/start", `{"workflowId":"edge-wait-long","iwfWorkflowType":"T","workflowTimeoutSeconds":0,"iwfWorkerUrl":"http://localhost:8803","startStateId":"S1","workflowStartOptions":{"waitForCompletionStateIds":["`+long(3000)+`"]}}`)

	// Search attributes of each type at their edges: each value is set on
	// edge-sa in turn (an update) and given to a workflow of its own at
	// its start (an insert), which the searches of diffSearches then find.
	nSA := 0
	setSA := func(name, attrs string) {
		add(name, "/api/v1/workflow/searchattributes/set", `{"workflowId":"edge-sa","searchAttributes":`+attrs+`}`)
		nSA++
		add(name+" at a start", "/api/v1/workflow/start", fmt.Sprintf(`{"workflowId":"sa-%03d","iwfWorkflowType":"SA","workflowTimeoutSeconds":0,"iwfWorkerUrl":"http://localhost:8803","startStateId":"S1","workflowStartOptions":{"searchAttributes":%s}}`, nSA, attrs))
	}
	start("workflow for search attributes", `"edge-sa"`)
	for _, v := range []string{"9223372036854775807", "-9223372036854775808", "0", "-1", "9223372036854775808", "1e3", "1.5", "-0", "1e400"} {
		setSA("INT "+v, `[{"key":"EdgeInt","valueType":"INT","integerValue":`+v+`}]`)
	}
	for _, v := range []string{"1.7976931348623157e308", "-1.7976931348623157e308", "5e-324", "-0.0", "0", "1e-7", "123456789012345678901234567890", "1e309", "0.1"} {
		setSA("DOUBLE "+v, `[{"key":"EdgeDouble","valueType":"DOUBLE","doubleValue":`+v+`}]`)
	}
	for _, v := range []string{"true", "false", `"true"`, "1"} {
		setSA("BOOL "+v, `[{"key":"EdgeBool","valueType":"BOOL","boolValue":`+v+`}]`)
	}
	for _, v := range []string{`""`, `"a\u0000b"`, "\"bad-\xff\"", `"caf\u00e9"`, `"` + long(3000) + `"`, `"` + long(100000) + `"`, `"  spaced  "`, `"Ünïcödé"`} {
		setSA("KEYWORD "+short([]byte(v)), `[{"key":"EdgeKeyword","valueType":"KEYWORD","stringValue":`+v+`}]`)
		setSA("TEXT "+short([]byte(v)), `[{"key":"EdgeText","valueType":"TEXT","stringValue":`+v+`}]`)
	}
	for _, v := range []string{`[]`, `["a","a","b"]`, `["", "x"]`, `["n\u0000ul"]`, `["` + long(3000) + `"]`, `["b","a"]`} {
		setSA("KEYWORD_ARRAY "+short([]byte(v)), `[{"key":"EdgeKeywords","valueType":"KEYWORD_ARRAY","stringArrayValue":`+v+`}]`)
	}
	for _, v := range []string{
		"0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999Z", "1970-01-01T00:00:00Z", "1969-12-31T23:59:59.999999999Z",
		"2024-02-29T12:00:00+14:00", "2024-02-29T12:00:00-12:00", "2016-12-31T23:59:60Z", "2024-02-30T00:00:00Z",
		"2024-01-02T03:04:05.123456789Z", "2024-01-02T03:04:05.1234567891Z", "2024-01-02", "2024-01-02T03:04:05", "",
		"10000-01-01T00:00:00Z", "2262-04-11T23:47:16.854775808Z", "1677-09-21T00:12:43.145224191Z",
	} {
		setSA("DATETIME "+v, `[{"key":"EdgeDatetime","valueType":"DATETIME","stringValue":"`+v+`"}]`)
	}
	setSA("search key with NUL", `[{"key":"Edge\u0000Nul","valueType":"KEYWORD","stringValue":"x"}]`)
	setSA("empty search key", `[{"key":"","valueType":"KEYWORD","stringValue":"x"}]`)
	setSA("search key of 3000 bytes", `[{"key":"`+long(3000)+`","valueType":"KEYWORD","stringValue":"x"}]`)
	setSA("duplicate search keys", `[{"key":"EdgeDup","valueType":"INT","integerValue":1},{"key":"EdgeDup","valueType":"INT","integerValue":2}]`)
	setSA("one key, two types", `[{"key":"EdgeTwoTypes","valueType":"INT","integerValue":1},{"key":"EdgeTwoTypes","valueType":"KEYWORD","stringValue":"one"}]`)
	setSA("value of another type", `[{"key":"EdgeMixed","valueType":"INT","stringValue":"1"}]`)
	add("start with edge search attributes", "/api/v1/workflow/start", `{"workflowId":"edge-sa-start","iwfWorkflowType":"T","workflowTimeoutSeconds":0,"iwfWorkerUrl":"http://localhost:8803","startStateId":"S1","workflowStartOptions":{"searchAttributes":[`+
		`{"key":"EdgeInt","valueType":"INT","integerValue":-9223372036854775808},{"key":"EdgeDouble","valueType":"DOUBLE","doubleValue":5e-324},`+
		`{"key":"EdgeDatetime","valueType":"DATETIME","stringValue":"0001-01-01T00:00:00Z"},{"key":"EdgeKeyword","valueType":"KEYWORD","stringValue":""},`+
		`{"key":"EdgeKeywords","valueType":"KEYWORD_ARRAY","stringArrayValue":["a","a"]}]}}`)

	// Other requests with edge values.
	add("signal with an empty channel name", "/api/v1/workflow/signal", `{"workflowId":"edge-data","signalChannelName":"","signalValue":{"data":"1"}}`)
	add("signal with a NUL channel name", "/api/v1/workflow/signal", `{"workflowId":"edge-data","signalChannelName":"c\u0000h","signalValue":{"data":"1"}}`)
	add("publish to a NUL channel", "/api/v1/workflow/publishToInternalChannel", `{"workflowId":"edge-data","messages":[{"channelName":"i\u0000ch","value":{"data":"m"}}]}`)
	add("stop with a NUL reason", "/api/v1/workflow/stop", `{"workflowId":"edge-data","stopType":"FAIL","reason":"r\u0000eason"}`)
	add("start with a negative timeout", "/api/v1/workflow/start", `{"workflowId":"edge-neg","iwfWorkflowType":"T","workflowTimeoutSeconds":-1,"iwfWorkerUrl":"http://localhost:8803","startStateId":"S1"}`)
	add("start with a huge timeout", "/api/v1/workflow/start", `{"workflowId":"edge-huge","iwfWorkflowType":"T","workflowTimeoutSeconds":2147483647,"iwfWorkerUrl":"http://localhost:8803","startStateId":"S1"}`)
	add("start with a NUL type", "/api/v1/workflow/start", `{"workflowId":"edge-type","iwfWorkflowType":"T\u0000","workflowTimeoutSeconds":0,"iwfWorkerUrl":"http://localhost:8803","startStateId":"S1"}`)
	add("start with a NUL state id", "/api/v1/workflow/start", `{"workflowId":"edge-state","iwfWorkflowType":"T","workflowTimeoutSeconds":0,"iwfWorkerUrl":"http://localhost:8803","startStateId":"S\u00001"}`)
	return cases
}

// diffSearches are queries over what the edge cases stored: each
// attribute's values in order both ways, equality, ranges, prefixes and
// lists at the edges of each type.
func diffSearches() []string {
	var qs []string
	for _, a := range []string{"EdgeInt", "EdgeDouble", "EdgeBool", "EdgeKeyword", "EdgeText", "EdgeKeywords", "EdgeDatetime", "WorkflowId", "StartTime"} {
		qs = append(qs, a+" IS NOT NULL ORDER BY "+a+" ASC", a+" IS NOT NULL ORDER BY "+a+" DESC")
	}
	return append(qs,
		"EdgeInt = -9223372036854775808", "EdgeInt = 9223372036854775807", "EdgeInt >= 0", "EdgeInt < 0", "EdgeInt = -0",
		"EdgeInt BETWEEN -1 AND 1", "EdgeInt IN (0, -1, 9223372036854775807)", "EdgeInt > 1.5", "EdgeInt = 1e3",
		"EdgeDouble > 0", "EdgeDouble <= 5e-324", "EdgeDouble = 0", "EdgeDouble = -0", "EdgeDouble < -1e308",
		"EdgeDouble = 0.1", "EdgeDouble = 1.7976931348623157e308", "EdgeDouble BETWEEN 0 AND 1",
		"EdgeBool = true", "EdgeBool = false", "EdgeBool != true",
		"EdgeKeyword = ''", "EdgeKeyword = 'café'", "EdgeKeyword = 'cafe\u0301'", "EdgeKeyword STARTS_WITH 'x'",
		"EdgeKeyword STARTS_WITH ''", "EdgeKeyword > 'Z'", "EdgeKeyword = '  spaced  '", "EdgeKeyword IN ('', 'Ünïcödé')",
		"EdgeText = 'Ünïcödé'", "EdgeText = 'spaced'", "EdgeText = 'ünïcödé'", "EdgeText = ''",
		"EdgeKeywords = 'a'", "EdgeKeywords = ''", "EdgeKeywords IN ('a', 'b')", "EdgeKeywords != 'a'", "EdgeKeywords IS NULL",
		"EdgeDatetime < '1970-01-01T00:00:00Z'", "EdgeDatetime >= '2262-01-01T00:00:00Z'", "EdgeDatetime = '1969-12-31T23:59:59.999999999Z'",
		"EdgeDatetime BETWEEN '2024-01-02T03:04:05.123456788Z' AND '2024-01-02T03:04:05.12345679Z'",
		"EdgeDatetime = '2024-02-29T12:00:00+14:00'", "EdgeDatetime = '2024-02-28T22:00:00Z'",
		"WorkflowId STARTS_WITH 'edge-' ORDER BY WorkflowId ASC", "WorkflowId >= 'edge-caf' ORDER BY WorkflowId DESC",
		"WorkflowId = 'edge-café'", "WorkflowId STARTS_WITH 'edge-cafe'",
		"EdgeTwoTypes = 1", "EdgeTwoTypes = 'one'", "EdgeDup = 2", "EdgeDup = 1",
		"WorkflowType = 'SA' ORDER BY StartTime DESC", "WorkflowType = 'T'", "",
	)
}
