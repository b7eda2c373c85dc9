package search

import (
	"unicode/utf8"
)

// The limits of a query. A query beyond any of them is rejected by Parse or
// Compile with an *Error whose message names the limit and its value (the
// API answers 400), before the query reaches a store. Together they bound
// the work of one search: the parser's memory and recursion, the size of
// the SQL statement and its number of bind parameters, and the number of
// subqueries a database plans and runs (docs/search.md, "Limits").
const (
	// MaxQueryLength is the longest query, in bytes (of UTF-8), checked
	// before the query is lexed.
	MaxQueryLength = 16 << 10
	// MaxDepth is the deepest nesting of parentheses and NOT: each "(" and
	// each NOT opens a level. The parser counts levels as it descends, so
	// its recursion is bounded by this constant whatever the input.
	MaxDepth = 32
	// MaxPredicates is the largest number of predicates (attribute,
	// operator, values) in one query.
	MaxPredicates = 100
	// MaxValues is the largest number of literal values in one query, the
	// values of IN lists included (so it bounds one IN list too).
	MaxValues = 1000
	// MaxTextWords is the largest number of words in one literal compared
	// with a TEXT attribute (each word is one index lookup).
	MaxTextWords = 32
	// MaxQueryTextWords is the largest number of TEXT words in one query,
	// over all its TEXT literals.
	MaxQueryTextWords = 100
)

// checkInput rejects, before lexing, a query longer than maxLength bytes
// (MaxQueryLength) or one that is not valid UTF-8. Positions count
// characters, each byte of an invalid sequence as one, as the lexer does.
func checkInput(query string, maxLength int) error {
	if len(query) > maxLength {
		cut := maxLength
		for cut > 0 && !utf8.RuneStart(query[cut]) {
			cut--
		}
		return searchError(utf8.RuneCountInString(query[:cut])+1,
			"the query is %d bytes long, more than the limit of %d bytes", len(query), maxLength)
	}
	pos := 1
	for i := 0; i < len(query); pos++ {
		r, n := utf8.DecodeRuneInString(query[i:])
		if r == utf8.RuneError && n == 1 {
			return searchError(pos, "the query is not valid UTF-8 (byte 0x%02x)", query[i])
		}
		i += n
	}
	return nil
}
