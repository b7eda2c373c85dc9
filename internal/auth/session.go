package auth

// Console sessions. Signing in to the console with a token starts a
// session: a random id (256 bits from crypto/rand) that the browser keeps in
// an HttpOnly, SameSite=Strict cookie scoped to the console, and that the
// server maps to the token's hash and an expiry. The cookie never holds the
// token. A session ends when it expires (checked by the server, on its
// clock), when the browser signs out, when its token leaves the token set
// (Reload), and when the process stops: sessions live in memory only.

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"sync"
	"time"
)

// SessionCookie is the cookie in which the web console keeps its session
// id.
const SessionCookie = "iwf_console_session"

// legacyTokenCookie is where earlier versions kept the token itself; a
// sign-in or sign-out deletes it from the browser.
const legacyTokenCookie = "iwf_console_token"

// DefaultSessionTTL is how long a console session lasts when
// Options.SessionTTL is 0.
const DefaultSessionTTL = 12 * time.Hour

// maxSessions bounds the sessions kept: a sign-in beyond it ends the
// session closest to its expiry. Only token holders can sign in, so the
// bound guards against a script, not a crowd.
const maxSessions = 10000

// session is what the server knows of a signed-in browser.
type session struct {
	token   [sha256.Size]byte // the hash of the token it was started with
	expires time.Time
}

// sessions maps the SHA-256 of session ids to sessions; the ids themselves
// are not kept.
type sessions struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]session
}

// start records a new session for the token whose hash is token and
// returns its id.
func (s *sessions) start(token [sha256.Size]byte, expires, now time.Time) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	id := base64.RawURLEncoding.EncodeToString(b)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[[sha256.Size]byte]session{}
	}
	if len(s.m) >= maxSessions {
		s.pruneLocked(now, nil)
	}
	if len(s.m) >= maxSessions {
		var oldest [sha256.Size]byte
		first := true
		for k, v := range s.m {
			if first || v.expires.Before(s.m[oldest].expires) {
				oldest, first = k, false
			}
		}
		delete(s.m, oldest)
	}
	s.m[sha256.Sum256([]byte(id))] = session{token: token, expires: expires}
	return id, nil
}

// lookup returns the token hash of the live session id names. An expired
// session is forgotten.
func (s *sessions) lookup(id string, now time.Time) ([sha256.Size]byte, bool) {
	if id == "" {
		return [sha256.Size]byte{}, false
	}
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[k]
	if !ok {
		return [sha256.Size]byte{}, false
	}
	if !now.Before(v.expires) {
		delete(s.m, k)
		return [sha256.Size]byte{}, false
	}
	return v.token, true
}

// end forgets the session id names.
func (s *sessions) end(id string) {
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	delete(s.m, k)
	s.mu.Unlock()
}

// pruneLocked forgets, unless now is zero, the sessions expired at now and,
// unless keep is nil, those whose token keep does not accept.
func (s *sessions) pruneLocked(now time.Time, keep func([sha256.Size]byte) bool) {
	for k, v := range s.m {
		if (!now.IsZero() && !now.Before(v.expires)) || (keep != nil && !keep(v.token)) {
			delete(s.m, k)
		}
	}
}

// count returns the number of sessions kept, live or not yet pruned.
func (s *sessions) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// Sessions returns the number of console sessions the server keeps.
func (t *Tokens) Sessions() int { return t.sessions.count() }

// hasHash reports whether the token whose hash is h is in force.
func (t *Tokens) hasHash(h [sha256.Size]byte) bool {
	_, ok := t.byHash(h)
	return ok
}

// byHash returns who holds the token whose hash is h.
func (t *Tokens) byHash(h [sha256.Size]byte) (Principal, bool) {
	for _, e := range *t.entries.Load() {
		if e.hash == h {
			return e.who, true
		}
	}
	return Principal{}, false
}

// sessionPrincipal returns who holds the token of the live session the
// request's cookie names, if its token is still in force.
func (t *Tokens) sessionPrincipal(r *http.Request, opts Options) (Principal, bool) {
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return Principal{}, false
	}
	h, ok := t.sessions.lookup(c.Value, opts.now())
	if !ok {
		return Principal{}, false
	}
	return t.byHash(h)
}

// SignOut returns a handler function that ends the session of the
// request's cookie and deletes the cookie. It checks nothing: the caller
// (the console's sign-out action) has checked that the request comes from
// the console's own page.
func (t *Tokens) SignOut(opts Options) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		if c, err := r.Cookie(SessionCookie); err == nil {
			t.sessions.end(c.Value)
		}
		clearCookies(w, opts, SessionCookie, legacyTokenCookie)
	}
}

// clearCookies deletes the named cookies of the console from the browser.
func clearCookies(w http.ResponseWriter, opts Options, names ...string) {
	for _, name := range names {
		http.SetCookie(w, &http.Cookie{
			Name: name, Value: "", Path: opts.ConsolePrefix, MaxAge: -1,
			HttpOnly: true, Secure: opts.SecureCookie, SameSite: http.SameSiteStrictMode,
		})
	}
}
