// Package auth guards the HTTP API with bearer tokens. It owns the token
// set (read from a file and the environment, re-read on demand), the
// middleware that checks every request, and the web console's sign-in
// page, which starts a console session (session.go): the browser keeps a
// random session id in a cookie scoped to the console, never the token.
// SameOrigin and HostPolicy (origin.go) say which requests a browser may
// make.
//
// A request carries its token as "Authorization: Bearer <token>". Tokens
// are compared in constant time, and never logged. Paths that stay open:
// GET / (the hello text), /info/healthcheck, /metrics unless
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
	file   string
	inline []string
	hashes atomic.Pointer[[][sha256.Size]byte]
	// sessions are the console's sessions; a Reload ends those whose token
	// it removed.
	sessions sessions
}

// Load reads the tokens of file (one per line; blank lines and lines
// starting with # are ignored; "" means no file) and adds inline (e.g.
// IWF_AUTH_TOKENS split at commas). At least one token is required, each
// at least MinTokenLength bytes without spaces. Errors never repeat a
// token.
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
	var all []string
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
			if err := checkToken(line); err != nil {
				return fmt.Errorf("auth-token-file %s line %d: %v", t.file, n, err)
			}
			all = append(all, line)
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
		all = append(all, tok)
	}
	if len(all) == 0 {
		return errors.New("auth: no tokens (the token file is empty and IWF_AUTH_TOKENS is unset)")
	}
	hashes := make([][sha256.Size]byte, len(all))
	for i, tok := range all {
		hashes[i] = sha256.Sum256([]byte(tok))
	}
	t.hashes.Store(&hashes)
	t.sessions.mu.Lock()
	t.sessions.pruneLocked(time.Time{}, t.hasHash)
	t.sessions.mu.Unlock()
	return nil
}

// Count returns the number of tokens in force.
func (t *Tokens) Count() int { return len(*t.hashes.Load()) }

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

// Valid reports whether token is one of the set. It compares hashes in
// constant time against every token, so the time taken says nothing about
// which token, or how much of one, matched.
func (t *Tokens) Valid(token string) bool {
	if token == "" {
		return false
	}
	h := sha256.Sum256([]byte(token))
	ok := 0
	for _, want := range *t.hashes.Load() {
		ok |= subtle.ConstantTimeCompare(h[:], want[:])
	}
	return ok == 1
}

// Options configure Middleware.
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
	metricsPath = "/metrics"
	// LoginPath, under the console prefix, is the sign-in page.
	LoginPath = "login"
)

// Middleware returns a handler that lets through only requests with a
// valid token, except on the open paths. An API request without one gets
// 401 with an iWF ErrorResponse body and WWW-Authenticate: Bearer; a
// console page redirects to the sign-in page.
func (t *Tokens) Middleware(opts Options) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		login := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.serveLogin(w, r, opts) })
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := r.URL.Path
			console := opts.ConsolePrefix != "" && strings.HasPrefix(p, opts.ConsolePrefix)
			switch {
			case p == "/" || p == healthPath || (p == metricsPath && !opts.ProtectMetrics):
				next.ServeHTTP(w, r)
				return
			case console && p == opts.ConsolePrefix+LoginPath:
				login.ServeHTTP(w, r)
				return
			}
			tok, hasHeader := bearer(r)
			if !hasHeader && console && t.validSession(r, opts) {
				next.ServeHTTP(w, r)
				return
			}
			if t.Valid(tok) {
				next.ServeHTTP(w, r)
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
