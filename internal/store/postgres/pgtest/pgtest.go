// Package pgtest connects tests to a PostgreSQL server and gives each test
// its own migrated postgres.Store in a fresh schema, dropped when the test
// ends. The store conformance suite and the engine's end-to-end tests use it.
//
// The server is IWF_TEST_POSTGRES_URL when set, else DefaultURL when a server
// answers there. When none is reachable, tests that need it are skipped with
// a message saying how to enable them; with IWF_TEST_POSTGRES_REQUIRED=1
// (as in CI) they fail instead.
//
// With IWF_TEST_POSTGRES_MIGRATED_BY set to the path of an iwf-server
// binary, every schema NewStore and its siblings create is first laid out
// by that binary's `iwf-server migrate`, and the store's own Migrate runs
// after it (finding its migrations recorded, it does nothing). The
// mixed-version test (internal/chaos TestMixedVersion) runs the previous
// release's conformance suite this way, on the schema of the release that
// follows it.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/internal/store/postgres"
)

// DefaultURL is probed when IWF_TEST_POSTGRES_URL is not set.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// The environment variables read by URL.
const (
	EnvURL      = "IWF_TEST_POSTGRES_URL"
	EnvRequired = "IWF_TEST_POSTGRES_REQUIRED"
	// EnvMigratedBy names an iwf-server binary whose `migrate` lays out
	// every new store schema before the store's own migrations run.
	EnvMigratedBy = "IWF_TEST_POSTGRES_MIGRATED_BY"
)

var probe struct {
	once sync.Once
	url  string
	err  error
}

// URL returns the URL of the test PostgreSQL server: IWF_TEST_POSTGRES_URL
// when set, else DefaultURL when a server answers there within about a
// second. Otherwise it skips the test, or fails it when
// IWF_TEST_POSTGRES_REQUIRED=1. The probe runs once per process.
func URL(t testing.TB) string {
	t.Helper()
	probe.once.Do(func() {
		if u := os.Getenv(EnvURL); u != "" {
			probe.url = u
			return
		}
		probe.url, probe.err = DefaultURL, reachable(DefaultURL)
	})
	if probe.err != nil {
		msg := fmt.Sprintf("PostgreSQL suite skipped: set %s or start PostgreSQL on 127.0.0.1:5432 (%v)", EnvURL, probe.err)
		if os.Getenv(EnvRequired) == "1" {
			t.Fatalf("%s=1 but PostgreSQL is unreachable: %v", EnvRequired, probe.err)
		}
		t.Skip(msg)
	}
	return probe.url
}

// reachable dials the server and pings it, within about a second.
func reachable(url string) error {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return err
	}
	addr := net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx)
}

// NewStore opens a postgres.Store on the test server in a new schema with a
// random name, migrates it, and registers a cleanup that closes the store
// and drops the schema. It skips (or fails) the test like URL.
func NewStore(t testing.TB) *postgres.Store {
	t.Helper()
	return NewStores(t, 1)[0]
}

// NewStores is NewStore for n stores on one new schema: the stores of n
// server processes sharing a database, each with its own pool (and change
// feed).
func NewStores(t testing.TB, n int) []*postgres.Store {
	t.Helper()
	stores, _ := newStores(t, n)
	return stores
}

// NewStoreWith is NewStore with options added to the store's (a
// round-trip counter, say). It also returns the schema, for a test that
// reaches the tables over a connection of its own.
func NewStoreWith(t testing.TB, opts ...postgres.Option) (*postgres.Store, string) {
	t.Helper()
	stores, schema := newStores(t, 1, opts...)
	return stores[0], schema
}

func newStores(t testing.TB, n int, opts ...postgres.Option) ([]*postgres.Store, string) {
	t.Helper()
	url := URL(t)
	schema := NewSchemaName()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stores := make([]*postgres.Store, n)
	t.Cleanup(func() {
		for _, s := range stores {
			if s != nil {
				s.Close()
			}
		}
		DropSchema(t, url, schema)
	})
	if bin := os.Getenv(EnvMigratedBy); bin != "" {
		migrateWith(ctx, t, bin, url, schema)
	}
	for i := range stores {
		s, err := postgres.Open(ctx, url, append([]postgres.Option{postgres.WithSchema(schema)}, opts...)...)
		if err != nil {
			t.Fatalf("pgtest: %v", err)
		}
		stores[i] = s
	}
	if err := stores[0].Migrate(ctx); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return stores, schema
}

// migrateWith creates schema and has the iwf-server binary bin migrate it
// (its --db URL selects the schema with search_path, as a deployment's
// would). The line it logs is how the mixed-version test knows that the
// suite it ran honoured EnvMigratedBy.
func migrateWith(ctx context.Context, t testing.TB, bin, base, schema string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	_, err = conn.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize())
	conn.Close(context.Background())
	if err != nil {
		t.Fatalf("pgtest: creating schema %s: %v", schema, err)
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("pgtest: %s: %v", EnvURL, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	cmd := exec.CommandContext(ctx, bin, "migrate", "--db", u.String())
	// Only the flag counts: the environment's IWF_* settings are left out.
	for _, kv := range os.Environ() {
		if len(kv) < 4 || kv[:4] != "IWF_" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pgtest: %s migrate --db %s: %v\n%s", bin, u.Redacted(), err, out)
	}
	t.Logf("pgtest: schema %s migrated by %s", schema, bin)
}

// NewSchemaName returns a fresh schema name, "iwf_test_" and random hex.
func NewSchemaName() string {
	var b [8]byte
	rand.Read(b[:])
	return "iwf_test_" + hex.EncodeToString(b[:])
}

// DropSchema drops a schema and everything in it, reporting failures as test
// errors.
func DropSchema(t testing.TB, url, schema string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Errorf("pgtest: dropping schema %s: %v", schema, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
		t.Errorf("pgtest: dropping schema %s: %v", schema, err)
	}
}

// Conn opens a connection of its own to the test server with schema as its
// search path (the schema of a store from NewStoreWith, say), for a test
// that reaches the store's tables directly. It is closed when the test ends.
func Conn(t testing.TB, schema string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(URL(t))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	cfg.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
