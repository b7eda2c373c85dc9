package docstest

import (
	"bufio"
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/server"
)

// TestMetricsTable: every metric the engine writes to GET /metrics — with
// limits set, so that the limits' metrics are written too — has a row in
// the metrics table of docs/configuration.md, and every row names a metric
// the engine writes.
func TestMetricsTable(t *testing.T) {
	ctx := context.Background()
	srv, err := server.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "iwf.db"), server.Options{Engine: engine.Config{
		Limits:           engine.Limits{TypeConcurrency: map[string]int{"T": 1}, WorkerRate: map[string]float64{"w.example:80": 1}},
		StateMetricsRuns: 10,
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(ctx)
	var out bytes.Buffer
	if err := srv.Engine.WriteMetrics(&out); err != nil {
		t.Fatal(err)
	}
	exposed := metricNames(out.Bytes())
	if len(exposed) < 20 {
		t.Fatalf("only %d metrics read from WriteMetrics:\n%s", len(exposed), out.String())
	}
	// What the endpoint serves besides the engine's may be in the table too.
	rec := httptest.NewRecorder()
	srv.Handler.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	served := metricNames(rec.Body.Bytes())

	data, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	i := strings.Index(text, "\n## Metrics\n")
	if i < 0 {
		t.Fatal("docs/configuration.md has no ## Metrics section")
	}
	text = text[i+1:]
	if j := strings.Index(text[3:], "\n## "); j >= 0 {
		text = text[:j+3]
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_:]+)").FindAllStringSubmatch(text, -1) {
		documented[m[1]] = true
	}
	for name := range exposed {
		if !documented[name] {
			t.Errorf("metric %s is not in the table of docs/configuration.md#metrics", name)
		}
	}
	for name := range documented {
		if !exposed[name] && !served[name] {
			t.Errorf("docs/configuration.md#metrics lists %s, which GET /metrics does not serve", name)
		}
	}
}

// metricNames returns the names of the metrics of a Prometheus text
// exposition, from their # TYPE lines.
func metricNames(text []byte) map[string]bool {
	names := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			names[f[2]] = true
		}
	}
	return names
}
