package console

// Protection of the actions against cross-site requests. An action is a
// POST whose form carries a token: the HMAC, under the console's key, of a
// random nonce kept in an HttpOnly, SameSite=Strict cookie (a signed
// double-submit cookie) and of the console session's id (auth's session
// cookie, when signed in): a token taken from one session's page fails in
// every other session, and after a sign-out. A request that a browser marks as coming from
// another site (Sec-Fetch-Site) or whose Origin or Referer is not this host
// (auth.SameOrigin) is refused before the token is even looked at.

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/iwf-server/iwf-server/internal/auth"
)

const (
	csrfCookie  = "iwf_console_csrf"
	csrfField   = "csrf"
	flashCookie = "iwf_console_flash"
)

// csrfToken returns the token for the forms of a page, setting the nonce
// cookie when the request has none.
func (c *console) csrfToken(w http.ResponseWriter, r *http.Request) string {
	nonce := ""
	if ck, err := r.Cookie(csrfCookie); err == nil && validNonce(ck.Value) {
		nonce = ck.Value
	} else {
		b := make([]byte, 18)
		if _, err := rand.Read(b); err != nil {
			return ""
		}
		nonce = base64.RawURLEncoding.EncodeToString(b)
		http.SetCookie(w, &http.Cookie{
			Name: csrfCookie, Value: nonce, Path: c.opts.Prefix,
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
		})
	}
	return c.sign(nonce, sessionOf(r))
}

// sessionOf is the console session id the request's cookie carries ("" when
// there is none: authentication off, or a request with a bearer token).
func sessionOf(r *http.Request) string {
	if ck, err := r.Cookie(auth.SessionCookie); err == nil {
		return ck.Value
	}
	return ""
}

func validNonce(s string) bool {
	b, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil && len(b) == 18
}

// sign returns the token of nonce within session (its id, "" for none).
// The lengths frame the two, so no pair of values signs as another.
func (c *console) sign(nonce, session string) string {
	m := hmac.New(sha256.New, c.opts.CSRFKey)
	fmt.Fprintf(m, "iwf-console-csrf\x00%d:%s\x00%d:%s", len(nonce), nonce, len(session), session)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkSameOrigin refuses a state-changing request that a browser sent
// from another site (auth.SameOrigin, the rule the API shares), and one
// without a valid CSRF token.
func (c *console) checkSameOrigin(r *http.Request) error {
	if err := auth.SameOrigin(r); err != nil {
		return err
	}
	ck, err := r.Cookie(csrfCookie)
	if err != nil || !validNonce(ck.Value) {
		return errors.New("missing CSRF cookie: reload the page and try again")
	}
	got := r.PostFormValue(csrfField)
	if !hmac.Equal([]byte(got), []byte(c.sign(ck.Value, sessionOf(r)))) {
		return errors.New("invalid CSRF token: reload the page and try again")
	}
	return nil
}

// setFlash leaves a message for the next page this browser renders.
func (c *console) setFlash(w http.ResponseWriter, r *http.Request, ok bool, msg string) {
	v := "e"
	if ok {
		v = "o"
	}
	http.SetCookie(w, &http.Cookie{
		Name: flashCookie, Value: url.QueryEscape(v + msg), Path: c.opts.Prefix, MaxAge: 60,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
}

// takeFlash reads and clears the flash message.
func (c *console) takeFlash(w http.ResponseWriter, r *http.Request) (string, bool) {
	ck, err := r.Cookie(flashCookie)
	if err != nil {
		return "", false
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: "", Path: c.opts.Prefix, MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	v, err := url.QueryUnescape(ck.Value)
	if err != nil || v == "" {
		return "", false
	}
	return v[1:], v[0] == 'o'
}
