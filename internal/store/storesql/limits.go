package storesql

import (
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/rowfmt"
)

// LimitSettings are the statements of the table of limits set at run time
// (limit_settings; engine.LimitSetting), rendered for one dialect.
type LimitSettings struct {
	// List returns up to $1 rows (LimitSettingColumns), by key.
	List string
	// Put writes a row over any of its key: LimitSettingArgs.
	Put string
	// Seed writes a row unless its key has one (set or removed):
	// LimitSettingArgs; returns the key when it wrote.
	Seed string
}

// LimitSettingColumns are the columns ScanLimitSetting reads, in order.
const LimitSettingColumns = "limit_key, value, source, updated_by, updated_at"

// LimitSettingStatements returns the statements of the limit table for d.
func LimitSettingStatements(d Dialect) LimitSettings {
	r := d.Render
	insert := `INSERT INTO limit_settings (` + LimitSettingColumns + `) VALUES ($1, $2, $3, $4, $5)`
	return LimitSettings{
		List: r(`SELECT ` + LimitSettingColumns + ` FROM limit_settings ORDER BY limit_key LIMIT $1`),
		Put: r(insert + ` ON CONFLICT (limit_key) DO UPDATE SET value = excluded.value, source = excluded.source,
			updated_by = excluded.updated_by, updated_at = excluded.updated_at`),
		Seed: r(insert + ` ON CONFLICT (limit_key) DO NOTHING RETURNING limit_key`),
	}
}

// LimitSettingArgs are the arguments of Put and Seed: a removed limit's
// value is NULL.
func LimitSettingArgs(s *engine.LimitSetting) []any {
	var value any
	if !s.Removed {
		value = s.Value
	}
	return []any{s.Key, value, s.Source, s.UpdatedBy, rowfmt.ToMs(s.UpdatedAt)}
}

// ScanLimitSetting reads a row of LimitSettingColumns.
func ScanLimitSetting(row rowfmt.Scanner) (*engine.LimitSetting, error) {
	var (
		s     engine.LimitSetting
		value *float64
		at    int64
	)
	if err := row.Scan(&s.Key, &value, &s.Source, &s.UpdatedBy, &at); err != nil {
		return nil, err
	}
	if value == nil {
		s.Removed = true
	} else {
		s.Value = *value
	}
	s.UpdatedAt = rowfmt.FromMs(at)
	return &s, nil
}
