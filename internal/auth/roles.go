package auth

// Roles and identities. A token file line may name its token and give it
// a role; a client certificate's subject may be mapped to a role. What a
// role may do is decided per route by the access table (access.go).

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// Permission is what a route needs: one of PermRead, PermWrite and
// PermOperate, or 0 for an open route.
type Permission uint8

// The permissions.
const (
	// PermRead: get, search, describe, history, dump, attributes, the
	// console's pages.
	PermRead Permission = 1 << iota
	// PermWrite: what applications do — start, signal, publish, RPC,
	// attribute writes, the long polls that wait for a run or a state.
	PermWrite
	// PermOperate: what operators do — stop, reset, skip timer, config
	// update, continue-as-new, pause and resume, and batch operations.
	PermOperate
)

// Role is a named set of permissions.
type Role string

// The roles of a token file line or a certificate mapping.
const (
	// RoleReader may read: PermRead.
	RoleReader Role = "reader"
	// RoleWriter is an application's role: PermRead and PermWrite.
	RoleWriter Role = "writer"
	// RoleOperator is an on-call person's role: PermRead and PermOperate.
	RoleOperator Role = "operator"
	// RoleAll is full access, the role of a bare token: every permission.
	RoleAll Role = "all"
)

// roles lists the permissions of each role.
var roles = map[Role]Permission{
	RoleReader:   PermRead,
	RoleWriter:   PermRead | PermWrite,
	RoleOperator: PermRead | PermOperate,
	RoleAll:      PermRead | PermWrite | PermOperate,
}

// ParseRole reads a role name (reader, writer, operator or all).
func ParseRole(s string) (Role, error) {
	r := Role(strings.ToLower(strings.TrimSpace(s)))
	if _, ok := roles[r]; !ok {
		return "", fmt.Errorf("unknown role %q: want reader, writer, operator or all", s)
	}
	return r, nil
}

// Grants reports whether the role has permission p (every role has 0).
func (r Role) Grants(p Permission) bool {
	return roles[r]&p == p
}

// String names the least role that has the permission: reader, writer or
// operator ("none" for an open route).
func (p Permission) String() string {
	switch p {
	case 0:
		return "none"
	case PermRead:
		return string(RoleReader)
	case PermWrite:
		return string(RoleWriter)
	case PermOperate:
		return string(RoleOperator)
	}
	return string(RoleAll)
}

// The actors of requests without a name.
const (
	// AnonymousActor is the actor when authentication is off.
	AnonymousActor = "anonymous"
	// BareTokenActor is the actor of a token without a name (a bare token
	// file line or an IWF_AUTH_TOKENS entry).
	BareTokenActor = "token"
)

// Principal is who makes a request: its actor (a token's name, "token" for
// a bare token, a client certificate's subject, "anonymous" without
// authentication) and its role.
type Principal struct {
	Actor string
	Role  Role
}

// Can reports whether the principal has permission p.
func (p Principal) Can(perm Permission) bool { return p.Role.Grants(perm) }

type principalKey struct{}

// WithPrincipal returns a context carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalOf returns the principal the guard found for a request, and
// false when no guard ran (a server without authentication set up by a
// test or an embedding program).
func PrincipalOf(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// maxNameLength bounds a token's name.
const maxNameLength = 64

// checkName accepts token names of letters, digits and . _ @ - : (no "=",
// so that a name never looks like a certificate subject).
func checkName(name string) error {
	if name == "" || len(name) > maxNameLength {
		return fmt.Errorf("a token name must be 1 to %d characters", maxNameLength)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._@-:", r)) {
			return fmt.Errorf("token name %q: use letters, digits and . _ @ - : only", name)
		}
	}
	if name == AnonymousActor || name == BareTokenActor {
		return fmt.Errorf("token name %q is reserved", name)
	}
	return nil
}

// CertRoles maps client certificate subjects (their common name, or "*"
// for any other certificate the client CAs verified) to roles.
type CertRoles map[string]Role

// ParseCertRoles reads entries of the form COMMON_NAME=ROLE ("*=ROLE" for
// every other verified certificate).
func ParseCertRoles(entries []string) (CertRoles, error) {
	m := CertRoles{}
	for _, e := range entries {
		cn, role, ok := strings.Cut(e, "=")
		cn = strings.TrimSpace(cn)
		if !ok || cn == "" {
			return nil, fmt.Errorf("invalid client role %q, want COMMON_NAME=ROLE (reader, writer, operator or all)", e)
		}
		r, err := ParseRole(role)
		if err != nil {
			return nil, fmt.Errorf("client role of %s: %v", cn, err)
		}
		if _, dup := m[cn]; dup {
			return nil, fmt.Errorf("client role of %s given twice", cn)
		}
		m[cn] = r
	}
	return m, nil
}

// Entries returns the mapping as COMMON_NAME=ROLE entries, sorted.
func (c CertRoles) Entries() []string {
	out := make([]string, 0, len(c))
	for cn, r := range c {
		out = append(out, cn+"="+string(r))
	}
	sort.Strings(out)
	return out
}

// role returns the role of a certificate.
func (c CertRoles) role(cert *x509.Certificate) (Role, bool) {
	if r, ok := c[cert.Subject.CommonName]; ok && cert.Subject.CommonName != "" {
		return r, true
	}
	r, ok := c["*"]
	return r, ok
}

// verifiedClientCert returns the client certificate of a request made over
// mutual TLS whose chain the server verified, or nil.
func verifiedClientCert(r *http.Request) *x509.Certificate {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return nil
	}
	return r.TLS.VerifiedChains[0][0]
}

// certActor is the actor of a client certificate: its subject as an RFC
// 2253 string, "CN=ops-bot,O=Example".
func certActor(cert *x509.Certificate) string {
	if s := cert.Subject.String(); s != "" {
		return s
	}
	return "certificate serial " + cert.SerialNumber.String()
}
