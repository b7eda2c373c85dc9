package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/archive"
	"github.com/iwf-server/iwf-server/internal/audit"
	"github.com/iwf-server/iwf-server/internal/auth"
	"github.com/iwf-server/iwf-server/internal/buildinfo"
	"github.com/iwf-server/iwf-server/internal/server"
	"github.com/iwf-server/iwf-server/internal/tracing"
)

// The commands of iwf-server.
const (
	// CommandServe runs the server (the default).
	CommandServe = "serve"
	// CommandMigrate applies the database migrations and exits.
	CommandMigrate = "migrate"
	// CommandVersion prints the build's identity (package buildinfo) and
	// exits; so does the --version flag.
	CommandVersion = "version"
)

// Main is the server program: NewMain, ParseFlags (or set Config), Run,
// Wait, Close. Tests run it in-process with Addr "127.0.0.1:0" and a
// temporary SQLite file, then talk to Addr().
type Main struct {
	// Config is the configuration Run uses; ParseFlags replaces it.
	Config Config
	// Command is CommandServe or CommandMigrate.
	Command string
	// ConfigFile is the config file ParseFlags read, if any.
	ConfigFile string

	// LookupEnv reads the environment; tests may replace it.
	LookupEnv func(key string) (string, bool)
	// Stdout receives the start-up banner; Stderr receives logs and usage.
	Stdout, Stderr io.Writer

	logger   zerolog.Logger
	tokens   *auth.Tokens
	audit    *audit.Log
	tls      *tlsFiles
	srv      *server.Server
	tracing  *tracing.Provider
	listener net.Listener
	server   *http.Server
	serveErr chan error
}

// NewMain returns a Main with the default configuration.
func NewMain() *Main {
	return &Main{
		Config:    DefaultConfig(),
		Command:   CommandServe,
		LookupEnv: os.LookupEnv,
		Stdout:    os.Stdout,
		Stderr:    os.Stderr,
		logger:    zerolog.Nop(),
	}
}

// ParseFlags reads the command, the flags (args excludes the program name),
// the environment and the config file into m.Config, and validates it.
func (m *Main) ParseFlags(_ context.Context, args []string) error {
	cmd, file, cfg, err := parseConfig(args, m.LookupEnv, m.Stderr)
	if err != nil {
		return err
	}
	m.Command, m.ConfigFile, m.Config = cmd, file, cfg
	return nil
}

// Run opens the store and applies its migrations; for CommandServe it then
// starts the engine and the HTTP server and returns while they run. For
// CommandVersion it prints the build's identity and opens nothing.
func (m *Main) Run(ctx context.Context) error {
	if m.Command == CommandVersion {
		_, err := fmt.Fprint(m.Stdout, "iwf-server\n"+buildinfo.Get().Lines())
		return err
	}
	if err := m.Config.Validate(); err != nil {
		return err
	}
	target, _ := server.ParseDB(m.Config.DB) // validated above
	if err := m.initLogger(); err != nil {
		return err
	}
	if m.ConfigFile != "" {
		m.logger.Info().Str("file", m.ConfigFile).Msg("read config file")
	}
	if m.Command == CommandMigrate {
		st, err := server.OpenStore(ctx, target, server.StoreOptions{ConnectTimeout: m.Config.DBConnectTimeout, SQLiteSynchronous: m.Config.SQLiteSynchronous})
		if err != nil {
			return err
		}
		if err := st.Close(); err != nil {
			return err
		}
		m.logger.Info().Str("data", target.String()).Msg("migrations applied")
		fmt.Fprintf(m.Stdout, "iwf-server: migrations applied to %s\n", target)
		return nil
	}
	var err error
	if m.Config.AuthTokenFile != "" || len(m.Config.AuthTokens) > 0 {
		if m.tokens, err = auth.Load(m.Config.AuthTokenFile, m.Config.AuthTokens); err != nil {
			return err
		}
	}
	var certRoles auth.CertRoles
	if len(m.Config.TLSClientRoles) > 0 {
		if certRoles, err = auth.ParseCertRoles(m.Config.TLSClientRoles); err != nil {
			return err
		}
	}
	if m.Config.AuditLog != "" {
		if m.audit, err = audit.Open(m.Config.AuditLog); err != nil {
			return err
		}
		logger := m.logger
		m.audit.OnError = func(err error) { logger.Error().Err(err).Msg("cannot write the audit log") }
	}
	if m.Config.TLSCertFile != "" {
		if m.tls, err = newTLSFiles(m.Config.TLSCertFile, m.Config.TLSKeyFile, m.Config.TLSClientCAFile); err != nil {
			return err
		}
	}
	// Tracing is configured by the standard OTEL_* variables (see
	// docs/observability.md), off unless an OTLP endpoint is set.
	if m.tracing, err = tracing.FromEnv(ctx, m.getenv); err != nil {
		return err
	}
	payloads, err := m.Config.externalStorage()
	if err != nil {
		return err
	}
	m.srv, err = server.Open(ctx, m.Config.DB, server.Options{
		Tracer: m.tracing.Tracer(),
		Engine: engine.Config{
			MaxWait:              m.Config.MaxWait,
			LeaseDuration:        m.Config.LeaseDuration,
			PollInterval:         m.Config.PollInterval,
			Concurrency:          m.Config.Concurrency,
			MaxSearches:          m.Config.MaxSearches,
			MaxBatchRuns:         m.Config.MaxBatchRuns,
			SearchAttributeTypes: m.Config.SearchAttributes,
			Retention:            m.Config.Retention,
			RetentionByType:      m.Config.RetentionFor,
			SweepInterval:        m.Config.RetentionInterval,
			Limits:               m.Config.Limits,
			StateMetricsRuns:     m.Config.StateMetricsRuns,
			PayloadThreshold:     m.Config.ExternalStorageThreshold,
			PayloadGrace:         m.Config.ExternalStorageGrace,
		},
		ExternalStorage:   payloads,
		WorkerHeaders:     m.Config.WorkerHeaders,
		WorkerURLAllow:    m.Config.WorkerURLAllow,
		Auth:              m.tokens,
		CertRoles:         certRoles,
		Audit:             m.audit,
		AuthMetrics:       m.Config.AuthMetrics,
		SecureCookies:     m.tls != nil,
		NoUI:              !m.Config.UI,
		Logger:            &m.logger,
		MaxBodyBytes:      m.Config.maxBodyBytes(),
		ConnectTimeout:    m.Config.DBConnectTimeout,
		DBLivenessTimeout: m.Config.DBLivenessTimeout,
		SQLiteSynchronous: m.Config.SQLiteSynchronous,
		RequestTimeout:    m.Config.RequestTimeout,
		RestrictHosts:     auth.IsLoopbackAddr(m.Config.Addr),
		AllowedHosts:      m.Config.AllowedHosts,
		ConsoleSessionTTL: m.Config.ConsoleSessionTTL,
		ArchiveURL:        m.Config.ArchiveURL,
	})
	if err != nil {
		return err
	}
	if err := m.srv.Start(ctx); err != nil {
		return err
	}
	handler := m.srv.Handler
	m.listener, err = net.Listen("tcp", m.Config.Addr)
	if err != nil {
		return err
	}
	m.server = &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       m.Config.ReadTimeout,
		WriteTimeout:      m.Config.WriteTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    DefaultMaxHeaderBytes,
		ErrorLog:          newStdLogger(m.logger),
	}
	scheme := "http"
	if m.tls != nil {
		m.server.TLSConfig = m.tls.config()
		scheme = "https"
	}
	srv, ln, tlsOn, serveErr := m.server, m.listener, m.tls != nil, make(chan error, 1)
	m.serveErr = serveErr
	go func() {
		var err error
		if tlsOn {
			err = srv.ServeTLS(ln, "", "")
		} else {
			err = srv.Serve(ln)
		}
		if !errors.Is(err, http.ErrServerClosed) {
			serveErr <- err
		}
		close(serveErr)
	}()

	info := buildinfo.Get()
	ev := m.logger.Info().Str("release", info.Release).Str("commit", info.Commit).Str("addr", m.Addr()).Str("scheme", scheme).Str("data", target.String()).
		Bool("auth", m.tokens != nil).Bool("mtls", m.Config.TLSClientCAFile != "")
	if len(m.Config.WorkerURLAllow) > 0 {
		ev = ev.Strs("workerUrlAllow", m.Config.WorkerURLAllow)
	}
	if m.audit != nil {
		ev = ev.Str("auditLog", m.audit.Path())
	}
	if certRoles != nil {
		ev = ev.Strs("tlsClientRoles", certRoles.Entries())
	}
	retention := engine.Config{Retention: m.Config.Retention, RetentionByType: m.Config.RetentionFor}.RetentionSummary()
	ev = ev.Str("retention", retention)
	if m.Config.ArchiveURL != "" {
		ev = ev.Str("archive", archive.Redact(m.Config.ArchiveURL))
	}
	if payloads.Active.ID != "" {
		ev = ev.Str("externalStorage", payloads.Active.String()).Int("externalStorageThreshold", m.Config.ExternalStorageThreshold)
	}
	if len(payloads.Reads) > 0 {
		reads := make([]string, len(payloads.Reads))
		for i, l := range payloads.Reads {
			reads[i] = l.String()
		}
		ev = ev.Strs("externalStorageRead", reads)
	}
	if auth.IsLoopbackAddr(m.Config.Addr) || len(m.Config.AllowedHosts) > 0 {
		ev = ev.Strs("allowedHosts", append([]string{"localhost", "loopback addresses"}, m.Config.AllowedHosts...))
	}
	if m.tracing != nil {
		ev = ev.Str("tracing", m.tracing.Endpoint())
	}
	ev.Msg("iwf-server listening")
	fmt.Fprintf(m.Stdout, "iwf-server %s listening on %s://%s, data in %s\n", buildinfo.Release(), scheme, m.Addr(), target)
	fmt.Fprintf(m.Stdout, "closed workflows are kept for %s after they close (retention)\n", retention)
	m.reportRetention(ctx)
	m.reportLimits()
	if m.Config.ArchiveURL != "" {
		fmt.Fprintf(m.Stdout, "expired workflows are archived to %s before they are deleted\n", archive.Redact(m.Config.ArchiveURL))
	}
	if payloads.Active.ID != "" {
		fmt.Fprintf(m.Stdout, "payloads over %d bytes are kept in the external store %s\n", m.Config.ExternalStorageThreshold, payloads.Active)
	}
	if m.Config.UI {
		fmt.Fprintf(m.Stdout, "web console: %s://%s%s\n", scheme, consoleHost(m.Addr()), server.ConsolePrefix)
	}
	if m.tokens == nil {
		m.logger.Warn().Msg("API authentication is off: anyone who reaches the port can run workflows (see docs/security.md)")
	}
	return nil
}

// consoleHost is the address to print for a browser: a wildcard listen
// address becomes localhost.
func consoleHost(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}

// Reload re-reads the API token file and the TLS files (on SIGHUP). What
// fails to load leaves the previous value in force.
func (m *Main) Reload() error {
	var errs []error
	if m.tokens != nil {
		if err := m.tokens.Reload(); err != nil {
			errs = append(errs, err)
		} else {
			m.logger.Info().Int("tokens", m.tokens.Count()).Msg("API tokens reloaded")
		}
	}
	if m.audit != nil {
		if err := m.audit.Reopen(); err != nil {
			errs = append(errs, err)
		}
	}
	if m.tls != nil {
		if err := m.tls.reload(); err != nil {
			errs = append(errs, err)
		} else {
			m.logger.Info().Msg("TLS files reloaded")
		}
	}
	err := errors.Join(errs...)
	if err != nil {
		m.logger.Error().Err(err).Msg("reload failed; the previous settings stay in force")
	}
	return err
}

// Wait blocks until ctx ends (a signal) or the HTTP server fails. It
// returns at once after CommandMigrate.
func (m *Main) Wait(ctx context.Context) error {
	if m.serveErr == nil {
		return nil
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-m.serveErr:
		return err
	}
}

// Addr returns the address the server listens on (the bound port when the
// configured port is 0), or the configured address before Run.
func (m *Main) Addr() string {
	if m.listener != nil {
		return m.listener.Addr().String()
	}
	return m.Config.Addr
}

// Close shuts the server down for a deploy: it stops accepting
// connections and claiming work, lets in-flight requests and worker calls
// finish for at most Config.ShutdownGrace, hands the engine's work back to
// the store so that other nodes take it at once, then closes the store.
func (m *Main) Close() error {
	var errs []error
	serving := m.srv != nil
	grace := m.Config.ShutdownGrace
	if grace <= 0 {
		grace = DefaultShutdownGrace
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if serving || m.server != nil {
		m.logger.Info().Dur("grace", grace).Msg("iwf-server shutting down")
	}
	var wg sync.WaitGroup
	if m.server != nil {
		srv := m.server
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Shutdown(ctx); err != nil {
				m.logger.Warn().Err(err).Msg("HTTP drain incomplete; closing connections")
				_ = srv.Close()
			}
		}()
	}
	if m.srv != nil {
		eng := m.srv.Engine
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := eng.Close(ctx); err != nil {
				m.logger.Warn().Err(err).Msg("worker calls still running at the end of the shutdown grace were cancelled and handed back")
			}
		}()
	}
	wg.Wait()
	m.server = nil
	if m.srv != nil {
		// The engine has stopped: this closes the store.
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := m.srv.Close(cctx)
		ccancel()
		if err != nil {
			errs = append(errs, err)
		}
		m.srv = nil
	}
	if m.tracing != nil {
		// The spans of the last moments, the hand-over included.
		tctx, tcancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := m.tracing.Shutdown(tctx); err != nil {
			m.logger.Warn().Err(err).Msg("exporting the last spans failed")
		}
		tcancel()
		m.tracing = nil
	}
	if m.audit != nil {
		if err := m.audit.Close(); err != nil {
			errs = append(errs, err)
		}
		m.audit = nil
	}
	if serving && len(errs) == 0 {
		m.logger.Info().Msg("iwf-server stopped")
	}
	return errors.Join(errs...)
}

// initLogger builds the zerolog logger from LogFormat and LogLevel.
func (m *Main) initLogger() error {
	level, err := parseLevel(m.Config.LogLevel)
	if err != nil {
		return err
	}
	format := m.Config.LogFormat
	if format == "" {
		format = "json"
		if f, ok := m.Stderr.(*os.File); ok && isTerminal(f) {
			format = "console"
		}
	}
	var w io.Writer = m.Stderr
	if format == "console" {
		w = zerolog.ConsoleWriter{Out: m.Stderr, TimeFormat: time.RFC3339}
	}
	m.logger = zerolog.New(w).Level(level).With().Timestamp().Logger()
	return nil
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// newStdLogger routes net/http's own error messages (TLS handshakes, bad
// connections) into the zerolog logger at warn level.
func newStdLogger(l zerolog.Logger) *log.Logger {
	return log.New(warnWriter{l.With().Str("component", "http").Logger()}, "", 0)
}

type warnWriter struct{ l zerolog.Logger }

func (w warnWriter) Write(p []byte) (int, error) {
	w.l.Warn().Msg(strings.TrimSpace(string(p)))
	return len(p), nil
}

// getenv reads a variable through LookupEnv (the environment by default).
func (m *Main) getenv(key string) string {
	lookup := m.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	v, _ := lookup(key)
	return v
}

// reportRetention says, in the log and on stdout, what each retention
// deletes first: when, and how many of the runs stored now. A database
// upgraded from a release without retention hears it a whole retention
// before its first deletion (engine.Config.RetentionSince).
func (m *Main) reportRetention(ctx context.Context) {
	steps, err := m.srv.Engine.RetentionOutlook(ctx)
	if err != nil {
		m.logger.Warn().Err(err).Msg("could not count the runs past their retention")
		return
	}
	now := time.Now()
	for _, st := range steps {
		scope := "workflows"
		switch {
		case len(st.Types) > 0:
			scope = "workflows of type " + strings.Join(st.Types, ", ")
		case len(st.ExceptTypes) > 0:
			scope = "workflows of other types than " + strings.Join(st.ExceptTypes, ", ")
		}
		keep := engine.Config{Retention: st.Retention}.RetentionSummary()
		when := "at the first sweep"
		if st.At.After(now) {
			when = "from " + st.At.UTC().Format(time.RFC3339) + " (retention counts from " +
				st.ClosedBefore.UTC().Format(time.RFC3339) + ", when this database first ran with a retention, for the runs closed before)"
		}
		m.logger.Info().Str("retention", keep).Strs("types", st.Types).Strs("exceptTypes", st.ExceptTypes).
			Time("firstDeletionAt", st.At).Time("closedBefore", st.ClosedBefore).Int("runs", st.Runs).
			Msg("retention: what the first deletions take")
		fmt.Fprintf(m.Stdout, "retention %s of %s: %d closed runs (closed before %s) are deleted %s\n",
			keep, scope, st.Runs, st.ClosedBefore.UTC().Format(time.RFC3339), when)
	}
}
