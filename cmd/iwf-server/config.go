package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"go.yaml.in/yaml/v3"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/auth"
	"github.com/iwf-server/iwf-server/internal/extstore"
	"github.com/iwf-server/iwf-server/internal/httpapi"
	"github.com/iwf-server/iwf-server/internal/server"
	"github.com/iwf-server/iwf-server/internal/store/postgres"
	"github.com/iwf-server/iwf-server/internal/store/sqlite"
	"github.com/iwf-server/iwf-server/internal/workerpolicy"
	"github.com/iwf-server/iwf-server/search"
)

// Config is the server's configuration: the defaults, overridden by the
// config file, overridden by the environment, overridden by the command line.
type Config struct {
	// Addr is the host:port the REST API listens on.
	Addr string
	// DB selects the store: sqlite://<path> or postgres://... (postgresql://).
	DB string
	// LogFormat is "json" or "console"; empty chooses console when stderr is a
	// terminal and json otherwise.
	LogFormat string
	// LogLevel is a zerolog level: trace, debug, info, warn, error.
	LogLevel string
	// MaxWait caps long polls and RPC worker calls (engine.Config.MaxWait).
	MaxWait time.Duration
	// WorkerHeaders are sent with every call to a worker.
	WorkerHeaders http.Header
	// SearchAttributes declares search attribute names and their types.
	SearchAttributes map[string]search.ValueType
	// MaxBodyBytes limits the size of request bodies.
	MaxBodyBytes int64
	// DBConnectTimeout bounds connecting to PostgreSQL at start.
	DBConnectTimeout time.Duration
	// DBLivenessTimeout is how long PostgreSQL may leave the liveness
	// probe unanswered before the node treats it as down.
	DBLivenessTimeout time.Duration
	// ReadTimeout bounds how long a client may take to send a request,
	// headers and body; a slower one is disconnected.
	ReadTimeout time.Duration
	// WriteTimeout bounds how long a request may take from the end of its
	// headers to the end of its answer. It must be at least MaxWait plus
	// RequestTimeout (a long poll's deadline) plus LongPollWriteMargin, so
	// that a long poll's answer at its deadline is written before the
	// connection is closed.
	WriteTimeout time.Duration
	// LeaseDuration is how long a claimed task stays leased without renewal.
	LeaseDuration time.Duration
	// PollInterval is how often the engine looks for due work it did not create.
	PollInterval time.Duration
	// Concurrency bounds the tasks processed at once.
	Concurrency int
	// MaxSearches bounds the searches a node runs at once.
	MaxSearches int
	// MaxBatchRuns bounds the runs one batch operation may match.
	MaxBatchRuns int
	// StateMetricsRuns bounds the open runs iwf_state_executions counts
	// (0: the gauge is off).
	StateMetricsRuns int
	// AuthTokenFile holds API tokens, one per line (# comments); with
	// AuthTokens, setting either turns API authentication on.
	AuthTokenFile string
	// AuthTokens are API tokens given inline (IWF_AUTH_TOKENS).
	AuthTokens []string
	// AuthMetrics requires a token for GET /metrics too.
	AuthMetrics bool
	// TLSCertFile and TLSKeyFile serve the API over HTTPS (both or none).
	TLSCertFile, TLSKeyFile string
	// TLSClientCAFile requires client certificates signed by these CAs
	// (mutual TLS); it needs TLSCertFile.
	TLSClientCAFile string
	// TLSClientRoles map client certificate common names to roles
	// (CN=ROLE, "*=ROLE" for any other); it needs TLSClientCAFile.
	TLSClientRoles []string
	// AuditLog, when set, is the file ("-" for stderr) that every call
	// changing workflows is written to, one JSON object per line.
	AuditLog string
	// WorkerURLAllow is the allow-list of worker URLs (patterns, CIDRs).
	WorkerURLAllow []string
	// UI serves the web console at /ui/.
	UI bool
	// ShutdownGrace bounds how long a shutdown waits for in-flight
	// requests and worker calls before cancelling them.
	ShutdownGrace time.Duration
	// RequestTimeout is the deadline of each API request and console page
	// that is not a long poll; long polls get MaxWait plus it. That sum
	// must leave WriteTimeout LongPollWriteMargin, so that a 504 reaches
	// the client.
	RequestTimeout time.Duration
	// AllowedHosts are the host names served besides localhost and the
	// loopback addresses when listening on a loopback address; set, they
	// restrict any listener to them.
	AllowedHosts []string
	// ConsoleSessionTTL is how long a console sign-in lasts.
	ConsoleSessionTTL time.Duration
	// Retention is how long a closed run is kept after it closed; 0 keeps
	// closed runs forever.
	Retention time.Duration
	// RetentionFor overrides Retention per workflow type (0: forever).
	RetentionFor map[string]time.Duration
	// RetentionInterval is how often a node deletes expired runs.
	RetentionInterval time.Duration
	// ArchiveURL, when set, is the gocloud.dev/blob URL of the archive
	// that expired runs are written to before they are deleted.
	ArchiveURL string
	// Limits are the concurrency and rate limits on worker calls
	// (--worker-concurrency, --worker-rate, --type-concurrency).
	Limits engine.Limits
	// SQLiteSynchronous is the durability of the SQLite store's commits:
	// normal (survives a process crash) or full (survives a power loss).
	SQLiteSynchronous sqlite.Synchronous
	// ExternalStorageURL, when set, is the active external payload store
	// as ID=URL: payloads over ExternalStorageThreshold go to it.
	ExternalStorageURL string
	// ExternalStorageReadURLs are older stores (ID=URL) whose payloads
	// stay readable; given alone, without ExternalStorageURL, nothing new
	// is offloaded.
	ExternalStorageReadURLs []string
	// ExternalStorageThreshold is the size, in bytes of data, above which
	// a payload goes to the external store.
	ExternalStorageThreshold int
	// ExternalStorageMaxBodyBytes replaces MaxBodyBytes while external
	// storage is on.
	ExternalStorageMaxBodyBytes int64
	// ExternalStorageGrace is how long an object written for a
	// transaction that never committed is kept before it is deleted.
	ExternalStorageGrace time.Duration
}

// DefaultExternalStorageMaxBodyBytes is the request body limit while
// external storage is on.
const DefaultExternalStorageMaxBodyBytes = 64 << 20

// externalStorageOn reports whether any external store is named.
func (c Config) externalStorageOn() bool {
	return c.ExternalStorageURL != "" || len(c.ExternalStorageReadURLs) > 0
}

// externalStorage returns the stores the settings name.
func (c Config) externalStorage() (server.ExternalStorage, error) {
	var x server.ExternalStorage
	if c.ExternalStorageURL != "" {
		l, err := extstore.ParseLocation(c.ExternalStorageURL)
		if err != nil {
			return x, fmt.Errorf("external-storage-url: %v", err)
		}
		x.Active = l
	}
	ids := map[string]bool{x.Active.ID: x.Active.ID != ""}
	for _, e := range c.ExternalStorageReadURLs {
		l, err := extstore.ParseLocation(e)
		if err != nil {
			return x, fmt.Errorf("external-storage-read-url: %v", err)
		}
		if ids[l.ID] {
			return x, fmt.Errorf("external-storage-read-url: the store id %q is given twice (each store needs an id of its own: it is the extStoreId of the references to its payloads)", l.ID)
		}
		ids[l.ID] = true
		x.Reads = append(x.Reads, l)
	}
	return x, nil
}

// maxBodyBytes is the request body limit in force.
func (c Config) maxBodyBytes() int64 {
	if c.externalStorageOn() {
		return c.ExternalStorageMaxBodyBytes
	}
	return c.MaxBodyBytes
}

// DefaultShutdownGrace is how long a SIGTERM waits for in-flight work.
const DefaultShutdownGrace = 30 * time.Second

// The listener's defaults: a request must arrive within DefaultReadTimeout
// and be answered within DefaultWriteTimeout, which leaves a long poll
// (deadline engine.DefaultMaxWait plus httpapi.DefaultRequestTimeout)
// writeTimeoutSpare to write its answer.
const (
	DefaultReadTimeout    = 30 * time.Second
	DefaultWriteTimeout   = engine.DefaultMaxWait + httpapi.DefaultRequestTimeout + writeTimeoutSpare
	DefaultMaxHeaderBytes = 64 << 10
)

// LongPollWriteMargin is the least time the write timeout must leave after
// a long poll's deadline (max-wait plus request-timeout): the time to
// write the answer the deadline causes (a 504) before net/http closes the
// connection. A write timeout equal to the deadline cuts the connection
// instead.
const LongPollWriteMargin = 5 * time.Second

// writeTimeoutSpare is what the default write timeout leaves after a long
// poll's deadline; when max-wait or request-timeout is raised and
// write-timeout is not set, the write timeout grows with them.
const writeTimeoutSpare = 30 * time.Second

// longPollDeadline is the deadline of a long poll: it waits up to MaxWait
// and then has RequestTimeout to answer (internal/server).
func (c Config) longPollDeadline() time.Duration { return c.MaxWait + c.RequestTimeout }

// DefaultConfig returns the configuration used when nothing else is set.
func DefaultConfig() Config {
	return Config{
		Addr:              "127.0.0.1:8801",
		DB:                "sqlite://iwf.db",
		LogLevel:          "info",
		MaxWait:           engine.DefaultMaxWait,
		MaxBodyBytes:      httpapi.DefaultMaxBodyBytes,
		ReadTimeout:       DefaultReadTimeout,
		DBConnectTimeout:  server.DefaultConnectTimeout,
		DBLivenessTimeout: postgres.DefaultLivenessTimeout,
		WriteTimeout:      DefaultWriteTimeout,
		LeaseDuration:     engine.DefaultLeaseDuration,
		PollInterval:      engine.DefaultPollInterval,
		Concurrency:       engine.DefaultConcurrency,
		MaxSearches:       engine.DefaultMaxSearches,
		MaxBatchRuns:      engine.DefaultMaxBatchRuns,
		StateMetricsRuns:  engine.DefaultStateMetricsRuns,
		UI:                true,
		ShutdownGrace:     DefaultShutdownGrace,
		RequestTimeout:    httpapi.DefaultRequestTimeout,
		ConsoleSessionTTL: auth.DefaultSessionTTL,
		Retention:         engine.DefaultRetention,
		RetentionInterval: engine.DefaultSweepInterval,
		SQLiteSynchronous: sqlite.SyncNormal,

		ExternalStorageThreshold:    engine.DefaultPayloadThreshold,
		ExternalStorageMaxBodyBytes: DefaultExternalStorageMaxBodyBytes,
		ExternalStorageGrace:        engine.DefaultPayloadGrace,
	}
}

// searchAttributeTypesText lists iWF's SearchAttributeValueType values for
// error messages.
const searchAttributeTypesText = "KEYWORD, TEXT, DATETIME, INT, DOUBLE, BOOL, KEYWORD_ARRAY"

// Validate reports the first setting that cannot work. It is the one place
// where the configuration is checked.
func (c Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("addr %q: want host:port: %v", c.Addr, err)
	}
	if _, err := server.ParseDB(c.DB); err != nil {
		return err
	}
	switch c.LogFormat {
	case "", "json", "console":
	default:
		return fmt.Errorf("log-format %q: want json or console", c.LogFormat)
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return err
	}
	for name, d := range map[string]time.Duration{
		"max-wait": c.MaxWait, "lease-duration": c.LeaseDuration, "poll-interval": c.PollInterval,
		"read-timeout": c.ReadTimeout, "write-timeout": c.WriteTimeout, "db-connect-timeout": c.DBConnectTimeout,
		"db-liveness-timeout": c.DBLivenessTimeout,
		"shutdown-grace":      c.ShutdownGrace, "request-timeout": c.RequestTimeout, "console-session-ttl": c.ConsoleSessionTTL,
		"retention-interval": c.RetentionInterval,
	} {
		if d <= 0 {
			return fmt.Errorf("%s must be positive, got %s", name, d)
		}
	}
	if least := c.longPollDeadline() + LongPollWriteMargin; c.WriteTimeout < least {
		return fmt.Errorf("write-timeout (%s) must be at least max-wait (%s) + request-timeout (%s) + %s = %s: "+
			"a long poll (getWithWait, waitForStateCompletion, rpc) may take max-wait plus request-timeout, and its answer "+
			"must be written before write-timeout closes the connection; raise write-timeout or lower max-wait or request-timeout",
			c.WriteTimeout, c.MaxWait, c.RequestTimeout, LongPollWriteMargin, least)
	}
	if _, err := auth.NewHostPolicy(c.AllowedHosts); err != nil {
		return err
	}
	if c.Retention < 0 {
		return fmt.Errorf("retention must not be negative (0 keeps closed runs forever), got %s", c.Retention)
	}
	for typ, d := range c.RetentionFor {
		if typ == "" || d < 0 {
			return fmt.Errorf("retention-for %s=%s: want a workflow type and a duration of 0 or more", typ, d)
		}
	}
	if err := c.Limits.Validate(); err != nil {
		return err
	}
	if c.ArchiveURL != "" {
		if u, err := url.Parse(c.ArchiveURL); err != nil || u.Scheme == "" {
			// Not echoed: a value that is no URL may hold a secret.
			return errors.New("archive-url: want a URL with a scheme, such as file:///var/lib/iwf/archive or s3://bucket?region=eu-west-1")
		}
	}
	if c.LeaseDuration < 100*time.Millisecond {
		return fmt.Errorf("lease-duration must be at least 100ms, got %s", c.LeaseDuration)
	}
	if c.MaxBodyBytes <= 0 {
		return fmt.Errorf("max-body-bytes must be positive, got %d", c.MaxBodyBytes)
	}
	if err := c.validateExternalStorage(); err != nil {
		return err
	}
	if c.Concurrency <= 0 {
		return fmt.Errorf("concurrency must be positive, got %d", c.Concurrency)
	}
	if c.StateMetricsRuns < 0 {
		return fmt.Errorf("state-metrics-runs must be 0 (off) or positive, got %d", c.StateMetricsRuns)
	}
	if c.MaxBatchRuns <= 0 {
		return fmt.Errorf("max-batch-runs must be positive, got %d", c.MaxBatchRuns)
	}
	if c.MaxSearches <= 0 {
		return fmt.Errorf("max-searches must be positive, got %d", c.MaxSearches)
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return errors.New("tls-cert-file and tls-key-file go together: set both or neither")
	}
	if len(c.TLSClientRoles) > 0 {
		if c.TLSClientCAFile == "" {
			return errors.New("tls-client-roles needs tls-client-ca-file: roles are given to verified client certificates")
		}
		if _, err := auth.ParseCertRoles(c.TLSClientRoles); err != nil {
			return fmt.Errorf("tls-client-roles: %v", err)
		}
	}
	if c.TLSClientCAFile != "" && c.TLSCertFile == "" {
		return errors.New("tls-client-ca-file needs tls-cert-file and tls-key-file: client certificates are checked over TLS")
	}
	if c.AuthMetrics && c.AuthTokenFile == "" && len(c.AuthTokens) == 0 {
		return errors.New("auth-metrics needs tokens: set auth-token-file or IWF_AUTH_TOKENS")
	}
	if _, err := workerpolicy.New(c.WorkerURLAllow); err != nil {
		return err
	}
	for name := range c.WorkerHeaders {
		if !validHeaderName(name) {
			return fmt.Errorf("worker-header: invalid header name %q", name)
		}
	}
	for name, typ := range c.SearchAttributes {
		if name == "" {
			return errors.New("search-attribute: empty name")
		}
		if !typ.Valid() {
			return fmt.Errorf("search-attribute %s: unknown type %q, want one of %s",
				name, typ, searchAttributeTypesText)
		}
	}
	return nil
}

// validateExternalStorage checks the external storage settings.
func (c Config) validateExternalStorage() error {
	if _, err := c.externalStorage(); err != nil {
		return err
	}
	if c.ExternalStorageThreshold <= 0 {
		return fmt.Errorf("external-storage-threshold must be a positive number of bytes, got %d", c.ExternalStorageThreshold)
	}
	if c.ExternalStorageMaxBodyBytes <= 0 {
		return fmt.Errorf("external-storage-max-body-bytes must be positive, got %d", c.ExternalStorageMaxBodyBytes)
	}
	if c.externalStorageOn() && c.ExternalStorageMaxBodyBytes < c.MaxBodyBytes {
		return fmt.Errorf("external-storage-max-body-bytes (%d) must be at least max-body-bytes (%d): it replaces max-body-bytes while external storage is on",
			c.ExternalStorageMaxBodyBytes, c.MaxBodyBytes)
	}
	if c.ExternalStorageGrace < time.Minute {
		return fmt.Errorf("external-storage-grace must be at least 1m (objects younger than it may still be claimed by a transaction under way), got %s", c.ExternalStorageGrace)
	}
	return nil
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		// RFC 9110 token characters.
		if r > 0x7e || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}

func parseLevel(s string) (zerolog.Level, error) {
	l, err := zerolog.ParseLevel(strings.ToLower(strings.TrimSpace(s)))
	if err != nil || s == "" {
		return 0, fmt.Errorf("log-level %q: want trace, debug, info, warn or error", s)
	}
	return l, nil
}

// setting is one configuration knob, reachable as a flag (--key), an
// environment variable (env) and a config-file key (key).
type setting struct {
	key   string
	env   string
	usage string
	// multi settings are repeatable flags, lists in the environment and
	// mappings or lists in the file.
	multi bool
	// splitEnv splits a multi setting's environment value into entries.
	splitEnv func(string) []string
	// joinKV turns a file mapping entry into the entry syntax of the flag.
	joinKV func(k, v string) string
	// apply sets the value from entries (one entry unless multi).
	apply func(c *Config, entries []string) error
	// def shows the default in the usage text.
	def func(c Config) string
	// noFlag settings are read from the environment and the config file
	// only (secrets that a command line would show to every local user).
	noFlag bool
	// file, when set, is the setting's config-file key (see fileKey).
	file string
	// isBool settings are flags without a value (--auth-metrics).
	isBool bool
}

func durationSetting(key, env, usage string, field func(*Config) *time.Duration) setting {
	return setting{
		key: key, env: env, usage: usage + " (a `duration` such as 500ms, 30s, 2m)",
		apply: func(c *Config, e []string) error {
			d, err := time.ParseDuration(strings.TrimSpace(e[0]))
			if err != nil {
				return fmt.Errorf("invalid duration %q (e.g. 30s, 1m)", e[0])
			}
			*field(c) = d
			return nil
		},
		def: func(c Config) string { return field(&c).String() },
	}
}

func stringSetting(key, env, usage string, field func(*Config) *string) setting {
	return setting{
		key: key, env: env, usage: usage,
		apply: func(c *Config, e []string) error { *field(c) = strings.TrimSpace(e[0]); return nil },
		def:   func(c Config) string { return *field(&c) },
	}
}

func boolSetting(key, env, usage string, field func(*Config) *bool) setting {
	return setting{
		key: key, env: env, usage: usage, isBool: true,
		apply: func(c *Config, e []string) error {
			b, err := strconv.ParseBool(strings.TrimSpace(e[0]))
			if err != nil {
				return fmt.Errorf("invalid boolean %q (want true or false)", e[0])
			}
			*field(c) = b
			return nil
		},
		def: func(c Config) string {
			if *field(&c) {
				return "true"
			}
			return ""
		},
	}
}

func listSetting(key, env, usage string, field func(*Config) *[]string) setting {
	return setting{
		key: key, env: env, usage: usage, multi: true,
		splitEnv: func(s string) []string { return splitList(s, ",\n") },
		joinKV:   func(k, v string) string { return k + "=" + v },
		apply:    func(c *Config, e []string) error { *field(c) = append([]string(nil), e...); return nil },
		def:      func(Config) string { return "" },
	}
}

func splitList(s string, seps string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(seps, r) }) {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// settings lists every knob once; the flags, the environment variables, the
// config file and the usage text are derived from it.
var settings = []setting{
	stringSetting("addr", "IWF_ADDR", "`host:port` to listen on (port 0 picks a free port)",
		func(c *Config) *string { return &c.Addr }),
	stringSetting("db", "IWF_DB", "store `URL`: sqlite://<path> or postgres://user:pass@host:5432/db",
		func(c *Config) *string { return &c.DB }),
	{
		key: "sqlite-synchronous", env: "IWF_SQLITE_SYNCHRONOUS",
		usage: "durability of the SQLite store's commits, `level` normal (a commit survives a crash of the process) or full (it also survives an OS crash or a power loss, at the price of an fsync per commit)",
		apply: func(c *Config, e []string) error {
			v, err := sqlite.ParseSynchronous(e[0])
			c.SQLiteSynchronous = v
			return err
		},
		def: func(c Config) string { return string(c.SQLiteSynchronous) },
	},
	{
		key: "log-format", env: "IWF_LOG_FORMAT",
		usage: "log `format`: json or console (default: console when stderr is a terminal, else json)",
		apply: func(c *Config, e []string) error { c.LogFormat = strings.ToLower(strings.TrimSpace(e[0])); return nil },
		def:   func(c Config) string { return c.LogFormat },
	},
	stringSetting("log-level", "IWF_LOG_LEVEL", "log `level`: trace, debug, info, warn, error",
		func(c *Config) *string { return &c.LogLevel }),
	durationSetting("max-wait", "IWF_MAX_WAIT", "cap on long polls (getWithWait, waitForStateCompletion) and RPC worker calls",
		func(c *Config) *time.Duration { return &c.MaxWait }),
	durationSetting("db-connect-timeout", "IWF_DB_CONNECT_TIMEOUT", "how long connecting to PostgreSQL may take at start",
		func(c *Config) *time.Duration { return &c.DBConnectTimeout }),
	durationSetting("db-liveness-timeout", "IWF_DB_LIVENESS_TIMEOUT", "how long PostgreSQL may leave the node's liveness probe (SELECT 1, every second) unanswered before the node treats it as down: it answers 503, closes its connections and reconnects once the database answers",
		func(c *Config) *time.Duration { return &c.DBLivenessTimeout }),
	durationSetting("read-timeout", "IWF_READ_TIMEOUT", "how long a client may take to send a request (headers and body); slower ones are disconnected",
		func(c *Config) *time.Duration { return &c.ReadTimeout }),
	durationSetting("write-timeout", "IWF_WRITE_TIMEOUT", "how long a request may take to be answered after its headers; at least max-wait + request-timeout + 5s, so that a long poll's answer at its deadline is written (when not set: the default, or max-wait + request-timeout + 30s when longer)",
		func(c *Config) *time.Duration { return &c.WriteTimeout }),
	durationSetting("request-timeout", "IWF_REQUEST_TIMEOUT", "deadline of each API request and console page that is not a long poll (long polls: max-wait plus it); past it the request's queries are cancelled and it answers 504",
		func(c *Config) *time.Duration { return &c.RequestTimeout }),
	{
		key: "worker-header", env: "IWF_WORKER_HEADERS", multi: true,
		usage:    "`Name: value` header sent with every worker call (repeatable)",
		splitEnv: func(s string) []string { return splitList(s, ";\n") },
		joinKV:   func(k, v string) string { return k + ": " + v },
		apply: func(c *Config, entries []string) error {
			h := http.Header{}
			for _, e := range entries {
				name, value, ok := strings.Cut(e, ":")
				name = strings.TrimSpace(name)
				if !ok || name == "" {
					return fmt.Errorf("invalid header %q, want \"Name: value\"", e)
				}
				if !validHeaderName(name) {
					return fmt.Errorf("invalid header name %q", name)
				}
				h.Add(textproto.CanonicalMIMEHeaderKey(name), strings.TrimSpace(value))
			}
			c.WorkerHeaders = h
			return nil
		},
		def: func(Config) string { return "" },
	},
	{
		key: "search-attribute", env: "IWF_SEARCH_ATTRIBUTES", multi: true,
		usage:    "declare a search attribute as `Name=TYPE` (KEYWORD, TEXT, DATETIME, INT, DOUBLE, BOOL, KEYWORD_ARRAY; repeatable)",
		splitEnv: func(s string) []string { return splitList(s, ",; \t\n") },
		joinKV:   func(k, v string) string { return k + "=" + v },
		apply: func(c *Config, entries []string) error {
			m := map[string]search.ValueType{}
			for _, e := range entries {
				name, typ, ok := strings.Cut(e, "=")
				name, typ = strings.TrimSpace(name), strings.ToUpper(strings.TrimSpace(typ))
				if !ok || name == "" || typ == "" {
					return fmt.Errorf("invalid search attribute %q, want Name=TYPE", e)
				}
				if !search.ValueType(typ).Valid() {
					return fmt.Errorf("search attribute %s: unknown type %q, want one of %s",
						name, typ, searchAttributeTypesText)
				}
				m[name] = search.ValueType(typ)
			}
			c.SearchAttributes = m
			return nil
		},
		def: func(Config) string { return "" },
	},
	{
		key: "max-body-bytes", env: "IWF_MAX_BODY_BYTES", usage: "largest request body accepted, in `bytes`",
		apply: func(c *Config, e []string) error {
			n, err := strconv.ParseInt(strings.TrimSpace(e[0]), 10, 64)
			if err != nil {
				return fmt.Errorf("invalid byte count %q", e[0])
			}
			c.MaxBodyBytes = n
			return nil
		},
		def: func(c Config) string { return strconv.FormatInt(c.MaxBodyBytes, 10) },
	},
	durationSetting("lease-duration", "IWF_LEASE_DURATION", "how long a claimed task stays leased; a crashed node's work is taken over after it",
		func(c *Config) *time.Duration { return &c.LeaseDuration }),
	durationSetting("poll-interval", "IWF_POLL_INTERVAL", "how often to look for due work created elsewhere (other nodes, far timers, expired leases)",
		func(c *Config) *time.Duration { return &c.PollInterval }),
	{
		key: "concurrency", env: "IWF_CONCURRENCY", usage: "`number` of tasks (worker calls, timers) processed at once",
		apply: func(c *Config, e []string) error {
			n, err := strconv.Atoi(strings.TrimSpace(e[0]))
			if err != nil {
				return fmt.Errorf("invalid number %q", e[0])
			}
			c.Concurrency = n
			return nil
		},
		def: func(c Config) string { return strconv.Itoa(c.Concurrency) },
	},
	{
		key: "max-searches", env: "IWF_MAX_SEARCHES", usage: "`number` of searches (workflow/search, the console's list) a node runs at once; more wait for a slot within their request's deadline",
		apply: func(c *Config, e []string) error {
			n, err := strconv.Atoi(strings.TrimSpace(e[0]))
			if err != nil {
				return fmt.Errorf("invalid number %q", e[0])
			}
			c.MaxSearches = n
			return nil
		},
		def: func(c Config) string { return strconv.Itoa(c.MaxSearches) },
	},
	{
		key: "max-batch-runs", env: "IWF_MAX_BATCH_RUNS", usage: "the most runs one batch operation (batch/start) may match: a query matching more is refused with a 400",
		apply: func(c *Config, e []string) error {
			n, err := strconv.Atoi(strings.TrimSpace(e[0]))
			if err != nil {
				return fmt.Errorf("invalid number %q", e[0])
			}
			c.MaxBatchRuns = n
			return nil
		},
		def: func(c Config) string { return strconv.Itoa(c.MaxBatchRuns) },
	},
	{
		key: "state-metrics-runs", env: "IWF_STATE_METRICS_RUNS", usage: "the `number` of open runs, the oldest, whose live state executions the gauge iwf_state_executions counts by type, state and phase (read on a scrape, at most every 30s); 0 turns it off",
		apply: func(c *Config, e []string) error {
			n, err := strconv.Atoi(strings.TrimSpace(e[0]))
			if err != nil {
				return fmt.Errorf("invalid number %q", e[0])
			}
			c.StateMetricsRuns = n
			return nil
		},
		def: func(c Config) string { return strconv.Itoa(c.StateMetricsRuns) },
	},
}

// securitySettings are the API authentication, TLS and worker-call policy
// knobs (docs/security.md).
var securitySettings = []setting{
	stringSetting("auth-token-file", "IWF_AUTH_TOKEN_FILE", "API tokens `file`, one per line (# comments); turns API authentication on; re-read on SIGHUP",
		func(c *Config) *string { return &c.AuthTokenFile }),
	{
		key: "auth-tokens", env: "IWF_AUTH_TOKENS", multi: true, noFlag: true,
		usage:    "API tokens, comma-separated (environment or config file only)",
		splitEnv: func(s string) []string { return splitList(s, ",\n") },
		apply:    func(c *Config, e []string) error { c.AuthTokens = append([]string(nil), e...); return nil },
		def:      func(Config) string { return "" },
	},
	boolSetting("auth-metrics", "IWF_AUTH_METRICS", "require a token for GET /metrics too",
		func(c *Config) *bool { return &c.AuthMetrics }),
	stringSetting("tls-cert-file", "IWF_TLS_CERT_FILE", "serve HTTPS with this PEM certificate `file` (chain first); re-read on SIGHUP",
		func(c *Config) *string { return &c.TLSCertFile }),
	stringSetting("tls-key-file", "IWF_TLS_KEY_FILE", "the PEM private key `file` of tls-cert-file; re-read on SIGHUP",
		func(c *Config) *string { return &c.TLSKeyFile }),
	stringSetting("tls-client-ca-file", "IWF_TLS_CLIENT_CA_FILE", "require client certificates signed by the CAs of this PEM `file` (mutual TLS); re-read on SIGHUP",
		func(c *Config) *string { return &c.TLSClientCAFile }),
	{
		key: "tls-client-role", env: "IWF_TLS_CLIENT_ROLES", multi: true, file: "tls-client-roles",
		usage:    "give client certificates whose subject common name is CN the `CN=ROLE` (reader, writer, operator, all; *=ROLE for any other verified certificate; repeatable); needs tls-client-ca-file",
		splitEnv: func(s string) []string { return splitList(s, ",\n") },
		joinKV:   func(k, v string) string { return k + "=" + v },
		apply: func(c *Config, e []string) error {
			if _, err := auth.ParseCertRoles(e); err != nil {
				return err
			}
			c.TLSClientRoles = append([]string(nil), e...)
			return nil
		},
		def: func(Config) string { return "" },
	},
	stringSetting("audit-log", "IWF_AUDIT_LOG", "write every call that changes workflows (API, console, CLI) to this `file` as one JSON object per line (- for stderr); reopened on SIGHUP",
		func(c *Config) *string { return &c.AuditLog }),
	{
		key: "allowed-hosts", env: "IWF_ALLOWED_HOSTS", multi: true,
		usage:    "host `names` served besides localhost and loopback addresses when listening on loopback (comma-separated or repeated; *.domain, IP addresses, * for any); set, they restrict any listener",
		splitEnv: func(s string) []string { return splitList(s, ",\n") },
		apply: func(c *Config, e []string) error {
			var hosts []string
			for _, entry := range e {
				hosts = append(hosts, splitList(entry, ",")...)
			}
			if _, err := auth.NewHostPolicy(hosts); err != nil {
				return err
			}
			c.AllowedHosts = hosts
			return nil
		},
		def: func(Config) string { return "" },
	},
	durationSetting("console-session-ttl", "IWF_CONSOLE_SESSION_TTL", "how long a console sign-in lasts; the server ends the session then",
		func(c *Config) *time.Duration { return &c.ConsoleSessionTTL }),
	listSetting("worker-url-allow", "IWF_WORKER_URL_ALLOW", "allow worker URLs matching `pattern`: scheme://host[:port][/path] (* in host or port) or a CIDR (repeatable; default: any)",
		func(c *Config) *[]string { return &c.WorkerURLAllow }),
}

// parseRetention reads a retention: a Go duration (90m, 72h) or a number
// of days with the suffix d (30d); 0 keeps closed runs forever.
func parseRetention(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		if err != nil || n < 0 || n > 100*365 {
			return 0, fmt.Errorf("invalid retention %q (e.g. 30d, 72h, 0 for forever)", s)
		}
		return time.Duration(n * float64(24*time.Hour)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("invalid retention %q (e.g. 30d, 72h, 0 for forever)", s)
	}
	return d, nil
}

// retentionSettings say how long closed runs are kept (docs/operations.md).
var retentionSettings = []setting{
	{
		key: "retention", env: "IWF_RETENTION",
		usage: "how long a closed run is kept after it closed, then deleted with its history (a `duration`: 30d, 72h; 0 keeps closed runs forever)",
		apply: func(c *Config, e []string) error {
			d, err := parseRetention(e[0])
			c.Retention = d
			return err
		},
		def: func(c Config) string { return engine.Config{Retention: c.Retention}.RetentionSummary() },
	},
	{
		key: "retention-for", env: "IWF_RETENTION_FOR", multi: true, file: "retention-for",
		usage:    "retention of one workflow type, `Type=DURATION` (7d, 12h; 0 keeps that type forever; repeatable)",
		splitEnv: func(s string) []string { return splitList(s, ",; \t\n") },
		joinKV:   func(k, v string) string { return k + "=" + v },
		apply: func(c *Config, entries []string) error {
			m := map[string]time.Duration{}
			for _, e := range entries {
				typ, ds, ok := strings.Cut(e, "=")
				typ = strings.TrimSpace(typ)
				if !ok || typ == "" {
					return fmt.Errorf("invalid retention-for %q, want Type=DURATION", e)
				}
				d, err := parseRetention(ds)
				if err != nil {
					return fmt.Errorf("retention-for %s: %w", typ, err)
				}
				m[typ] = d
			}
			c.RetentionFor = m
			return nil
		},
		def: func(Config) string { return "" },
	},
	durationSetting("retention-interval", "IWF_RETENTION_INTERVAL", "how often a node deletes the closed runs past their retention (one node at a time on PostgreSQL)",
		func(c *Config) *time.Duration { return &c.RetentionInterval }),
	stringSetting("archive-url", "IWF_ARCHIVE_URL", "archive each expired run to this `URL` before deleting it, and keep it while the write fails: file:///dir, s3://bucket?region=R[&endpoint=URL&use_path_style=true], gs://bucket, azblob://container (default: no archive)",
		func(c *Config) *string { return &c.ArchiveURL }),
}

// externalStorageSettings are iWF's external storage of big payloads
// (docs/configuration.md, "External storage").
var externalStorageSettings = []setting{
	{
		key: "external-storage-url", env: "IWF_EXTERNAL_STORAGE_URL",
		usage: "keep payloads over external-storage-threshold in this blob store, `ID=URL`: ID (letters, digits, - _ .) is the extStoreId of the references the rows keep; URL is file:///dir, s3://bucket?region=R[&endpoint=URL&use_path_style=true], gs://bucket or azblob://container (default: off)",
		// Checked by Validate, whose errors do not echo the URL (the
		// flag package's would, and a URL may hold a secret).
		apply: func(c *Config, e []string) error { c.ExternalStorageURL = strings.TrimSpace(e[0]); return nil },
		def:   func(Config) string { return "" },
	},
	{
		key: "external-storage-read-url", env: "IWF_EXTERNAL_STORAGE_READ_URLS", multi: true, file: "external-storage-read-urls",
		usage:    "an older external store, `ID=URL`, whose payloads stay readable (repeatable; alone, without external-storage-url, payloads are read but none is written)",
		splitEnv: func(s string) []string { return splitList(s, "\n ") },
		joinKV:   func(k, v string) string { return k + "=" + v },
		apply:    func(c *Config, e []string) error { c.ExternalStorageReadURLs = append([]string(nil), e...); return nil },
		def:      func(Config) string { return "" },
	},
	{
		key: "external-storage-threshold", env: "IWF_EXTERNAL_STORAGE_THRESHOLD",
		usage: "a payload whose data is longer than this many `bytes` goes to the external store",
		apply: func(c *Config, e []string) error {
			n, err := strconv.Atoi(strings.TrimSpace(e[0]))
			if err != nil {
				return fmt.Errorf("invalid byte count %q", e[0])
			}
			c.ExternalStorageThreshold = n
			return nil
		},
		def: func(c Config) string { return strconv.Itoa(c.ExternalStorageThreshold) },
	},
	{
		key: "external-storage-max-body-bytes", env: "IWF_EXTERNAL_STORAGE_MAX_BODY_BYTES",
		usage: "largest request body accepted while external storage is on, in `bytes` (replaces max-body-bytes then)",
		apply: func(c *Config, e []string) error {
			n, err := strconv.ParseInt(strings.TrimSpace(e[0]), 10, 64)
			if err != nil {
				return fmt.Errorf("invalid byte count %q", e[0])
			}
			c.ExternalStorageMaxBodyBytes = n
			return nil
		},
		def: func(c Config) string { return strconv.FormatInt(c.ExternalStorageMaxBodyBytes, 10) },
	},
	durationSetting("external-storage-grace", "IWF_EXTERNAL_STORAGE_GRACE", "how long an object written for a request or worker answer whose transaction never committed is kept before the payload sweep deletes it",
		func(c *Config) *time.Duration { return &c.ExternalStorageGrace }),
}

// limitSetting is a repeatable KEY=VALUE setting of a limit: a mapping or
// a list of KEY=VALUE in the file, entries separated by commas in the
// environment.
func limitSetting(key, env, usage string, apply func(c *Config, k, v string) error) setting {
	return setting{
		key: key, env: env, multi: true, file: key, usage: usage,
		splitEnv: func(s string) []string { return splitList(s, ",; \t\n") },
		joinKV:   func(k, v string) string { return k + "=" + v },
		apply: func(c *Config, entries []string) error {
			for _, e := range entries {
				k, v, ok := strings.Cut(strings.TrimSpace(e), "=")
				k, v = strings.TrimSpace(k), strings.TrimSpace(v)
				if !ok || k == "" || v == "" {
					return fmt.Errorf("invalid %s %q, want %s", key, e, strings.Trim(strings.SplitN(usage, "`", 3)[1], "`"))
				}
				if err := apply(c, k, v); err != nil {
					return fmt.Errorf("%s %s: %w", key, e, err)
				}
			}
			return nil
		},
		def: func(Config) string { return "" },
	}
}

// positiveInt parses a limit's count.
func positiveInt(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("invalid value %q: want a positive whole number", v)
	}
	return n, nil
}

// limitSettings are the concurrency and rate limits on worker calls
// (docs/operations.md, "Concurrency and rate limits").
var limitSettings = []setting{
	limitSetting("worker-concurrency", "IWF_WORKER_CONCURRENCY",
		"at most N waitUntil/execute calls in flight to one worker host, across all nodes: `HOST:PORT=N` (repeatable); a starting value: stored at start unless the store holds a limit of this key (`iwf limit` changes it at run time)",
		func(c *Config, k, v string) error {
			n, err := positiveInt(v)
			if err != nil {
				return err
			}
			if c.Limits.WorkerConcurrency == nil {
				c.Limits.WorkerConcurrency = map[string]int{}
			}
			c.Limits.WorkerConcurrency[engine.NormalizeHostPort(k)] = n
			return nil
		}),
	limitSetting("worker-rate", "IWF_WORKER_RATE",
		"at most R waitUntil/execute calls per second to one worker host, across all nodes: `HOST:PORT=R` (R may be a fraction; repeatable); a starting value: stored at start unless the store holds a limit of this key (`iwf limit` changes it at run time)",
		func(c *Config, k, v string) error {
			r, err := strconv.ParseFloat(v, 64)
			if err != nil || !(r > 0) || math.IsInf(r, 0) {
				return fmt.Errorf("invalid rate %q: want a positive number of calls per second", v)
			}
			if c.Limits.WorkerRate == nil {
				c.Limits.WorkerRate = map[string]float64{}
			}
			c.Limits.WorkerRate[engine.NormalizeHostPort(k)] = r
			return nil
		}),
	limitSetting("type-concurrency", "IWF_TYPE_CONCURRENCY",
		"at most N state executions of one workflow type in waitUntil/execute at once, across all nodes: `TYPE=N` (repeatable); a starting value: stored at start unless the store holds a limit of this key (`iwf limit` changes it at run time)",
		func(c *Config, k, v string) error {
			n, err := positiveInt(v)
			if err != nil {
				return err
			}
			if c.Limits.TypeConcurrency == nil {
				c.Limits.TypeConcurrency = map[string]int{}
			}
			c.Limits.TypeConcurrency[k] = n
			return nil
		}),
}

func init() {
	settings = append(settings, limitSettings...)
	settings = append(settings, retentionSettings...)
	settings = append(settings, externalStorageSettings...)
	settings = append(settings, securitySettings...)
	settings = append(settings, durationSetting("shutdown-grace", "IWF_SHUTDOWN_GRACE",
		"on SIGTERM, how long in-flight requests and worker calls may take to finish before they are cancelled and their work handed to other nodes",
		func(c *Config) *time.Duration { return &c.ShutdownGrace }))
	settings = append(settings, boolSetting("ui", "IWF_UI", "serve the web console at /ui/ (--ui=false turns it off)",
		func(c *Config) *bool { return &c.UI }))
}

// fileKeys are the config-file keys; they are the flag names, except that
// the repeatable settings take plural keys.
func fileKey(s setting) string {
	if s.file != "" {
		return s.file
	}
	if s.multi && !strings.HasSuffix(s.key, "s") {
		return s.key + "s"
	}
	return s.key
}

// flagValue collects a setting's command-line values.
type flagValue struct {
	s       *setting
	entries []string
}

// String lists the values given. The flag package also calls it on a zero
// value (a nil *flagValue) to learn the default, which is then "".
func (v *flagValue) String() string {
	if v == nil {
		return ""
	}
	return strings.Join(v.entries, ", ")
}

func (v *flagValue) Set(s string) error {
	if v.s.multi {
		v.entries = append(v.entries, s)
	} else {
		v.entries = []string{s}
	}
	// Check the syntax now so that the flag package names the flag.
	var c Config
	return v.s.apply(&c, v.entries)
}

// boolFlag is a flagValue that may be given without a value.
type boolFlag struct{ *flagValue }

// IsBoolFlag tells the flag package that --name alone means true.
func (boolFlag) IsBoolFlag() bool { return true }

// parseConfig merges defaults, the config file, the environment and args.
// It returns the command ("serve", "migrate" or "version"), the config file
// path used (may be empty) and the validated configuration. The version
// command, and the --version flag with any command, read no configuration:
// they answer whatever the environment holds.
func parseConfig(args []string, lookupEnv func(string) (string, bool), usageOut io.Writer) (cmd, file string, cfg Config, err error) {
	cmd = CommandServe
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case CommandServe, CommandMigrate:
			cmd, args = args[0], args[1:]
		case CommandVersion:
			if len(args) > 1 {
				return "", "", cfg, fmt.Errorf("version takes no arguments, got %q", args[1])
			}
			return CommandVersion, "", DefaultConfig(), nil
		default:
			return "", "", cfg, fmt.Errorf("unknown command %q (want serve, migrate, backup or version)", args[0])
		}
	}

	defaults := DefaultConfig()
	fs := flag.NewFlagSet("iwf-server", flag.ContinueOnError)
	// Errors are returned, not printed; only -h prints the usage.
	fs.SetOutput(io.Discard)
	configFlag := fs.String("config", "", "optional YAML config `file` with the same settings (env IWF_CONFIG)")
	versionFlag := fs.Bool("version", false, "print the release, commit, build date and Go version, and exit")
	values := make([]*flagValue, len(settings))
	for i := range settings {
		s := &settings[i]
		values[i] = &flagValue{s: s}
		usage := s.usage + " (env " + s.env + ")"
		if d := s.def(defaults); d != "" {
			usage += " (default " + d + ")"
		}
		if s.noFlag {
			continue
		}
		if s.isBool {
			fs.Var(boolFlag{values[i]}, s.key, usage)
			continue
		}
		fs.Var(values[i], s.key, usage)
	}
	printUsage := func() {
		fs.SetOutput(usageOut)
		fmt.Fprintf(usageOut, "Usage: iwf-server [serve|migrate|version] [flags]\n\n"+
			"serve (the default) runs the server; migrate applies the database migrations and exits;\n"+
			"version (or --version) prints the release, commit, build date and Go version.\n"+
			"iwf-server backup --db sqlite://PATH --to FILE copies a SQLite store while it serves (backup -help).\n"+
			"Precedence: flag > environment > config file > default.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		printUsage()
		return "", "", cfg, err
	} else if err != nil {
		return "", "", cfg, fmt.Errorf("%v (see iwf-server -help)", err)
	}
	if fs.NArg() > 0 {
		return "", "", cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *versionFlag {
		return CommandVersion, "", DefaultConfig(), nil
	}

	file = *configFlag
	if file == "" {
		file, _ = lookupEnv("IWF_CONFIG")
	}
	var fileEntries map[string][]string
	if file != "" {
		if fileEntries, err = readConfigFile(file); err != nil {
			return "", "", cfg, err
		}
	}

	cfg = defaults
	writeTimeoutSet := false
	for i, s := range settings {
		var (
			entries []string
			source  string
		)
		if v := values[i]; len(v.entries) > 0 {
			entries, source = v.entries, "--"+s.key
		} else if ev, ok := lookupEnv(s.env); ok && strings.TrimSpace(ev) != "" {
			if s.multi {
				entries = s.splitEnv(ev)
			} else {
				entries = []string{ev}
			}
			source = s.env
		} else if fe, ok := fileEntries[fileKey(s)]; ok {
			entries, source = fe, "config file "+file+": "+fileKey(s)
		} else {
			continue
		}
		if err := s.apply(&cfg, entries); err != nil {
			return "", "", cfg, fmt.Errorf("%s: %v", source, err)
		}
		writeTimeoutSet = writeTimeoutSet || s.key == "write-timeout"
	}
	if !writeTimeoutSet {
		// The default grows with a raised max-wait or request-timeout.
		cfg.WriteTimeout = max(cfg.WriteTimeout, cfg.longPollDeadline()+writeTimeoutSpare)
	}
	if err := cfg.Validate(); err != nil {
		return "", "", cfg, err
	}
	return cmd, file, cfg, nil
}

// readConfigFile reads a YAML config file into entries per key, in the
// syntax of the corresponding flag.
func readConfigFile(path string) (map[string][]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %v", err)
	}
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return map[string][]string{}, nil // empty file
		}
		return nil, fmt.Errorf("config file %s: %v", path, err)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("config file %s: want a mapping of settings at the top level", path)
	}
	byKey := map[string]*setting{}
	for i := range settings {
		byKey[fileKey(settings[i])] = &settings[i]
	}
	out := map[string][]string{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		s, ok := byKey[k.Value]
		if !ok {
			return nil, fmt.Errorf("config file %s:%d: unknown key %q (known: %s)", path, k.Line, k.Value, knownKeys())
		}
		where := fmt.Sprintf("config file %s:%d: %s", path, v.Line, k.Value)
		switch {
		case v.Kind == yaml.ScalarNode && !s.multi:
			out[k.Value] = []string{v.Value}
		case v.Kind == yaml.MappingNode && s.multi:
			var entries []string
			for j := 0; j+1 < len(v.Content); j += 2 {
				if v.Content[j+1].Kind != yaml.ScalarNode {
					return nil, fmt.Errorf("%s: the value of %q must be a scalar", where, v.Content[j].Value)
				}
				entries = append(entries, s.joinKV(v.Content[j].Value, v.Content[j+1].Value))
			}
			out[k.Value] = entries
		case v.Kind == yaml.SequenceNode && s.multi:
			var entries []string
			for _, e := range v.Content {
				if e.Kind != yaml.ScalarNode {
					return nil, fmt.Errorf("%s: list entries must be scalars", where)
				}
				entries = append(entries, e.Value)
			}
			out[k.Value] = entries
		case s.multi:
			return nil, fmt.Errorf("%s: want a mapping or a list", where)
		default:
			return nil, fmt.Errorf("%s: want a single value", where)
		}
	}
	return out, nil
}

func knownKeys() string {
	keys := make([]string, 0, len(settings))
	for _, s := range settings {
		keys = append(keys, fileKey(s))
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}
