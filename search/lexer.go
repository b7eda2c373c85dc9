package search

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// Error is a query the language rejects: what is wrong and where (the
// 1-based character position).
type Error struct {
	Pos int
	Msg string
}

// Error implements error.
func (e *Error) Error() string {
	return fmt.Sprintf("invalid search query at position %d: %s", e.Pos, e.Msg)
}

func searchError(pos int, format string, args ...any) *Error {
	return &Error{Pos: pos, Msg: oneLine(fmt.Sprintf(format, args...))}
}

// oneLine escapes the control characters and line separators of s (Go
// escapes such as \n), so that an error message quoting a user's string
// or attribute name stays on one line in responses and logs.
func oneLine(s string) string {
	isBreak := func(r rune) bool { return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' }
	if !strings.ContainsFunc(s, isBreak) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if isBreak(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
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

// lex splits a query into tokens, ending with tEOF. The query has passed
// checkInput: it is valid UTF-8 and at most MaxQueryLength bytes long.
func lex(query string) ([]token, error) {
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
			tok, end, err := doubled(rs, i)
			if err != nil {
				return nil, err
			}
			out = append(out, tok)
			i = end
		case r == '"':
			// Temporal's list filter, which iWF passes queries to, also
			// takes double-quoted strings: "" or \" for a quote, \\ for a
			// backslash.
			text, end, err := doubleQuoted(rs, i)
			if err != nil {
				return nil, err
			}
			out = append(out, token{tString, text, pos})
			i = end
		case unicode.IsDigit(r) || ((r == '-' || r == '+' || r == '.') && i+1 < len(rs) && unicode.IsDigit(rs[i+1])):
			tok, end, err := number(rs, i, isIdent)
			if err != nil {
				return nil, err
			}
			out = append(out, tok)
			i = end
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

// doubleQuoted reads the double-quoted string that starts at rs[start] and
// returns its text and the index after its closing quote. Inside, "" and
// \" stand for a quote and \\ for a backslash; any other backslash is
// kept as it is.
func doubleQuoted(rs []rune, start int) (string, int, error) {
	var b strings.Builder
	for j := start + 1; j < len(rs); j++ {
		switch {
		case rs[j] == '\\' && j+1 < len(rs) && (rs[j+1] == '"' || rs[j+1] == '\\'):
			b.WriteRune(rs[j+1])
			j++
		case rs[j] == '"' && j+1 < len(rs) && rs[j+1] == '"':
			b.WriteRune('"')
			j++
		case rs[j] == '"':
			return b.String(), j + 1, nil
		case rs[j] == 0:
			return "", 0, nulError(j)
		default:
			b.WriteRune(rs[j])
		}
	}
	return "", 0, searchError(start+1, "unterminated string")
}

// doubled reads the single-quoted string or backquoted attribute name that
// starts at rs[start], in which the quote is written twice to stand for
// itself, and returns its token and the index after its closing quote.
func doubled(rs []rune, start int) (token, int, error) {
	q := rs[start]
	var b strings.Builder
	for j := start + 1; j < len(rs); j++ {
		if rs[j] == 0 {
			return token{}, 0, nulError(j)
		}
		if rs[j] != q {
			b.WriteRune(rs[j])
			continue
		}
		if j+1 < len(rs) && rs[j+1] == q {
			b.WriteRune(q)
			j++
			continue
		}
		kind := tString
		if q == '`' {
			kind = tIdent
		}
		return token{kind, b.String(), start + 1}, j + 1, nil
	}
	what := "string"
	if q == '`' {
		what = "quoted attribute name"
	}
	return token{}, 0, searchError(start+1, "unterminated %s", what)
}

// nulError is the error for a NUL character at rs[i] inside a string or a
// quoted attribute name: no store can hold it (PostgreSQL's text cannot),
// so no value or key can equal a literal that has one.
func nulError(i int) error {
	return searchError(i+1, "a string or quoted attribute name cannot contain the NUL character")
}

// number reads the number that starts at rs[start] (12, -3.5, 1e9) and
// returns its token and the index after it; letters run into it make it
// malformed.
func number(rs []rune, start int, isIdent func(r rune, first bool) bool) (token, int, error) {
	j := start + 1
	for j < len(rs) && (unicode.IsDigit(rs[j]) || rs[j] == '.' || rs[j] == 'e' || rs[j] == 'E' ||
		((rs[j] == '-' || rs[j] == '+') && (rs[j-1] == 'e' || rs[j-1] == 'E'))) {
		j++
	}
	text := string(rs[start:j])
	if _, err := strconv.ParseFloat(text, 64); err != nil || (j < len(rs) && isIdent(rs[j], false)) {
		for j < len(rs) && isIdent(rs[j], false) {
			j++
		}
		return token{}, 0, searchError(start+1, "malformed number %s", string(rs[start:j]))
	}
	return token{tNumber, text, start + 1}, j, nil
}
