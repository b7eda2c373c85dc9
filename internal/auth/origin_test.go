package auth_test

import (
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/iwf-server/iwf-server/internal/auth"
)

func TestSameOrigin(t *testing.T) {
	for _, tt := range []struct {
		name    string
		headers map[string]string
		ok      bool
	}{
		{"no browser headers", nil, true},
		{"same-origin", map[string]string{"Sec-Fetch-Site": "same-origin"}, true},
		{"typed URL", map[string]string{"Sec-Fetch-Site": "none"}, true},
		{"same Origin", map[string]string{"Origin": "http://iwf.test:8801"}, true},
		{"same Origin, other case", map[string]string{"Origin": "http://IWF.test:8801"}, true},
		{"same Referer", map[string]string{"Referer": "http://iwf.test:8801/ui/x"}, true},
		{"cross-site", map[string]string{"Sec-Fetch-Site": "cross-site"}, false},
		{"same-site", map[string]string{"Sec-Fetch-Site": "same-site"}, false},
		{"other Origin", map[string]string{"Origin": "http://evil.example"}, false},
		{"other port", map[string]string{"Origin": "http://iwf.test:8802"}, false},
		{"Origin null", map[string]string{"Origin": "null"}, false},
		{"bad Origin", map[string]string{"Origin": "::"}, false},
		{"other Referer", map[string]string{"Referer": "http://evil.example/"}, false},
		{"same-origin, other Origin", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://evil.example"}, false},
	} {
		r := httptest.NewRequest("POST", "http://iwf.test:8801/api/v1/workflow/stop", nil)
		for k, v := range tt.headers {
			r.Header.Set(k, v)
		}
		err := auth.SameOrigin(r)
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, auth.ErrCrossSite)) {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

func TestHostPolicy(t *testing.T) {
	p, err := auth.NewHostPolicy([]string{"iwf.example.com", "*.corp.example", "[fd00::1]", "10.0.0.5"})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"localhost": true, "localhost:8801": true, "127.0.0.1:8801": true, "127.9.9.9": true, "[::1]:8801": true, "[::1]": true, "": true,
		"iwf.example.com": true, "iwf.example.com:443": true, "a.corp.example": true, "[fd00::1]:8801": true, "10.0.0.5:1": true,
		"rebind.attacker.example": false, "corp.example": false, "xcorp.example": false, "10.0.0.6": false,
		"localhost.attacker.example": false, "127.0.0.1.nip.io": false, "[fd00::2]:8801": false,
	} {
		if got := p.Allows(host); got != want {
			t.Errorf("Allows(%q) = %v, want %v", host, got, want)
		}
	}
	anyHost, err := auth.NewHostPolicy([]string{"*"})
	if err != nil || !anyHost.Allows("rebind.attacker.example") {
		t.Errorf("* does not allow any host: %v", err)
	}
	for _, bad := range []string{"http://iwf.example.com", "iwf.example.com:8801", "a b", "", "*.", "a/b"} {
		if _, err := auth.NewHostPolicy([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for addr, want := range map[string]bool{
		"127.0.0.1:8801": true, "localhost:0": true, "[::1]:8801": true,
		"0.0.0.0:8801": false, ":8801": false, "10.0.0.5:8801": false, "[::]:8801": false, "bad": false,
	} {
		if got := auth.IsLoopbackAddr(addr); got != want {
			t.Errorf("IsLoopbackAddr(%q) = %v, want %v", addr, got, want)
		}
	}
}
