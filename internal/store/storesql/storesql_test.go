package storesql

import (
	"reflect"
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/engine"
)

func TestRender(t *testing.T) {
	for _, c := range []struct{ in, sqlite string }{
		{`SELECT a FROM t WHERE x = $1 AND y = $12 OR z = $1`, `SELECT a FROM t WHERE x = ?1 AND y = ?12 OR z = ?1`},
		{`SELECT '$1', $2`, `SELECT '$1', ?2`},
		{`SELECT 'it''s $1' || $3`, `SELECT 'it''s $1' || ?3`},
		{`SELECT $ FROM t`, `SELECT $ FROM t`},
	} {
		if got := SQLite.Render(c.in); got != c.sqlite {
			t.Errorf("SQLite.Render(%q) = %q, want %q", c.in, got, c.sqlite)
		}
		if got := PostgreSQL.Render(c.in); got != c.in {
			t.Errorf("PostgreSQL.Render(%q) = %q, want it unchanged", c.in, got)
		}
	}
}

// statements lists every statement of the package rendered for d.
func statements(d Dialect) map[string]string {
	out := map[string]string{}
	add := func(prefix string, v any) {
		rv := reflect.ValueOf(v)
		for i := range rv.NumField() {
			f := rv.Field(i)
			switch f.Kind() {
			case reflect.String:
				if f.String() != "" {
					out[prefix+rv.Type().Field(i).Name] = f.String()
				}
			case reflect.Slice:
				for j := range f.Len() {
					out[prefix+rv.Type().Field(i).Name+"["+RunTables[j]+"]"] = f.Index(j).String()
				}
			}
		}
	}
	add("Batches.", BatchStatements(d))
	add("Permits.", PermitStatements(d))
	add("Pauses.", PauseStatements(d))
	add("LimitSettings.", LimitSettingStatements(d))
	add("StateStats.", StateStatsStatements(d))
	add("RunsDelete.", RunsDeleteStatements(d))
	for _, e := range []engine.RunExpiry{
		{Types: []string{"T"}, Limit: 1}, {Types: []string{"A", "B"}, Limit: 1}, {ExceptTypes: []string{"A"}, Limit: 1},
	} {
		q, _ := Expired(d, "run_id", e)
		out["Expired "+strings.Join(append(e.Types, e.ExceptTypes...), ",")] = q
		q, _ = ExpiredCount(d, e)
		out["ExpiredCount "+strings.Join(append(e.Types, e.ExceptTypes...), ",")] = q
	}
	insert, read := RetentionStart(d)
	out["RetentionStart insert"], out["RetentionStart read"] = insert, read
	return out
}

// TestDialectsRender: SQLite's statements carry none of PostgreSQL's
// syntax ($N parameters, :: casts, arrays, SKIP LOCKED), and each
// statement exists for both dialects.
func TestDialectsRender(t *testing.T) {
	lite, pg := statements(SQLite), statements(PostgreSQL)
	for name, q := range lite {
		for _, pgOnly := range []string{"$", "::", "ANY (", "ALL (", "unnest(", "SKIP LOCKED"} {
			if strings.Contains(q, pgOnly) {
				t.Errorf("SQLite's %s has %q: %s", name, pgOnly, q)
			}
		}
		if _, ok := pg[name]; !ok && !strings.HasPrefix(name, "RunsDelete.") {
			t.Errorf("%s: SQLite only", name)
		}
	}
	for name, q := range pg {
		if strings.Contains(q, "json_each") || strings.Contains(q, "?") {
			t.Errorf("PostgreSQL's %s has SQLite's syntax: %s", name, q)
		}
		if _, ok := lite[name]; !ok && name != "RunsDelete.One" {
			t.Errorf("%s: PostgreSQL only", name)
		}
	}
}

// TestRunsDeleteEveryTable: both deletions delete from every table of
// RunTables, and from workflows and runs.
func TestRunsDeleteEveryTable(t *testing.T) {
	one := RunsDeleteStatements(PostgreSQL).One
	steps := RunsDeleteStatements(SQLite)
	all := strings.Join(append(steps.Tables, steps.Workflows, steps.Runs), "\n")
	for _, table := range append(RunTables, "workflows", "runs") {
		if !strings.Contains(one, "DELETE FROM "+table+" ") {
			t.Errorf("PostgreSQL's deletion leaves %s", table)
		}
		if !strings.Contains(all, "DELETE FROM "+table+" ") {
			t.Errorf("SQLite's deletion leaves %s", table)
		}
	}
}

func TestList(t *testing.T) {
	if got := List(SQLite, []string{"a", "b"}); got != `["a","b"]` {
		t.Errorf("SQLite list %v", got)
	}
	if got := List(SQLite, []int64(nil)); got != nil {
		t.Errorf("SQLite nil list %v, want nil", got)
	}
	if got := List(PostgreSQL, []int64{1}); !reflect.DeepEqual(got, []int64{1}) {
		t.Errorf("PostgreSQL list %v", got)
	}
	if SQLite.Limit(0) != int64(-1) || PostgreSQL.Limit(0) != nil || PostgreSQL.Limit(3) != int64(3) {
		t.Error("Limit")
	}
}
