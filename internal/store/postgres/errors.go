package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/rowfmt"
)

// storeName names the database in the errors the API shows.
const storeName = "PostgreSQL"

// maxParams is the most bind parameters one statement can carry: the
// extended protocol counts them in 16 bits. pgx fails a statement with more
// while encoding it, after the statements before it in the batch went out,
// and closes the connection; the store refuses it before anything is sent.
const maxParams = math.MaxUint16

// checkParams refuses a statement with more bind parameters than
// PostgreSQL takes, as a client error.
func checkParams(args []any) error {
	if len(args) > maxParams {
		return engine.InvalidRequestError(fmt.Sprintf(
			"the request needs %d values bound in one statement, more than the %d the store (PostgreSQL) takes", len(args), maxParams), nil)
	}
	return nil
}

// classify sorts the error of a store operation run under ctx by whose
// fault it is, for the engine and the API's error table:
//
//   - the request's time ran out: ctx ended (deadline or cancellation) and
//     the statement stopped because of it, or the statement timeout or a
//     cancel request ended it (SQLSTATE 57014, query_canceled):
//     *engine.Error with engine.CodeDeadlineExceeded;
//   - the database refused what the request asked: SQLSTATE class 22
//     (data exception: a NUL character, an invalid encoding, a value out of
//     range), class 54 (program limit exceeded: an index row too large, a
//     statement too complex), or more bind parameters than a statement
//     carries: *engine.Error with engine.CodeInvalidArgument;
//   - the database cannot be reached or cannot take work now (no
//     connection, a connection lost, the server shutting down or starting,
//     too many connections, a full disk, a closed pool, a server that
//     refuses writes because it is a standby):
//     *engine.UnavailableError, retried later;
//   - anything else is returned unchanged.
//
// Errors already classified pass through.
func classify(ctx context.Context, err error) error {
	if rowfmt.Classified(err) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "57014": // query_canceled
			return engine.DeadlineExceededError(storeName, ctx.Err(), err)
		case pgErr.Code == "22021" && strings.Contains(pgErr.Message, "0x00"):
			return engine.InvalidRequestError("a text holds the character U+0000 (NUL), which the store (PostgreSQL) cannot keep", err)
		case strings.HasPrefix(pgErr.Code, "22"): // data_exception
			return engine.InvalidRequestError("the store (PostgreSQL) cannot hold a value of the request: "+pgErr.Message, err)
		case strings.HasPrefix(pgErr.Code, "54"): // program_limit_exceeded
			return engine.InvalidRequestError("the request exceeds a limit of the store (PostgreSQL): "+pgErr.Message, err)
		case strings.HasPrefix(pgErr.Code, "08"), // connection_exception
			pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03", // admin/crash shutdown, cannot_connect_now
			pgErr.Code == "53100", pgErr.Code == "53200", pgErr.Code == "53300", // disk_full, out_of_memory, too_many_connections
			pgErr.Code == sqlReadOnly: // read_only_sql_transaction: a standby (the connection is discarded, readonly.go)
			return &engine.UnavailableError{Store: storeName, Err: err}
		}
		return err
	}
	if msg := err.Error(); strings.Contains(msg, "too many parameter format codes") ||
		strings.Contains(msg, "extended protocol limited to") {
		// pgx's own check, should a statement escape checkParams.
		return engine.InvalidRequestError(fmt.Sprintf(
			"the request needs more values bound in one statement than the %d the store (PostgreSQL) takes", maxParams), err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || pgconn.Timeout(err) {
		return engine.DeadlineExceededError(storeName, ctx.Err(), err)
	}
	if connectionLost(err) {
		if ctx.Err() != nil {
			// The request ended first: the connection broke because of
			// that (a deadline on the socket), not because the database
			// went away.
			return engine.DeadlineExceededError(storeName, ctx.Err(), err)
		}
		return &engine.UnavailableError{Store: storeName, Err: err}
	}
	return err
}

// connectionLost reports whether err says the connection to the database
// could not be made or broke.
func connectionLost(err error) bool {
	var connErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connErr) || errors.As(err, &netErr) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		strings.Contains(err.Error(), "conn closed") || strings.Contains(err.Error(), "closed pool")
}
