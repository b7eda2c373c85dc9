package postgres

import "context"

// SchemaVersion returns the highest migration version recorded in
// schema_migrations (0 when none is).
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	if err := s.pool.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, classify(ctx, wrap("SchemaVersion", err))
	}
	return v, nil
}
