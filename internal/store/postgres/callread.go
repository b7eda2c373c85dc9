package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/engine"
)

var _ engine.CallReader = (*Store)(nil)

// ReadForCall implements engine.CallReader: the run, the execution and the
// run's attributes, read in one REPEATABLE READ, READ ONLY transaction
// whose statements (BEGIN, five SELECTs, ROLLBACK) go out as one pipeline:
// one round trip where View and a read per item take six. Attributes are
// read whole: a loading policy that names keys is applied by the engine.
func (s *Store) ReadForCall(ctx context.Context, runID, executionID string) (*engine.CallRead, error) {
	b := &pgx.Batch{}
	b.Queue(`begin isolation level repeatable read read only`)
	b.Queue(`SELECT `+runColumns+` FROM runs WHERE run_id = $1`, runID)
	b.Queue(`SELECT `+execColumns+` FROM executions WHERE run_id = $1 AND execution_id = $2`, runID, executionID)
	b.Queue(`SELECT key, value FROM data_attributes WHERE run_id = $1 ORDER BY key`, runID)
	b.Queue(`SELECT `+saColumns+` FROM search_attributes WHERE run_id = $1 ORDER BY key`, runID)
	b.Queue(`SELECT key, value FROM search_attribute_strings WHERE run_id = $1 ORDER BY key, pos`, runID)
	b.Queue(`rollback`)
	// On an error the connection is left inside the failed transaction and
	// the pool discards it on release.
	br := s.pool.SendBatch(ctx, b)
	out, err := readForCall(br)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, unavailable(fmt.Errorf("postgres: ReadForCall: %w", err))
	}
	return out, nil
}

// readForCall reads the results of ReadForCall's pipeline.
func readForCall(br pgx.BatchResults) (*engine.CallRead, error) {
	if _, err := br.Exec(); err != nil {
		return nil, err
	}
	var out engine.CallRead
	run, err := scanRun(br.QueryRow())
	switch {
	case err == nil:
		out.Run = run
	case !errors.Is(err, engine.ErrNotFound):
		return nil, err
	}
	x, err := scanExecution(br.QueryRow())
	switch {
	case err == nil:
		out.Execution = x
	case !errors.Is(err, engine.ErrNotFound):
		return nil, err
	}
	rows, err := br.Query()
	if out.DataAttributes, err = collect(rows, err, func(r pgx.Rows) (*engine.Attribute, error) {
		var a engine.Attribute
		return &a, r.Scan(&a.Key, &a.Value)
	}); err != nil {
		return nil, err
	}
	rows, err = br.Query()
	if out.SearchAttributes, err = collect(rows, err, scanSearchAttribute); err != nil {
		return nil, err
	}
	rows, err = br.Query()
	if err := fillKeywordArrays(rows, err, keywordArrays(out.SearchAttributes)); err != nil {
		return nil, err
	}
	if _, err := br.Exec(); err != nil {
		return nil, err
	}
	return &out, nil
}
