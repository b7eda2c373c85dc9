package check

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

const unitFile = "../systemd/iwf-server.service"

// unit reads a systemd unit into its settings, per section.
func unit(t *testing.T) map[string]map[string][]string {
	t.Helper()
	f, err := os.Open(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
			out[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("bad line %q", line)
			}
			out[section][k] = append(out[section][k], v)
		}
	}
	return out
}

// TestSystemdUnit: the unit runs the server as a user of its own with
// the hardening options set, and gives it longer to stop than its
// shutdown grace. When systemd-analyze is installed, it verifies the unit
// and its exposure score stays low (it rates the hardening).
func TestSystemdUnit(t *testing.T) {
	u := unit(t)
	svc := u["Service"]
	if svc == nil || u["Install"] == nil || u["Unit"] == nil {
		t.Fatalf("sections %v", u)
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
		"DynamicUser": "yes", "NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
		"PrivateTmp": "yes", "PrivateDevices": "yes", "StateDirectory": "iwf-server", "KillSignal": "SIGTERM",
		"Restart": "on-failure", "MemoryDenyWriteExecute": "yes", "RestrictSUIDSGID": "yes",
	} {
		if got := one(k); got != want {
			t.Errorf("%s=%q, want %q", k, got, want)
		}
	}
	env := map[string]string{}
	for _, e := range svc["Environment"] {
		k, v, _ := strings.Cut(e, "=")
		env[k] = v
	}
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

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skipf("systemd-analyze not installed: the unit was checked without it")
	}
	// verify checks that ExecStart exists: point it at a file that does.
	b, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	copyFile := filepath.Join(t.TempDir(), "iwf-server.service")
	if err := os.WriteFile(copyFile, []byte(strings.ReplaceAll(string(b), "/usr/local/bin/iwf-server", self)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(analyze, "verify", copyFile).CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err := exec.Command(analyze, "security", "--offline=true", copyFile).CombinedOutput()
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
