// Package migration reads the numbered SQL migrations that the SQLite and
// PostgreSQL stores embed (migrations/NNNN_name.up.sql). Applying them is
// each store's business: the dialects differ in how they lock and record.
package migration

import (
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
}

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
		out = append(out, Migration{Version: version, Name: name, SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}
