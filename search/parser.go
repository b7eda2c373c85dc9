package search

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

// Parsed is a query before typing.
type Parsed struct {
	where   searchExpr // nil: every run
	orderBy *token     // nil: default order
	desc    bool
}

type parser struct {
	toks []token
	i    int

	maxDepth int
	depth    int // open parentheses and NOTs around the current token
	preds    int // predicates read
	values   int // values read
}

// Parse parses a query:
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
//
// A query beyond MaxQueryLength, MaxDepth, MaxPredicates or MaxValues, or
// one that is not valid UTF-8 or has a NUL character in a string or quoted
// name, is an *Error.
func Parse(query string) (*Parsed, error) { return parse(query, MaxQueryLength, MaxDepth) }

// parse is Parse with other length and depth limits (for tests).
func parse(query string, maxLength, maxDepth int) (*Parsed, error) {
	if err := checkInput(query, maxLength); err != nil {
		return nil, err
	}
	toks, err := lex(query)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks, maxDepth: maxDepth}
	q := &Parsed{}
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

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) isKeyword(kw string) bool {
	t := p.peek()
	return t.kind == tKeyword && t.text == kw
}

func (p *parser) expected(what string) error {
	t := p.peek()
	return searchError(t.pos, "expected %s, found %s", what, describe(t))
}

func (p *parser) or() (searchExpr, error) {
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

func (p *parser) and() (searchExpr, error) {
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

func (p *parser) unary() (searchExpr, error) {
	switch t := p.peek(); {
	case t.kind == tKeyword && t.text == "NOT":
		if err := p.descend(t); err != nil {
			return nil, err
		}
		p.next()
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		p.depth--
		return &notExpr{term: x}, nil
	case t.kind == tLParen:
		if err := p.descend(t); err != nil {
			return nil, err
		}
		p.next()
		x, err := p.or()
		if err != nil {
			return nil, err
		}
		if p.peek().kind != tRParen {
			return nil, p.expected("')'")
		}
		p.next()
		p.depth--
		return x, nil
	case t.kind == tIdent:
		return p.predicate()
	}
	return nil, p.expected("an attribute name, NOT or '('")
}

// descend opens one level of nesting at t, a "(" or a NOT: the only
// places where the parser recurses, so that MaxDepth bounds its stack.
func (p *parser) descend(t token) error {
	if p.depth == p.maxDepth {
		return searchError(t.pos, "the query nests parentheses and NOT deeper than the limit of %d levels", p.maxDepth)
	}
	p.depth++
	return nil
}

func (p *parser) value() (token, error) {
	t := p.peek()
	switch {
	case t.kind == tString, t.kind == tNumber, t.kind == tKeyword && (t.text == "TRUE" || t.text == "FALSE"):
		if p.values == MaxValues {
			return token{}, searchError(t.pos, "the query has more values than the limit of %d (IN lists included)", MaxValues)
		}
		p.values++
		return p.next(), nil
	}
	return token{}, p.expected("a value ('string' or number)")
}

func (p *parser) predicate() (searchExpr, error) {
	if p.preds == MaxPredicates {
		return nil, searchError(p.peek().pos, "the query has more predicates than the limit of %d", MaxPredicates)
	}
	p.preds++
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
	var err error
	switch t.text {
	case "BETWEEN":
		err = p.between(pr)
	case "IN":
		err = p.in(pr)
	case "STARTS_WITH":
		err = p.startsWith(pr)
	default:
		return nil, p.expected("an operator after " + pr.attr.text)
	}
	if err != nil {
		return nil, err
	}
	return pr, nil
}

// between reads "BETWEEN value AND value" into pr.
func (p *parser) between(pr *predicate) error {
	p.next()
	pr.op = "BETWEEN"
	lo, err := p.value()
	if err != nil {
		return err
	}
	if !p.isKeyword("AND") {
		return p.expected("AND in BETWEEN")
	}
	p.next()
	hi, err := p.value()
	if err != nil {
		return err
	}
	pr.values = []token{lo, hi}
	return nil
}

// in reads "IN ( value { , value } )" into pr.
func (p *parser) in(pr *predicate) error {
	p.next()
	pr.op = "IN"
	if p.peek().kind != tLParen {
		return p.expected("'(' after IN")
	}
	p.next()
	for {
		v, err := p.value()
		if err != nil {
			return err
		}
		pr.values = append(pr.values, v)
		if p.peek().kind == tComma {
			p.next()
			continue
		}
		if p.peek().kind != tRParen {
			return p.expected("',' or ')'")
		}
		p.next()
		return nil
	}
}

// startsWith reads "STARTS_WITH 'string'" into pr.
func (p *parser) startsWith(pr *predicate) error {
	p.next()
	pr.op = "STARTS_WITH"
	v, err := p.value()
	if err != nil {
		return err
	}
	if v.kind != tString {
		return searchError(v.pos, "STARTS_WITH needs a 'string', found %s", describe(v))
	}
	pr.values = []token{v}
	return nil
}
