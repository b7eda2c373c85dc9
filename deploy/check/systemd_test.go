package check

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	unitFile     = "../systemd/iwf-server.service"
	sysusersFile = "../systemd/iwf-server.sysusers"
)

// unitSettings are a unit's settings, per section; examples are the
// settings of its commented-out lines ("#Key=value"), which docs/deploy.md
// tells the operator to uncomment.
type unitSettings struct {
	settings, examples map[string]map[string][]string
}

// unit reads the systemd unit.
func unit(t *testing.T) unitSettings {
	t.Helper()
	f, err := os.Open(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unitSettings{settings: map[string]map[string][]string{}, examples: map[string]map[string][]string{}}
	section := ""
	example := regexp.MustCompile(`^#([A-Z][A-Za-z]+)=(.*)$`)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case example.MatchString(line):
			m := example.FindStringSubmatch(line)
			u.examples[section][m[1]] = append(u.examples[section][m[1]], m[2])
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
			u.settings[section] = map[string][]string{}
			u.examples[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("bad line %q", line)
			}
			u.settings[section][k] = append(u.settings[section][k], v)
		}
	}
	return u
}

// envOf collects Environment= assignments.
func envOf(values []string) map[string]string {
	env := map[string]string{}
	for _, e := range values {
		k, v, _ := strings.Cut(e, "=")
		env[k] = v
	}
	return env
}

// TestSystemdUnit: the unit runs the server as a system user of its own
// with the hardening options set, and gives it longer to stop than its
// shutdown grace. The files its settings and examples name can be used as
// the docs say: those the server writes (the SQLite store, the audit log,
// a file archive) are in the directories the unit lets it write, and
// those it re-reads on reload (the token file, the TLS files) are read
// from where they are edited, not from a copy systemd made at start
// (LoadCredential), which a reload would not refresh.
func TestSystemdUnit(t *testing.T) {
	u := unit(t)
	svc := u.settings["Service"]
	if svc == nil || u.settings["Install"] == nil || u.settings["Unit"] == nil {
		t.Fatalf("sections %v", u.settings)
	}
	one := func(k string) string {
		t.Helper()
		if len(svc[k]) == 0 {
			t.Errorf("no %s", k)
			return ""
		}
		return svc[k][len(svc[k])-1]
	}
	if got := one("ExecStart"); got != "/usr/local/bin/iwf-server serve" {
		t.Errorf("ExecStart %q", got)
	}
	for k, want := range map[string]string{
		"User": "iwf-server", "Group": "iwf-server", "NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
		"PrivateTmp": "yes", "PrivateDevices": "yes", "StateDirectory": "iwf-server", "LogsDirectory": "iwf-server",
		"KillSignal": "SIGTERM", "Restart": "on-failure", "MemoryDenyWriteExecute": "yes", "RestrictSUIDSGID": "yes",
		"ExecReload": "/bin/kill -HUP $MAINPID",
	} {
		if got := one(k); got != want {
			t.Errorf("%s=%q, want %q", k, got, want)
		}
	}
	env := envOf(svc["Environment"])
	if env["IWF_DB"] != "sqlite:///var/lib/iwf-server/iwf.db" {
		t.Errorf("IWF_DB %q is not in the state directory", env["IWF_DB"])
	}
	grace, err := time.ParseDuration(env["IWF_SHUTDOWN_GRACE"])
	if err != nil {
		t.Fatalf("IWF_SHUTDOWN_GRACE: %v", err)
	}
	stop, err := strconv.Atoi(one("TimeoutStopSec"))
	if err != nil || time.Duration(stop)*time.Second <= grace {
		t.Errorf("TimeoutStopSec %q, want whole seconds beyond IWF_SHUTDOWN_GRACE %s", one("TimeoutStopSec"), grace)
	}

	var writable []string
	for dir, k := range map[string]string{"/var/lib/": "StateDirectory", "/var/log/": "LogsDirectory"} {
		if len(svc[k]) > 0 {
			writable = append(writable, dir+svc[k][0]+"/")
		}
	}
	examples := envOf(u.examples["Service"]["Environment"])
	for _, k := range []string{"IWF_AUTH_TOKEN_FILE", "IWF_TLS_CERT_FILE", "IWF_TLS_KEY_FILE", "IWF_AUDIT_LOG", "IWF_ARCHIVE_URL"} {
		if examples[k] == "" {
			t.Errorf("no commented-out example of %s in the unit", k)
		}
	}
	for k, v := range examples {
		env[k] = v
	}
	checkUnitPaths(t, "the unit", env, writable)
	for _, k := range []string{"LoadCredential", "LoadCredentialEncrypted", "SetCredential"} {
		if len(svc[k]) > 0 || len(u.examples["Service"][k]) > 0 {
			t.Errorf("the unit passes files as credentials (%s): a reload re-reads systemd's copy, made at start", k)
		}
	}

	// The examples docs/deploy.md gives for the unit work with it too.
	doc, err := os.ReadFile("../../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## systemd\n")
	if !ok {
		t.Fatal("docs/deploy.md has no systemd section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	docEnv := map[string]string{}
	for _, m := range regexp.MustCompile("(IWF_[A-Z_]+)=([^\\s`'\"]+)").FindAllStringSubmatch(section, -1) {
		docEnv[m[1]] = m[2]
	}
	for _, k := range []string{"IWF_AUTH_TOKEN_FILE", "IWF_AUDIT_LOG", "IWF_ARCHIVE_URL"} {
		if docEnv[k] == "" {
			t.Errorf("docs/deploy.md's systemd section gives no %s for the unit", k)
		}
	}
	checkUnitPaths(t, "docs/deploy.md", docEnv, writable)
}

// checkUnitPaths checks the files that the settings env name: those the
// server writes are under one of the writable directories; those it
// re-reads are not systemd's credential copies.
func checkUnitPaths(t *testing.T, where string, env map[string]string, writable []string) {
	t.Helper()
	under := func(p string) bool {
		for _, dir := range writable {
			if strings.HasPrefix(filepath.Clean(p), dir) {
				return true
			}
		}
		return false
	}
	for k, v := range env {
		switch k {
		case "IWF_DB":
			if p, ok := strings.CutPrefix(v, "sqlite://"); ok && !under(p) {
				t.Errorf("%s: %s=%s: the unit cannot write there (only under %v)", where, k, v, writable)
			}
		case "IWF_AUDIT_LOG":
			if v != "-" && !under(v) {
				t.Errorf("%s: %s=%s: the unit cannot write there (only under %v); the server would not start", where, k, v, writable)
			}
		case "IWF_ARCHIVE_URL":
			if p, ok := strings.CutPrefix(v, "file://"); ok {
				p, _, _ = strings.Cut(p, "?")
				if !under(p + "/") {
					t.Errorf("%s: %s=%s: the unit cannot write there (only under %v)", where, k, v, writable)
				}
			}
		case "IWF_AUTH_TOKEN_FILE", "IWF_TLS_CERT_FILE", "IWF_TLS_KEY_FILE", "IWF_TLS_CLIENT_CA_FILE":
			if strings.Contains(v, "%d") || strings.Contains(v, "CREDENTIALS_DIRECTORY") {
				t.Errorf("%s: %s=%s is systemd's copy of a credential, which a reload does not refresh", where, k, v)
			}
		}
	}
}

// systemdTool returns the path of a systemd tool. Without it the test is
// skipped, except in CI (CI=true), where that fails it: the Debian
// package systemd provides them.
func systemdTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required in CI (apt-get install systemd): %v", name, err)
		}
		t.Skipf("%s not installed (apt-get install systemd): the unit's settings were checked without it", name)
	}
	return p
}

// TestSystemdAnalyze: systemd-analyze verifies the unit, with its
// commented-out examples on as well, and its exposure score stays low (it
// rates the hardening).
func TestSystemdAnalyze(t *testing.T) {
	analyze := systemdTool(t, "systemd-analyze")
	b, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	// verify checks that ExecStart exists: point it at a file that does.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), "/usr/local/bin/iwf-server", self)
	withExamples := regexp.MustCompile(`(?m)^#([A-Z][A-Za-z]+=)`).ReplaceAllString(text, "$1")
	dir := t.TempDir()
	for name, content := range map[string]string{"iwf-server.service": text, "examples/iwf-server.service": withExamples} {
		file := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(analyze, "verify", file).CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Fatalf("systemd-analyze verify %s: %v\n%s", name, err, out)
		}
	}
	out, err := exec.Command(analyze, "security", "--offline=true", filepath.Join(dir, "iwf-server.service")).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no exposure level in:\n%s", out)
	}
	if level, _ := strconv.ParseFloat(string(m[1]), 64); level > 2 {
		t.Fatalf("exposure level %s, want at most 2 (hardening lost?):\n%s", m[1], out)
	}
	t.Logf("systemd-analyze security: exposure level %s", m[1])
}

// TestSystemdSysusers: the sysusers file creates the user and group the
// unit runs as, a system account without a login shell.
func TestSystemdSysusers(t *testing.T) {
	sysusers := systemdTool(t, "systemd-sysusers")
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	conf, err := os.Open(sysusersFile)
	if err != nil {
		t.Fatal(err)
	}
	defer conf.Close()
	cmd := exec.Command(sysusers, "--root="+root, "-")
	cmd.Stdin = conf
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("systemd-sysusers: %v\n%s", err, out)
	}
	passwd, err := os.ReadFile(filepath.Join(root, "etc", "passwd"))
	if err != nil {
		t.Fatal(err)
	}
	group, err := os.ReadFile(filepath.Join(root, "etc", "group"))
	if err != nil {
		t.Fatal(err)
	}
	svc := unit(t).settings["Service"]
	if len(svc["User"]) != 1 || len(svc["Group"]) != 1 {
		t.Fatalf("the unit's User= %q and Group= %q: want one of each", svc["User"], svc["Group"])
	}
	user, grp := svc["User"][0], svc["Group"][0]
	var entry []string
	for _, line := range strings.Split(string(passwd), "\n") {
		if f := strings.Split(line, ":"); len(f) == 7 && f[0] == user {
			entry = f
		}
	}
	if entry == nil {
		t.Fatalf("no user %s in:\n%s", user, passwd)
	}
	if uid, err := strconv.Atoi(entry[2]); err != nil || uid == 0 || uid >= 1000 {
		t.Errorf("user %s has uid %s, want a system uid", user, entry[2])
	}
	if entry[6] != "/usr/sbin/nologin" {
		t.Errorf("user %s has the shell %s", user, entry[6])
	}
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(grp) + `:x:` + entry[3] + `:`).Match(group) {
		t.Errorf("no group %s with gid %s in:\n%s", grp, entry[3], group)
	}
}
