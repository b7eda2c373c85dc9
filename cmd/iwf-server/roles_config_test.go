package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/internal/audit"
)

// TestConfigRolesAndAudit: --audit-log and --tls-client-role from flags,
// the environment and the config file, and their errors.
func TestConfigRolesAndAudit(t *testing.T) {
	p := newTestPKI(t)
	tlsArgs := []string{"--tls-cert-file", p.certFile, "--tls-key-file", p.keyFile, "--tls-client-ca-file", p.caFile}
	file := writeFile(t, "audit-log: /var/log/iwf/audit.jsonl\ntls-client-roles:\n  ops-bot: operator\n  \"*\": reader\n")
	m, err := parse(t, tlsArgs, env{"IWF_CONFIG": file})
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.AuditLog != "/var/log/iwf/audit.jsonl" || !reflect.DeepEqual(m.Config.TLSClientRoles, []string{"ops-bot=operator", "*=reader"}) {
		t.Fatalf("from the file: %q %q", m.Config.AuditLog, m.Config.TLSClientRoles)
	}
	m, err = parse(t, tlsArgs, env{"IWF_CONFIG": file, "IWF_AUDIT_LOG": "-", "IWF_TLS_CLIENT_ROLES": "a=writer,b=all"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.AuditLog != "-" || !reflect.DeepEqual(m.Config.TLSClientRoles, []string{"a=writer", "b=all"}) {
		t.Fatalf("from the environment: %q %q", m.Config.AuditLog, m.Config.TLSClientRoles)
	}
	m, err = parse(t, append(tlsArgs, "--audit-log", "/tmp/a", "--tls-client-role", "c=reader"), env{"IWF_AUDIT_LOG": "-"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.AuditLog != "/tmp/a" || !reflect.DeepEqual(m.Config.TLSClientRoles, []string{"c=reader"}) {
		t.Fatalf("from flags: %q %q", m.Config.AuditLog, m.Config.TLSClientRoles)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-client-role", "ops=operator"}, "tls-client-roles needs tls-client-ca-file"},
		{append(tlsArgs, "--tls-client-role", "ops=admin"), `unknown role "admin"`},
		{append(tlsArgs, "--tls-client-role", "ops"), "want COMMON_NAME=ROLE"},
	} {
		if _, err := parse(t, tc.args, env{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	// An audit log that cannot be opened stops the start.
	bad := NewMain()
	bad.LookupEnv = env{}.lookup
	bad.Stdout, bad.Stderr = &syncBuffer{}, &syncBuffer{}
	if err := bad.ParseFlags(t.Context(), []string{"--addr", "127.0.0.1:0", "--db", "sqlite://" + filepath.Join(t.TempDir(), "x.db"),
		"--audit-log", filepath.Join(t.TempDir(), "missing-dir", "audit.jsonl")}); err != nil {
		t.Fatal(err)
	}
	if err := bad.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "audit-log") {
		t.Fatalf("unwritable audit log: %v", err)
	}
	_ = bad.Close()
}

// auditEntries reads an audit file.
func auditEntries(t *testing.T, file string) []audit.Entry {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.Entry
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var e audit.Entry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

// TestSecurityClientCertificateRoles: over mutual TLS, a client
// certificate's common name gives it a role and names it in the audit log;
// a bearer token, when sent, decides instead.
func TestSecurityClientCertificateRoles(t *testing.T) {
	p := newTestPKI(t) // its client certificate's common name is "client"
	auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
	m, _ := startMain(t, "--tls-cert-file", p.certFile, "--tls-key-file", p.keyFile, "--tls-client-ca-file", p.caFile,
		"--tls-client-role", "client=reader", "--audit-log", auditFile)
	base := "https://" + m.Addr()
	c := p.client(true)
	if status, _, body := call(t, c, base+"/api/v1/workflow/get", "", `{"workflowId":"w"}`); status != 400 || body["subStatus"] != "WORKFLOW_NOT_EXISTS_SUB_STATUS" {
		t.Fatalf("get as a reader certificate: %d %v", status, body)
	}
	status, _, body := call(t, c, base+"/api/v1/workflow/stop", "", `{"workflowId":"w"}`)
	if want := "forbidden: POST /api/v1/workflow/stop needs the operator role (or all); client certificate CN=client has the reader role"; status != 403 || body["detail"] != want {
		t.Fatalf("stop as a reader certificate: %d %v", status, body)
	}
	entries := auditEntries(t, auditFile)
	if len(entries) != 1 || entries[0].Actor != "CN=client" || entries[0].Role != "reader" || entries[0].Outcome != "forbidden" || entries[0].Operation != "stop" {
		t.Fatalf("audit: %+v", entries)
	}

	// With tokens as well: the certificate of a mapped subject needs no
	// token; a token, when sent, decides.
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte(readerToken+" dashboard reader\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	both, _ := startMain(t, "--tls-cert-file", p.certFile, "--tls-key-file", p.keyFile, "--tls-client-ca-file", p.caFile,
		"--tls-client-role", "*=operator", "--auth-token-file", file)
	base = "https://" + both.Addr()
	if status, _, body = call(t, c, base+"/api/v1/workflow/stop", "", `{"workflowId":"w"}`); status != 400 {
		t.Fatalf("stop as an operator certificate: %d %v", status, body)
	}
	if status, _, body = call(t, c, base+"/api/v1/workflow/stop", readerToken, `{"workflowId":"w"}`); status != 403 ||
		!strings.Contains(fmt.Sprint(body["detail"]), "token dashboard has the reader role") {
		t.Fatalf("stop with a reader token over an operator certificate: %d %v", status, body)
	}
}

// TestSecurityRolesReload: a reload applies a changed role at once and
// reopens the audit log, so that logrotate can move it away.
func TestSecurityRolesReload(t *testing.T) {
	dir := t.TempDir()
	file, auditFile := filepath.Join(dir, "tokens"), filepath.Join(dir, "audit.jsonl")
	if err := os.WriteFile(file, []byte(readerToken+" dashboard reader\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m, _ := startMain(t, "--auth-token-file", file, "--audit-log", auditFile)
	base := "http://" + m.Addr()
	stop := `{"workflowId":"w"}`
	if status, _, body := call(t, http.DefaultClient, base+"/api/v1/workflow/stop", readerToken, stop); status != 403 {
		t.Fatalf("stop as reader: %d %v", status, body)
	}
	// logrotate moves the file; the token becomes an operator's.
	if err := os.Rename(auditFile, auditFile+".1"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(readerToken+" dashboard operator\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := m.Reload(); err != nil {
		t.Fatal(err)
	}
	if status, _, body := call(t, http.DefaultClient, base+"/api/v1/workflow/stop", readerToken, stop); status != 400 || body["subStatus"] != "WORKFLOW_NOT_EXISTS_SUB_STATUS" {
		t.Fatalf("stop after the role changed: %d %v", status, body)
	}
	old, cur := auditEntries(t, auditFile+".1"), auditEntries(t, auditFile)
	if len(old) != 1 || old[0].Outcome != "forbidden" || len(cur) != 1 || cur[0].Outcome != "workflow_not_exists" || cur[0].Role != "operator" {
		t.Fatalf("audit before the reload %+v, after %+v", old, cur)
	}
	// An invalid line keeps the roles in force and names the line.
	if err := os.WriteFile(file, []byte("# x\n"+readerToken+" dashboard boss\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := m.Reload(); err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), `unknown role "boss"`) {
		t.Fatalf("reload with an unknown role: %v", err)
	}
	if status, _, _ := call(t, http.DefaultClient, base+"/api/v1/workflow/stop", readerToken, stop); status != 400 {
		t.Fatalf("stop after a failed reload: %d", status)
	}
}

// TestBinaryRejectsBadTokenFile: the binary refuses to start with an
// invalid token file line and says which line.
func TestBinaryRejectsBadTokenFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte(fullToken+"\n"+readerToken+" dashboard\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runBinary(t, "--addr", "127.0.0.1:0", "--db", "sqlite://"+filepath.Join(t.TempDir(), "x.db"), "--auth-token-file", file)
	if code != 1 || !strings.Contains(stderr, "line 2: want TOKEN or TOKEN NAME ROLE") || strings.Contains(stderr, readerToken) {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}
