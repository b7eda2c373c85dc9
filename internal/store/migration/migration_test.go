package migration_test

import (
	"slices"
	"testing"
	"testing/fstest"

	"github.com/iwf-server/iwf-server/internal/store/migration"
)

func TestLoadOrdersByVersion(t *testing.T) {
	fsys := fstest.MapFS{
		"migrations/0010_later.up.sql": {Data: []byte("B")},
		"migrations/0002_first.up.sql": {Data: []byte("A")},
		"migrations/README":            {Data: []byte("ignored")},
	}
	ms, err := migration.Load(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].Version != 2 || ms[0].Name != "first" || ms[0].SQL != "A" || ms[1].Version != 10 {
		t.Fatalf("loaded %+v", ms)
	}
}

func TestLoadRejectsBadNamesAndDuplicates(t *testing.T) {
	for name, fsys := range map[string]fstest.MapFS{
		"no name":   {"migrations/0001.up.sql": {}},
		"no number": {"migrations/init.up.sql": {}},
		"duplicate": {"migrations/0001_a.up.sql": {}, "migrations/0001_b.up.sql": {}},
	} {
		if _, err := migration.Load(fsys); err == nil {
			t.Errorf("%s: Load succeeded", name)
		}
	}
}

func TestLoadNoTransaction(t *testing.T) {
	fsys := fstest.MapFS{
		"migrations/0001_plain.up.sql":  {Data: []byte("CREATE TABLE a (x int);\n-- migrate: no transaction\n")},
		"migrations/0002_concur.up.sql": {Data: []byte(migration.NoTransaction + "\n-- why\nCREATE INDEX CONCURRENTLY i ON a (x);\n")},
	}
	ms, err := migration.Load(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if ms[0].NoTransaction || !ms[1].NoTransaction {
		t.Fatalf("NoTransaction %v %v, want false true (the directive counts on the first line only)", ms[0].NoTransaction, ms[1].NoTransaction)
	}
	bad := fstest.MapFS{"migrations/0001_bad.up.sql": {Data: []byte(migration.NoTransaction + "\nSELECT 'unterminated;\n")}}
	if _, err := migration.Load(bad); err == nil {
		t.Fatal("Load accepted a no-transaction migration that does not split into statements")
	}
}

func TestStatements(t *testing.T) {
	for _, c := range []struct {
		script string
		want   []string
	}{
		{"", nil},
		{"-- only a comment\n/* and another */\n", nil},
		{"SELECT 1", []string{"SELECT 1"}},
		{"SELECT 1;SELECT 2;", []string{"SELECT 1", "SELECT 2"}},
		{"-- head; not a statement\nDROP INDEX a; -- tail; either\n\nCREATE INDEX b ON t (x);\n-- end;\n",
			[]string{"-- head; not a statement\nDROP INDEX a", "-- tail; either\n\nCREATE INDEX b ON t (x)"}},
		{"SELECT ';', 'it''s;' ; SELECT \"a;\"\"b\"", []string{"SELECT ';', 'it''s;'", "SELECT \"a;\"\"b\""}},
		{"SELECT E'a\\';b'; SELECT 'c\\'", []string{"SELECT E'a\\';b'", "SELECT 'c\\'"}},
		{"/* a /* nested; */ still; */ SELECT 1; SELECT 2", []string{"/* a /* nested; */ still; */ SELECT 1", "SELECT 2"}},
		{"DO $$ BEGIN PERFORM 1; END $$; DO $f$ SELECT '$$;' $f$; SELECT $1", []string{"DO $$ BEGIN PERFORM 1; END $$", "DO $f$ SELECT '$$;' $f$", "SELECT $1"}},
		{"SELECT a$b; SELECT 2", []string{"SELECT a$b", "SELECT 2"}},
	} {
		got, err := migration.Statements(c.script)
		if err != nil {
			t.Errorf("%q: %v", c.script, err)
			continue
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%q:\n got %q\nwant %q", c.script, got, c.want)
		}
	}
	for _, bad := range []string{"SELECT 'a", "SELECT \"a", "/* a /* b */", "DO $x$ SELECT 1 $y$"} {
		if got, err := migration.Statements(bad); err == nil {
			t.Errorf("%q: split into %q, want an error", bad, got)
		}
	}
}
