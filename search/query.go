package search

import (
	"errors"
	"strings"
)

// ErrInvalidCursor is wrapped by the error RunSearch returns for a
// cursor it cannot use (one it did not issue, or one issued for another
// order).
var ErrInvalidCursor = errors.New("invalid search cursor")

// Query is a typed search over runs, as RunSearch receives it.
//
// Runs are returned in Order, at most Limit of them (Limit > 0), starting
// after the position Cursor names ("" for the first page). The store returns
// each matching run once.
type Query struct {
	// Filter selects runs; nil selects every run.
	Filter Expr
	// Order sorts the result; its zero value is the default order.
	Order Order
	// Limit is the page size (> 0).
	Limit int
	// Cursor is Page.Cursor of the previous page, or "".
	Cursor string
}

// Page is one page of a search.
type Page struct {
	// Runs are the matching runs of this page, in order.
	Runs []Run
	// Cursor is where the next page starts, opaque to the engine; "" when
	// no run follows this page.
	Cursor string
}

// Run identifies one run found by a search.
type Run struct {
	WorkflowID string
	RunID      string
}

// Order sorts search results. Runs with equal sort values are ordered
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
type Order struct {
	Field Field
	Desc  bool
}

// IsDefault reports whether o is the default order.
func (o Order) IsDefault() bool { return o.Field.Builtin == "" && o.Field.Key == "" }

// Builtin names a column of the run row that searches can read.
type Builtin string

// The built-in search fields. WorkflowId, RunId, WorkflowType and
// ExecutionStatus are KEYWORD (ExecutionStatus holds RunStatus values);
// StartTime and CloseTime are DATETIME. Only CloseTime can be absent (while
// the run is open).
const (
	BuiltinWorkflowID   Builtin = "WorkflowId"      // Run.WorkflowID
	BuiltinRunID        Builtin = "RunId"           // Run.RunID
	BuiltinWorkflowType Builtin = "WorkflowType"    // Run.WorkflowType, the iWF workflow type
	BuiltinStatus       Builtin = "ExecutionStatus" // Run.Status
	BuiltinStartTime    Builtin = "StartTime"       // Run.StartedAt
	BuiltinCloseTime    Builtin = "CloseTime"       // Run.ClosedAt
)

// Field is what a condition or an order reads: a built-in column of the
// run (Builtin) or the search attribute Key, with its value Type (KEYWORD,
// TEXT, DATETIME, INT, DOUBLE, BOOL or KEYWORD_ARRAY).
type Field struct {
	Builtin Builtin
	Key     string
	Type    ValueType
}

// Expr is a node of a search filter: *And, *Or or
// *Cond. There is no negation node: the engine pushes NOT down into
// the conditions (Cond.Negated).
type Expr interface{ isSearchExpr() }

// And matches the runs that every term matches.
type And struct{ Terms []Expr }

// Or matches the runs that at least one term matches.
type Or struct{ Terms []Expr }

func (*And) isSearchExpr()  {}
func (*Or) isSearchExpr()   {}
func (*Cond) isSearchExpr() {}

// Op is the test a Cond applies to a value.
type Op int

// The condition operators. "v" is the field's value; for a KEYWORD_ARRAY
// field the test applies to each element.
const (
	Eq      Op = iota + 1 // v = Values[0]
	Lt                    // v < Values[0]
	Le                    // v <= Values[0]
	Gt                    // v > Values[0]
	Ge                    // v >= Values[0]
	Between               // Values[0] <= v <= Values[1]
	In                    // v equals one of Values (at least one)
	Prefix                // v starts with Values[0] (a string)
	// Match is the TEXT word match: Values[0] is one word (a string
	// as Words returns them); v matches when it is one of v's words.
	Match
	// Present tests that the field has a value; Values is empty.
	Present
)

// Words returns the distinct words of a TEXT value, in order of first
// appearance, with ASCII letters in lower case. A word is a maximal run of
// characters that are not word separators; the separators are the ASCII
// characters other than letters, digits, the underscore and NUL (white
// space, punctuation, control characters). Other characters (non-ASCII
// letters included) belong to words and are compared exactly.
//
// This is the definition both stores implement: they keep the words of
// every TEXT attribute in an index (search_attribute_words, maintained by
// triggers), which Match conditions read.
func Words(s string) []string {
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

// Cond is one condition on one field.
//
// Values hold the literals converted to the field's type: string (KEYWORD,
// TEXT, KEYWORD_ARRAY and the KEYWORD built-ins; RunStatus values as strings
// for ExecutionStatus), int64 (INT), float64 (DOUBLE), bool (BOOL) or
// time.Time (DATETIME).
//
// Which runs match:
//   - Op Present: the runs where the field has a value of its type
//     (a KEYWORD_ARRAY needs at least one element; CloseTime is absent while
//     the run is open; the other built-ins are always present); Negated:
//     the runs where it has none.
//   - any other Op: only runs where the field has a value of the field's
//     type, and among them those where the test holds for the value (for a
//     KEYWORD_ARRAY: for at least one element) or, when Negated, those where
//     it holds for no value (no element).
type Cond struct {
	Field   Field
	Op      Op
	Values  []any
	Negated bool
}
