// Package workerpolicy decides which worker URLs the server may call. It
// owns the operator's allow-list (--worker-url-allow), the addresses that
// are never called (link-local and cloud-metadata addresses, unspecified
// addresses), and the checks at both moments that matter: when a request
// names a worker URL (start, reset, RPC), and when a connection is about to
// be made to the address a host name resolved to, so that DNS cannot point
// an allowed name somewhere else.
package workerpolicy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// deniedPrefixes are never called, whatever the allow-list says: the
// link-local ranges (169.254.169.254 is the metadata service of most
// clouds), AWS's IPv6 metadata address, and the unspecified addresses.
var deniedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("fd00:ec2::254/128"),
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("::/128"),
}

// Policy is the set of worker URLs the server may call. The zero value
// and nil allow every well-formed URL except the denied addresses.
type Policy struct {
	patterns []urlPattern
	cidrs    []netip.Prefix
	allow    []string // as given, for messages
}

// urlPattern is one scheme://host[:port][/path] entry of the allow-list.
type urlPattern struct {
	scheme string
	host   *regexp.Regexp
	port   string // "" any
	path   string // "" any; else a path prefix without a trailing slash
}

// New builds a policy from allow-list entries. Each entry is either a URL
// pattern, scheme://host[:port][/path], where host may contain * (any run
// of name characters, dots included: *.svc.cluster.local), port is a
// number or * (absent means the scheme's default port), and a path limits
// calls to that path and below; or an IP network in CIDR notation
// (10.0.0.0/8) or a single IP address, which allows any http(s) URL whose
// host is, or resolves to, an address inside it. No entries means no
// allow-list.
func New(allow []string) (*Policy, error) {
	p := &Policy{}
	for _, raw := range allow {
		e := strings.TrimSpace(raw)
		if e == "" {
			continue
		}
		p.allow = append(p.allow, e)
		if !strings.Contains(e, "://") {
			pfx, err := parseNetwork(e)
			if err != nil {
				return nil, fmt.Errorf("worker-url-allow %q: want scheme://host[:port][/path], a CIDR or an IP address", e)
			}
			p.cidrs = append(p.cidrs, pfx)
			continue
		}
		pat, err := parsePattern(e)
		if err != nil {
			return nil, fmt.Errorf("worker-url-allow %q: %v", e, err)
		}
		p.patterns = append(p.patterns, pat)
	}
	return p, nil
}

func parseNetwork(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		pfx, err := netip.ParsePrefix(s)
		return pfx.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), nil
}

var hostGlob = regexp.MustCompile(`^[a-zA-Z0-9.*\-\[\]:]+$`)

func parsePattern(s string) (urlPattern, error) {
	scheme, rest, _ := strings.Cut(s, "://")
	scheme = strings.ToLower(scheme)
	if scheme != "http" && scheme != "https" {
		return urlPattern{}, errors.New("the scheme must be http or https")
	}
	hostport, path, _ := strings.Cut(rest, "/")
	if strings.ContainsAny(hostport, "?#@") || strings.ContainsAny(path, "?#") {
		return urlPattern{}, errors.New("a pattern has no user info, query or fragment")
	}
	host, port := hostport, defaultPort(scheme)
	if i := strings.LastIndex(hostport, ":"); i >= 0 && !strings.HasSuffix(hostport, "]") {
		host, port = hostport[:i], hostport[i+1:]
		if port == "*" {
			port = ""
		} else if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return urlPattern{}, fmt.Errorf("bad port %q", port)
		}
	}
	host = strings.ToLower(strings.Trim(host, "[]"))
	if host == "" || !hostGlob.MatchString(host) {
		return urlPattern{}, fmt.Errorf("bad host %q", host)
	}
	re := "^" + strings.ReplaceAll(regexp.QuoteMeta(host), `\*`, `[a-z0-9.\-]+`) + "$"
	path = strings.TrimRight(path, "/")
	if path != "" {
		path = "/" + path
	}
	return urlPattern{scheme: scheme, host: regexp.MustCompile(re), port: port, path: path}, nil
}

func defaultPort(scheme string) string {
	if scheme == "https" {
		return "443"
	}
	return "80"
}

// Restricted reports whether an allow-list is set.
func (p *Policy) Restricted() bool { return p != nil && (len(p.patterns) > 0 || len(p.cidrs) > 0) }

// String lists the allow-list as given.
func (p *Policy) String() string {
	if !p.Restricted() {
		return "any worker URL"
	}
	return strings.Join(p.allow, ", ")
}

// Check reports why the server must not call a worker at rawURL, or nil.
// The URL must be absolute http or https, with a host and without user
// info, query or fragment; a host that is an IP address must not be a
// denied one; and with an allow-list, the URL must match a pattern, or its
// host must be an address inside an allowed network, or a name that
// resolves only to such addresses (looked up now, and again at every
// connection).
func (p *Policy) Check(ctx context.Context, rawURL string) error {
	u, err := parseWorkerURL(rawURL)
	if err != nil {
		return err
	}
	host := strings.ToLower(u.Hostname())
	if a, err := netip.ParseAddr(host); err == nil {
		if denied(a) {
			return fmt.Errorf("worker URL %q: the address %s is never called (link-local, cloud metadata or unspecified)", rawURL, a)
		}
	}
	if !p.Restricted() || p.matchPattern(u) {
		return nil
	}
	if len(p.cidrs) > 0 {
		if a, err := netip.ParseAddr(host); err == nil {
			if p.inNetworks(a) {
				return nil
			}
		} else if addrs, err := lookup(ctx, host); err == nil && len(addrs) > 0 && p.allInNetworks(addrs) {
			return nil
		}
	}
	return fmt.Errorf("worker URL %q is not allowed by --worker-url-allow (%s)", rawURL, p)
}

// parseWorkerURL checks the form of a worker URL.
func parseWorkerURL(rawURL string) (*url.URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" || u.User != nil ||
		u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "" {
		return nil, fmt.Errorf("worker URL %q must be an absolute http:// or https:// URL with a host and without user info, query or fragment", rawURL)
	}
	if ambiguousPath(u) {
		return nil, fmt.Errorf("worker URL %q must not contain . or .. path segments or encoded slashes", rawURL)
	}
	return u, nil
}

// ambiguousPath reports whether u's path has a "." or ".." segment, also
// percent-encoded, or an encoded slash or backslash. A worker behind a
// proxy that normalises paths would serve such a URL from another path
// than the one an allow-list entry names.
func ambiguousPath(u *url.URL) bool {
	escaped := strings.ToLower(u.EscapedPath())
	if strings.Contains(escaped, "%2f") || strings.Contains(escaped, "%5c") || strings.Contains(u.Path, "\\") {
		return true
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// matchPattern reports whether u matches a URL pattern of the allow-list.
func (p *Policy) matchPattern(u *url.URL) bool {
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if port == "" {
		port = defaultPort(u.Scheme)
	}
	path := strings.TrimRight(u.EscapedPath(), "/")
	for _, pat := range p.patterns {
		if pat.scheme != u.Scheme || !pat.host.MatchString(host) || (pat.port != "" && pat.port != port) {
			continue
		}
		if pat.path == "" || path == pat.path || strings.HasPrefix(path, pat.path+"/") {
			return true
		}
	}
	return false
}

func (p *Policy) inNetworks(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	for _, pfx := range p.cidrs {
		if pfx.Contains(a) {
			return true
		}
	}
	return false
}

func (p *Policy) allInNetworks(addrs []netip.Addr) bool {
	for _, a := range addrs {
		if !p.inNetworks(a) {
			return false
		}
	}
	return true
}

// denied reports whether a is never called. The zone of a scoped IPv6
// address (fe80::1%eth0) is dropped first: a prefix never contains a zoned
// address, so without that every zoned address would pass.
func denied(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	for _, pfx := range deniedPrefixes {
		if pfx.Contains(a) {
			return true
		}
	}
	return false
}

func lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

type ctxKey struct{}

// ForCall returns the context a call to rawURL dials with: it tells the
// dialer whether the connection's address must lie inside an allowed
// network (the URL matched no pattern of the allow-list), and is an error
// when the URL may not be called at all.
func (p *Policy) ForCall(ctx context.Context, rawURL string) (context.Context, error) {
	u, err := parseWorkerURL(rawURL)
	if err != nil {
		return ctx, err
	}
	needNetwork := p.Restricted() && !p.matchPattern(u)
	if needNetwork && len(p.cidrs) == 0 {
		return ctx, fmt.Errorf("worker URL %q is not allowed by --worker-url-allow (%s)", rawURL, p)
	}
	return context.WithValue(ctx, ctxKey{}, needNetwork), nil
}

// Control is a net.Dialer Control function: it refuses a connection to a
// denied address, and, for a call whose URL matched no pattern, to an
// address outside the allowed networks. It runs after name resolution, on
// the address actually dialled.
func (p *Policy) Control(ctx context.Context) func(network, address string, c syscall.RawConn) error {
	needNetwork, _ := ctx.Value(ctxKey{}).(bool)
	return func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("worker call to %s refused: %v", address, err)
		}
		a := ap.Addr()
		if denied(a) {
			return fmt.Errorf("worker call to %s refused: link-local, cloud metadata and unspecified addresses are never called", a)
		}
		if needNetwork && !p.inNetworks(a) {
			return fmt.Errorf("worker call to %s refused: the address is outside the networks of --worker-url-allow", a)
		}
		return nil
	}
}
