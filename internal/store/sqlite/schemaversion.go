package sqlite

import (
	"context"
	"fmt"

	"github.com/iwf-server/iwf-server/engine"
)

// SchemaVersion returns the highest migration version recorded in
// schema_migrations (0 when none is).
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.View(ctx, func(ctx context.Context, rt engine.ReadTx) error {
		return rt.(*txn).tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: SchemaVersion: %w", err)
	}
	return v, nil
}
