package sqlite

import (
	"context"
	"errors"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/rowfmt"
)

// storeName names the database in the errors the API shows.
const storeName = "SQLite"

// limitMessages are the texts of SQLITE_ERROR results that say a statement
// exceeds one of SQLite's limits: the request asked for too much (too many
// values, an expression nested too deep), not that something broke.
var limitMessages = []string{
	"too many SQL variables",
	"Expression tree is too large",
	"parser stack overflow",
	"too many terms in compound SELECT",
	"too many arguments on function",
	"at most 64 tables in a join",
	"too many FROM clause terms",
	"too many columns",
	"string or blob too big",
	"LIKE or GLOB pattern too complex",
}

// classify sorts the error of a store operation run under ctx by whose
// fault it is, for the engine and the API's error table:
//
//   - the request's time ran out: ctx ended and the driver interrupted the
//     statement (SQLITE_INTERRUPT) or returned ctx's error:
//     *engine.Error with engine.CodeDeadlineExceeded;
//   - the request asked for more than SQLite takes: a string or blob too
//     big (SQLITE_TOOBIG), a parameter index out of range (SQLITE_RANGE),
//     an expression too deep, too many bound variables (limitMessages):
//     *engine.Error with engine.CodeInvalidArgument;
//   - SQLite cannot take work for now (the disk is full, an I/O error, the
//     file cannot be opened or written, the database stayed locked past
//     the busy timeout): *engine.UnavailableError, retried later;
//   - anything else is returned unchanged.
//
// Errors already classified pass through.
func classify(ctx context.Context, err error) error {
	if rowfmt.Classified(err) {
		return err
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_INTERRUPT:
			return engine.DeadlineExceededError(storeName, ctx.Err(), err)
		case sqlite3.SQLITE_TOOBIG:
			return engine.InvalidRequestError("a value of the request is larger than the store (SQLite) takes", err)
		case sqlite3.SQLITE_RANGE:
			return engine.InvalidRequestError("the request needs more values bound in one statement than the store (SQLite) takes", err)
		case sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_BUSY,
			sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_NOMEM:
			return &engine.UnavailableError{Store: storeName, Err: err}
		case sqlite3.SQLITE_ERROR:
			msg := se.Error()
			for _, m := range limitMessages {
				if strings.Contains(msg, m) {
					return engine.InvalidRequestError("the request exceeds a limit of the store (SQLite): "+m, err)
				}
			}
		}
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return engine.DeadlineExceededError(storeName, ctx.Err(), err)
	}
	return err
}
