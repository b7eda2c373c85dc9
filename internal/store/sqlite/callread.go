package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/rowfmt"
	"github.com/iwf-server/iwf-server/search"
)

var _ engine.CallReader = (*Store)(nil)

// qCallRead reads everything a worker call needs in one compound
// statement, one row per item, tagged by its first column: 0 the run, 1 the
// execution, 2 a data attribute, 3 a search attribute, 4 a keyword element
// (key, value, position). A statement outside a transaction is its own
// read transaction in SQLite, so this is one consistent snapshot without
// BEGIN and ROLLBACK, and one statement where View took six.
var qCallRead = query(`
	SELECT 0, ` + runColumns + `, NULL FROM runs WHERE run_id = ?1
	UNION ALL
	SELECT 1, ` + execColumns + `, NULL, NULL FROM executions WHERE run_id = ?1 AND execution_id = ?2
	UNION ALL
	SELECT 2, key, value, NULL, NULL, NULL, NULL, NULL, NULL FROM data_attributes WHERE run_id = ?1
	UNION ALL
	SELECT 3, ` + saColumns + ` FROM search_attributes WHERE run_id = ?1
	UNION ALL
	SELECT 4, key, value, pos, NULL, NULL, NULL, NULL, NULL FROM search_attribute_strings WHERE run_id = ?1
	ORDER BY 1, 2, 4`)

// ReadForCall implements engine.CallReader with qCallRead. Attributes are
// read whole: a loading policy that names keys is applied by the engine.
func (s *Store) ReadForCall(ctx context.Context, runID, executionID string) (*engine.CallRead, error) {
	_, rst, err := s.statements(ctx)
	if err != nil {
		return nil, err
	}
	// The statement runs without the caller's cancellation: for a context
	// that can be cancelled, database/sql starts a goroutine per Rows and
	// the driver one per statement, to interrupt it, and this read, a few
	// index lookups, is over about as soon as they are scheduled.
	out, err := s.readForCall(context.WithoutCancel(ctx), rst, runID, executionID)
	if err != nil {
		return nil, classify(ctx, fmt.Errorf("sqlite: ReadForCall: %w", err))
	}
	return out, nil
}

func (s *Store) readForCall(ctx context.Context, rst []*sql.Stmt, runID, executionID string) (*engine.CallRead, error) {
	rows, err := rst[qCallRead].QueryContext(ctx, runID, executionID)
	if err != nil {
		return nil, err
	}
	return scanCallRead(rows)
}

// scanCallRead reads the rows of qCallRead and closes them.
func scanCallRead(rows *sql.Rows) (*engine.CallRead, error) {
	defer rows.Close()
	var (
		out      engine.CallRead
		elements []callReadElement
		tag      int64
		c        [8]any
	)
	for rows.Next() {
		if err := rows.Scan(&tag, &c[0], &c[1], &c[2], &c[3], &c[4], &c[5], &c[6], &c[7]); err != nil {
			return nil, err
		}
		switch tag {
		case 0:
			out.Run = &engine.Run{
				RunID: colText(c[0]), WorkflowID: colText(c[1]), WorkflowType: colText(c[2]),
				Status:    engine.RunStatus(colText(c[3])),
				StartedAt: rowfmt.FromMs(colInt(c[4])), ClosedAt: rowfmt.FromMs(colInt(c[5])),
				Data: colBytes(c[6]),
			}
		case 1:
			out.Execution = &engine.Execution{
				RunID: colText(c[0]), ExecutionID: colText(c[1]), StateID: colText(c[2]),
				Status:    engine.ExecutionStatus(colText(c[3])),
				CreatedAt: rowfmt.FromMs(colInt(c[4])), Data: colBytes(c[5]),
			}
		case 2:
			out.DataAttributes = append(out.DataAttributes, &engine.Attribute{Key: colText(c[0]), Value: colBytes(c[1])})
		case 3:
			a := &engine.SearchAttribute{Key: colText(c[0]), ValueType: search.ValueType(colText(c[1])), Raw: colBytes(c[2])}
			if c[3] != nil {
				a.String = ptrTo(colText(c[3]))
			}
			if c[4] != nil {
				a.Int = ptrTo(colInt(c[4]))
			}
			if c[5] != nil {
				v, ok := c[5].(float64)
				if !ok {
					v = float64(colInt(c[5]))
				}
				a.Double = &v
			}
			if c[6] != nil {
				a.Bool = ptrTo(colInt(c[6]) != 0)
			}
			if c[7] != nil {
				a.Time = ptrTo(rowfmt.FromNs(colInt(c[7])))
			}
			if a.ValueType == search.KeywordArray {
				a.Strings = []string{}
			}
			out.SearchAttributes = append(out.SearchAttributes, a)
		case 4:
			elements = append(elements, callReadElement{key: colText(c[0]), value: colText(c[1])})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if out.Run == nil {
		// Only the run's own rows count: nothing is returned for a run that
		// does not exist.
		return &engine.CallRead{}, nil
	}
	if len(elements) > 0 {
		arrays := map[string]*engine.SearchAttribute{}
		for _, a := range out.SearchAttributes {
			if a.ValueType == search.KeywordArray {
				arrays[a.Key] = a
			}
		}
		for _, e := range elements {
			if a := arrays[e.key]; a != nil {
				a.Strings = append(a.Strings, e.value)
			}
		}
	}
	return &out, nil
}

// callReadElement is one keyword element row of qCallRead.
type callReadElement struct{ key, value string }

func ptrTo[T any](v T) *T { return &v }

// colText, colInt and colBytes read a column the driver returned as any; SQLite
// columns are dynamically typed, so each accepts the forms a value of its
// kind can take.
func colText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	}
	return ""
}

func colInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case float64:
		return int64(x)
	case bool:
		if x {
			return 1
		}
	}
	return 0
}

func colBytes(v any) []byte {
	switch x := v.(type) {
	case []byte:
		return x
	case string:
		return []byte(x)
	}
	return nil
}
