package auth

// What a browser may do: the same-origin rule that the API, the console's
// pages, its sign-in and its actions share, and the host names a server
// answers to.

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// ErrCrossSite is the error SameOrigin wraps when it refuses a request.
var ErrCrossSite = errors.New("cross-site request refused")

// SameOrigin returns nil for a request that a browser sent from a page of
// this server, that a person typed or bookmarked, or that no browser sent
// at all (SDKs and curl send none of the headers it reads); it returns an
// error wrapping ErrCrossSite for a request a browser sent from another
// site. A browser's Sec-Fetch-Site must be same-origin or none (same-site
// is another origin too: a sibling subdomain is not this server); an
// Origin, or without one a Referer, must name the request's own Host.
// "Origin: null" (sandboxed frames, data: URLs) is refused.
func SameOrigin(r *http.Request) error {
	switch s := r.Header.Get("Sec-Fetch-Site"); s {
	case "", "same-origin", "none":
	default:
		return fmt.Errorf("%w: the browser sent it from another site (Sec-Fetch-Site: %.20s)", ErrCrossSite, s)
	}
	if o := r.Header.Get("Origin"); o != "" {
		if o == "null" || !sameHost(o, r.Host) {
			return fmt.Errorf("%w: its Origin is not this server", ErrCrossSite)
		}
		return nil
	}
	if ref := r.Header.Get("Referer"); ref != "" && !sameHost(ref, r.Host) {
		return fmt.Errorf("%w: its Referer is another site", ErrCrossSite)
	}
	return nil
}

// sameHost says whether a URL's host (with port) is host.
func sameHost(rawURL, host string) bool {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return false
	}
	return strings.EqualFold(u.Host, host)
}

// HostPolicy is the set of host names a server answers to, whatever the
// port: the loopback names (localhost and loopback IP addresses) and the
// configured ones. It defeats DNS rebinding, where a page of an attacker's
// domain, resolved to 127.0.0.1, reads the answers of a local server: the
// browser sends the attacker's name in the Host header.
type HostPolicy struct {
	any      bool
	exact    map[string]bool
	suffixes []string // ".example.com" for "*.example.com"
}

// NewHostPolicy returns the policy that allows the loopback names and
// allowed: host names ("iwf.example.com"), wildcards of one domain's
// subdomains ("*.example.com"), IP addresses ("10.0.0.5", "::1" or
// "[::1]"), or "*" for any host. Entries carry no port and no scheme.
func NewHostPolicy(allowed []string) (*HostPolicy, error) {
	p := &HostPolicy{exact: map[string]bool{}}
	for _, e := range allowed {
		h := strings.ToLower(strings.TrimSpace(e))
		if h == "*" {
			p.any = true
			continue
		}
		if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
			h = h[1 : len(h)-1]
		}
		if ip := net.ParseIP(h); ip != nil {
			p.exact[ip.String()] = true
			continue
		}
		wild := strings.HasPrefix(h, "*.")
		name := strings.TrimSuffix(strings.TrimPrefix(h, "*."), ".")
		if !validHostName(name) {
			return nil, fmt.Errorf("allowed-hosts: %q is not a host name, *.domain, IP address or *", e)
		}
		if wild {
			p.suffixes = append(p.suffixes, "."+name)
		} else {
			p.exact[name] = true
		}
	}
	return p, nil
}

// validHostName accepts DNS names of letters, digits, hyphens, dots and
// underscores.
func validHostName(s string) bool {
	if s == "" || len(s) > 253 || strings.HasPrefix(s, ".") || strings.Contains(s, "..") {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
			return false
		}
	}
	return true
}

// Allows reports whether a request's Host header (host or host:port) names
// this server. An empty Host (an HTTP/1.0 client) is allowed: a browser
// always sends one.
func (p *HostPolicy) Allows(hostport string) bool {
	if p.any || hostport == "" {
		return true
	}
	h := strings.ToLower(hostport)
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	} else if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	h = strings.TrimSuffix(h, ".")
	if ip := net.ParseIP(h); ip != nil {
		return ip.IsLoopback() || p.exact[ip.String()]
	}
	if h == "localhost" || p.exact[h] {
		return true
	}
	for _, s := range p.suffixes {
		if strings.HasSuffix(h, s) {
			return true
		}
	}
	return false
}

// IsLoopbackAddr reports whether a listen address (host:port) accepts
// connections only from this machine: localhost or a loopback IP address.
// A wildcard address (":8801", "0.0.0.0:8801") is not loopback.
func IsLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
