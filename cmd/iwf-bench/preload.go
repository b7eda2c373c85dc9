package main

// W5's preload: N closed BenchW5 runs written straight into a stopped
// server's database by cloning the rows the engine wrote for a template
// run. The template ran through the real server, so the clones hold
// exactly the rows the engine writes for such a run; only the ids and the
// values that name the run change (run id, workflow id, CustomerId), each
// to a value of the same length, and the times (columns at and *_at, but
// for 0), which move back by w5Spacing per clone. The tables to clone are read from the
// schema: a table with a run_id column holds per-run rows and is cloned,
// workflows is cloned by its workflow id, and the preload refuses to run
// when the schema has a table it does not know (TestPreloadMatchesEngine
// compares a clone with an engine-run workflow table by table).

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the SQLite driver the server uses too
)

const (
	// w5PerCustomer is how many preloaded runs share one CustomerId value:
	// the selective search finds that many.
	w5PerCustomer = 5
	// w5TemplateID is the workflow id of the template run; the same
	// length as w5ID's, as is w5TemplateCustomer as w5Customer's.
	w5TemplateID       = "w5-t000000000"
	w5TemplateCustomer = "cust-t000000"
)

// w5ID is the workflow id of the i-th preloaded run.
func w5ID(i int) string { return fmt.Sprintf("w5-%010d", i) }

// w5Customer is the CustomerId of the i-th preloaded run.
func w5Customer(i int) string { return fmt.Sprintf("cust-%07d", i/w5PerCustomer) }

// w5Attributes are the search attributes of a W5 workflow: its customer
// (KEYWORD, shared by w5PerCustomer runs), a region (KEYWORD), an amount
// (INT) and tags (KEYWORD_ARRAY), the last three the same in every run.
func w5Attributes(id string) []iwfapi.SearchAttribute {
	cust := w5TemplateCustomer
	if n, err := strconv.Atoi(strings.TrimPrefix(id, "w5-")); err == nil && id != w5TemplateID {
		cust = w5Customer(n)
	}
	return []iwfapi.SearchAttribute{
		keywordAttr("CustomerId", cust),
		keywordAttr("Region", "eu-west-1"),
		intAttr("Amount", 4200),
		keywordArrayAttr("Tags", "gold", "b2b"),
	}
}

// keywordAttr, intAttr and keywordArrayAttr build search attributes.
func keywordAttr(key, v string) iwfapi.SearchAttribute {
	return iwfapi.SearchAttribute{Key: ptr(key), ValueType: ptr(iwfapi.SearchAttributeValueTypeKeyword), StringValue: ptr(v)}
}

func intAttr(key string, v int64) iwfapi.SearchAttribute {
	return iwfapi.SearchAttribute{Key: ptr(key), ValueType: ptr(iwfapi.SearchAttributeValueTypeInt), IntegerValue: ptr(v)}
}

func keywordArrayAttr(key string, v ...string) iwfapi.SearchAttribute {
	return iwfapi.SearchAttribute{Key: ptr(key), ValueType: ptr(iwfapi.SearchAttributeValueTypeKeywordArray), StringArrayValue: ptr(v)}
}

// globalTables hold no per-run rows: the preload leaves them as the
// template run left them.
var globalTables = map[string]bool{
	"schema_migrations":      true,
	"search_attribute_types": true, // one row per key, written by the template's attributes
	"sqlite_sequence":        true, // SQLite's AUTOINCREMENT counters
	"batches":                true, // batch operations: none in a preloaded database
	"batch_items":            true,
	"limit_permits":          true, // permits of calls in flight or waiting (none in a preload)
	"limit_buckets":          true, // one row per limit key
	"retention_start":        true, // when retention began to count: one row, or none
	"limit_settings":         true, // limits set at run time: none in a preload
	"pauses":                 true, // paused runs, types and hosts: none in a preload
}

// tableInfo is one table of the schema and how its rows are cloned.
type tableInfo struct {
	name    string
	columns []columnInfo
	// by is the column that selects the template's rows: run_id, or
	// workflow_id for workflows.
	by string
	// order is the column that orders a run's rows (its identity or
	// rowid), "" when the rows have no order of their own.
	order string
}

// columnInfo is one column of a table.
type columnInfo struct {
	name     string
	text     bool // TEXT (SQLite: TEXT affinity)
	bytea    bool // PostgreSQL BYTEA: the engine keeps JSON in it
	identity bool // assigned by the database: left out of the INSERT
}

// classifyTables decides how each table of the schema is cloned, and fails
// on a table the preload does not know.
func classifyTables(tables []tableInfo) ([]tableInfo, error) {
	var out []tableInfo
	for _, t := range tables {
		if globalTables[t.name] {
			continue
		}
		has := func(c string) bool {
			for _, col := range t.columns {
				if col.name == c {
					return true
				}
			}
			return false
		}
		switch {
		case has("run_id"):
			t.by = "run_id"
		case t.name == "workflows" && has("workflow_id") && has("current_run_id"):
			t.by = "workflow_id"
		default:
			return nil, fmt.Errorf("preload: the schema has a table %q that the preload does not know how to clone (no run_id column): "+
				"teach cmd/iwf-bench/preload.go about it", t.name)
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("preload: the schema has no per-run tables")
	}
	return out, nil
}

// isTimeColumn reports whether a column holds a time in unix milliseconds
// (0 for none): created_at, closed_at, at, ...
func isTimeColumn(name string) bool { return name == "at" || strings.HasSuffix(name, "_at") }

// w5Spacing is the time between two clones' starts: clone i's times are
// the template's minus (first + n - i) times it.
const w5Spacing = 10 // ms

// dialect is what differs between the stores' SQL in the preload.
type dialect struct {
	postgres bool
}

// param returns the n-th placeholder (1-based).
func (d dialect) param(n int) string {
	if d.postgres {
		return "$" + strconv.Itoa(n)
	}
	return "?" + strconv.Itoa(n)
}

// insertSQL returns the statement that clones the template's rows of t for
// the clones a..b and its arguments: template key, a, b, and when a
// column's values are rewritten the template's run id, workflow id and
// customer.
func (d dialect) insertSQL(t tableInfo, tpl preloadTemplate, a, b int) (string, []any) {
	var cols, exprs []string
	key := tpl.runID
	if t.by == "workflow_id" {
		key = tpl.workflowID
	}
	args := []any{key, a, b}
	replaced := func(e string) string {
		if len(args) == 3 {
			args = append(args, tpl.runID, tpl.workflowID, tpl.customer)
		}
		return "replace(replace(replace(" + e + ", " + d.param(4) + ", c.run_id), " + d.param(5) + ", c.workflow_id), " + d.param(6) + ", c.cust)"
	}
	for _, c := range t.columns {
		if c.identity {
			continue
		}
		col := "t." + c.name
		var e string
		switch {
		case c.name == "run_id" || c.name == "current_run_id":
			e = "c.run_id"
		case c.name == "workflow_id":
			e = "c.workflow_id"
		case isTimeColumn(c.name):
			// The clones' times are spread over the past, as a real
			// store's are: planners read their distribution.
			e = "CASE WHEN " + col + " = 0 THEN 0 ELSE " + col + " - c.shift END"
		case c.text:
			e = replaced(col)
		case c.bytea:
			e = "convert_to(" + replaced("convert_from("+col+", 'UTF8')") + ", 'UTF8')"
		default:
			e = col
		}
		cols = append(cols, c.name)
		exprs = append(exprs, e)
	}
	clones := "temp_w5_clones"
	if !d.postgres {
		clones = "temp.w5_clones"
	}
	order := "c.i"
	if t.order != "" {
		order += ", t." + t.order
	}
	return fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s t JOIN %s c ON c.i BETWEEN %s AND %s WHERE t.%s = %s ORDER BY %s",
		t.name, strings.Join(cols, ", "), strings.Join(exprs, ", "), t.name, clones, d.param(2), d.param(3), t.by, d.param(1), order), args
}

// preloadTemplate names the template run whose rows are cloned.
type preloadTemplate struct {
	workflowID, runID, customer string
}

// preloadProgress reports the preload's progress.
type preloadProgress func(done, n int, elapsed time.Duration)

// preloadChunk is how many clones one transaction writes.
const preloadChunk = 20_000

// preloadSQLite clones the template run into n runs (indexes first..first+n-1)
// in the SQLite database at path; the server must not be running.
func preloadSQLite(ctx context.Context, path string, tpl preloadTemplate, first, n int, report preloadProgress) error {
	db, err := sql.Open("sqlite", path+"?_busy_timeout=10000&_foreign_keys=0&_txlock=immediate")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // the temp table lives in one connection
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, p := range []string{"PRAGMA journal_mode=WAL", "PRAGMA synchronous=OFF", "PRAGMA cache_size=-1048576", "PRAGMA temp_store=MEMORY"} {
		if _, err := conn.ExecContext(ctx, p); err != nil {
			return fmt.Errorf("preload: %s: %w", p, err)
		}
	}
	tables, err := sqliteTables(ctx, conn)
	if err != nil {
		return err
	}
	if tables, err = classifyTables(tables); err != nil {
		return err
	}
	d := dialect{}
	if _, err := conn.ExecContext(ctx, `CREATE TEMP TABLE w5_clones (i INTEGER PRIMARY KEY, run_id TEXT NOT NULL, workflow_id TEXT NOT NULL, cust TEXT NOT NULL, shift INTEGER NOT NULL)`); err != nil {
		return err
	}
	var started int64
	if err := conn.QueryRowContext(ctx, `SELECT started_at FROM runs WHERE run_id = ?`, tpl.runID).Scan(&started); err != nil {
		return fmt.Errorf("preload: the template's start time: %w", err)
	}
	// A version-7 UUID, as the engine's run ids are, of the clone's start
	// time (?5 - shift): 48 bits of milliseconds, then random bits.
	const uuid = `lower(substr(printf('%012x', ?5 - (?2 + 1 - i) * ?4), 1, 8) || '-' || substr(printf('%012x', ?5 - (?2 + 1 - i) * ?4), 9, 4) ||
		'-7' || substr(hex(randomblob(2)), 2) || '-' ||
		substr('89ab', 1 + abs(random() % 4), 1) || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6)))`
	if _, err := conn.ExecContext(ctx, `WITH RECURSIVE s(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM s WHERE i < ?2)
		INSERT INTO temp.w5_clones SELECT i, `+uuid+`, printf('w5-%010d', i), printf('cust-%07d', i / ?3), (?2 + 1 - i) * ?4 FROM s`,
		first, first+n-1, w5PerCustomer, w5Spacing, started); err != nil {
		return fmt.Errorf("preload: clone ids: %w", err)
	}
	began := time.Now()
	for a := first; a < first+n; a += preloadChunk {
		b := min(a+preloadChunk, first+n) - 1
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		for _, t := range tables {
			q, args := d.insertSQL(t, tpl, a, b)
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				_ = tx.Rollback()
				return fmt.Errorf("preload: %s: %w", t.name, err)
			}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		if report != nil {
			report(b-first+1, n, time.Since(began))
		}
	}
	if _, err := conn.ExecContext(ctx, `DROP TABLE temp.w5_clones`); err != nil {
		return err
	}
	// The server's checkpointer would fold the WAL in; do it now so that
	// the store's size is the database file's.
	_, err = conn.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
	return err
}

// sqliteTables reads the tables of a SQLite database and their columns.
func sqliteTables(ctx context.Context, conn *sql.Conn) ([]tableInfo, error) {
	rows, err := conn.QueryContext(ctx, `SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name`)
	if err != nil {
		return nil, err
	}
	type tdef struct{ name, sql string }
	var defs []tdef
	for rows.Next() {
		var t tdef
		var s sql.NullString
		if err := rows.Scan(&t.name, &s); err != nil {
			rows.Close()
			return nil, err
		}
		t.sql = s.String
		defs = append(defs, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []tableInfo
	for _, def := range defs {
		t := tableInfo{name: def.name}
		rowid := !strings.Contains(strings.ToUpper(def.sql), "WITHOUT ROWID")
		cr, err := conn.QueryContext(ctx, `SELECT name, upper(type), pk FROM pragma_table_info(?) ORDER BY cid`, def.name)
		if err != nil {
			return nil, err
		}
		for cr.Next() {
			var name, typ string
			var pk int
			if err := cr.Scan(&name, &typ, &pk); err != nil {
				cr.Close()
				return nil, err
			}
			c := columnInfo{name: name, text: strings.Contains(typ, "TEXT") || strings.Contains(typ, "CHAR")}
			// An INTEGER PRIMARY KEY is the rowid: the database assigns it.
			if rowid && pk == 1 && typ == "INTEGER" {
				c.identity = true
				t.order = name
			}
			t.columns = append(t.columns, c)
		}
		cr.Close()
		if err := cr.Err(); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// preloadPostgres clones the template run into n runs in the PostgreSQL
// database of dbURL; the server must not be running. It ends as a store
// that grew over months would stand: VACUUM (ANALYZE), which autovacuum
// would have run after so many inserts (the rows' hint bits and the
// visibility map set), and a CHECKPOINT, so that the writing out of the
// preload's pages does not fall into the large store's measurements.
func preloadPostgres(ctx context.Context, dbURL string, tpl preloadTemplate, first, n int, report preloadProgress) error {
	conn, err := pgx.Connect(ctx, withoutPoolParams(dbURL))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `SET synchronous_commit = off`); err != nil {
		return err
	}
	tables, err := postgresTables(ctx, conn)
	if err != nil {
		return err
	}
	if tables, err = classifyTables(tables); err != nil {
		return err
	}
	d := dialect{postgres: true}
	if _, err := conn.Exec(ctx, `CREATE TEMP TABLE temp_w5_clones (i BIGINT PRIMARY KEY, run_id TEXT COLLATE "C" NOT NULL, workflow_id TEXT COLLATE "C" NOT NULL, cust TEXT COLLATE "C" NOT NULL, shift BIGINT NOT NULL)`); err != nil {
		return err
	}
	var started int64
	if err := conn.QueryRow(ctx, `SELECT started_at FROM runs WHERE run_id = $1`, tpl.runID).Scan(&started); err != nil {
		return fmt.Errorf("preload: the template's start time: %w", err)
	}
	// A version-7 UUID, as the engine's run ids are: the clone's start time
	// in milliseconds as the first 12 hex digits, the rest from a random
	// UUID with the version digit set to 7.
	if _, err := conn.Exec(ctx, `INSERT INTO temp_w5_clones
		SELECT i, substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-7' || substr(r, 16), 'w5-' || lpad(i::text, 10, '0'),
			'cust-' || lpad((i / $3)::text, 7, '0'), ($2 + 1 - i) * $4
		FROM generate_series($1::bigint, $2::bigint) AS i,
			LATERAL (SELECT lpad(to_hex($5::bigint - ($2 + 1 - i) * $4), 12, '0') AS h, gen_random_uuid()::text AS r) AS v`,
		first, first+n-1, w5PerCustomer, w5Spacing, started); err != nil {
		return fmt.Errorf("preload: clone ids: %w", err)
	}
	if _, err := conn.Exec(ctx, `ANALYZE temp_w5_clones`); err != nil {
		return err
	}
	began := time.Now()
	for a := first; a < first+n; a += preloadChunk {
		b := min(a+preloadChunk, first+n) - 1
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		for _, t := range tables {
			q, args := d.insertSQL(t, tpl, a, b)
			if _, err := tx.Exec(ctx, q, args...); err != nil {
				_ = tx.Rollback(ctx)
				return fmt.Errorf("preload: %s: %w", t.name, err)
			}
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		if report != nil {
			report(b-first+1, n, time.Since(began))
		}
	}
	if _, err := conn.Exec(ctx, `DROP TABLE temp_w5_clones`); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `VACUUM (ANALYZE)`); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, `CHECKPOINT`)
	return err
}

// postgresTables reads the tables of the public schema and their columns.
func postgresTables(ctx context.Context, conn *pgx.Conn) ([]tableInfo, error) {
	rows, err := conn.Query(ctx, `SELECT c.table_name::text, c.column_name::text, c.data_type::text, c.is_identity = 'YES'
		FROM information_schema.columns c JOIN information_schema.tables t USING (table_schema, table_name)
		WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
		ORDER BY c.table_name, c.ordinal_position`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []tableInfo
	for rows.Next() {
		var table, col, typ string
		var ident bool
		if err := rows.Scan(&table, &col, &typ, &ident); err != nil {
			return nil, err
		}
		if len(out) == 0 || out[len(out)-1].name != table {
			out = append(out, tableInfo{name: table})
		}
		t := &out[len(out)-1]
		t.columns = append(t.columns, columnInfo{name: col, text: typ == "text" || strings.Contains(typ, "char"), bytea: typ == "bytea", identity: ident})
		if ident {
			t.order = col
		}
	}
	return out, rows.Err()
}
