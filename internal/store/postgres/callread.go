package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/search"
	"github.com/iwf-server/iwf-server/internal/store/rowfmt"
)

var _ engine.CallReader = (*Store)(nil)

// callReadSQL reads everything a worker call needs in one statement: the
// run, the execution (NULLs when it does not exist) and the run's data
// attributes, search attributes and keyword elements, each table folded
// into arrays in key order. One statement is one snapshot, so it needs no
// transaction of its own: the backend parses, plans and starts one
// executor where a transaction of five SELECTs took seven statements.
// No row comes back when the run does not exist.
const callReadSQL = `SELECT r.run_id, r.workflow_id, r.workflow_type, r.status, r.started_at, r.closed_at, r.data,
  x.run_id, x.execution_id, x.state_id, x.status, x.created_at, x.data,
  da.k, da.v,
  sa.k, sa.t, sa.raw, sa.s, sa.i, sa.d, sa.b, sa.tm,
  ss.k, ss.v
FROM runs r
LEFT JOIN executions x ON x.run_id = r.run_id AND x.execution_id = $2
CROSS JOIN (SELECT array_agg(key ORDER BY key) AS k, array_agg(value ORDER BY key) AS v
  FROM data_attributes WHERE run_id = $1) da
CROSS JOIN (SELECT array_agg(key ORDER BY key) AS k, array_agg(value_type ORDER BY key) AS t,
    array_agg(raw ORDER BY key) AS raw, array_agg(string_value ORDER BY key) AS s,
    array_agg(int_value ORDER BY key) AS i, array_agg(double_value ORDER BY key) AS d,
    array_agg(bool_value ORDER BY key) AS b, array_agg(time_value ORDER BY key) AS tm
  FROM search_attributes WHERE run_id = $1) sa
CROSS JOIN (SELECT array_agg(key ORDER BY key, pos) AS k, array_agg(value ORDER BY key, pos) AS v
  FROM search_attribute_strings WHERE run_id = $1) ss
WHERE r.run_id = $1`

// ReadForCall implements engine.CallReader with callReadSQL: one statement
// in one round trip, on a connection taken through the gate. Attributes are read whole: a loading policy that names
// keys is applied by the engine. When the run does not exist, nothing is
// returned (no execution and no attributes either).
func (s *Store) ReadForCall(ctx context.Context, runID, executionID string) (*engine.CallRead, error) {
	if err := s.gate.enter(ctx); err != nil {
		return nil, fmt.Errorf("postgres: ReadForCall: %w", err)
	}
	out, err := scanCallRead(s.pool.QueryRow(ctx, callReadSQL, runID, executionID))
	s.gate.leave()
	if err != nil {
		return nil, unavailable(fmt.Errorf("postgres: ReadForCall: %w", err))
	}
	return out, nil
}

var _ engine.RunReader = (*Store)(nil)

// ReadRun implements engine.RunReader: one statement in one round trip,
// on a connection taken through the gate; without runID it follows the
// workflow's current run.
func (s *Store) ReadRun(ctx context.Context, workflowID, runID string) (*engine.Run, error) {
	if err := s.gate.enter(ctx); err != nil {
		return nil, fmt.Errorf("postgres: ReadRun: %w", err)
	}
	var row pgx.Row
	if runID != "" {
		row = s.pool.QueryRow(ctx, `SELECT `+runColumns+` FROM runs WHERE run_id = $1`, runID)
	} else {
		row = s.pool.QueryRow(ctx, `SELECT `+runColumns+` FROM runs
			WHERE run_id = (SELECT current_run_id FROM workflows WHERE workflow_id = $1)`, workflowID)
	}
	r, err := scanRun(row)
	s.gate.leave()
	if err != nil && !errors.Is(err, engine.ErrNotFound) {
		return nil, unavailable(fmt.Errorf("postgres: ReadRun: %w", err))
	}
	return r, err
}

// scanCallRead reads the row of callReadSQL; no row is an empty CallRead.
func scanCallRead(row pgx.Row) (*engine.CallRead, error) {
	var (
		run                      engine.Run
		runStatus                string
		startedAt, closedAt      int64
		xRunID, xID, xState, xSt *string
		xCreated                 *int64
		xData                    []byte
		daKeys                   []string
		daValues                 [][]byte
		saKeys, saTypes          []string
		saRaw                    [][]byte
		saStrings                []*string
		saInts, saTimes          []*int64
		saDoubles                []*float64
		saBools                  []*bool
		elemKeys, elemValues     []string
	)
	err := row.Scan(&run.RunID, &run.WorkflowID, &run.WorkflowType, &runStatus, &startedAt, &closedAt, &run.Data,
		&xRunID, &xID, &xState, &xSt, &xCreated, &xData,
		&daKeys, &daValues,
		&saKeys, &saTypes, &saRaw, &saStrings, &saInts, &saDoubles, &saBools, &saTimes,
		&elemKeys, &elemValues)
	if errors.Is(err, pgx.ErrNoRows) {
		return &engine.CallRead{}, nil
	}
	if err != nil {
		return nil, err
	}
	if len(daValues) != len(daKeys) || len(saTypes) != len(saKeys) || len(saRaw) != len(saKeys) ||
		len(saStrings) != len(saKeys) || len(saInts) != len(saKeys) || len(saDoubles) != len(saKeys) ||
		len(saBools) != len(saKeys) || len(saTimes) != len(saKeys) || len(elemValues) != len(elemKeys) {
		return nil, errors.New("attribute arrays of different lengths")
	}
	run.Status = engine.RunStatus(runStatus)
	run.StartedAt, run.ClosedAt = rowfmt.FromMs(startedAt), rowfmt.FromMs(closedAt)
	out := &engine.CallRead{Run: &run}
	if xID != nil {
		out.Execution = &engine.Execution{
			RunID: *xRunID, ExecutionID: *xID, StateID: *xState, Status: engine.ExecutionStatus(*xSt),
			CreatedAt: rowfmt.FromMs(*xCreated), Data: xData,
		}
	}
	for i, k := range daKeys {
		out.DataAttributes = append(out.DataAttributes, &engine.Attribute{Key: k, Value: daValues[i]})
	}
	for i, k := range saKeys {
		a := &engine.SearchAttribute{Key: k, ValueType: search.ValueType(saTypes[i]), Raw: saRaw[i],
			String: saStrings[i], Int: saInts[i], Double: saDoubles[i], Bool: saBools[i]}
		if saTimes[i] != nil {
			v := rowfmt.FromMs(*saTimes[i])
			a.Time = &v
		}
		out.SearchAttributes = append(out.SearchAttributes, a)
	}
	arrays := keywordArrays(out.SearchAttributes)
	for i, k := range elemKeys {
		if a := arrays[k]; a != nil {
			a.Strings = append(a.Strings, elemValues[i])
		}
	}
	return out, nil
}
