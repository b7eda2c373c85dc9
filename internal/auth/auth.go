// Package auth guards the HTTP API with bearer tokens and decides what
// each caller may do. It owns the token set (read from a file and the
// environment, re-read on demand; a file line is TOKEN or TOKEN NAME
// ROLE), the guard that finds who makes each request — a token, a console
// session, a client certificate — and puts that Principal in the
// request's context, the access table (access.go: the permission each
// route of the API and the console needs, and the calls the audit log
// records), and the web console's sign-in page, which starts a console
// session (session.go): the browser keeps a random session id in a cookie
// scoped to the console, never the token. SameOrigin and HostPolicy
// (origin.go) say which requests a browser may make.
//
// A request carries its token as "Authorization: Bearer <token>". Tokens
// are compared in constant time, and never logged. Paths that stay open:
// GET / (the hello text), /info/healthcheck, /info/version, /metrics unless
// Options.ProtectMetrics, and the console's sign-in page.
package auth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// MinTokenLength is the shortest token accepted: a shorter one is a typo
// or too easy to guess.
const MinTokenLength = 16

// Tokens is the set of accepted API tokens. It is safe for concurrent use;
// Reload replaces the whole set at once.
type Tokens struct {
	file    string
	inline  []string
	entries atomic.Pointer[[]tokenEntry]
	// sessions are the console's sessions; a Reload ends those whose token
	// it removed.
	sessions sessions
}

// tokenEntry is one accepted token: its hash, never the token, and who
// holds it.
type tokenEntry struct {
	hash [sha256.Size]byte
	who  Principal
}

// Load reads the tokens of file ("" means no file) and adds inline (e.g.
// IWF_AUTH_TOKENS split at commas), which have full access. A file line is
// TOKEN (full access) or TOKEN NAME ROLE, whitespace-separated; blank lines
// and lines starting with # are ignored. At least one token is required,
// each at least MinTokenLength bytes without spaces; names are unique.
// Errors name the line and never repeat a token.
func Load(file string, inline []string) (*Tokens, error) {
	t := &Tokens{file: file, inline: append([]string(nil), inline...)}
	if err := t.Reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// Reload reads the token file again and replaces the set. On error the
// previous set stays in force.
func (t *Tokens) Reload() error {
	var all []tokenEntry
	seen := map[[sha256.Size]byte]string{} // hash -> where
	names := map[string]int{}              // name -> line
	add := func(tok string, who Principal, where string) error {
		h := sha256.Sum256([]byte(tok))
		if prev, dup := seen[h]; dup {
			return fmt.Errorf("%s: the same token as %s", where, prev)
		}
		seen[h] = where
		all = append(all, tokenEntry{hash: h, who: who})
		return nil
	}
	if t.file != "" {
		data, err := os.ReadFile(t.file)
		if err != nil {
			return fmt.Errorf("auth-token-file: %w", err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			where := fmt.Sprintf("auth-token-file %s line %d", t.file, n)
			tok, who, err := parseTokenLine(line)
			if err != nil {
				return fmt.Errorf("%s: %v", where, err)
			}
			if who.Actor != BareTokenActor {
				if prev, dup := names[who.Actor]; dup {
					return fmt.Errorf("%s: the name %s is already used on line %d", where, who.Actor, prev)
				}
				names[who.Actor] = n
			}
			if err := add(tok, who, fmt.Sprintf("line %d", n)); err != nil {
				return fmt.Errorf("auth-token-file %s line %d: %v", t.file, n, err)
			}
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("auth-token-file %s: %w", t.file, err)
		}
	}
	for i, tok := range t.inline {
		tok = strings.TrimSpace(tok)
		if err := checkToken(tok); err != nil {
			return fmt.Errorf("IWF_AUTH_TOKENS entry %d: %v", i+1, err)
		}
		if err := add(tok, Principal{Actor: BareTokenActor, Role: RoleAll}, fmt.Sprintf("IWF_AUTH_TOKENS entry %d", i+1)); err != nil {
			return err
		}
	}
	if len(all) == 0 {
		return errors.New("auth: no tokens (the token file is empty and IWF_AUTH_TOKENS is unset)")
	}
	t.entries.Store(&all)
	t.sessions.mu.Lock()
	t.sessions.pruneLocked(time.Time{}, t.hasHash)
	t.sessions.mu.Unlock()
	return nil
}

// parseTokenLine reads a token file line: TOKEN, or TOKEN NAME ROLE.
func parseTokenLine(line string) (string, Principal, error) {
	f := strings.Fields(line)
	switch len(f) {
	case 1:
		if err := checkToken(f[0]); err != nil {
			return "", Principal{}, err
		}
		return f[0], Principal{Actor: BareTokenActor, Role: RoleAll}, nil
	case 3:
		if err := checkToken(f[0]); err != nil {
			return "", Principal{}, err
		}
		if err := checkName(f[1]); err != nil {
			return "", Principal{}, err
		}
		role, err := ParseRole(f[2])
		if err != nil {
			return "", Principal{}, fmt.Errorf("token %s: %v", f[1], err)
		}
		return f[0], Principal{Actor: f[1], Role: role}, nil
	}
	return "", Principal{}, fmt.Errorf("want TOKEN or TOKEN NAME ROLE (whitespace-separated), found %d fields "+
		"(a token must not contain spaces)", len(f))
}

// Count returns the number of tokens in force.
func (t *Tokens) Count() int { return len(*t.entries.Load()) }

func checkToken(tok string) error {
	if len(tok) < MinTokenLength {
		return fmt.Errorf("a token must be at least %d bytes long", MinTokenLength)
	}
	for _, r := range tok {
		if r <= ' ' || r == 0x7f {
			return errors.New("a token must not contain spaces or control characters")
		}
	}
	return nil
}

// Valid reports whether token is one of the set.
func (t *Tokens) Valid(token string) bool {
	_, ok := t.lookup(token)
	return ok
}

// lookup returns who holds token. It compares hashes in constant time
// against every token, so the time taken says nothing about which token,
// or how much of one, matched.
func (t *Tokens) lookup(token string) (Principal, bool) {
	if token == "" {
		return Principal{}, false
	}
	h := sha256.Sum256([]byte(token))
	var who Principal
	ok := 0
	for _, e := range *t.entries.Load() {
		eq := subtle.ConstantTimeCompare(h[:], e.hash[:])
		if eq == 1 {
			who = e.who
		}
		ok |= eq
	}
	return who, ok == 1
}

// Options configure Guard.
type Options struct {
	// ProtectMetrics requires a token for GET /metrics too.
	ProtectMetrics bool
	// ConsolePrefix is where the web console is served ("/ui/"); its pages
	// accept a session from SessionCookie and send a browser without one
	// to the sign-in page. Empty means no console.
	ConsolePrefix string
	// SecureCookie marks the console cookie Secure (set when serving TLS).
	SecureCookie bool
	// SessionTTL is how long a console session lasts after sign-in
	// (default DefaultSessionTTL).
	SessionTTL time.Duration
	// Now is the clock of session expiry (default time.Now).
	Now func() time.Time
	// CertRoles, when set, maps the subjects of verified client
	// certificates (mutual TLS) to roles; see Guard.
	CertRoles CertRoles
}

func (o Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

func (o Options) sessionTTL() time.Duration {
	if o.SessionTTL > 0 {
		return o.SessionTTL
	}
	return DefaultSessionTTL
}

// Paths that never need a token.
const (
	healthPath  = "/info/healthcheck"
	versionPath = "/info/version"
	metricsPath = "/metrics"
	// LoginPath, under the console prefix, is the sign-in page.
	LoginPath = "login"
)

// Middleware is Guard(t, opts).
func (t *Tokens) Middleware(opts Options) func(http.Handler) http.Handler {
	return Guard(t, opts)
}

// Guard returns the middleware that finds who makes each request and puts
// that Principal in the request's context (see PrincipalOf); the access
// table then decides what the principal may do (Policy, applied by the
// HTTP layer). tokens may be nil: authentication is then off.
//
// The open paths (GET /, the health check, the version, /metrics unless
// ProtectMetrics, the console's sign-in page) pass without a principal.
// Otherwise, in this order:
//   - an Authorization: Bearer header must name a token of the set, whose
//     name and role it carries (a bare token: "token", full access);
//   - a console page accepts the session of its cookie, with the role of
//     the token it was started with;
//   - a client certificate verified by the client CAs (mutual TLS) is
//     mapped to a role by Options.CertRoles; without a mapping it has full
//     access when tokens are off, and counts for nothing when they are on;
//   - without tokens, the request is anonymous with full access.
//
// An API request that none of these identifies gets 401 with an iWF
// ErrorResponse body and WWW-Authenticate: Bearer; a console page
// redirects to the sign-in page.
func Guard(t *Tokens, opts Options) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		login := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.serveLogin(w, r, opts) })
		pass := func(w http.ResponseWriter, r *http.Request, p Principal) {
			next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := r.URL.Path
			console := opts.ConsolePrefix != "" && strings.HasPrefix(p, opts.ConsolePrefix)
			switch {
			case p == "/" || p == healthPath || p == versionPath || (p == metricsPath && (!opts.ProtectMetrics || t == nil)):
				// Public for what they serve, GET (and HEAD); another method
				// is answered as the router would, 405, rather than asked
				// for a token or refused a role that nothing needs.
				if r.Method != http.MethodGet && r.Method != http.MethodHead {
					w.Header().Set("Allow", "GET, HEAD")
					writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed for %s", r.Method, p))
					return
				}
				next.ServeHTTP(w, r)
				return
			case t != nil && console && p == opts.ConsolePrefix+LoginPath:
				login.ServeHTTP(w, r)
				return
			}
			tok, hasHeader := bearer(r)
			if t != nil && hasHeader {
				if who, ok := t.lookup(tok); ok {
					pass(w, r, who)
					return
				}
			}
			if t != nil && !hasHeader && console {
				if who, ok := t.sessionPrincipal(r, opts); ok {
					pass(w, r, who)
					return
				}
			}
			if cert := verifiedClientCert(r); cert != nil && !(t != nil && hasHeader) {
				if opts.CertRoles != nil {
					if role, ok := opts.CertRoles.role(cert); ok {
						pass(w, r, Principal{Actor: certActor(cert), Role: role})
						return
					}
					if t == nil {
						writeError(w, http.StatusForbidden, fmt.Sprintf(
							"forbidden: client certificate %s has no role (tls-client-roles)", certActor(cert)))
						return
					}
				} else if t == nil {
					pass(w, r, Principal{Actor: certActor(cert), Role: RoleAll})
					return
				}
			}
			if t == nil {
				if opts.CertRoles != nil {
					writeError(w, http.StatusUnauthorized, "a client certificate is required")
					return
				}
				pass(w, r, Principal{Actor: AnonymousActor, Role: RoleAll})
				return
			}
			if console && !hasHeader {
				// A page goes back to itself after sign-in; an action (a
				// POST whose session ended) goes to the console's start.
				next := opts.ConsolePrefix
				if r.Method == http.MethodGet || r.Method == http.MethodHead {
					next = r.URL.RequestURI()
				}
				http.Redirect(w, r, opts.ConsolePrefix+LoginPath+"?next="+urlQueryEscape(next), http.StatusSeeOther)
				return
			}
			detail := "missing bearer token: send Authorization: Bearer <token>"
			if tok != "" {
				detail = "invalid token"
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="iwf-server"`)
			writeError(w, http.StatusUnauthorized, detail)
		})
	}
}

// bearer returns the token of an Authorization: Bearer header, and
// whether the request had an Authorization header at all.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", false
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", true
	}
	return strings.TrimSpace(tok), true
}

// writeError answers with iWF's ErrorResponse shape.
func writeError(w http.ResponseWriter, status int, detail string) {
	body, _ := json.Marshal(map[string]string{"detail": detail})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
