package auth_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/internal/auth"
)

// A token file mixes bare tokens (full access) and named ones with a role;
// the guard puts each one's name and role in the request's context.
func TestTokenRoles(t *testing.T) {
	file := writeFile(t, "# bare\n"+tokA+"\n"+tokB+"  dashboard\treader\n"+tokC+" ci-bot WRITER\n")
	toks, err := auth.Load(file, []string{"inline-token-0123456789"})
	if err != nil {
		t.Fatal(err)
	}
	var got auth.Principal
	h := toks.Middleware(auth.Options{ConsolePrefix: "/ui/"})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := auth.PrincipalOf(r.Context())
		if !ok {
			t.Error("no principal")
		}
		got = p
	}))
	for tok, want := range map[string]auth.Principal{
		tokA:                      {Actor: "token", Role: auth.RoleAll},
		tokB:                      {Actor: "dashboard", Role: auth.RoleReader},
		tokC:                      {Actor: "ci-bot", Role: auth.RoleWriter},
		"inline-token-0123456789": {Actor: "token", Role: auth.RoleAll},
	} {
		req := httptest.NewRequest("POST", "/api/v1/workflow/get", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 || got != want {
			t.Errorf("token %s: %d %+v, want %+v", tok[:8], rec.Code, got, want)
		}
	}

	// Reload applies a new role at once.
	if err := os.WriteFile(file, []byte(tokB+" dashboard operator\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := toks.Reload(); err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("POST", "/api/v1/workflow/get", nil)
	req.Header.Set("Authorization", "Bearer "+tokB)
	h.ServeHTTP(httptest.NewRecorder(), req)
	if got.Role != auth.RoleOperator {
		t.Fatalf("after reload: %+v", got)
	}
}

// Invalid lines are refused with an error that names the line and never
// repeats the token; the previous set stays in force on reload.
func TestTokenLineErrors(t *testing.T) {
	for name, tc := range map[string]struct{ file, want string }{
		"two fields":     {tokA + " dashboard\n", "line 1: want TOKEN or TOKEN NAME ROLE (whitespace-separated), found 2 fields"},
		"four fields":    {"# c\n" + tokA + " a reader extra\n", "line 2: want TOKEN or TOKEN NAME ROLE"},
		"unknown role":   {tokA + " dashboard admin\n", `line 1: token dashboard: unknown role "admin": want reader, writer, operator or all`},
		"bad name":       {tokA + " dash=board reader\n", `line 1: token name "dash=board": use letters, digits`},
		"reserved name":  {tokA + " anonymous reader\n", `line 1: token name "anonymous" is reserved`},
		"duplicate name": {tokA + " dash reader\n" + tokB + " dash writer\n", "line 2: the name dash is already used on line 1"},
		"same token":     {tokA + " dash reader\n\n" + tokA + "\n", "line 3: the same token as line 1"},
		"short token":    {"short-token x reader\n", "line 1: a token must be at least 16 bytes long"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := auth.Load(writeFile(t, tc.file), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), tokA) || strings.Contains(err.Error(), tokB) {
				t.Fatalf("the error repeats a token: %v", err)
			}
		})
	}
}

// The access table: every permission's least role, and who may do what.
func TestRolesAndPolicy(t *testing.T) {
	pol, err := auth.NewPolicy("/ui/")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, path string
		need         auth.Permission
		op           string
	}{
		{"GET", "/", 0, ""},
		{"GET", "/info/healthcheck", 0, ""},
		{"POST", "/api/v1/workflow/get", auth.PermRead, ""},
		{"POST", "/api/v1/workflow/getWithWait", auth.PermWrite, ""},
		{"POST", "/api/v1/workflow/start", auth.PermWrite, "start"},
		{"POST", "/api/v1/workflow/stop", auth.PermOperate, "stop"},
		{"POST", "/api/v1/workflow/timer/skip", auth.PermOperate, "skipTimer"},
		{"GET", "/ui/", auth.PermRead, ""},
		{"GET", "/ui/workflows/a/b", auth.PermRead, ""},
		{"POST", "/ui/login", 0, ""},
		{"POST", "/ui/actions/stop", auth.PermOperate, "stop"},
		{"POST", "/ui/actions/signal", auth.PermWrite, "signal"},
		{"POST", "/ui/actions/unknown", auth.PermRead, ""}, // the console's 404
		{"POST", "/api/v1/workflow/nope", auth.PermRead, ""},
	} {
		rule := pol.Match(httptest.NewRequest(tc.method, tc.path, nil))
		if rule.Need != tc.need || rule.Operation != tc.op {
			t.Errorf("%s %s: %+v, want need %v op %q", tc.method, tc.path, rule, tc.need, tc.op)
		}
	}
	for role, want := range map[auth.Role][3]bool{
		auth.RoleReader:   {true, false, false},
		auth.RoleWriter:   {true, true, false},
		auth.RoleOperator: {true, false, true},
		auth.RoleAll:      {true, true, true},
	} {
		got := [3]bool{role.Grants(auth.PermRead), role.Grants(auth.PermWrite), role.Grants(auth.PermOperate)}
		if got != want {
			t.Errorf("%s grants %v, want %v", role, got, want)
		}
	}
	if auth.PermOperate.String() != "operator" || auth.PermWrite.String() != "writer" || auth.PermRead.String() != "reader" {
		t.Fatal("permission names")
	}
	msg := auth.Forbidden(auth.Principal{Actor: "dashboard", Role: auth.RoleReader},
		pol.Match(httptest.NewRequest("POST", "/api/v1/workflow/stop", nil)), httptest.NewRequest("POST", "/api/v1/workflow/stop", nil))
	if msg != "forbidden: POST /api/v1/workflow/stop needs the operator role (or all); token dashboard has the reader role" {
		t.Fatalf("message %q", msg)
	}
}

// Client certificates verified by the client CAs are mapped to roles by
// their common name, "*" for the others; without a mapping they have full
// access when tokens are off.
func TestCertRoles(t *testing.T) {
	roles, err := auth.ParseCertRoles([]string{"ops-bot=operator", "*=reader"})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]string{{"ops"}, {"=reader"}, {"ops=boss"}, {"a=reader", "a=writer"}} {
		if _, err := auth.ParseCertRoles(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	cert := func(cn string) *http.Request {
		req := httptest.NewRequest("POST", "/api/v1/workflow/get", nil)
		c := &x509.Certificate{Subject: pkix.Name{CommonName: cn, Organization: []string{"Example"}}, SerialNumber: big.NewInt(1)}
		req.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{c}}}
		return req
	}
	serve := func(req *http.Request) (int, auth.Principal) {
		var got auth.Principal
		rec := httptest.NewRecorder()
		auth.Guard(nil, auth.Options{CertRoles: roles})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got, _ = auth.PrincipalOf(r.Context())
		})).ServeHTTP(rec, req)
		return rec.Code, got
	}
	if code, p := serve(cert("ops-bot")); code != 200 || p != (auth.Principal{Actor: "CN=ops-bot,O=Example", Role: auth.RoleOperator}) {
		t.Fatalf("ops-bot: %d %+v", code, p)
	}
	if code, p := serve(cert("someone")); code != 200 || p.Role != auth.RoleReader {
		t.Fatalf("someone: %d %+v", code, p)
	}
	if code, _ := serve(httptest.NewRequest("POST", "/api/v1/workflow/get", nil)); code != 401 {
		t.Fatalf("no certificate with roles set: %d", code)
	}
	delete(roles, "*")
	if code, _ := serve(cert("someone")); code != 403 {
		t.Fatalf("unmapped certificate: %d", code)
	}
	// Without a mapping and without tokens: full access, named by subject.
	var got auth.Principal
	auth.Guard(nil, auth.Options{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = auth.PrincipalOf(r.Context())
	})).ServeHTTP(httptest.NewRecorder(), cert("anyone"))
	if got != (auth.Principal{Actor: "CN=anyone,O=Example", Role: auth.RoleAll}) {
		t.Fatalf("unmapped certificate without tokens: %+v", got)
	}
	auth.Guard(nil, auth.Options{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = auth.PrincipalOf(r.Context())
	})).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/ui/", nil))
	if got != (auth.Principal{Actor: "anonymous", Role: auth.RoleAll}) {
		t.Fatalf("without authentication: %+v", got)
	}
	if _, ok := auth.PrincipalOf(context.Background()); ok {
		t.Fatal("a principal without a guard")
	}
}

// TestBatchNeed: a batch start needs the operator permission of
// batch/start and the permission of the call that makes its operation on
// one run, so that no role does by batch what it may not do run by run;
// AllowBatch refuses the others with a message naming the role needed.
func TestBatchNeed(t *testing.T) {
	direct := map[string]string{
		"TERMINATE": "stop", "CANCEL": "stop", "FAIL": "stop",
		"SIGNAL": "signal", "RESET": "reset", "SKIP_TIMER": "timer/skip",
	}
	start, _ := auth.FindRule(false, http.MethodPost, "/api/v1/batch/start")
	roles := []auth.Role{auth.RoleReader, auth.RoleWriter, auth.RoleOperator, auth.RoleAll}
	for op, call := range direct {
		rule, ok := auth.FindRule(false, http.MethodPost, "/api/v1/workflow/"+call)
		if !ok {
			t.Fatalf("no rule for %s", call)
		}
		for _, role := range roles {
			want := role.Grants(start.Need) && role.Grants(rule.Need)
			if got := role.Grants(auth.BatchNeed(op)); got != want {
				t.Errorf("%s batch as %s: allowed %v, want %v", op, role, got, want)
			}
			ctx := auth.WithPrincipal(context.Background(), auth.Principal{Actor: "someone", Role: role})
			err := auth.AllowBatch(ctx, op)
			var fe *auth.ForbiddenError
			if want != (err == nil) || (err != nil && !errors.As(err, &fe)) {
				t.Errorf("AllowBatch(%s, %s) = %v, want allowed %v", role, op, err, want)
			}
		}
	}
	// An on-call token may stop, reset and skip timers by batch, not signal.
	oncall := auth.WithPrincipal(context.Background(), auth.Principal{Actor: "oncall", Role: auth.RoleOperator})
	err := auth.AllowBatch(oncall, "SIGNAL")
	if err == nil || err.Error() != "forbidden: a SIGNAL batch needs the all role (batch/start needs the operator role, "+
		"and POST /api/v1/workflow/signal, which makes it on one run, the writer role); token oncall has the operator role" {
		t.Errorf("operator's SIGNAL batch: %v", err)
	}
	for _, op := range []string{"TERMINATE", "CANCEL", "FAIL", "RESET", "SKIP_TIMER"} {
		if err := auth.AllowBatch(oncall, op); err != nil {
			t.Errorf("operator's %s batch: %v", op, err)
		}
	}
	// Unknown operations need everything; without a guard, all may pass.
	if auth.BatchNeed("EXPLODE") != auth.PermRead|auth.PermWrite|auth.PermOperate {
		t.Errorf("unknown operation needs %v", auth.BatchNeed("EXPLODE"))
	}
	if err := auth.AllowBatch(context.Background(), "SIGNAL"); err != nil {
		t.Errorf("without a principal: %v", err)
	}
}
