package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/searchsql"
	"github.com/iwf-server/iwf-server/internal/store/storetest"
	"github.com/iwf-server/iwf-server/search"
)

// explainSearch returns SQLite's plan of a search, one step a line.
func explainSearch(ctx context.Context, s *Store, q *search.Query) (string, error) {
	st, err := compileSearch(ctx, s.r, q)
	if err != nil {
		return "", err
	}
	rows, err := s.r.QueryContext(ctx, "EXPLAIN QUERY PLAN "+st.SQL, st.Args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	depth := map[int]int{}
	var b strings.Builder
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			return "", err
		}
		depth[id] = depth[parent] + 1
		fmt.Fprintf(&b, "%s%s\n", strings.Repeat("  ", depth[id]), detail)
	}
	return b.String(), rows.Err()
}

// TestSearchShapes runs the search conformance tests with every condition
// counted as dense (each a per-run probe, no driving condition) and with
// counts alternating between dense and small, so that every shape of
// statement that compileSearch can produce meets the suite.
func TestSearchShapes(t *testing.T) {
	shapes := map[string]func() func(int) int{
		"dense": func() func(int) int { return func(int) int { return searchsql.CountCap + 1 } },
		"mixed": func() func(int) int {
			i := 0
			return func(n int) int {
				i++
				if i%2 == 0 {
					return searchsql.CountCap + 1
				}
				return n
			}
		},
	}
	for name, hook := range shapes {
		t.Run(name, func(t *testing.T) {
			searchCountsHook = hook()
			defer func() { searchCountsHook = nil }()
			storetest.RunSearch(t, func(t *testing.T) engine.Store {
				ctx := context.Background()
				s, err := Open(ctx, filepath.Join(t.TempDir(), "iwf.db"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				if err := s.Migrate(ctx); err != nil {
					t.Fatal(err)
				}
				return s
			})
		})
	}
}

// TestSearchPlansUseIndexes checks SQLite's plans of the benchmark queries,
// with conditions counted as small and as dense: no search attribute table
// is read in full, and runs are read through an index (in the result's
// order, or by key).
func TestSearchPlansUseIndexes(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "iwf.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { searchCountsHook = nil }()
	fullScan := regexp.MustCompile(`(?m)^\s*SCAN (s|e|w|o|search_\w+)\b|^\s*SCAN r\s*$`)
	for _, dense := range []bool{false, true} {
		if dense {
			searchCountsHook = func(int) int { return searchsql.CountCap + 1 }
		}
		for _, bq := range storetest.SearchBenchQueries() {
			plan, err := explainSearch(ctx, s, &bq.Query)
			if err != nil {
				t.Fatal(err)
			}
			if fullScan.MatchString(plan) {
				t.Errorf("%s (dense %v): a full scan:\n%s", bq.Text, dense, plan)
			}
		}
	}
}

// BenchmarkSearch times typical searches over 100,000 runs (see
// storetest.BenchSearch). It is not part of make test:
//
//	go test -run '^$' -bench Search -benchtime 200x ./internal/store/sqlite
func BenchmarkSearch(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(b.TempDir(), "iwf.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	storetest.BenchSearch(b, s, storetest.SearchBenchOptions{
		Explain: func(ctx context.Context, q *search.Query) (string, error) { return explainSearch(ctx, s, q) },
	})
}
