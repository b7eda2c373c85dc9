package engine

// Search (POST /api/v1/workflow/search): the query language, its typing, and
// the dialect-free query that ReadTx.RunSearch executes.
//
// A query goes through three steps:
//
//  1. parseSearchQuery turns the text into a syntax tree (searchExpr), with
//     the position of every token for error messages;
//  2. typeSearchQuery resolves every attribute to a SearchField with a value
//     type, converts the literals to that type, checks that the operator
//     applies to it, and pushes NOT down to the conditions, which yields a
//     SearchQuery made of SearchAnd, SearchOr and SearchCond only;
//  3. the store compiles the SearchQuery to parameterised SQL and returns one
//     page of (workflowId, runId) pairs and an opaque cursor, which the
//     engine wraps into the nextPageToken.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// DefaultSearchPageSize is the page size of a search request whose pageSize
// is absent or not positive.
const DefaultSearchPageSize = 1000

// ErrInvalidSearchCursor is wrapped by the error RunSearch returns for a
// cursor it cannot use (one it did not issue, or one issued for another
// order).
var ErrInvalidSearchCursor = errors.New("invalid search cursor")

// SearchQuery is a typed search over runs, as RunSearch receives it.
//
// Runs are returned in Order, at most Limit of them (Limit > 0), starting
// after the position Cursor names ("" for the first page). The store returns
// each matching run once.
type SearchQuery struct {
	// Filter selects runs; nil selects every run.
	Filter SearchExpr
	// Order sorts the result; its zero value is the default order.
	Order SearchOrder
	// Limit is the page size (> 0).
	Limit int
	// Cursor is SearchPage.Cursor of the previous page, or "".
	Cursor string
}

// SearchPage is one page of a search.
type SearchPage struct {
	// Runs are the matching runs of this page, in order.
	Runs []SearchRun
	// Cursor is where the next page starts, opaque to the engine; "" when
	// no run follows this page.
	Cursor string
}

// SearchRun identifies one run found by a search.
type SearchRun struct {
	WorkflowID string
	RunID      string
}

// SearchOrder sorts search results. Runs with equal sort values are ordered
// by run id, in the same direction, so that paging is stable.
//
// The zero value (no Field) is the default order: runs that are still open
// first, then by close time descending, then by start time descending, then
// by run id descending.
//
// For a search attribute (Field.Key set, of type KEYWORD, INT, DOUBLE, BOOL
// or DATETIME) runs without a value of that type sort after all others in
// both directions. Ordering by CloseTime puts open runs before every closed
// run when ascending and after them when descending (an open run's close
// time counts as earlier than any other).
type SearchOrder struct {
	Field SearchField
	Desc  bool
}

// IsDefault reports whether o is the default order.
func (o SearchOrder) IsDefault() bool { return o.Field.Builtin == "" && o.Field.Key == "" }

// SearchBuiltin names a column of the run row that searches can read.
type SearchBuiltin string

// The built-in search fields. WorkflowId, RunId, WorkflowType and
// ExecutionStatus are KEYWORD (ExecutionStatus holds RunStatus values);
// StartTime and CloseTime are DATETIME. Only CloseTime can be absent (while
// the run is open).
const (
	BuiltinWorkflowID   SearchBuiltin = "WorkflowId"      // Run.WorkflowID
	BuiltinRunID        SearchBuiltin = "RunId"           // Run.RunID
	BuiltinWorkflowType SearchBuiltin = "WorkflowType"    // Run.WorkflowType, the iWF workflow type
	BuiltinStatus       SearchBuiltin = "ExecutionStatus" // Run.Status
	BuiltinStartTime    SearchBuiltin = "StartTime"       // Run.StartedAt
	BuiltinCloseTime    SearchBuiltin = "CloseTime"       // Run.ClosedAt
)

// SearchField is what a condition or an order reads: a built-in column of the
// run (Builtin) or the search attribute Key, with its value Type (KEYWORD,
// TEXT, DATETIME, INT, DOUBLE, BOOL or KEYWORD_ARRAY).
type SearchField struct {
	Builtin SearchBuiltin
	Key     string
	Type    string
}

// SearchExpr is a node of a search filter: *SearchAnd, *SearchOr or
// *SearchCond. There is no negation node: the engine pushes NOT down into
// the conditions (SearchCond.Negated).
type SearchExpr interface{ isSearchExpr() }

// SearchAnd matches the runs that every term matches.
type SearchAnd struct{ Terms []SearchExpr }

// SearchOr matches the runs that at least one term matches.
type SearchOr struct{ Terms []SearchExpr }

func (*SearchAnd) isSearchExpr()  {}
func (*SearchOr) isSearchExpr()   {}
func (*SearchCond) isSearchExpr() {}

// SearchOp is the test a SearchCond applies to a value.
type SearchOp int

// The condition operators. "v" is the field's value; for a KEYWORD_ARRAY
// field the test applies to each element.
const (
	SearchEq      SearchOp = iota + 1 // v = Values[0]
	SearchLt                          // v < Values[0]
	SearchLe                          // v <= Values[0]
	SearchGt                          // v > Values[0]
	SearchGe                          // v >= Values[0]
	SearchBetween                     // Values[0] <= v <= Values[1]
	SearchIn                          // v equals one of Values (at least one)
	SearchPrefix                      // v starts with Values[0] (a string)
	// SearchMatch is the TEXT word match: Values[0] is one word (a string
	// as SearchWords returns them); v matches when it is one of v's words.
	SearchMatch
	// SearchPresent tests that the field has a value; Values is empty.
	SearchPresent
)

// SearchWords returns the distinct words of a TEXT value, in order of first
// appearance, with ASCII letters in lower case. A word is a maximal run of
// characters that are not word separators; the separators are the ASCII
// characters other than letters, digits, the underscore and NUL (white
// space, punctuation, control characters). Other characters (non-ASCII
// letters included) belong to words and are compared exactly.
//
// This is the definition both stores implement: they keep the words of
// every TEXT attribute in an index (search_attribute_words, maintained by
// triggers), which SearchMatch conditions read.
func SearchWords(s string) []string {
	var out []string
	seen := map[string]bool{}
	for _, w := range strings.FieldsFunc(s, isWordSeparator) {
		w = asciiLower(w)
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

func isWordSeparator(r rune) bool {
	return r > 0 && r < 0x80 && r != '_' &&
		!('a' <= r && r <= 'z') && !('A' <= r && r <= 'Z') && !('0' <= r && r <= '9')
}

// SearchCond is one condition on one field.
//
// Values hold the literals converted to the field's type: string (KEYWORD,
// TEXT, KEYWORD_ARRAY and the KEYWORD built-ins; RunStatus values as strings
// for ExecutionStatus), int64 (INT), float64 (DOUBLE), bool (BOOL) or
// time.Time (DATETIME).
//
// Which runs match:
//   - Op SearchPresent: the runs where the field has a value of its type
//     (a KEYWORD_ARRAY needs at least one element; CloseTime is absent while
//     the run is open; the other built-ins are always present); Negated:
//     the runs where it has none.
//   - any other Op: only runs where the field has a value of the field's
//     type, and among them those where the test holds for the value (for a
//     KEYWORD_ARRAY: for at least one element) or, when Negated, those where
//     it holds for no value (no element).
type SearchCond struct {
	Field   SearchField
	Op      SearchOp
	Values  []any
	Negated bool
}

// statusNames maps the ExecutionStatus spellings a query may use (Temporal's
// and iWF's, compared in lower case without underscores) to run statuses.
var statusNames = map[string]RunStatus{
	"running":        RunRunning,
	"completed":      RunCompleted,
	"failed":         RunFailed,
	"canceled":       RunCanceled,
	"cancelled":      RunCanceled,
	"terminated":     RunTerminated,
	"timedout":       RunTimeout,
	"timeout":        RunTimeout,
	"continuedasnew": RunStatus("CONTINUED_AS_NEW"),
}

// SearchWorkflows answers POST /api/v1/workflow/search.
func (e *Engine) SearchWorkflows(ctx context.Context, req iwfapi.WorkflowSearchRequest) (iwfapi.WorkflowSearchResponse, error) {
	var resp iwfapi.WorkflowSearchResponse
	pq, err := parseSearchQuery(req.Query)
	if err != nil {
		return resp, err
	}
	size := int(deref(req.PageSize))
	if size <= 0 {
		size = DefaultSearchPageSize
	}
	cursor, err := decodeSearchToken(deref(req.NextPageToken), req.Query)
	if err != nil {
		return resp, err
	}
	var page *SearchPage
	err = e.store.View(ctx, func(ctx context.Context, tx ReadTx) error {
		q, err := typeSearchQuery(ctx, pq, e.searchTypes(tx), e.cfg.Clock.Now())
		if err != nil {
			return err
		}
		q.Limit, q.Cursor = size, cursor
		page, err = tx.RunSearch(ctx, q)
		return err
	})
	if errors.Is(err, ErrInvalidSearchCursor) {
		return resp, Errorf(CodeInvalidArgument, "invalid nextPageToken")
	}
	if err != nil {
		return resp, err
	}
	entries := make([]iwfapi.WorkflowSearchResponseEntry, 0, len(page.Runs))
	for _, r := range page.Runs {
		entries = append(entries, iwfapi.WorkflowSearchResponseEntry{WorkflowId: r.WorkflowID, WorkflowRunId: r.RunID})
	}
	resp.WorkflowExecutions = &entries
	resp.NextPageToken = ptr(encodeSearchToken(page.Cursor, req.Query))
	return resp, nil
}

// searchToken is the content of a nextPageToken: the store's cursor and a
// hash of the query it belongs to.
type searchToken struct {
	Query  string `json:"q"`
	Cursor string `json:"c"`
}

func queryHash(query string) string {
	h := fnv.New64a()
	h.Write([]byte(query))
	return strconv.FormatUint(h.Sum64(), 16)
}

// encodeSearchToken returns the nextPageToken for a store cursor; "" when
// the cursor is "" (no more runs).
func encodeSearchToken(cursor, query string) string {
	if cursor == "" {
		return ""
	}
	b, _ := json.Marshal(searchToken{Query: queryHash(query), Cursor: cursor})
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeSearchToken returns the store cursor of a nextPageToken ("" for the
// first page). A token of another query is rejected.
func decodeSearchToken(token, query string) (string, error) {
	if token == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	var t searchToken
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	if err != nil || t.Cursor == "" {
		return "", Errorf(CodeInvalidArgument, "invalid nextPageToken")
	}
	if t.Query != queryHash(query) {
		return "", Errorf(CodeInvalidArgument, "nextPageToken belongs to another query")
	}
	return t.Cursor, nil
}

// ---------------------------------------------------------------------------
// typing

// searchTypeReader tells the type last written under a search attribute key
// (ReadTx.SearchAttributeTypeOf).
type searchTypeReader interface {
	SearchAttributeTypeOf(ctx context.Context, key string) (string, error)
}

// searchTypes resolves custom attributes from the declared registry, then
// from the store.
func (e *Engine) searchTypes(tx ReadTx) searchTypeReader {
	return declaredTypes{declared: e.cfg.SearchAttributeTypes, next: tx}
}

type declaredTypes struct {
	declared map[string]string
	next     searchTypeReader
}

func (d declaredTypes) SearchAttributeTypeOf(ctx context.Context, key string) (string, error) {
	if t, ok := d.declared[key]; ok {
		return t, nil
	}
	return d.next.SearchAttributeTypeOf(ctx, key)
}

// typer turns a parsed query into a SearchQuery.
type typer struct {
	ctx    context.Context
	types  searchTypeReader
	now    time.Time
	fields map[string]SearchField
}

// typeSearchQuery resolves the attributes of a parsed query (built-ins,
// system attributes, then types), converts its literals and checks its
// operators. now anchors relative DATETIME literals such as '15m'.
func typeSearchQuery(ctx context.Context, pq *parsedQuery, types searchTypeReader, now time.Time) (*SearchQuery, error) {
	t := &typer{ctx: ctx, types: types, now: now, fields: map[string]SearchField{}}
	q := &SearchQuery{}
	if pq.where != nil {
		f, err := t.expr(pq.where, false)
		if err != nil {
			return nil, err
		}
		q.Filter = f
	}
	if pq.orderBy != nil {
		f, err := t.field(*pq.orderBy)
		if err != nil {
			return nil, err
		}
		if f.Builtin == "" {
			switch f.Type {
			case "KEYWORD", "INT", "DOUBLE", "BOOL", "DATETIME":
			default:
				return nil, searchError(pq.orderBy.pos, "cannot order by %s: a %s attribute has no order", pq.orderBy.text, f.Type)
			}
		}
		q.Order = SearchOrder{Field: f, Desc: pq.desc}
	}
	return q, nil
}

// field resolves an attribute name.
func (t *typer) field(name token) (SearchField, error) {
	if f, ok := t.fields[name.text]; ok {
		return f, nil
	}
	f, err := t.resolve(name)
	if err == nil {
		t.fields[name.text] = f
	}
	return f, err
}

func (t *typer) resolve(name token) (SearchField, error) {
	switch name.text {
	case "WorkflowId":
		return SearchField{Builtin: BuiltinWorkflowID, Type: "KEYWORD"}, nil
	case "RunId", "WorkflowRunId":
		return SearchField{Builtin: BuiltinRunID, Type: "KEYWORD"}, nil
	case "WorkflowType", SystemSAWorkflowType:
		// IwfWorkflowType is written once, at the start of a run, with the
		// run's type: the run row holds the same value.
		return SearchField{Builtin: BuiltinWorkflowType, Type: "KEYWORD"}, nil
	case "ExecutionStatus":
		return SearchField{Builtin: BuiltinStatus, Type: "KEYWORD"}, nil
	case "StartTime":
		return SearchField{Builtin: BuiltinStartTime, Type: "DATETIME"}, nil
	case "CloseTime":
		return SearchField{Builtin: BuiltinCloseTime, Type: "DATETIME"}, nil
	case SystemSAExecutingStateIDs:
		return SearchField{Key: name.text, Type: "KEYWORD_ARRAY"}, nil
	case systemSAGlobalVersion:
		return SearchField{Key: name.text, Type: "INT"}, nil
	}
	if name.text == "" {
		return SearchField{}, searchError(name.pos, "empty attribute name")
	}
	vt, err := t.types.SearchAttributeTypeOf(t.ctx, name.text)
	if errors.Is(err, ErrNotFound) {
		return SearchField{}, searchError(name.pos, "unknown search attribute %s", name.text)
	}
	if err != nil {
		return SearchField{}, err
	}
	if !validSearchAttributeType(vt) {
		return SearchField{}, searchError(name.pos, "search attribute %s has unsupported type %q", name.text, vt)
	}
	return SearchField{Key: name.text, Type: vt}, nil
}

// expr types e; neg asks for its negation.
func (t *typer) expr(e searchExpr, neg bool) (SearchExpr, error) {
	switch e := e.(type) {
	case *boolExpr:
		terms := make([]SearchExpr, 0, len(e.terms))
		for _, x := range e.terms {
			y, err := t.expr(x, neg)
			if err != nil {
				return nil, err
			}
			terms = append(terms, y)
		}
		// NOT (a AND b) = NOT a OR NOT b, and the other way round.
		if e.and != neg {
			return flatAnd(terms), nil
		}
		return flatOr(terms), nil
	case *notExpr:
		return t.expr(e.term, !neg)
	case *predicate:
		return t.predicate(e, neg)
	}
	return nil, fmt.Errorf("search: unknown node %T", e)
}

func flatAnd(terms []SearchExpr) SearchExpr {
	var out []SearchExpr
	for _, x := range terms {
		if a, ok := x.(*SearchAnd); ok {
			out = append(out, a.Terms...)
		} else {
			out = append(out, x)
		}
	}
	if len(out) == 1 {
		return out[0]
	}
	return &SearchAnd{Terms: out}
}

func flatOr(terms []SearchExpr) SearchExpr {
	var out []SearchExpr
	for _, x := range terms {
		if o, ok := x.(*SearchOr); ok {
			out = append(out, o.Terms...)
		} else {
			out = append(out, x)
		}
	}
	if len(out) == 1 {
		return out[0]
	}
	return &SearchOr{Terms: out}
}

// opAllowed reports whether an operator (as the parser spells it) applies
// to a field.
func opAllowed(f SearchField, op string) bool {
	switch op {
	case "=", "!=", "IN", "IS NULL":
		return true
	case "<", "<=", ">", ">=", "BETWEEN":
		if f.Builtin == BuiltinStatus {
			return false
		}
		switch f.Type {
		case "KEYWORD", "KEYWORD_ARRAY", "INT", "DOUBLE", "DATETIME":
			return true
		}
	case "STARTS_WITH":
		if f.Builtin == BuiltinStatus {
			return false
		}
		return f.Type == "KEYWORD" || f.Type == "KEYWORD_ARRAY"
	}
	return false
}

var opsByText = map[string]SearchOp{
	"=": SearchEq, "!=": SearchEq, "<": SearchLt, "<=": SearchLe, ">": SearchGt, ">=": SearchGe,
	"BETWEEN": SearchBetween, "IN": SearchIn, "STARTS_WITH": SearchPrefix, "IS NULL": SearchPresent,
}

func (t *typer) predicate(p *predicate, neg bool) (SearchExpr, error) {
	f, err := t.field(p.attr)
	if err != nil {
		return nil, err
	}
	if !opAllowed(f, p.op) {
		what := f.Type
		if f.Builtin != "" {
			what = string(f.Builtin)
		}
		return nil, searchError(p.at, "operator %s does not apply to %s (%s)", p.opText(), p.attr.text, what)
	}
	// "!=" is a negated "=", IS NULL a negated "is present"; p.not is the
	// NOT of NOT IN, NOT BETWEEN, NOT STARTS_WITH and IS NOT NULL.
	negated := neg != p.not
	if p.op == "!=" || p.op == "IS NULL" {
		negated = !negated
	}
	op := opsByText[p.op]
	values := make([]any, 0, len(p.values))
	for _, v := range p.values {
		x, err := t.literal(f, p.attr.text, v, op == SearchPrefix)
		if err != nil {
			return nil, err
		}
		values = append(values, x)
	}
	if f.Type == "TEXT" && op != SearchPresent {
		// A literal matches when each of its words is a word of the value:
		// one single-word condition per word, and IN is the disjunction of
		// its literals. Negated, by De Morgan: any word missing, and every
		// literal failing.
		lits := make([]SearchExpr, 0, len(values))
		for i, v := range values {
			words := SearchWords(v.(string))
			if len(words) == 0 {
				return nil, searchError(p.values[i].pos, "a TEXT value to match needs at least one word, got %s", describe(p.values[i]))
			}
			conds := make([]SearchExpr, 0, len(words))
			for _, w := range words {
				conds = append(conds, &SearchCond{Field: f, Op: SearchMatch, Values: []any{w}, Negated: negated})
			}
			if negated {
				lits = append(lits, flatOr(conds))
			} else {
				lits = append(lits, flatAnd(conds))
			}
		}
		if negated {
			return flatAnd(lits), nil
		}
		return flatOr(lits), nil
	}
	return &SearchCond{Field: f, Op: op, Values: values, Negated: negated}, nil
}

// literal converts one literal to the type of f.
func (t *typer) literal(f SearchField, attr string, v token, prefix bool) (any, error) {
	bad := func(want string) error {
		return searchError(v.pos, "%s is not a valid %s value for %s", describe(v), want, attr)
	}
	if v.kind == tKeyword && f.Type != "BOOL" {
		return nil, bad(f.Type)
	}
	if f.Builtin == BuiltinStatus {
		s, ok := statusNames[strings.ReplaceAll(strings.ToLower(v.text), "_", "")]
		if !ok || v.kind != tString {
			return nil, searchError(v.pos, "%s is not an ExecutionStatus (one of 'Running', 'Completed', 'Failed', 'Canceled', 'Terminated', 'TimedOut', 'ContinuedAsNew')", describe(v))
		}
		return string(s), nil
	}
	if prefix {
		return v.text, nil
	}
	switch f.Type {
	case "KEYWORD", "TEXT", "KEYWORD_ARRAY":
		return v.text, nil
	case "INT":
		n, err := strconv.ParseInt(strings.TrimSpace(v.text), 10, 64)
		if err != nil {
			return nil, bad("INT")
		}
		return n, nil
	case "DOUBLE":
		d, err := strconv.ParseFloat(strings.TrimSpace(v.text), 64)
		if err != nil || math.IsNaN(d) || math.IsInf(d, 0) {
			return nil, bad("DOUBLE")
		}
		return d, nil
	case "BOOL":
		b, err := strconv.ParseBool(strings.TrimSpace(v.text))
		if err != nil {
			return nil, bad("BOOL")
		}
		return b, nil
	case "DATETIME":
		tm, err := parseDatetime(strings.TrimSpace(v.text), t.now)
		if err != nil {
			return nil, searchError(v.pos, "%s is not a valid DATETIME value for %s (want RFC 3339, Unix nanoseconds or a relative time like 15m)", describe(v), attr)
		}
		return tm, nil
	}
	return nil, bad(f.Type)
}

// asciiLower folds ASCII letters to lower case and leaves every other
// character alone, as SQL lower() does in both stores.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// ---------------------------------------------------------------------------
// syntax

func searchError(pos int, format string, args ...any) *Error {
	return Errorf(CodeInvalidArgument, "invalid search query at position %d: %s", pos, fmt.Sprintf(format, args...))
}

type tokKind int

const (
	tEOF     tokKind = iota
	tIdent           // attribute name, bare or backquoted
	tKeyword         // AND, OR, ...; text in upper case
	tString          // 'single quoted'; text unquoted
	tNumber          // 12, -3.5, 1e9
	tOp              // = != <> < <= > >=
	tLParen
	tRParen
	tComma
)

// token is one lexical element; pos is its 1-based character position.
type token struct {
	kind tokKind
	text string
	pos  int
}

var searchKeywords = map[string]bool{
	"AND": true, "OR": true, "NOT": true, "BETWEEN": true, "IN": true, "IS": true, "NULL": true,
	"STARTS_WITH": true, "ORDER": true, "BY": true, "ASC": true, "DESC": true, "TRUE": true, "FALSE": true,
}

// describe names a token for an error message.
func describe(t token) string {
	switch t.kind {
	case tEOF:
		return "the end of the query"
	case tString:
		return "'" + strings.ReplaceAll(t.text, "'", "''") + "'"
	case tIdent:
		return "attribute " + t.text
	}
	return t.text
}

// lexSearch splits a query into tokens, ending with tEOF.
func lexSearch(query string) ([]token, error) {
	rs := []rune(query)
	var out []token
	isIdent := func(r rune, first bool) bool {
		return r == '_' || unicode.IsLetter(r) || (!first && unicode.IsDigit(r))
	}
	for i := 0; i < len(rs); {
		r := rs[i]
		pos := i + 1
		switch {
		case unicode.IsSpace(r):
			i++
		case r == '(':
			out = append(out, token{tLParen, "(", pos})
			i++
		case r == ')':
			out = append(out, token{tRParen, ")", pos})
			i++
		case r == ',':
			out = append(out, token{tComma, ",", pos})
			i++
		case r == '=':
			out = append(out, token{tOp, "=", pos})
			i++
		case r == '!' || r == '<' || r == '>':
			op := string(r)
			if i+1 < len(rs) && (rs[i+1] == '=' || (r == '<' && rs[i+1] == '>')) {
				op += string(rs[i+1])
			}
			if op == "!" {
				return nil, searchError(pos, "unexpected '!' (did you mean '!='?)")
			}
			i += len(op) // ASCII
			if op == "<>" {
				op = "!="
			}
			out = append(out, token{tOp, op, pos})
		case r == '\'' || r == '`':
			var b strings.Builder
			j := i + 1
			for ; ; j++ {
				if j >= len(rs) {
					what := "string"
					if r == '`' {
						what = "quoted attribute name"
					}
					return nil, searchError(pos, "unterminated %s", what)
				}
				if rs[j] == r {
					if j+1 < len(rs) && rs[j+1] == r {
						b.WriteRune(r)
						j++
						continue
					}
					break
				}
				b.WriteRune(rs[j])
			}
			kind := tString
			if r == '`' {
				kind = tIdent
			}
			out = append(out, token{kind, b.String(), pos})
			i = j + 1
		case r == '"':
			return nil, searchError(pos, "strings are single-quoted ('...'); attribute names may be backquoted (`...`)")
		case unicode.IsDigit(r) || ((r == '-' || r == '+' || r == '.') && i+1 < len(rs) && unicode.IsDigit(rs[i+1])):
			j := i + 1
			for j < len(rs) && (unicode.IsDigit(rs[j]) || rs[j] == '.' || rs[j] == 'e' || rs[j] == 'E' ||
				((rs[j] == '-' || rs[j] == '+') && (rs[j-1] == 'e' || rs[j-1] == 'E'))) {
				j++
			}
			text := string(rs[i:j])
			if _, err := strconv.ParseFloat(text, 64); err != nil || (j < len(rs) && isIdent(rs[j], false)) {
				for j < len(rs) && isIdent(rs[j], false) {
					j++
				}
				return nil, searchError(pos, "malformed number %s", string(rs[i:j]))
			}
			out = append(out, token{tNumber, text, pos})
			i = j
		case isIdent(r, true):
			j := i + 1
			for j < len(rs) && isIdent(rs[j], false) {
				j++
			}
			text := string(rs[i:j])
			if up := strings.ToUpper(text); searchKeywords[up] {
				out = append(out, token{tKeyword, up, pos})
			} else {
				out = append(out, token{tIdent, text, pos})
			}
			i = j
		default:
			return nil, searchError(pos, "unexpected character %q", r)
		}
	}
	return append(out, token{tEOF, "", len(rs) + 1}), nil
}

// searchExpr is a node of the syntax tree: *boolExpr, *notExpr or
// *predicate.
type searchExpr interface{ isSyntax() }

type boolExpr struct {
	and   bool
	terms []searchExpr
}

type notExpr struct{ term searchExpr }

// predicate is "attr op values". op is one of = != < <= > >= BETWEEN IN
// STARTS_WITH "IS NULL"; not is set for NOT BETWEEN, NOT IN, NOT
// STARTS_WITH and IS NOT NULL.
type predicate struct {
	attr   token
	op     string
	not    bool
	values []token
	at     int // position of the operator
}

func (*boolExpr) isSyntax()  {}
func (*notExpr) isSyntax()   {}
func (*predicate) isSyntax() {}

func (p *predicate) opText() string {
	switch {
	case p.op == "IS NULL" && p.not:
		return "IS NOT NULL"
	case p.not:
		return "NOT " + p.op
	}
	return p.op
}

// parsedQuery is a query before typing.
type parsedQuery struct {
	where   searchExpr // nil: every run
	orderBy *token     // nil: default order
	desc    bool
}

type searchParser struct {
	toks []token
	i    int
}

// parseSearchQuery parses a query:
//
//	query     = [ expr ] [ ORDER BY attribute [ ASC | DESC ] ]
//	expr      = and { OR and }
//	and       = unary { AND unary }
//	unary     = NOT unary | "(" expr ")" | predicate
//	predicate = attribute ( op value
//	                      | [ NOT ] BETWEEN value AND value
//	                      | [ NOT ] IN "(" value { "," value } ")"
//	                      | [ NOT ] STARTS_WITH value
//	                      | IS [ NOT ] NULL )
//	op        = "=" | "!=" | "<>" | "<" | "<=" | ">" | ">="
//	value     = 'string' | number | TRUE | FALSE
//	attribute = name | `quoted name`
//
// Keywords are case-insensitive; attribute names are case-sensitive.
func parseSearchQuery(query string) (*parsedQuery, error) {
	toks, err := lexSearch(query)
	if err != nil {
		return nil, err
	}
	p := &searchParser{toks: toks}
	q := &parsedQuery{}
	if !p.isKeyword("ORDER") && p.peek().kind != tEOF {
		if q.where, err = p.or(); err != nil {
			return nil, err
		}
	}
	if p.isKeyword("ORDER") {
		p.next()
		if !p.isKeyword("BY") {
			return nil, p.expected("BY after ORDER")
		}
		p.next()
		if p.peek().kind != tIdent {
			return nil, p.expected("an attribute name after ORDER BY")
		}
		attr := p.next()
		q.orderBy = &attr
		if p.isKeyword("ASC") || p.isKeyword("DESC") {
			q.desc = p.next().text == "DESC"
		}
	}
	if p.peek().kind != tEOF {
		if q.where == nil && q.orderBy == nil {
			return nil, p.expected("a condition")
		}
		return nil, p.expected("AND, OR, ORDER BY or the end of the query")
	}
	return q, nil
}

func (p *searchParser) peek() token { return p.toks[p.i] }

func (p *searchParser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *searchParser) isKeyword(kw string) bool {
	t := p.peek()
	return t.kind == tKeyword && t.text == kw
}

func (p *searchParser) expected(what string) error {
	t := p.peek()
	return searchError(t.pos, "expected %s, found %s", what, describe(t))
}

func (p *searchParser) or() (searchExpr, error) {
	first, err := p.and()
	if err != nil {
		return nil, err
	}
	terms := []searchExpr{first}
	for p.isKeyword("OR") {
		p.next()
		t, err := p.and()
		if err != nil {
			return nil, err
		}
		terms = append(terms, t)
	}
	if len(terms) == 1 {
		return first, nil
	}
	return &boolExpr{and: false, terms: terms}, nil
}

func (p *searchParser) and() (searchExpr, error) {
	first, err := p.unary()
	if err != nil {
		return nil, err
	}
	terms := []searchExpr{first}
	for p.isKeyword("AND") {
		p.next()
		t, err := p.unary()
		if err != nil {
			return nil, err
		}
		terms = append(terms, t)
	}
	if len(terms) == 1 {
		return first, nil
	}
	return &boolExpr{and: true, terms: terms}, nil
}

func (p *searchParser) unary() (searchExpr, error) {
	switch t := p.peek(); {
	case t.kind == tKeyword && t.text == "NOT":
		p.next()
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &notExpr{term: x}, nil
	case t.kind == tLParen:
		p.next()
		x, err := p.or()
		if err != nil {
			return nil, err
		}
		if p.peek().kind != tRParen {
			return nil, p.expected("')'")
		}
		p.next()
		return x, nil
	case t.kind == tIdent:
		return p.predicate()
	}
	return nil, p.expected("an attribute name, NOT or '('")
}

func (p *searchParser) value() (token, error) {
	t := p.peek()
	switch {
	case t.kind == tString, t.kind == tNumber, t.kind == tKeyword && (t.text == "TRUE" || t.text == "FALSE"):
		return p.next(), nil
	}
	return token{}, p.expected("a value ('string' or number)")
}

func (p *searchParser) predicate() (searchExpr, error) {
	pr := &predicate{attr: p.next()}
	t := p.peek()
	pr.at = t.pos
	switch {
	case t.kind == tOp:
		p.next()
		pr.op = t.text
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		pr.values = []token{v}
		return pr, nil
	case t.kind == tKeyword && t.text == "IS":
		p.next()
		if p.isKeyword("NOT") {
			p.next()
			pr.not = true
		}
		if !p.isKeyword("NULL") {
			return nil, p.expected("NULL")
		}
		p.next()
		pr.op = "IS NULL"
		return pr, nil
	case t.kind == tKeyword && t.text == "NOT":
		p.next()
		pr.not = true
		if t := p.peek(); !(t.kind == tKeyword && (t.text == "BETWEEN" || t.text == "IN" || t.text == "STARTS_WITH")) {
			return nil, p.expected("BETWEEN, IN or STARTS_WITH after NOT")
		}
	}
	t = p.peek()
	if t.kind != tKeyword {
		return nil, p.expected("an operator after " + pr.attr.text)
	}
	switch t.text {
	case "BETWEEN":
		p.next()
		pr.op = "BETWEEN"
		lo, err := p.value()
		if err != nil {
			return nil, err
		}
		if !p.isKeyword("AND") {
			return nil, p.expected("AND in BETWEEN")
		}
		p.next()
		hi, err := p.value()
		if err != nil {
			return nil, err
		}
		pr.values = []token{lo, hi}
	case "IN":
		p.next()
		pr.op = "IN"
		if p.peek().kind != tLParen {
			return nil, p.expected("'(' after IN")
		}
		p.next()
		for {
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			pr.values = append(pr.values, v)
			if p.peek().kind == tComma {
				p.next()
				continue
			}
			if p.peek().kind != tRParen {
				return nil, p.expected("',' or ')'")
			}
			p.next()
			break
		}
	case "STARTS_WITH":
		p.next()
		pr.op = "STARTS_WITH"
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		if v.kind != tString {
			return nil, searchError(v.pos, "STARTS_WITH needs a 'string', found %s", describe(v))
		}
		pr.values = []token{v}
	default:
		return nil, p.expected("an operator after " + pr.attr.text)
	}
	return pr, nil
}
