// Package server assembles an iwf-server from its parts: a store (opened
// from a database setting, or given), the engine on it with an HTTP worker
// client, and the HTTP handler (the REST API, GET /metrics and the
// healthcheck) with the web console. cmd/iwf-server, iwftest and the end-to-end test harness
// build their servers here, so a server is put together in one place.
//
// It owns the order of things: migrations before the engine, the engine
// before the handler, and on Close the engine before the store it opened.
// Listening, signals and configuration parsing stay with the caller.
package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/archive"
	"github.com/iwf-server/iwf-server/internal/audit"
	"github.com/iwf-server/iwf-server/internal/auth"
	"github.com/iwf-server/iwf-server/internal/console"
	"github.com/iwf-server/iwf-server/internal/dbclock"
	"github.com/iwf-server/iwf-server/internal/extstore"
	"github.com/iwf-server/iwf-server/internal/httpapi"
	"github.com/iwf-server/iwf-server/internal/store/postgres"
	"github.com/iwf-server/iwf-server/internal/store/sqlite"
	"github.com/iwf-server/iwf-server/internal/tracing"
	"github.com/iwf-server/iwf-server/internal/workerclient"
	"github.com/iwf-server/iwf-server/internal/workerpolicy"
)

// Store is a store the server can migrate and run on.
type Store interface {
	engine.Store
	Migrate(ctx context.Context) error
}

// SQLiteSweepShare is the share of time a retention sweep may keep an
// SQLite store's writer busy (engine.Config.SweepShare). Live writes lose
// about the writer time the sweep takes: W5 with 60,000 runs on a quiet
// 2-core machine (20 ms transactions) kept 97 % of W1's rate beside the
// sweep at 0.05, 90 % at 0.1, 90-93 % at 0.15 and 73-78 % at 0.2, while the
// sweep deleted 572, 1,326, 2,074-2,255 and 2,900-3,012 runs/s
// (docs/benchmarks.md, "A large store"). 0.15 met both W5 targets (W1 at
// least 80 %, 2,000 runs/s) at 60,000 runs, and at 1,000,000 by the median
// of three runs on a faster VM (2,300-2,426 runs/s, W1 at 81-87 %); on the
// slower VM the sweep's rate at 1,000,000 fell to 1,791-2,043 runs/s: a
// deletion is CPU work on the one writer.
const SQLiteSweepShare = 0.15

// SQLiteSweepHold is how long one deletion transaction of a retention sweep
// may hold an SQLite store's writer (engine.Config.SweepHold): the writes
// of live work wait at most about that long for it. Larger transactions
// dirty fewer pages per run deleted: at the same share, 20 ms deleted
// 30-50 % more runs per second than 5 ms, and 50 ms no more than 20 ms
// while W1's p99 rose by a third.
const SQLiteSweepHold = 20 * time.Millisecond

// SQLiteSweepBatch is the number of expired runs a sweep lists at a time
// on SQLite (engine.Config.SweepBatch); SQLiteSweepHold splits each list
// into transactions of about SQLiteSweepHold each.
const SQLiteSweepBatch = 1000

// Options configure New. The zero value of each field selects its default.
type Options struct {
	// Engine holds the engine's settings. When Engine.WorkerClient is nil
	// the server calls workers over HTTP, sending WorkerHeaders.
	Engine engine.Config
	// WorkerHeaders are sent with every call to a worker.
	WorkerHeaders http.Header
	// WorkerURLAllow is the allow-list of worker URLs (workerpolicy.New);
	// empty allows any, except the addresses workerpolicy always denies.
	WorkerURLAllow []string
	// Auth, when set, requires its tokens on the API (see package auth).
	Auth *auth.Tokens
	// CertRoles, when set, maps the subjects of verified client
	// certificates to roles (auth.Options.CertRoles).
	CertRoles auth.CertRoles
	// Audit, when set, receives an entry per call that changes workflows.
	Audit *audit.Log
	// AuthMetrics requires a token for GET /metrics too.
	AuthMetrics bool
	// SecureCookies marks cookies Secure (set when serving TLS).
	SecureCookies bool
	// NoUI turns the web console at ConsolePrefix off.
	NoUI bool
	// Logger receives the logs of the engine and the HTTP layer, tagged
	// with their component. Default: none.
	Logger *zerolog.Logger
	// MaxBodyBytes limits request bodies (default httpapi.DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// NoMetrics turns GET /metrics off.
	NoMetrics bool
	// ConnectTimeout bounds connecting to PostgreSQL in Open (default
	// DefaultConnectTimeout).
	ConnectTimeout time.Duration
	// SQLiteSynchronous is the durability of a SQLite store's commits
	// (default sqlite.SyncNormal; see docs/reliability.md).
	SQLiteSynchronous sqlite.Synchronous
	// DBLivenessTimeout is how long PostgreSQL may leave the store's
	// liveness probe unanswered before the node treats it as down
	// (default postgres.DefaultLivenessTimeout; see docs/reliability.md).
	DBLivenessTimeout time.Duration
	// RestrictHosts serves only requests whose Host header names
	// localhost, a loopback address or one of AllowedHosts, and answers
	// others 421 (set when listening on a loopback address: it defeats DNS
	// rebinding). A non-empty AllowedHosts restricts hosts too.
	RestrictHosts bool
	// AllowedHosts are the host names served besides the loopback ones
	// (see auth.NewHostPolicy).
	AllowedHosts []string
	// RequestTimeout is the deadline of each request that is not a long
	// poll (default httpapi.DefaultRequestTimeout); long polls get the
	// engine's MaxWait plus RequestTimeout.
	RequestTimeout time.Duration
	// ConsoleSessionTTL is how long a console sign-in lasts (default
	// auth.DefaultSessionTTL).
	ConsoleSessionTTL time.Duration
	// ArchiveURL, when set and Engine.Archive is not, is the archive
	// (archive.Open) that expired runs are written to before retention
	// deletes them; Close closes it.
	ArchiveURL string
	// Tracer, when set, traces API requests, store transactions, state
	// executions and worker calls (see internal/tracing); nil is off.
	Tracer trace.Tracer
	// TraceDB names the database in store spans ("sqlite", "postgresql").
	TraceDB string
	// ExternalStorage, when it names a store and Engine.Payloads is not
	// set, is the external payload store (extstore.Open) that payloads
	// over Engine.PayloadThreshold go to; Close closes it. The API then
	// serves encodedobject/load.
	ExternalStorage ExternalStorage
}

// ExternalStorage names the external payload stores: the active one,
// which new payloads are written to (none: the stores are only read), and
// older ones that stay readable.
type ExternalStorage struct {
	Active extstore.Location
	Reads  []extstore.Location
}

// on reports whether any store is named.
func (x ExternalStorage) on() bool { return x.Active.ID != "" || len(x.Reads) > 0 }

// ConsolePrefix is where the web console is served.
const ConsolePrefix = "/ui/"

// Server is an engine and the HTTP handler serving it.
type Server struct {
	// Engine is the server's engine.
	Engine *engine.Engine
	// Handler serves the REST API, /metrics and the healthcheck.
	Handler http.Handler

	store    Store          // closed by Close when the server opened it
	clock    *dbclock.Clock // the database's clock, stopped by Close
	started  bool
	ownStore bool
	archive  *archive.Bucket // opened from Options.ArchiveURL
	payloads *extstore.Store // opened from Options.ExternalStorage
}

// New builds a server on a store whose migrations have been applied. It
// does not start the engine: Start does.
func New(st engine.Store, opts Options) (*Server, error) {
	if st == nil {
		return nil, errors.New("server: a store is required")
	}
	logger := zerolog.Nop()
	if opts.Logger != nil {
		logger = *opts.Logger
	}
	policy, err := workerpolicy.New(opts.WorkerURLAllow)
	if err != nil {
		return nil, err
	}
	ec := opts.Engine
	if ec.WorkerClient == nil {
		ec.WorkerClient = workerclient.NewWithOptions(workerclient.Options{Headers: opts.WorkerHeaders, Policy: policy})
	}
	if ec.CheckWorkerURL == nil {
		ec.CheckWorkerURL = policy.Check
	}
	if ec.Logger == nil {
		l := logger.With().Str("component", "engine").Logger()
		ec.Logger = &l
	}
	var bucket *archive.Bucket
	if ec.Archive == nil && opts.ArchiveURL != "" {
		if bucket, err = archive.Open(context.Background(), opts.ArchiveURL); err != nil {
			return nil, err
		}
		ec.Archive = bucket
	}
	var payloads *extstore.Store
	if ec.Payloads == nil && opts.ExternalStorage.on() {
		if payloads, err = extstore.Open(context.Background(), opts.ExternalStorage.Active, opts.ExternalStorage.Reads); err != nil {
			if bucket != nil {
				bucket.Close()
			}
			return nil, err
		}
		ec.Payloads = payloads
	}
	closeBucket := func() {
		if bucket != nil {
			bucket.Close()
		}
		if payloads != nil {
			payloads.Close()
		}
	}
	if opts.Tracer != nil {
		// The engine spans its own store calls: the store is handed over
		// as it is, so that none of its optional interfaces is hidden.
		ec.Tracer, ec.TraceDBSystem = opts.Tracer, opts.TraceDB
	}
	eng, err := engine.New(st, ec)
	if err != nil {
		closeBucket()
		return nil, err
	}
	requestTimeout := opts.RequestTimeout
	if requestTimeout <= 0 {
		requestTimeout = httpapi.DefaultRequestTimeout
	}
	maxWait := opts.Engine.MaxWait
	if maxWait <= 0 {
		maxWait = engine.DefaultMaxWait
	}
	ho := httpapi.Options{
		Logger:          logger.With().Str("component", "http").Logger(),
		MaxBodyBytes:    opts.MaxBodyBytes,
		RequestTimeout:  requestTimeout,
		LongPollTimeout: maxWait + requestTimeout,
		ExternalStorage: ec.Payloads != nil,
	}
	if ec.Payloads != nil {
		ho.Spill = eng // big payloads stream to the store as request bodies arrive
	}
	if opts.RestrictHosts || len(opts.AllowedHosts) > 0 {
		if ho.Hosts, err = auth.NewHostPolicy(opts.AllowedHosts); err != nil {
			return nil, err
		}
	}
	if !opts.NoMetrics {
		ho.Metrics = metricsWriter(eng)
	}
	ao := auth.Options{ProtectMetrics: opts.AuthMetrics, ConsolePrefix: ConsolePrefix, SecureCookie: opts.SecureCookies,
		SessionTTL: opts.ConsoleSessionTTL, CertRoles: opts.CertRoles}
	if !opts.NoUI {
		co := console.Options{Logger: logger.With().Str("component", "console").Logger(), Prefix: ConsolePrefix}
		if a, ok := ec.Archive.(console.Archive); ok {
			co.Archive = a // the console reads archived runs back
		}
		if opts.Auth != nil {
			co.SignOut = opts.Auth.SignOut(ao)
		}
		ui, err := console.New(eng, co)
		if err != nil {
			closeBucket()
			return nil, err
		}
		ho.Extra, ho.ExtraPrefix = ui, ConsolePrefix
	}
	// The guard always runs: without tokens it names requests
	// "anonymous" (or by their client certificate) with full access.
	ho.Guard = auth.Guard(opts.Auth, ao)
	ho.Audit = opts.Audit
	handler, err := httpapi.NewHandler(eng, ho)
	if err != nil {
		closeBucket()
		return nil, err
	}
	handler = tracing.Handler(opts.Tracer, handler)
	return &Server{Engine: eng, Handler: handler, archive: bucket, payloads: payloads}, nil
}

// Open opens the store a database setting names (see ParseDB), applies its
// migrations and builds a server on it, which Close closes with the store.
// A SQLite store, which one process owns, releases the leases of its
// previous process at start.
func Open(ctx context.Context, db string, opts Options) (*Server, error) {
	target, err := ParseDB(db)
	if err != nil {
		return nil, err
	}
	st, err := OpenStore(ctx, target, StoreOptions{ConnectTimeout: opts.ConnectTimeout, SQLiteSynchronous: opts.SQLiteSynchronous,
		LivenessTimeout: opts.DBLivenessTimeout})
	if err != nil {
		return nil, err
	}
	if target.Kind == SQLite {
		opts.Engine.ReleaseLeasesOnStart = true
		// A deletion holds SQLite's only writer: retention sweeps leave
		// live work most of it, in turns of about SQLiteSweepHold.
		if opts.Engine.SweepShare == 0 {
			opts.Engine.SweepShare = SQLiteSweepShare
		}
		if opts.Engine.SweepHold == 0 {
			opts.Engine.SweepHold = SQLiteSweepHold
		}
		if opts.Engine.SweepBatch == 0 {
			opts.Engine.SweepBatch = SQLiteSweepBatch
		}
	}
	if opts.TraceDB == "" {
		opts.TraceDB = map[DBKind]string{SQLite: "sqlite", Postgres: "postgresql"}[target.Kind]
	}
	// Nodes sharing a database run on its clock (see package dbclock).
	var clock *dbclock.Clock
	if src, ok := st.(interface {
		Now(context.Context) (time.Time, error)
	}); ok && opts.Engine.Clock == nil {
		clock = dbclock.New(dbclock.NodeClock(), src.Now)
		cctx, cancel := context.WithTimeout(ctx, connectTimeoutOr(opts.ConnectTimeout))
		err := clock.Sync(cctx)
		cancel()
		if err != nil {
			st.Close()
			return nil, fmt.Errorf("read the database's clock: %w", err)
		}
		if opts.Logger != nil {
			off, bound := clock.Offset()
			opts.Logger.Info().Dur("offset", off).Dur("bound", bound).Msg("running on the database's clock (offset: database minus this node)")
		}
		clock.Start(dbclock.DefaultInterval)
		opts.Engine.Clock = clock
	}
	if d, ok := st.(interface {
		DurabilityWarnings(context.Context) ([]string, error)
	}); ok && opts.Logger != nil {
		warnings, err := d.DurabilityWarnings(ctx)
		if err != nil {
			opts.Logger.Warn().Err(err).Msg("could not read the database's durability settings")
		}
		for _, w := range warnings {
			opts.Logger.Warn().Str("data", target.String()).Msg("the database does not keep every commit: " + w)
		}
	}
	// Retention counts from the first start with a retention set: a
	// database upgraded from a release without retention keeps its old
	// runs a whole retention longer (engine.Config.RetentionSince).
	if opts.Engine.Retention > 0 || anyPositive(opts.Engine.RetentionByType) {
		now := time.Now()
		if opts.Engine.Clock != nil {
			now = opts.Engine.Clock.Now()
		}
		if opts.Engine.RetentionSince, err = st.RetentionStart(ctx, now); err != nil {
			if clock != nil {
				clock.Stop()
			}
			st.Close()
			return nil, fmt.Errorf("read when retention began: %w", err)
		}
	}
	s, err := New(st, opts)
	if err != nil {
		if clock != nil {
			clock.Stop()
		}
		st.Close()
		return nil, err
	}
	s.store, s.ownStore, s.clock = st, true, clock
	return s, nil
}

// Start starts the engine.
func (s *Server) Start(ctx context.Context) error {
	if err := s.Engine.Start(ctx); err != nil {
		return fmt.Errorf("start engine: %w", err)
	}
	s.started = true
	return nil
}

// Close stops the engine, waiting for its in-flight tasks until ctx ends
// (unfinished tasks stay in the store), then closes the store if the
// server opened it.
func (s *Server) Close(ctx context.Context) error {
	var errs []error
	if s.started {
		if err := s.Engine.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("close engine: %w", err))
		}
		s.started = false
	}
	if s.clock != nil {
		s.clock.Stop()
		s.clock = nil
	}
	if s.ownStore && s.store != nil {
		if err := s.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close store: %w", err))
		}
		s.store = nil
	}
	if s.archive != nil {
		if err := s.archive.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close archive: %w", err))
		}
		s.archive = nil
	}
	if s.payloads != nil {
		if err := s.payloads.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close external storage: %w", err))
		}
		s.payloads = nil
	}
	return errors.Join(errs...)
}

// DBKind is the kind of database a setting names.
type DBKind int

// The database kinds.
const (
	SQLite DBKind = iota + 1
	Postgres
)

// DB is a parsed database setting.
type DB struct {
	Kind DBKind
	// Path is the SQLite file (absolute unless ":memory:"); URL is the
	// PostgreSQL connection URL.
	Path, URL string
}

// String describes where the data lives, without credentials.
func (d DB) String() string {
	if d.Kind == SQLite {
		return "SQLite " + d.Path
	}
	u, err := url.Parse(d.URL)
	if err != nil {
		return "PostgreSQL"
	}
	s := "PostgreSQL " + u.Host + u.Path
	if u.User != nil && u.User.Username() != "" {
		s += " as " + u.User.Username()
	}
	return s
}

// ParseDB parses a database setting: sqlite://<path> (sqlite:///abs/path.db,
// sqlite://rel.db, sqlite://:memory:), or a postgres:// or postgresql://
// URL. Error messages never repeat a password.
func ParseDB(s string) (DB, error) {
	switch {
	case strings.HasPrefix(s, "sqlite://"):
		p := strings.TrimPrefix(s, "sqlite://")
		if i := strings.IndexByte(p, '?'); i >= 0 {
			p = p[:i]
		}
		if p == "" {
			return DB{}, fmt.Errorf("db %q: missing file path, e.g. sqlite://iwf.db or sqlite:///var/lib/iwf/iwf.db", s)
		}
		if p == ":memory:" {
			return DB{Kind: SQLite, Path: p}, nil
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return DB{}, fmt.Errorf("db %q: %v", s, err)
		}
		return DB{Kind: SQLite, Path: abs}, nil
	case strings.HasPrefix(s, "postgres://"), strings.HasPrefix(s, "postgresql://"):
		u, err := url.Parse(s)
		if err != nil {
			// The error text may contain the password: do not repeat s.
			return DB{}, errors.New("db: cannot parse the PostgreSQL URL")
		}
		if u.Host == "" && u.Query().Get("host") == "" {
			return DB{}, errors.New("db: the PostgreSQL URL has no host")
		}
		return DB{Kind: Postgres, URL: s}, nil
	}
	return DB{}, fmt.Errorf("db %q: want sqlite://<path>, postgres://... or postgresql://...", redactURL(s))
}

// redactURL hides a password in a URL-like string.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		return u.Redacted()
	}
	return s
}

// DefaultConnectTimeout bounds how long opening a PostgreSQL store may take
// to connect when the caller sets no other limit.
const DefaultConnectTimeout = 10 * time.Second

// StoreOptions configure OpenStore. The zero value of each field selects
// its default.
type StoreOptions struct {
	// ConnectTimeout bounds connecting to PostgreSQL (default
	// DefaultConnectTimeout).
	ConnectTimeout time.Duration
	// SQLiteSynchronous is the durability of a SQLite store's commits.
	SQLiteSynchronous sqlite.Synchronous
	// LivenessTimeout is postgres.WithLivenessTimeout (0: its default).
	LivenessTimeout time.Duration
}

// connectTimeoutOr is d, or DefaultConnectTimeout when d is not positive.
func connectTimeoutOr(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultConnectTimeout
	}
	return d
}

// OpenStore opens the database d names and applies its migrations. The
// directory of a SQLite file is created when missing. Connecting to
// PostgreSQL may take at most o.ConnectTimeout (DefaultConnectTimeout when
// 0); the migrations are not limited by it. Errors say in one line what is
// wrong: a server that does not answer, a missing database, refused
// credentials.
func OpenStore(ctx context.Context, d DB, o StoreOptions) (Store, error) {
	connectTimeout := o.ConnectTimeout
	if connectTimeout <= 0 {
		connectTimeout = DefaultConnectTimeout
	}
	var st Store
	var err error
	switch d.Kind {
	case SQLite:
		if d.Path != ":memory:" {
			if err := os.MkdirAll(filepath.Dir(d.Path), 0o750); err != nil {
				return nil, fmt.Errorf("create the directory of %s: %w", d, err)
			}
		}
		var opts []sqlite.Option
		if o.SQLiteSynchronous != "" {
			opts = append(opts, sqlite.WithSynchronous(o.SQLiteSynchronous))
		}
		st, err = sqlite.Open(ctx, d.Path, opts...)
	case Postgres:
		cctx, cancel := context.WithTimeout(ctx, connectTimeout)
		var popts []postgres.Option
		if o.LivenessTimeout != 0 {
			popts = append(popts, postgres.WithLivenessTimeout(o.LivenessTimeout))
		}
		st, err = postgres.Open(cctx, d.URL, popts...)
		cancel()
		if err != nil {
			return nil, explainPostgres(d, connectTimeout, err)
		}
	default:
		return nil, fmt.Errorf("db: unknown kind %d", d.Kind)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", d, err)
	}
	if err := st.Migrate(ctx); err != nil {
		st.Close()
		return nil, fmt.Errorf("migrate %s: %w", d, err)
	}
	return st, nil
}

// explainPostgres turns a failure to open a PostgreSQL store into one line
// that names the cause an operator can act on.
func explainPostgres(d DB, timeout time.Duration, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "3D000": // invalid_catalog_name
			return fmt.Errorf("open %s: the database does not exist (create it, or fix the URL): %s", d, pgErr.Message)
		case "28P01", "28000": // invalid_password, invalid_authorization_specification
			return fmt.Errorf("open %s: PostgreSQL refused the credentials: %s", d, pgErr.Message)
		}
		return fmt.Errorf("open %s: %s (SQLSTATE %s)", d, pgErr.Message, pgErr.Code)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("open %s: PostgreSQL did not answer within %s (db-connect-timeout)", d, timeout)
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return fmt.Errorf("open %s: PostgreSQL does not answer: %v", d, errors.Unwrap(connErr))
	}
	return fmt.Errorf("open %s: %w", d, err)
}

// anyPositive reports whether any value of m is positive.
func anyPositive(m map[string]time.Duration) bool {
	for _, d := range m {
		if d > 0 {
			return true
		}
	}
	return false
}
