package deploy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/crashtest"
	"github.com/iwf-server/iwf-server/internal/server"
)

// promtool returns the path of promtool. It skips the test when promtool
// is missing, except in CI (CI=true), where that fails it: .ci/run
// installs the Debian package prometheus.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("promtool is required in CI (apt-get install prometheus): %v", err)
		}
		t.Skipf("promtool not found (apt-get install prometheus): %v", err)
	}
	return p
}

// TestAlertRulesCheck: promtool accepts the alerting rules.
func TestAlertRulesCheck(t *testing.T) {
	out, err := exec.Command(promtool(t), "check", "rules", "prometheus/alerts.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool check rules:\n%s", out)
	}
}

// TestAlertRulesUnitTests: every alert fires on the series it is about,
// with the labels and annotations expected, and stays silent on healthy
// ones (prometheus/alerts_test.yml). The unit tests cover every alert.
func TestAlertRulesUnitTests(t *testing.T) {
	out, err := exec.Command(promtool(t), "test", "rules", "prometheus/alerts_test.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	readYAML(t, "prometheus/alerts_test.yml", &tests)
	fired := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fired[a.Alertname] = true
			}
		}
	}
	for _, name := range alertNames(t) {
		if !fired[name] {
			t.Errorf("alert %s has no unit test in which it fires", name)
		}
	}
}

type ruleFile struct {
	Groups []struct {
		Rules []struct {
			Alert string `yaml:"alert"`
			Expr  string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func alertNames(t *testing.T) []string {
	var rules ruleFile
	readYAML(t, "prometheus/alerts.yml", &rules)
	var names []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
		}
	}
	return names
}

// queries returns the PromQL expressions of the rules and the dashboard,
// each with where it comes from.
func queries(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	var rules ruleFile
	readYAML(t, "prometheus/alerts.yml", &rules)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out["alert "+r.Alert] = r.Expr
		}
	}
	b, err := os.ReadFile("grafana/iwf-server.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash any
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("grafana/iwf-server.json: %v", err)
	}
	n := 0
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			title, _ := v["title"].(string)
			if title != "" {
				path = title
			}
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "expr" || k == "definition") {
					n++
					out[fmt.Sprintf("dashboard %q %s #%d", path, k, n)] = s
					continue
				}
				walk(path, x)
			}
		case []any:
			for _, x := range v {
				walk(path, x)
			}
		}
	}
	walk("", dash)
	if n < 20 {
		t.Fatalf("found only %d queries in the dashboard", n)
	}
	return out
}

// scrape is what GET /metrics exported: per sample name, its label sets.
type scrape struct {
	families map[string]bool                // declared by # TYPE
	samples  map[string][]map[string]string // sample name -> label sets
	text     string
}

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? \S+$`)
var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

func parseScrape(t *testing.T, text string) scrape {
	t.Helper()
	s := scrape{families: map[string]bool{}, samples: map[string][]map[string]string{}, text: text}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			s.families[strings.Fields(f)[0]] = true
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("unparseable exposition line %q", line)
		}
		labels := map[string]string{}
		for _, p := range labelPair.FindAllStringSubmatch(m[3], -1) {
			labels[p[1]] = p[2]
		}
		s.samples[m[1]] = append(s.samples[m[1]], labels)
	}
	return s
}

// noSampleInWorkload are metrics that a single SQLite node cannot produce
// samples of; they must still be declared.
var noSampleInWorkload = map[string]string{
	"iwf_change_notices_received_total": "announcements come from other nodes on PostgreSQL",
}

// addedLabels are the labels Prometheus adds at scrape time (or that the
// dashboard's histogram queries keep).
var addedLabels = []string{"job", "instance"}

var (
	metricName = regexp.MustCompile(`\biwf_[a-z0-9_]+\b`)
	selector   = regexp.MustCompile(`\b(iwf_[a-z0-9_]+)\{([^}]*)\}`)
	matcher    = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	byClause   = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
)

// TestMonitoringNamesExported runs a real server (SQLite, the HTTP worker
// client, retention with an archive) with a real HTTP worker through a
// small workload — a timer, a state that fails once and is retried,
// workflows that close and are archived and deleted by retention — then
// scrapes GET /metrics and checks every query of the dashboard and the
// alerts against it: each metric name has samples, each label a matcher or
// a by() clause names is on the metrics of the query, and each label value
// matched exactly is exported.
func TestMonitoringNamesExported(t *testing.T) {
	s := runWorkload(t)
	qs := queries(t)
	keys := make([]string, 0, len(qs))
	for k := range qs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	used := map[string]bool{}
	for _, where := range keys {
		q := qs[where]
		names := metricName.FindAllString(q, -1)
		if len(names) == 0 {
			t.Errorf("%s: names no iwf_ metric: %s", where, q)
		}
		queryLabels := map[string]bool{}
		for _, name := range names {
			used[name] = true
			sets, ok := s.samples[name]
			if !ok {
				if _, allowed := noSampleInWorkload[name]; allowed && s.families[name] {
					continue
				}
				t.Errorf("%s: %s is not exported (no sample after the workload)", where, name)
				continue
			}
			for _, set := range sets {
				for l := range set {
					queryLabels[l] = true
				}
			}
		}
		for _, sel := range selector.FindAllStringSubmatch(q, -1) {
			name, sets := sel[1], s.samples[sel[1]]
			for _, m := range matcher.FindAllStringSubmatch(sel[2], -1) {
				label, op, value := m[1], m[2], m[3]
				if slices.Contains(addedLabels, label) {
					continue
				}
				if len(sets) == 0 {
					continue // reported above, or allowed
				}
				found := false
				for _, set := range sets {
					if v, ok := set[label]; ok && (op != "=" || v == value) {
						found = true
						break
					}
				}
				if !found {
					t.Errorf("%s: no %s sample has %s%s%q", where, name, label, op, value)
				}
			}
		}
		for _, by := range byClause.FindAllStringSubmatch(q, -1) {
			for _, label := range strings.Split(by[1], ",") {
				label = strings.TrimSpace(label)
				if label == "" || slices.Contains(addedLabels, label) {
					continue
				}
				if !queryLabels[label] && !onlyAllowed(names) {
					t.Errorf("%s: groups by %q, which none of its metrics has: %s", where, label, q)
				}
			}
		}
	}
	// The per-type labels carry the workload's names.
	found := false
	for _, set := range s.samples["iwf_state_calls_total"] {
		if set["workflow_type"] == "Monitored" && set["state"] == "Flaky" && set["outcome"] == "error" {
			found = true
		}
	}
	if !found {
		t.Errorf("iwf_state_calls_total has no error of Monitored/Flaky:\n%s", s.text)
	}
	t.Logf("%d queries use %d metric names", len(qs), len(used))
}

func onlyAllowed(names []string) bool {
	for _, n := range names {
		if _, ok := noSampleInWorkload[n]; !ok {
			return false
		}
	}
	return true
}

// runWorkload runs the workload on a real server and returns its scrape
// once retention has archived and deleted the closed runs.
func runWorkload(t *testing.T) scrape {
	t.Helper()
	ctx := context.Background()
	archiveDir := t.TempDir()
	srv, err := server.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "iwf.db"), server.Options{
		Engine: engine.Config{
			Retention:     time.Millisecond,
			SweepInterval: 50 * time.Millisecond,
			PollInterval:  100 * time.Millisecond,
		},
		ArchiveURL: "file://" + archiveDir,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(srv.Handler)
	t.Cleanup(func() {
		api.CloseClientConnections()
		api.Close()
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Close(cctx); err != nil {
			t.Errorf("close the server: %v", err)
		}
	})

	w := crashtest.NewWorker(t)
	move := func(next string) *iwfapi.WorkflowStateDecideResponse {
		return &iwfapi.WorkflowStateDecideResponse{StateDecision: &iwfapi.StateDecision{
			NextStates: &[]iwfapi.StateMovement{{StateId: next}},
		}}
	}
	w.State("Sleep", crashtest.State{
		WaitUntil: func(*iwfapi.WorkflowStateStartRequest) *iwfapi.WorkflowStateStartResponse {
			all := iwfapi.CommandWaitingTypeAllCompleted
			return &iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
				CommandWaitingType: &all,
				TimerCommands:      &[]iwfapi.TimerCommand{{CommandId: ptr("t"), DurationSeconds: ptr(int64(1))}},
			}}
		},
		Execute: func(*iwfapi.WorkflowStateDecideRequest) *iwfapi.WorkflowStateDecideResponse { return move("Flaky") },
	})
	var failed atomic.Int64
	w.State("Flaky", crashtest.State{
		Execute: func(req *iwfapi.WorkflowStateDecideRequest) *iwfapi.WorkflowStateDecideResponse {
			if req.Context.Attempt != nil && *req.Context.Attempt == 1 {
				failed.Add(1)
				return nil // a 500: the attempt fails and is retried
			}
			return move("_SYS_GRACEFUL_COMPLETING_WORKFLOW")
		},
	})

	client, err := iwfapi.NewClientWithResponses(api.URL)
	if err != nil {
		t.Fatal(err)
	}
	const n = 3
	for i := range n {
		resp, err := client.StartWorkflowWithResponse(ctx, iwfapi.WorkflowStartRequest{
			WorkflowId: fmt.Sprintf("mon-%d", i), IwfWorkflowType: "Monitored", IwfWorkerUrl: w.URL(),
			WorkflowTimeoutSeconds: 0, StartStateId: ptr("Sleep"),
		})
		if err != nil || resp.StatusCode() != http.StatusOK {
			t.Fatalf("start: %v %v", err, resp)
		}
	}
	// Retention deletes each run after it closes and is archived: wait
	// for all of them to be gone, reading the metrics.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		s := get(t, api.URL+"/metrics")
		if value(s, "iwf_retention_runs_deleted_total") == fmt.Sprint(n) && value(s, "iwf_retention_runs_archived_total") == fmt.Sprint(n) {
			if failed.Load() < n {
				t.Fatalf("%d attempts failed, want %d", failed.Load(), n)
			}
			return parseScrape(t, s)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the workflows were not closed, archived and deleted within 2 minutes:\n%s", s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}

// value is the value of a sample without labels ("" when absent).
func value(text, name string) string {
	for line := range strings.SplitSeq(text, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}

func ptr[T any](v T) *T { return &v }
