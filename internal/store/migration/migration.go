// Package migration reads the numbered SQL migrations that the SQLite and
// PostgreSQL stores embed (migrations/NNNN_name.up.sql). Applying them is
// each store's business: the dialects differ in how they lock and record.
package migration

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

// Migration is one numbered schema change.
type Migration struct {
	Version int
	Name    string
	SQL     string
	// NoTransaction is set by the NoTransaction directive: the store runs
	// the migration's statements one at a time, outside a transaction
	// (PostgreSQL's CREATE INDEX CONCURRENTLY cannot run inside one), and
	// records the migration once they have all succeeded. A migration
	// stopped halfway (a crash, a cancelled statement) is run again from
	// its first statement, so each statement of such a file must be safe
	// to run again over any prefix of the file already applied.
	NoTransaction bool
}

// NoTransaction, as the first line of a migration file, marks it as a
// Migration.NoTransaction.
const NoTransaction = "-- migrate: no transaction"

// Load reads every migrations/*.up.sql file of fsys in version order. File
// names must be NNNN_name.up.sql with distinct positive versions.
func Load(fsys fs.FS) ([]Migration, error) {
	paths, err := fs.Glob(fsys, "migrations/*.up.sql")
	if err != nil {
		return nil, err
	}
	var out []Migration
	seen := map[int]string{}
	for _, path := range paths {
		base := strings.TrimSuffix(strings.TrimPrefix(path, "migrations/"), ".up.sql")
		num, name, ok := strings.Cut(base, "_")
		version, err := strconv.Atoi(num)
		if !ok || err != nil || version <= 0 || name == "" {
			return nil, fmt.Errorf("migration file %s: want NNNN_name.up.sql", path)
		}
		if prev, dup := seen[version]; dup {
			return nil, fmt.Errorf("migrations %s and %s share version %d", prev, path, version)
		}
		seen[version] = path
		b, err := fs.ReadFile(fsys, path)
		if err != nil {
			return nil, err
		}
		m := Migration{Version: version, Name: name, SQL: string(b)}
		first, _, _ := strings.Cut(m.SQL, "\n")
		if strings.TrimSpace(first) == NoTransaction {
			m.NoTransaction = true
			if _, err := Statements(m.SQL); err != nil {
				return nil, fmt.Errorf("migration file %s: %w", path, err)
			}
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Statements splits a script into its statements, at the semicolons that
// end them: those outside comments (-- and nested /* */), quoted strings
// ('...', E'...' with backslash escapes), quoted identifiers ("...") and
// dollar-quoted strings ($$...$$, $tag$...$tag$). Each statement is
// returned without its semicolon and trimmed; a statement of comments only
// is dropped. An unterminated string, identifier or comment is an error.
func Statements(script string) ([]string, error) {
	var (
		out   []string
		start int  // where the current statement begins
		code  bool // the current statement has more than comments
	)
	s := script
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '-' && strings.HasPrefix(s[i:], "--"):
			end := strings.IndexByte(s[i:], '\n')
			if end < 0 {
				i = len(s)
			} else {
				i += end + 1
			}
		case c == '/' && strings.HasPrefix(s[i:], "/*"):
			depth := 0
			j := i
			for j < len(s) {
				if strings.HasPrefix(s[j:], "/*") {
					depth++
					j += 2
				} else if strings.HasPrefix(s[j:], "*/") {
					depth--
					j += 2
					if depth == 0 {
						break
					}
				} else {
					j++
				}
			}
			if depth != 0 {
				return nil, errors.New("unterminated /* comment")
			}
			i = j
		case c == '\'' || c == '"':
			escapes := c == '\'' && i > 0 && (s[i-1] == 'E' || s[i-1] == 'e') && (i < 2 || !identChar(s[i-2]))
			j := i + 1
			for ; j < len(s); j++ {
				if escapes && s[j] == '\\' {
					j++
					continue
				}
				if s[j] == c {
					if j+1 < len(s) && s[j+1] == c { // a doubled quote stands for itself
						j++
						continue
					}
					break
				}
			}
			if j >= len(s) {
				return nil, fmt.Errorf("unterminated %c quote", c)
			}
			code = true
			i = j + 1
		case c == '$' && (i == 0 || !identChar(s[i-1])):
			tag, ok := dollarTag(s[i:])
			if !ok {
				code = true
				i++
				break
			}
			end := strings.Index(s[i+len(tag):], tag)
			if end < 0 {
				return nil, fmt.Errorf("unterminated %s string", tag)
			}
			code = true
			i += len(tag) + end + len(tag)
		case c == ';':
			if code {
				out = append(out, strings.TrimSpace(s[start:i]))
			}
			i++
			start, code = i, false
		default:
			if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
				code = true
			}
			i++
		}
	}
	if code {
		out = append(out, strings.TrimSpace(s[start:]))
	}
	return out, nil
}

// dollarTag returns the opening tag of a dollar-quoted string at the start
// of s ($$ or $name$), if there is one.
func dollarTag(s string) (string, bool) {
	for j := 1; j < len(s); j++ {
		switch {
		case s[j] == '$':
			return s[:j+1], true
		case identChar(s[j]) && !(j == 1 && s[j] >= '0' && s[j] <= '9'):
		default:
			return "", false
		}
	}
	return "", false
}

func identChar(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}
