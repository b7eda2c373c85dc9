package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestClassifyTables: every table of a schema is cloned, left alone as a
// global table, or refused.
func TestClassifyTables(t *testing.T) {
	col := func(names ...string) []columnInfo {
		var out []columnInfo
		for _, n := range names {
			out = append(out, columnInfo{name: n})
		}
		return out
	}
	got, err := classifyTables([]tableInfo{
		{name: "runs", columns: col("run_id", "workflow_id", "data")},
		{name: "workflows", columns: col("workflow_id", "current_run_id")},
		{name: "schema_migrations", columns: col("version")},
		{name: "search_attribute_types", columns: col("key", "value_type")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].by != "run_id" || got[1].by != "workflow_id" {
		t.Errorf("got %+v", got)
	}
	_, err = classifyTables([]tableInfo{{name: "runs", columns: col("run_id")}, {name: "run_notes", columns: col("note_id", "text")}})
	if err == nil || !strings.Contains(err.Error(), "run_notes") {
		t.Errorf("an unknown table: err %v, want one naming run_notes", err)
	}
}

// TestPreloadMatchesEngine checks W5's preload against the engine, on
// SQLite and (with IWF_TEST_POSTGRES_URL) on PostgreSQL: the real server
// runs the template and a reference workflow, the preload clones the
// template, and a clone's rows in every per-run table of the schema equal
// the reference's once ids and times are normalised. A schema change the
// preload does not follow (a new table, a new per-run value) fails here.
func TestPreloadMatchesEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root, err := moduleRoot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin, err := buildServer(ctx, root, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	w, err := startWorker(time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()

	t.Run("SQLite", func(t *testing.T) {
		path := filepath.Join(dir, "preload.db")
		checkPreload(ctx, t, bin, "sqlite://"+path, dir, w,
			func(tpl preloadTemplate, first, n int) error {
				return preloadSQLite(ctx, path, tpl, first, n, nil)
			},
			func() (rowReader, func()) {
				db, err := sql.Open("sqlite", path+"?_query_only=1")
				if err != nil {
					t.Fatal(err)
				}
				db.SetMaxOpenConns(1)
				conn, err := db.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				tables, err := sqliteTables(ctx, conn)
				if err != nil {
					t.Fatal(err)
				}
				return rowReader{tables: tables, query: func(q string, args ...any) ([][]any, error) {
						rows, err := conn.QueryContext(ctx, q, args...)
						if err != nil {
							return nil, err
						}
						defer rows.Close()
						cols, _ := rows.Columns()
						var out [][]any
						for rows.Next() {
							vals := make([]any, len(cols))
							ptrs := make([]any, len(cols))
							for i := range vals {
								ptrs[i] = &vals[i]
							}
							if err := rows.Scan(ptrs...); err != nil {
								return nil, err
							}
							out = append(out, vals)
						}
						return out, rows.Err()
					}}, func() {
						conn.Close()
						db.Close()
					}
			})
	})

	t.Run("PostgreSQL", func(t *testing.T) {
		base := os.Getenv("IWF_TEST_POSTGRES_URL")
		if base == "" {
			if os.Getenv("IWF_TEST_POSTGRES_REQUIRED") != "" {
				t.Fatal("IWF_TEST_POSTGRES_REQUIRED is set but IWF_TEST_POSTGRES_URL is not")
			}
			t.Skip("needs IWF_TEST_POSTGRES_URL")
		}
		pg, err := connectPostgres(ctx, base)
		if err != nil {
			t.Fatal(err)
		}
		defer pg.close(context.Background())
		name := fmt.Sprintf("iwf_bench_preload_test_%d", time.Now().UnixNano()%1e9)
		db, err := pg.createDatabase(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := pg.dropDatabase(context.Background(), name); err != nil {
				t.Errorf("drop %s: %v", name, err)
			}
		}()
		checkPreload(ctx, t, bin, db, dir, w,
			func(tpl preloadTemplate, first, n int) error {
				return preloadPostgres(ctx, db, tpl, first, n, nil)
			},
			func() (rowReader, func()) {
				conn, err := pgx.Connect(ctx, withoutPoolParams(db))
				if err != nil {
					t.Fatal(err)
				}
				tables, err := postgresTables(ctx, conn)
				if err != nil {
					t.Fatal(err)
				}
				return rowReader{tables: tables, query: func(q string, args ...any) ([][]any, error) {
					rows, err := conn.Query(ctx, strings.ReplaceAll(q, "?", "$1"), args...)
					if err != nil {
						return nil, err
					}
					defer rows.Close()
					var out [][]any
					for rows.Next() {
						vals, err := rows.Values()
						if err != nil {
							return nil, err
						}
						out = append(out, vals)
					}
					return out, rows.Err()
				}}, func() { conn.Close(context.Background()) }
			})
	})
}

// rowReader reads a store's schema and rows for checkPreload.
type rowReader struct {
	tables []tableInfo
	query  func(q string, args ...any) ([][]any, error)
}

// checkPreload runs the template and a reference workflow through the
// server on db, preloads clones of the template and compares clone and
// reference table by table.
func checkPreload(ctx context.Context, t *testing.T, bin, db, dir string, w *worker,
	preload func(tpl preloadTemplate, first, n int) error, open func() (rowReader, func())) {
	t.Helper()
	// The reference shares its CustomerId with the clones 10..14; the
	// clones 11..14 are preloaded, and clone 12 is compared with it.
	const refIndex, first, n, cloneIndex = 10, 11, 4, 12
	var tpl preloadTemplate
	var refRun string
	err := largePhase(ctx, &options{}, bin, db, filepath.Join(dir, "template-"+t.Name()[strings.LastIndex(t.Name(), "/")+1:]+".log"), []string{"--retention", "0"}, w, nil,
		func(tg *target) error {
			var err error
			if tpl, err = runTemplate(ctx, tg); err != nil {
				return err
			}
			ref, err := runW5(ctx, tg, w5ID(refIndex))
			refRun = ref
			return err
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := preload(tpl, first, n); err != nil {
		t.Fatal(err)
	}
	rr, closeDB := open()
	defer closeDB()
	// The tables compared come from the schema, not from the preload's
	// choice: every table with a run_id column by run, every table with a
	// workflow_id column by workflow id; the rest must be tables known to
	// hold no per-run rows.
	var tables []tableInfo
	for _, tb := range rr.tables {
		for _, c := range tb.columns {
			if c.name == "run_id" {
				tb.by = "run_id"
			} else if c.name == "workflow_id" && tb.by == "" {
				tb.by = "workflow_id"
			}
		}
		switch {
		case tb.by != "":
			tables = append(tables, tb)
		case !globalTables[tb.name]:
			t.Errorf("table %s has neither run_id nor workflow_id and is not a known global table: is it per-run?", tb.name)
		}
	}
	// The clone's run id.
	rows, err := rr.query(`SELECT current_run_id FROM workflows WHERE workflow_id = ?`, w5ID(cloneIndex))
	if err != nil || len(rows) != 1 {
		t.Fatalf("the clone's workflow row: %v, %d rows", err, len(rows))
	}
	cloneRun := fmt.Sprint(text(rows[0][0]))
	if cloneRun == refRun || cloneRun == tpl.runID || len(cloneRun) != len(refRun) {
		t.Fatalf("clone run id %q: want a new id like %q", cloneRun, refRun)
	}
	nonEmpty := 0
	for _, tb := range tables {
		read := func(runID, wfID string) []string {
			key := runID
			if tb.by == "workflow_id" {
				key = wfID
			}
			order := ""
			if tb.order != "" {
				order = " ORDER BY " + tb.order
			}
			rows, err := rr.query(`SELECT * FROM `+tb.name+` WHERE `+tb.by+` = ?`+order, key)
			if err != nil {
				t.Fatalf("%s: %v", tb.name, err)
			}
			var out []string
			for _, r := range rows {
				var cells []string
				for i, v := range r {
					c := tb.columns[i]
					if c.identity {
						continue
					}
					s := normalise(text(v), runID, wfID)
					if (c.name == "at" || strings.HasSuffix(c.name, "_at")) && s != "0" {
						s = "<t>"
					}
					cells = append(cells, c.name+"="+s)
				}
				out = append(out, strings.Join(cells, " | "))
			}
			if tb.order == "" {
				slices.Sort(out)
			}
			return out
		}
		ref, clone := read(refRun, w5ID(refIndex)), read(cloneRun, w5ID(cloneIndex))
		if len(ref) > 0 {
			nonEmpty++
		}
		if !slices.Equal(ref, clone) {
			t.Errorf("table %s: the preloaded run's rows differ from the engine's\nengine:\n  %s\npreload:\n  %s",
				tb.name, strings.Join(ref, "\n  "), strings.Join(clone, "\n  "))
		}
	}
	// runs, workflows, executions, history and the search attribute tables
	// at least hold the reference's rows: the comparison compared something.
	if nonEmpty < 5 {
		t.Errorf("only %d tables hold rows of the reference run", nonEmpty)
	}
	// Every preloaded run is there, closed, of W5's type.
	rows, err = rr.query(`SELECT count(*) FROM runs WHERE workflow_type = ?`, typeW5)
	if err != nil || fmt.Sprint(rows[0][0]) != fmt.Sprint(n+2) {
		t.Errorf("runs of %s: %v %v, want %d (template, reference, clones)", typeW5, rows, err, n+2)
	}
}

// text turns a column value into a string: bytes as text.
func text(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case []byte:
		return string(x)
	case string:
		return x
	}
	return fmt.Sprint(v)
}

// timesInText are times inside the engine's JSON: RFC 3339 and unix
// milliseconds or nanoseconds of this century.
var timesInText = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)|\b1[6-9]\d{11}(\d{6})?\b`)

// normalise replaces a run's ids and the times in a value.
func normalise(s, runID, wfID string) string {
	s = strings.ReplaceAll(s, runID, "<run>")
	s = strings.ReplaceAll(s, wfID, "<wf>")
	return timesInText.ReplaceAllString(s, "<time>")
}
