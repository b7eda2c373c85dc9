package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/rowfmt"
	"github.com/iwf-server/iwf-server/search"
)

var _ engine.CallReader = (*Store)(nil)

// callReadSQL reads everything a worker call needs in one statement: a
// compound SELECT with one row per item, tagged by its first column (see
// the callRead* constants). One statement is one snapshot, so it needs no
// transaction of its own. Each branch is one index scan under an Append:
// folding the attribute tables into arrays (array_agg with ORDER BY) cost
// the backend a join and three aggregates with eleven sorts to set up on
// every call, about a third more than this. The branches' columns have
// the compound's types (hence pos::bigint), so the planner flattens them
// into the Append; one column of another type would put a subquery scan
// over every branch but the first. Rows come in no particular order;
// scanCallRead puts attributes in key order. No row comes back when the
// run does not exist.
const callReadSQL = `SELECT 0, run_id, workflow_id, workflow_type, status, started_at, closed_at, data,
    NULL::double precision, NULL::boolean FROM runs WHERE run_id = $1
UNION ALL SELECT 1, execution_id, state_id, status, NULL, created_at, NULL, data, NULL, NULL
  FROM executions WHERE run_id = $1 AND execution_id = $2
UNION ALL SELECT 2, key, NULL, NULL, NULL, NULL, NULL, value, NULL, NULL
  FROM data_attributes WHERE run_id = $1
UNION ALL SELECT 3, key, value_type, string_value, NULL, int_value, time_value, raw, double_value, bool_value
  FROM search_attributes WHERE run_id = $1
UNION ALL SELECT 4, key, value, NULL, NULL, pos::bigint, NULL, NULL, NULL, NULL
  FROM search_attribute_strings WHERE run_id = $1`

// The tags of callReadSQL's rows and what their columns hold (after the
// tag: three or four texts, two integers, bytes, a double and a bool).
const (
	callReadRun       = 0 // run_id, workflow_id, workflow_type, status, started_at, closed_at, data
	callReadExecution = 1 // execution_id, state_id, status, -, created_at, -, data
	callReadData      = 2 // key, -, -, -, -, -, value
	callReadSearch    = 3 // key, value_type, string_value, -, int_value, time_value, raw, double_value, bool_value
	callReadElement   = 4 // key, value, -, -, pos
)

// ReadForCall implements engine.CallReader with callReadSQL: one statement
// in one round trip, on a connection taken through the gate. Attributes are read whole: a loading policy that names
// keys is applied by the engine. When the run does not exist, nothing is
// returned (no execution and no attributes either).
func (s *Store) ReadForCall(ctx context.Context, runID, executionID string) (*engine.CallRead, error) {
	if err := s.gate.enter(ctx); err != nil {
		return nil, fmt.Errorf("postgres: ReadForCall: %w", err)
	}
	rows, err := s.pool.Query(ctx, callReadSQL, runID, executionID)
	var out *engine.CallRead
	if err == nil {
		out, err = scanCallRead(rows)
	}
	s.gate.leave()
	if err != nil {
		return nil, classify(ctx, fmt.Errorf("postgres: ReadForCall: %w", err))
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
		return nil, classify(ctx, fmt.Errorf("postgres: ReadRun: %w", err))
	}
	return r, err
}

// scanCallRead reads the rows of callReadSQL and closes them; no run row
// is an empty CallRead. Attributes come out in key order, the elements of
// a keyword array in position order.
func scanCallRead(rows pgx.Rows) (*engine.CallRead, error) {
	defer rows.Close()
	var (
		out      engine.CallRead
		elements []callReadElementRow
		tag      int32
		t        [4]*string
		i        [2]*int64
		b        []byte
		d        *float64
		bl       *bool
	)
	for rows.Next() {
		if err := rows.Scan(&tag, &t[0], &t[1], &t[2], &t[3], &i[0], &i[1], &b, &d, &bl); err != nil {
			return nil, err
		}
		switch tag {
		case callReadRun:
			out.Run = &engine.Run{
				RunID: deref(t[0]), WorkflowID: deref(t[1]), WorkflowType: deref(t[2]),
				Status:    engine.RunStatus(deref(t[3])),
				StartedAt: rowfmt.FromMs(derefInt(i[0])), ClosedAt: rowfmt.FromMs(derefInt(i[1])),
				Data: b,
			}
		case callReadExecution:
			out.Execution = &engine.Execution{
				ExecutionID: deref(t[0]), StateID: deref(t[1]), Status: engine.ExecutionStatus(deref(t[2])),
				CreatedAt: rowfmt.FromMs(derefInt(i[0])), Data: b,
			}
		case callReadData:
			out.DataAttributes = append(out.DataAttributes, &engine.Attribute{Key: deref(t[0]), Value: b})
		case callReadSearch:
			a := &engine.SearchAttribute{Key: deref(t[0]), ValueType: search.ValueType(deref(t[1])), Raw: b,
				String: t[2], Int: i[0], Double: d, Bool: bl}
			if i[1] != nil {
				v := rowfmt.FromNs(*i[1])
				a.Time = &v
			}
			out.SearchAttributes = append(out.SearchAttributes, a)
		case callReadElement:
			elements = append(elements, callReadElementRow{key: deref(t[0]), value: deref(t[1]), pos: derefInt(i[0])})
		default:
			return nil, fmt.Errorf("call read: unknown row tag %d", tag)
		}
		// Scan fills pointers and byte slices afresh for each row, so what
		// a row's values point to is its own.
		t, i, b, d, bl = [4]*string{}, [2]*int64{}, nil, nil, nil
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if out.Run == nil {
		return &engine.CallRead{}, nil
	}
	if out.Execution != nil {
		out.Execution.RunID = out.Run.RunID
	}
	slices.SortFunc(out.DataAttributes, func(x, y *engine.Attribute) int { return strings.Compare(x.Key, y.Key) })
	slices.SortFunc(out.SearchAttributes, func(x, y *engine.SearchAttribute) int { return strings.Compare(x.Key, y.Key) })
	slices.SortFunc(elements, func(x, y callReadElementRow) int {
		if c := strings.Compare(x.key, y.key); c != 0 {
			return c
		}
		return cmp.Compare(x.pos, y.pos)
	})
	arrays := keywordArrays(out.SearchAttributes)
	for _, e := range elements {
		if a := arrays[e.key]; a != nil {
			a.Strings = append(a.Strings, e.value)
		}
	}
	return &out, nil
}

// callReadElementRow is one keyword element of callReadSQL.
type callReadElementRow struct {
	key, value string
	pos        int64
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func derefInt(v *int64) int64 {
	if v == nil {
		return 0
	}
	return *v
}
