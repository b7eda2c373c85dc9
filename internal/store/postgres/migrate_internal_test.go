package postgres

import (
	"strings"
	"testing"
)

// TestPlainIndexBuilds: on a new schema, a NoTransaction migration's index
// builds and drops lose their CONCURRENTLY and nothing else changes.
func TestPlainIndexBuilds(t *testing.T) {
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range ms {
		if !m.NoTransaction {
			continue
		}
		n++
		plain := plainIndexBuilds(m.SQL)
		if strings.Contains(strings.ToUpper(stripComments(plain)), "CONCURRENTLY") {
			t.Errorf("%04d_%s keeps CONCURRENTLY:\n%s", m.Version, m.Name, plain)
		}
		if got, want := strings.Count(plain, "\n"), strings.Count(m.SQL, "\n"); got != want {
			t.Errorf("%04d_%s: %d lines, want %d", m.Version, m.Name, got, want)
		}
	}
	if n == 0 {
		t.Fatal("no NoTransaction migration to check")
	}
	for in, want := range map[string]string{
		"CREATE INDEX CONCURRENTLY a ON t (x);":        "CREATE INDEX a ON t (x);",
		"create unique index concurrently b on t (y);": "create unique index b on t (y);",
		"DROP INDEX CONCURRENTLY IF EXISTS c;":         "DROP INDEX IF EXISTS c;",
		"ALTER INDEX d RENAME TO e;":                   "ALTER INDEX d RENAME TO e;",
	} {
		if got := plainIndexBuilds(in); got != want {
			t.Errorf("plainIndexBuilds(%q) = %q, want %q", in, got, want)
		}
	}
}

// stripComments drops -- comments, which may say CONCURRENTLY.
func stripComments(sql string) string {
	var b strings.Builder
	for _, line := range strings.Split(sql, "\n") {
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i]
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}
