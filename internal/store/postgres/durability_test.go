package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/internal/store/postgres"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
)

// TestDurabilityWarnings: a session with synchronous_commit=off is named;
// the test server's defaults (fsync, full_page_writes and
// synchronous_commit on) give no warning.
func TestDurabilityWarnings(t *testing.T) {
	ctx := context.Background()
	st := pgtest.NewStore(t)
	if w, err := st.DurabilityWarnings(ctx); err != nil || len(w) != 0 {
		t.Fatalf("default settings: %q, %v; want no warning", w, err)
	}
	u := pgtest.URL(t)
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	lax, err := postgres.Open(ctx, u+sep+"synchronous_commit=off")
	if err != nil {
		t.Fatal(err)
	}
	defer lax.Close()
	w, err := lax.DurabilityWarnings(ctx)
	if err != nil || len(w) != 1 || !strings.HasPrefix(w[0], "synchronous_commit=off") {
		t.Fatalf("synchronous_commit=off: %q, %v", w, err)
	}
}
