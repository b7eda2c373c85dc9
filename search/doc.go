// Package search owns the search language of POST /api/v1/workflow/search:
// its lexer and parser (Parse), its typing (Compile), the dialect-free query
// that stores execute (Query and its Expr nodes), and the value types of
// search attributes (ValueType).
//
// It imports neither the engine nor any store: the engine resolves custom
// attribute names through a Resolver, and each store compiles a Query to
// its SQL (internal/store/searchsql).
package search
