package search

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// dumpSyntax renders a syntax tree compactly.
func dumpSyntax(e searchExpr) string {
	switch e := e.(type) {
	case nil:
		return "<all>"
	case *boolExpr:
		op := "OR"
		if e.and {
			op = "AND"
		}
		parts := []string{}
		for _, t := range e.terms {
			parts = append(parts, dumpSyntax(t))
		}
		return "(" + op + " " + strings.Join(parts, " ") + ")"
	case *notExpr:
		return "(NOT " + dumpSyntax(e.term) + ")"
	case *predicate:
		vals := []string{}
		for _, v := range e.values {
			vals = append(vals, describe(v))
		}
		return fmt.Sprintf("[%s %s %s]", e.attr.text, e.opText(), strings.Join(vals, ","))
	}
	return "?"
}

func TestParse(t *testing.T) {
	cases := []struct{ query, want string }{
		{"", "<all>"},
		{"   ", "<all>"},
		{"A = 'x'", "[A = 'x']"},
		{"A='x'", "[A = 'x']"},
		{"A != 'x'", "[A != 'x']"},
		{"A <> 'x'", "[A != 'x']"},
		{"A < 1 AND B <= -2.5 AND C > 1e3 AND D >= .5", "(AND [A < 1] [B <= -2.5] [C > 1e3] [D >= .5])"},
		{"A = 'it''s'", "[A = 'it''s']"},
		// Double quotes, as Temporal's list filter takes them.
		{`EmployerId="test-employer-id"`, "[EmployerId = 'test-employer-id']"},
		{`A = "it""s" OR A = "it\"s" OR A = "a\\b" OR A = "c:\d"`, `(OR [A = 'it"s'] [A = 'it"s'] [A = 'a\b'] [A = 'c:\d'])`},
		{`A IN ("x", 'y')`, "[A IN 'x','y']"},
		{"A = ''", "[A = '']"},
		{"A = 'naïve ☃'", "[A = 'naïve ☃']"},
		{"A BETWEEN 1 AND 5", "[A BETWEEN 1,5]"},
		{"A NOT BETWEEN '1' AND '5'", "[A NOT BETWEEN '1','5']"},
		{"A IN ('x')", "[A IN 'x']"},
		{"A in ('x', 'y' ,3)", "[A IN 'x','y',3]"},
		{"A NOT IN ('x', 'y')", "[A NOT IN 'x','y']"},
		{"A STARTS_WITH 'pre'", "[A STARTS_WITH 'pre']"},
		{"A not starts_with 'pre'", "[A NOT STARTS_WITH 'pre']"},
		{"A IS NULL", "[A IS NULL ]"},
		{"A is not null", "[A IS NOT NULL ]"},
		{"A = true OR B = FALSE", "(OR [A = TRUE] [B = FALSE])"},
		{"A = 1 OR B = 2 AND C = 3", "(OR [A = 1] (AND [B = 2] [C = 3]))"},
		{"(A = 1 OR B = 2) AND C = 3", "(AND (OR [A = 1] [B = 2]) [C = 3])"},
		{"NOT A = 1", "(NOT [A = 1])"},
		{"NOT NOT (A = 1)", "(NOT (NOT [A = 1]))"},
		{"not (A = 1 and B = 2)", "(NOT (AND [A = 1] [B = 2]))"},
		{"`Weird Name-1` = 'x'", "[Weird Name-1 = 'x']"},
		{"`a``b` = 'x'", "[a`b = 'x']"},
		{"`and` = 1", "[and = 1]"},
		{"_x1 = 1", "[_x1 = 1]"},
		{"A = 1 ORDER BY StartTime", "[A = 1] order StartTime asc"},
		{"A = 1 order by StartTime DESC", "[A = 1] order StartTime desc"},
		{"ORDER BY CloseTime asc", "<all> order CloseTime asc"},
		{"((A = 1))", "[A = 1]"},
		{"A=1AND B=2", ""}, // a malformed number, see the error cases
	}
	for _, c := range cases {
		if c.want == "" {
			continue
		}
		q, err := Parse(c.query)
		if err != nil {
			t.Errorf("%q: %v", c.query, err)
			continue
		}
		got := dumpSyntax(q.where)
		if q.orderBy != nil {
			dir := "asc"
			if q.desc {
				dir = "desc"
			}
			got += " order " + q.orderBy.text + " " + dir
		}
		if got != c.want {
			t.Errorf("%q:\n got %s\nwant %s", c.query, got, c.want)
		}
	}
}

func TestParseSearchQueryErrors(t *testing.T) {
	cases := []struct {
		query string
		pos   int
		msg   string
	}{
		{"A", 2, "expected an operator after A, found the end of the query"},
		{"A =", 4, "expected a value"},
		{"A = B", 5, "expected a value ('string' or number), found attribute B"},
		{"A = 'x", 5, "unterminated string"},
		{"`A = 1", 1, "unterminated quoted attribute name"},
		{`A = "x`, 5, "unterminated string"},
		{`A = "x\"`, 5, "unterminated string"},
		{"A == 1", 4, "expected a value"},
		{"A ! 1", 3, "did you mean '!='"},
		{"A = 1 B = 2", 7, "expected AND, OR, ORDER BY or the end of the query, found attribute B"},
		{"A = 1 AND", 10, "expected an attribute name, NOT or '('"},
		{"A = 1 OR OR B = 2", 10, "expected an attribute name"},
		{"(A = 1", 7, "expected ')'"},
		{"A = 1)", 6, "expected AND, OR, ORDER BY or the end of the query, found )"},
		{"A BETWEEN 1 OR 2", 13, "expected AND in BETWEEN"},
		{"A IN 1", 6, "expected '(' after IN"},
		{"A IN ()", 7, "expected a value"},
		{"A IN (1, 2", 11, "expected ',' or ')'"},
		{"A IN (1 2)", 9, "expected ',' or ')'"},
		{"A STARTS_WITH 5", 15, "STARTS_WITH needs a 'string'"},
		{"A IS 5", 6, "expected NULL"},
		{"A NOT = 1", 7, "expected BETWEEN, IN or STARTS_WITH after NOT"},
		{"A = 1 ORDER StartTime", 13, "expected BY after ORDER"},
		{"A = 1 ORDER BY", 15, "expected an attribute name after ORDER BY"},
		{"A = 1 ORDER BY StartTime DESC LIMIT 5", 31, "expected AND, OR, ORDER BY or the end of the query, found attribute LIMIT"},
		{"A = 12abc", 5, "malformed number 12abc"},
		{"A=1AND B=2", 3, "malformed number 1AND"},
		{"A = 1.2.3", 5, "malformed number"},
		{"A = 1 ; DROP TABLE runs", 7, "unexpected character ';'"},
		{"'x' = A", 1, "expected an attribute name, NOT or '(', found 'x'"},
		{"☃ = 1", 1, "unexpected character '☃'"},
		{"AND = 1", 1, "expected an attribute name"},
		{"x = 'é' AND ?", 13, "unexpected character '?'"}, // positions count characters, not bytes
	}
	for _, c := range cases {
		_, err := Parse(c.query)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%q: %v, want a *search.Error", c.query, err)
			continue
		}
		prefix := fmt.Sprintf("invalid search query at position %d: ", c.pos)
		if !strings.HasPrefix(e.Error(), prefix) || !strings.Contains(e.Error(), c.msg) || e.Pos != c.pos {
			t.Errorf("%q:\n got %s\nwant %s...%s", c.query, e.Error(), prefix, c.msg)
		}
	}
}

// fakeTypes is a Resolver for typing tests; like the engine's, it maps
// IwfWorkflowType to the WorkflowType built-in.
type fakeTypes map[string]ValueType

func (f fakeTypes) Resolve(_ context.Context, name string) (Field, error) {
	if name == "IwfWorkflowType" {
		return Field{Builtin: BuiltinWorkflowType, Type: Keyword}, nil
	}
	if t, ok := f[name]; ok {
		return Field{Key: name, Type: t}, nil
	}
	return Field{}, ErrUnknownAttribute
}

var testTypes = fakeTypes{
	"CustomKeywordField": "KEYWORD", "CustomIntField": "INT", "CustomDoubleField": "DOUBLE",
	"CustomBoolField": "BOOL", "CustomDatetimeField": "DATETIME", "CustomStringField": "TEXT",
	"CustomKeywordArrayField": "KEYWORD_ARRAY", "Weird Name": "KEYWORD", "Broken": "BLOB",
	"IwfExecutingStateIds": "KEYWORD_ARRAY", "IwfGlobalWorkflowVersion": "INT",
}

// dumpTyped renders a typed filter compactly.
func dumpTyped(e Expr) string {
	switch e := e.(type) {
	case nil:
		return "<all>"
	case *And:
		parts := []string{}
		for _, t := range e.Terms {
			parts = append(parts, dumpTyped(t))
		}
		return "(AND " + strings.Join(parts, " ") + ")"
	case *Or:
		parts := []string{}
		for _, t := range e.Terms {
			parts = append(parts, dumpTyped(t))
		}
		return "(OR " + strings.Join(parts, " ") + ")"
	case *Cond:
		name := e.Field.Key
		if e.Field.Builtin != "" {
			name = "$" + string(e.Field.Builtin)
		}
		op := map[Op]string{Eq: "=", Lt: "<", Le: "<=", Gt: ">", Ge: ">=",
			Between: "between", In: "in", Prefix: "prefix", Match: "match", Present: "present"}[e.Op]
		if e.Negated {
			op = "!" + op
		}
		vals := []string{}
		for _, v := range e.Values {
			switch v := v.(type) {
			case string:
				vals = append(vals, fmt.Sprintf("%q", v))
			case time.Time:
				vals = append(vals, v.Format(time.RFC3339Nano))
			default:
				vals = append(vals, fmt.Sprintf("%T(%v)", v, v))
			}
		}
		return fmt.Sprintf("[%s:%s %s %s]", name, e.Field.Type, op, strings.Join(vals, ","))
	}
	return "?"
}

var typingNow = time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)

func typeQuery(query string) (*Query, error) {
	pq, err := Parse(query)
	if err != nil {
		return nil, err
	}
	return Compile(context.Background(), pq, testTypes, typingNow)
}

func TestCompile(t *testing.T) {
	cases := []struct{ query, want string }{
		{"", "<all>"},
		// Literal conversion by type, quoted or not.
		{"CustomIntField = 5", `[CustomIntField:INT = int64(5)]`},
		{"CustomIntField = '5'", `[CustomIntField:INT = int64(5)]`},
		{"CustomIntField = -9223372036854775808", `[CustomIntField:INT = int64(-9223372036854775808)]`},
		{"CustomDoubleField = '0.01'", `[CustomDoubleField:DOUBLE = float64(0.01)]`},
		{"CustomDoubleField > 1", `[CustomDoubleField:DOUBLE > float64(1)]`},
		{"CustomBoolField = 'true'", `[CustomBoolField:BOOL = bool(true)]`},
		{"CustomBoolField = FALSE", `[CustomBoolField:BOOL = bool(false)]`},
		{"CustomBoolField != true", `[CustomBoolField:BOOL != bool(true)]`},
		{"CustomDatetimeField = '2024-01-02T03:04:05+08:00'", `[CustomDatetimeField:DATETIME = 2024-01-01T19:04:05Z]`},
		{"CustomDatetimeField < '1h'", `[CustomDatetimeField:DATETIME < 2024-06-01T11:00:00Z]`},
		{"CustomDatetimeField > 1000000000", `[CustomDatetimeField:DATETIME > 1970-01-01T00:00:01Z]`},
		{"CustomKeywordField = 123", `[CustomKeywordField:KEYWORD = "123"]`},
		{"`Weird Name` STARTS_WITH 'a%'", `[Weird Name:KEYWORD prefix "a%"]`},
		{"CustomKeywordField BETWEEN 'a' AND 'b'", `[CustomKeywordField:KEYWORD between "a","b"]`},
		// TEXT: one word match per literal, words in lower case.
		{"CustomStringField = 'Quanzheng'", `[CustomStringField:TEXT match "quanzheng"]`},
		{"CustomStringField = 'Hello, WORLD! hello'", `(AND [CustomStringField:TEXT match "hello"] [CustomStringField:TEXT match "world"])`},
		{"CustomStringField != 'x'", `[CustomStringField:TEXT !match "x"]`},
		{"CustomStringField != 'x y'", `(OR [CustomStringField:TEXT !match "x"] [CustomStringField:TEXT !match "y"])`},
		{"CustomStringField IN ('a', 'b c')", `(OR [CustomStringField:TEXT match "a"] (AND [CustomStringField:TEXT match "b"] [CustomStringField:TEXT match "c"]))`},
		{"CustomStringField NOT IN ('a', 'b c')", `(AND [CustomStringField:TEXT !match "a"] (OR [CustomStringField:TEXT !match "b"] [CustomStringField:TEXT !match "c"]))`},
		{"CustomStringField IS NULL", `[CustomStringField:TEXT !present ]`},
		// KEYWORD_ARRAY.
		{"CustomKeywordArrayField = 'a'", `[CustomKeywordArrayField:KEYWORD_ARRAY = "a"]`},
		{"CustomKeywordArrayField != 'a'", `[CustomKeywordArrayField:KEYWORD_ARRAY != "a"]`},
		{"IwfExecutingStateIds = 'S2'", `[IwfExecutingStateIds:KEYWORD_ARRAY = "S2"]`},
		// Built-ins.
		{"WorkflowId = 'w'", `[$WorkflowId:KEYWORD = "w"]`},
		{"RunId = 'r' OR WorkflowRunId = 's'", `(OR [$RunId:KEYWORD = "r"] [$RunId:KEYWORD = "s"])`},
		{"IwfWorkflowType = 'T'", `[$WorkflowType:KEYWORD = "T"]`},
		{"WorkflowType STARTS_WITH 'T'", `[$WorkflowType:KEYWORD prefix "T"]`},
		{"StartTime > '2024-01-01T00:00:00Z'", `[$StartTime:DATETIME > 2024-01-01T00:00:00Z]`},
		{"CloseTime IS NOT NULL", `[$CloseTime:DATETIME present ]`},
		{"IwfGlobalWorkflowVersion = 2", `[IwfGlobalWorkflowVersion:INT = int64(2)]`},
		// ExecutionStatus values.
		{"ExecutionStatus = 'Running'", `[$ExecutionStatus:KEYWORD = "RUNNING"]`},
		{"ExecutionStatus IN ('Completed', 'Failed', 'Canceled', 'Terminated', 'TimedOut', 'ContinuedAsNew')",
			`[$ExecutionStatus:KEYWORD in "COMPLETED","FAILED","CANCELED","TERMINATED","TIMEOUT","CONTINUED_AS_NEW"]`},
		{"ExecutionStatus = 'TIMEOUT' OR ExecutionStatus = 'continued_as_new'",
			`(OR [$ExecutionStatus:KEYWORD = "TIMEOUT"] [$ExecutionStatus:KEYWORD = "CONTINUED_AS_NEW"])`},
		// NOT is pushed down to the conditions.
		{"NOT CustomIntField = 1", `[CustomIntField:INT != int64(1)]`},
		{"NOT CustomIntField != 1", `[CustomIntField:INT = int64(1)]`},
		{"NOT CustomIntField IS NULL", `[CustomIntField:INT present ]`},
		{"NOT CustomIntField NOT IN (1, 2)", `[CustomIntField:INT in int64(1),int64(2)]`},
		{"NOT (CustomIntField < 1 AND (WorkflowId = 'a' OR NOT WorkflowId = 'b'))",
			`(OR [CustomIntField:INT !< int64(1)] (AND [$WorkflowId:KEYWORD != "a"] [$WorkflowId:KEYWORD = "b"]))`},
		{"NOT CustomStringField IN ('a', 'b')", `(AND [CustomStringField:TEXT !match "a"] [CustomStringField:TEXT !match "b"])`},
		// AND/OR are flattened.
		{"CustomIntField = 1 AND (CustomIntField = 2 AND CustomIntField = 3)",
			`(AND [CustomIntField:INT = int64(1)] [CustomIntField:INT = int64(2)] [CustomIntField:INT = int64(3)])`},
	}
	for _, c := range cases {
		q, err := typeQuery(c.query)
		if err != nil {
			t.Errorf("%q: %v", c.query, err)
			continue
		}
		if got := dumpTyped(q.Filter); got != c.want {
			t.Errorf("%q:\n got %s\nwant %s", c.query, got, c.want)
		}
	}
}

func TestTypeSearchQueryOrder(t *testing.T) {
	cases := []struct {
		query string
		want  Order
	}{
		{"", Order{}},
		{"ORDER BY StartTime", Order{Field: Field{Builtin: BuiltinStartTime, Type: "DATETIME"}}},
		{"ORDER BY CloseTime DESC", Order{Field: Field{Builtin: BuiltinCloseTime, Type: "DATETIME"}, Desc: true}},
		{"ORDER BY WorkflowId", Order{Field: Field{Builtin: BuiltinWorkflowID, Type: "KEYWORD"}}},
		{"ORDER BY CustomIntField DESC", Order{Field: Field{Key: "CustomIntField", Type: "INT"}, Desc: true}},
		{"ORDER BY CustomKeywordField", Order{Field: Field{Key: "CustomKeywordField", Type: "KEYWORD"}}},
	}
	for _, c := range cases {
		q, err := typeQuery(c.query)
		if err != nil {
			t.Errorf("%q: %v", c.query, err)
			continue
		}
		if q.Order != c.want {
			t.Errorf("%q: order %+v, want %+v", c.query, q.Order, c.want)
		}
	}
	if !(Order{}).IsDefault() {
		t.Error("the zero Order is not the default order")
	}
}

func TestTypeSearchQueryErrors(t *testing.T) {
	cases := []struct {
		query string
		pos   int
		msg   string
	}{
		{"Nope = 1", 1, "unknown search attribute Nope"},
		{"customIntField = 1", 1, "unknown search attribute customIntField"}, // names are case-sensitive
		{"CustomIntField = 1 AND Nope = 1", 24, "unknown search attribute Nope"},
		{"Broken = 1", 1, `unsupported type "BLOB"`},
		{"CustomIntField = 'abc'", 18, "'abc' is not a valid INT value for CustomIntField"},
		{"CustomIntField = 1.5", 18, "1.5 is not a valid INT value"},
		{"CustomIntField = 9223372036854775808", 18, "not a valid INT value"},
		{"CustomIntField IN (1, 'x')", 23, "'x' is not a valid INT value"},
		{"CustomIntField = true", 18, "TRUE is not a valid INT value"},
		{"CustomDoubleField = 'NaN'", 21, "not a valid DOUBLE value"},
		{"CustomDoubleField = 'Inf'", 21, "not a valid DOUBLE value"},
		{"CustomBoolField = 'yes'", 19, "not a valid BOOL value"},
		{"CustomBoolField > true", 17, "operator > does not apply to CustomBoolField (BOOL)"},
		{"CustomBoolField STARTS_WITH 't'", 17, "operator STARTS_WITH does not apply"},
		{"CustomDatetimeField = 'yesterday'", 23, "not a valid DATETIME value for CustomDatetimeField"},
		{"CustomDatetimeField STARTS_WITH '2024'", 21, "operator STARTS_WITH does not apply"},
		{"CustomStringField > 'a'", 19, "operator > does not apply to CustomStringField (TEXT)"},
		{"CustomStringField NOT BETWEEN 'a' AND 'b'", 19, "operator NOT BETWEEN does not apply"},
		{"CustomStringField STARTS_WITH 'a'", 19, "operator STARTS_WITH does not apply"},
		{"CustomStringField = ', !'", 21, "a TEXT value to match needs at least one word"},
		{"CustomIntField STARTS_WITH '1'", 16, "operator STARTS_WITH does not apply"},
		{"ExecutionStatus = 'Sleeping'", 19, "'Sleeping' is not an ExecutionStatus"},
		{"ExecutionStatus = 1", 19, "1 is not an ExecutionStatus"},
		{"ExecutionStatus > 'Running'", 17, "operator > does not apply to ExecutionStatus (ExecutionStatus)"},
		{"ExecutionStatus STARTS_WITH 'R'", 17, "operator STARTS_WITH does not apply"},
		{"StartTime = 'soon'", 13, "not a valid DATETIME value for StartTime"},
		{"ORDER BY CustomStringField", 10, "cannot order by CustomStringField: a TEXT attribute has no order"},
		{"ORDER BY CustomKeywordArrayField", 10, "a KEYWORD_ARRAY attribute has no order"},
		{"ORDER BY Nope", 10, "unknown search attribute Nope"},
	}
	for _, c := range cases {
		_, err := typeQuery(c.query)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%q: %v, want a *search.Error", c.query, err)
			continue
		}
		prefix := fmt.Sprintf("invalid search query at position %d: ", c.pos)
		if !strings.HasPrefix(e.Error(), prefix) || !strings.Contains(e.Error(), c.msg) || e.Pos != c.pos {
			t.Errorf("%q:\n got %s\nwant %s...%s", c.query, e.Error(), prefix, c.msg)
		}
	}
}

// TestCompileResolverError: a failure of the type lookup is not the
// client's fault.
func TestTypeSearchQueryStoreError(t *testing.T) {
	boom := errors.New("disk on fire")
	pq, err := Parse("X = 1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Compile(context.Background(), pq, failingTypes{boom}, typingNow)
	var se *Error
	if !errors.Is(err, boom) || errors.As(err, &se) {
		t.Fatalf("got %v, want the resolver's error, not a query error", err)
	}
}

type failingTypes struct{ err error }

func (f failingTypes) Resolve(context.Context, string) (Field, error) {
	return Field{}, f.err
}

func TestSearchWords(t *testing.T) {
	cases := map[string]string{
		"My name is Quanzheng Long":   "my|name|is|quanzheng|long",
		"hello, World! HELLO":         "hello|world",
		"snake_case stays whole":      "snake_case|stays|whole",
		"a-b.c/d\te\nf(g)h\x01i\x7fj": "a|b|c|d|e|f|g|h|i|j",
		"nul\x00inside":               "nul\x00inside",
		"ÉCOLE école":                 "École|école", // only ASCII letters fold
		"  ,;  ":                      "",
	}
	for in, want := range cases {
		if got := strings.Join(Words(in), "|"); got != want {
			t.Errorf("Words(%q) = %q, want %q", in, got, want)
		}
	}
}
