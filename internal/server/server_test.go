package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseDB(t *testing.T) {
	wd, _ := os.Getwd()
	tests := []struct {
		in       string
		kind     DBKind
		path     string
		describe string
	}{
		{"sqlite://iwf.db", SQLite, filepath.Join(wd, "iwf.db"), "SQLite " + filepath.Join(wd, "iwf.db")},
		{"sqlite://data/x.db", SQLite, filepath.Join(wd, "data/x.db"), ""},
		{"sqlite:///var/lib/iwf/iwf.db", SQLite, "/var/lib/iwf/iwf.db", "SQLite /var/lib/iwf/iwf.db"},
		{"sqlite://:memory:", SQLite, ":memory:", ""},
		{"postgres://iwf:hunter2@db.internal:5432/iwf?sslmode=disable", Postgres, "", "PostgreSQL db.internal:5432/iwf as iwf"},
		{"postgresql://db.internal/iwf", Postgres, "", "PostgreSQL db.internal/iwf"},
	}
	for _, tt := range tests {
		got, err := ParseDB(tt.in)
		if err != nil {
			t.Errorf("ParseDB(%q): %v", tt.in, err)
			continue
		}
		if got.Kind != tt.kind || got.Path != tt.path {
			t.Errorf("ParseDB(%q) = %+v", tt.in, got)
		}
		if tt.describe != "" && got.String() != tt.describe {
			t.Errorf("ParseDB(%q).String() = %q, want %q", tt.in, got.String(), tt.describe)
		}
		if strings.Contains(got.String(), "hunter2") {
			t.Errorf("password shown: %q", got.String())
		}
	}
}
