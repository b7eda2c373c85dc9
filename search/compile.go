package search

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// statusNames maps the ExecutionStatus spellings a query may use (Temporal's
// and iWF's, compared in lower case without underscores) to run statuses
// (iWF's WorkflowStatus values, which the runs' status column holds).
var statusNames = map[string]string{
	"running":        "RUNNING",
	"completed":      "COMPLETED",
	"failed":         "FAILED",
	"canceled":       "CANCELED",
	"cancelled":      "CANCELED",
	"terminated":     "TERMINATED",
	"timedout":       "TIMEOUT",
	"timeout":        "TIMEOUT",
	"continuedasnew": "CONTINUED_AS_NEW",
}

// ErrUnknownAttribute is what a Resolver returns for a name it does not
// know.
var ErrUnknownAttribute = errors.New("unknown search attribute")

// Resolver resolves the names of a query that are not built-in fields: the
// custom (and system) search attributes, to a Field with a Key (or, for an
// alias of a built-in, a Builtin) and a Type. It returns an error wrapping
// ErrUnknownAttribute for an unknown name.
type Resolver interface {
	Resolve(ctx context.Context, name string) (Field, error)
}

// typer turns a parsed query into a Query.
type typer struct {
	ctx    context.Context
	types  Resolver
	now    time.Time
	fields map[string]Field
	words  int // TEXT words matched so far
}

// Compile resolves the attributes of a parsed query (built-ins,
// system attributes, then types), converts its literals and checks its
// operators. now anchors relative DATETIME literals such as '15m'. A TEXT
// literal of more than MaxTextWords words, or TEXT literals of more than
// MaxQueryTextWords words in all, are an *Error.
func Compile(ctx context.Context, pq *Parsed, types Resolver, now time.Time) (*Query, error) {
	t := &typer{ctx: ctx, types: types, now: now, fields: map[string]Field{}}
	q := &Query{}
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
			case Keyword, Int, Double, Bool, Datetime:
			default:
				return nil, searchError(pq.orderBy.pos, "cannot order by %s: a %s attribute has no order", pq.orderBy.text, f.Type)
			}
		}
		q.Order = Order{Field: f, Desc: pq.desc}
	}
	return q, nil
}

// field resolves an attribute name.
func (t *typer) field(name token) (Field, error) {
	if f, ok := t.fields[name.text]; ok {
		return f, nil
	}
	f, err := t.resolve(name)
	if err == nil {
		t.fields[name.text] = f
	}
	return f, err
}

func (t *typer) resolve(name token) (Field, error) {
	switch name.text {
	case "WorkflowId":
		return Field{Builtin: BuiltinWorkflowID, Type: Keyword}, nil
	case "RunId", "WorkflowRunId":
		return Field{Builtin: BuiltinRunID, Type: Keyword}, nil
	case "WorkflowType":
		return Field{Builtin: BuiltinWorkflowType, Type: Keyword}, nil
	case "ExecutionStatus":
		return Field{Builtin: BuiltinStatus, Type: Keyword}, nil
	case "StartTime":
		return Field{Builtin: BuiltinStartTime, Type: Datetime}, nil
	case "CloseTime":
		return Field{Builtin: BuiltinCloseTime, Type: Datetime}, nil
	}
	if name.text == "" {
		return Field{}, searchError(name.pos, "empty attribute name")
	}
	f, err := t.types.Resolve(t.ctx, name.text)
	if errors.Is(err, ErrUnknownAttribute) {
		return Field{}, searchError(name.pos, "unknown search attribute %s", name.text)
	}
	if err != nil {
		return Field{}, err
	}
	if !f.Type.Valid() {
		return Field{}, searchError(name.pos, "search attribute %s has unsupported type %q", name.text, f.Type)
	}
	return f, nil
}

// expr types e; neg asks for its negation.
func (t *typer) expr(e searchExpr, neg bool) (Expr, error) {
	switch e := e.(type) {
	case *boolExpr:
		terms := make([]Expr, 0, len(e.terms))
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

func flatAnd(terms []Expr) Expr {
	var out []Expr
	for _, x := range terms {
		if a, ok := x.(*And); ok {
			out = append(out, a.Terms...)
		} else {
			out = append(out, x)
		}
	}
	if len(out) == 1 {
		return out[0]
	}
	return &And{Terms: out}
}

func flatOr(terms []Expr) Expr {
	var out []Expr
	for _, x := range terms {
		if o, ok := x.(*Or); ok {
			out = append(out, o.Terms...)
		} else {
			out = append(out, x)
		}
	}
	if len(out) == 1 {
		return out[0]
	}
	return &Or{Terms: out}
}

// opAllowed reports whether an operator (as the parser spells it) applies
// to a field.
func opAllowed(f Field, op string) bool {
	switch op {
	case "=", "!=", "IN", "IS NULL":
		return true
	case "<", "<=", ">", ">=", "BETWEEN":
		if f.Builtin == BuiltinStatus {
			return false
		}
		switch f.Type {
		case Keyword, KeywordArray, Int, Double, Datetime:
			return true
		}
	case "STARTS_WITH":
		if f.Builtin == BuiltinStatus {
			return false
		}
		return f.Type == Keyword || f.Type == KeywordArray
	}
	return false
}

var opsByText = map[string]Op{
	"=": Eq, "!=": Eq, "<": Lt, "<=": Le, ">": Gt, ">=": Ge,
	"BETWEEN": Between, "IN": In, "STARTS_WITH": Prefix, "IS NULL": Present,
}

func (t *typer) predicate(p *predicate, neg bool) (Expr, error) {
	f, err := t.field(p.attr)
	if err != nil {
		return nil, err
	}
	if !opAllowed(f, p.op) {
		what := string(f.Type)
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
		x, err := t.literal(f, p.attr.text, v, op == Prefix)
		if err != nil {
			return nil, err
		}
		values = append(values, x)
	}
	if f.Type == Text && op != Present {
		// A literal matches when each of its words is a word of the value:
		// one single-word condition per word, and IN is the disjunction of
		// its literals. Negated, by De Morgan: any word missing, and every
		// literal failing.
		lits := make([]Expr, 0, len(values))
		for i, v := range values {
			words := Words(v.(string))
			if len(words) == 0 {
				return nil, searchError(p.values[i].pos, "a TEXT value to match needs at least one word, got %s", describe(p.values[i]))
			}
			if len(words) > MaxTextWords {
				return nil, searchError(p.values[i].pos, "a TEXT value to match has %d words, more than the limit of %d", len(words), MaxTextWords)
			}
			if t.words += len(words); t.words > MaxQueryTextWords {
				return nil, searchError(p.values[i].pos, "the query's TEXT values have more words than the limit of %d in all", MaxQueryTextWords)
			}
			conds := make([]Expr, 0, len(words))
			for _, w := range words {
				conds = append(conds, &Cond{Field: f, Op: Match, Values: []any{w}, Negated: negated})
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
	return &Cond{Field: f, Op: op, Values: values, Negated: negated}, nil
}

// literal converts one literal to the type of f.
func (t *typer) literal(f Field, attr string, v token, prefix bool) (any, error) {
	bad := func(want string) error {
		return searchError(v.pos, "%s is not a valid %s value for %s", describe(v), want, attr)
	}
	if v.kind == tKeyword && f.Type != Bool {
		return nil, bad(string(f.Type))
	}
	if f.Builtin == BuiltinStatus {
		s, ok := statusNames[strings.ReplaceAll(strings.ToLower(v.text), "_", "")]
		if !ok || v.kind != tString {
			return nil, searchError(v.pos, "%s is not an ExecutionStatus (one of 'Running', 'Completed', 'Failed', 'Canceled', 'Terminated', 'TimedOut', 'ContinuedAsNew')", describe(v))
		}
		return s, nil
	}
	if prefix {
		return v.text, nil
	}
	switch f.Type {
	case Keyword, Text, KeywordArray:
		return v.text, nil
	case Int:
		n, err := strconv.ParseInt(strings.TrimSpace(v.text), 10, 64)
		if err != nil {
			return nil, bad("INT")
		}
		return n, nil
	case Double:
		d, err := strconv.ParseFloat(strings.TrimSpace(v.text), 64)
		if err != nil || math.IsNaN(d) || math.IsInf(d, 0) {
			return nil, bad("DOUBLE")
		}
		return d, nil
	case Bool:
		b, err := strconv.ParseBool(strings.TrimSpace(v.text))
		if err != nil {
			return nil, bad("BOOL")
		}
		return b, nil
	case Datetime:
		tm, err := ParseDatetime(strings.TrimSpace(v.text), t.now)
		if err != nil {
			return nil, searchError(v.pos, "%s is not a valid DATETIME value for %s (want RFC 3339, Unix nanoseconds or a relative time like 15m)", describe(v), attr)
		}
		return tm, nil
	}
	return nil, bad(string(f.Type))
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
