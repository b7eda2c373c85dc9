package workerpolicy_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/internal/workerpolicy"
)

func TestCheckWithoutAllowList(t *testing.T) {
	p, err := workerpolicy.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ok := range []string{"http://127.0.0.1:8803", "https://worker.example.com/iwf", "http://[::1]:80", "http://localhost:1"} {
		if err := p.Check(ctx, ok); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	for bad, want := range map[string]string{
		"http://169.254.169.254/latest/meta-data":  "never called",
		"http://[fe80::1]:80":                      "never called",
		"http://[::ffff:169.254.169.254]":          "never called",
		"http://0.0.0.0:8803":                      "never called",
		"http://[::]:8803":                         "never called",
		"http://[fd00:ec2::254]":                   "never called",
		"http://[fe80::fc:ff:fe00:1%25eth0]:18112": "never called", // a zone must not hide the address
		"http://[fd00:ec2::254%25eth0]":            "never called",
		"http://[::%25eth0]:8803":                  "never called",
		"http://127.0.0.1:8803/iwf/../other":       "path segments",
		"http://127.0.0.1:8803/iwf/%2e%2e/other":   "path segments",
		"http://127.0.0.1:8803/iwf/..%2fother":     "path segments",
		"http://127.0.0.1:8803/iwf/%2E/x":          "path segments",
		"http://127.0.0.1:8803/iwf%2Fother":        "encoded slashes",
		"http://127.0.0.1:8803/iwf%5c..%5cother":   "encoded slashes",
		"not a url":                                "absolute http",
		"file:///etc/passwd":                       "absolute http",
		"http://127.0.0.1:8803/capture?":           "without user info, query or fragment",
		"http://127.0.0.1:8803/x#frag":             "without user info, query or fragment",
		"http://user:pw@127.0.0.1:8803":            "without user info",
		"http:///nohost":                           "absolute http",
	} {
		if err := p.Check(ctx, bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", bad, err, want)
		}
	}
}

func TestCheckWithAllowList(t *testing.T) {
	p, err := workerpolicy.New([]string{"http://127.0.0.1:*", "https://*.svc.cluster.local", "http://worker.internal:8080/iwf", "10.1.0.0/16", "192.168.7.7"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	allowed := []string{
		"http://127.0.0.1:8803", "http://127.0.0.1:1/any/path",
		"https://orders.prod.svc.cluster.local", "https://ORDERS.svc.cluster.local:443/x",
		"http://worker.internal:8080/iwf", "http://worker.internal:8080/iwf/", "http://worker.internal:8080/iwf/v2",
		"http://10.1.2.3:9000", "https://10.1.255.255", "http://192.168.7.7:80",
	}
	for _, u := range allowed {
		if err := p.Check(ctx, u); err != nil {
			t.Errorf("%s refused: %v", u, err)
		}
	}
	refused := []string{
		"http://127.0.0.2:8803",                     // another loopback address
		"https://127.0.0.1:8803",                    // another scheme
		"https://svc.cluster.local",                 // * needs at least one character
		"https://x.svc.cluster.local:8443",          // no port in the pattern: the default port only
		"http://x.svc.cluster.local",                // scheme
		"http://worker.internal:8080/iwfx",          // the path prefix ends at a segment
		"http://worker.internal:8080/other",         // outside the path
		"http://worker.internal:8080/iwf/../other",  // dot segments would leave the path
		"http://worker.internal:8080/iwf/%2e%2e/x",  // also encoded
		"http://[fe80::1%25eth0]:8803",              // zoned link-local
		"http://worker.internal:8081/iwf",           // port
		"http://10.2.0.1:9000",                      // outside the network
		"http://192.168.7.8",                        // another address
		"http://169.254.169.254",                    // denied whatever the list says
		"http://localhost:8803",                     // resolves to loopback, which no network allows
		"http://127.0.0.1.nip.example.invalid:8803", // does not resolve
	}
	for _, u := range refused {
		err := p.Check(ctx, u)
		if err == nil {
			t.Errorf("%s allowed", u)
		} else if !strings.Contains(err.Error(), "not allowed by --worker-url-allow") && !strings.Contains(err.Error(), "never called") &&
			!strings.Contains(err.Error(), "path segments") {
			t.Errorf("%s: unclear error %v", u, err)
		}
	}
}

func TestNewRejectsBadPatterns(t *testing.T) {
	for _, bad := range []string{"ftp://x", "http://", "http://x:0", "http://x:99999", "http://x?q", "10.0.0.0/33", "worker.example.com", "http://a b"} {
		if _, err := workerpolicy.New([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The dial-time check sees the address a name resolved to: a URL that
// passed the checks cannot reach a denied address, or one outside the
// allowed networks, through DNS.
func TestControlChecksTheDialledAddress(t *testing.T) {
	p, err := workerpolicy.New([]string{"10.0.0.0/8", "http://allowed.example:*"})
	if err != nil {
		t.Fatal(err)
	}
	dial := func(rawURL, addr string) error {
		ctx, err := p.ForCall(context.Background(), rawURL)
		if err != nil {
			return err
		}
		return p.Control(ctx)("tcp", addr, nil)
	}
	if err := dial("http://allowed.example:80", "169.254.169.254:80"); err == nil || !strings.Contains(err.Error(), "never called") {
		t.Errorf("metadata address through an allowed name: %v", err)
	}
	if err := dial("http://allowed.example:80", "[fe80::fc:ff:fe00:1%eth0]:80"); err == nil || !strings.Contains(err.Error(), "never called") {
		t.Errorf("zoned link-local address through an allowed name: %v", err)
	}
	if err := dial("http://rebind.example:80", "[fe80::a%eth0]:80"); err == nil || !strings.Contains(err.Error(), "never called") {
		t.Errorf("zoned link-local address through a network-allowed name: %v", err)
	}
	if err := dial("http://allowed.example:80", "203.0.113.5:80"); err != nil {
		t.Errorf("a pattern-matched URL may go anywhere but denied addresses: %v", err)
	}
	if err := dial("http://rebind.example:80", "203.0.113.5:80"); err == nil || !strings.Contains(err.Error(), "outside the networks") {
		t.Errorf("a network-allowed name resolving outside: %v", err)
	}
	if err := dial("http://rebind.example:80", "10.9.8.7:80"); err != nil {
		t.Errorf("a name resolving inside the network: %v", err)
	}
	noCIDR, _ := workerpolicy.New([]string{"http://allowed.example:*"})
	if _, err := noCIDR.ForCall(context.Background(), "http://other.example"); err == nil {
		t.Error("a URL matching no pattern was callable without networks")
	}
}

// A real dial through the Control function: the connection to a denied
// address is refused before any byte is sent.
func TestControlRefusesRealDial(t *testing.T) {
	var p *workerpolicy.Policy // no allow-list: only denied addresses
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	ctx, err := p.ForCall(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	d := net.Dialer{Control: p.Control(ctx)}
	c, err := d.DialContext(ctx, "tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatalf("loopback refused: %v", err)
	}
	c.Close()
	if _, err := d.DialContext(ctx, "tcp", "0.0.0.0:1"); err == nil || !strings.Contains(err.Error(), "never called") {
		t.Fatalf("dial to 0.0.0.0: %v", err)
	}
}
