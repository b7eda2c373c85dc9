package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/audit"
)

// TestLimitsAndStatsPages runs the whole server with a reader and an
// operator token: the reader sees the states page but no limits page and
// may not set a limit; the operator sets a limit (after a confirmation),
// sees it listed, removes it, and both changes are audited with the limit.
// The states page shows where the demo runs stand.
func TestLimitsAndStatsPages(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs := newRoleServer(t, ctx)
	e, reader, operator := rs.e, rs.reader, rs.operator
	e.start(t, "order-1")
	waitCommands(t, e, "order-1")

	// The states page, for a reader.
	body := reader.open("/ui/stats?type=" + demoType)
	for _, want := range []string{`id="nav-stats"`, `data-state="approve" data-phase="WAITING_COMMANDS"`, `data-count="1"`,
		"signal <code>approval</code> (1)", "timer (1)", "1 open runs of <code>" + demoType + "</code> read", "order-1"} {
		if !strings.Contains(body, want) {
			t.Errorf("states page lacks %q", want)
		}
	}
	if strings.Contains(body, `id="nav-limits"`) {
		t.Error("the reader's pages link to the limits page")
	}
	if t.Failed() {
		t.Fatalf("states page:\n%s", body)
	}
	if body := reader.open("/ui/stats"); !strings.Contains(body, `id="stats-form"`) || strings.Contains(body, `id="stats"`) {
		t.Fatalf("states page without a type:\n%s", body)
	}
	if status, _ := get(t, reader.c, e.url+"/ui/limits"); status != http.StatusForbidden {
		t.Fatalf("reader's limits page: %d, want 403", status)
	}
	set := func(token, value string) url.Values {
		return url.Values{"kind": {string(engine.LimitWorkerRate)}, "target": {"Pay.Internal:443"}, "value": {value}, "csrf": {token}}
	}
	confirmed := func(f url.Values) url.Values { f.Set("confirm", "yes"); return f }
	if status, body, _ := reader.post("limit-set", confirmed(set(reader.token, "0")), nil); status != http.StatusForbidden || !strings.Contains(body, "operator") {
		t.Fatalf("reader's limit set: %d\n%s", status, body)
	}

	// The operator: the page, a confirmation, the limit set.
	if body := operator.open("/ui/limits"); !strings.Contains(body, `id="nav-limits"`) || !strings.Contains(body, `id="limit-set-form"`) || !strings.Contains(body, "No limits") {
		t.Fatalf("operator's limits page:\n%s", body)
	}
	status, body, _ := operator.post("limit-set", set(operator.token, "0"), map[string]string{"Origin": e.url})
	if status != http.StatusOK || !strings.Contains(body, `id="confirm"`) || !strings.Contains(body, "0 pauses the calls") {
		t.Fatalf("confirmation: %d\n%s", status, body)
	}
	if ls, _ := e.eng.ListLimits(ctx); len(ls) != 0 {
		t.Fatalf("a limit set before the confirmation: %+v", ls)
	}
	if status, _, loc := operator.post("limit-set", confirmed(set(operator.token, "0")), map[string]string{"Origin": e.url}); status != http.StatusSeeOther || loc != "/ui/limits" {
		t.Fatalf("limit set: %d %q", status, loc)
	}
	ls, err := e.eng.ListLimits(ctx)
	if err != nil || len(ls) != 1 || ls[0].Target != "pay.internal:443" || ls[0].Value != 0 || ls[0].UpdatedBy != "oncall" {
		t.Fatalf("limits: %+v %v", ls, err)
	}
	body = operator.open("/ui/limits")
	if !strings.Contains(body, `data-limit="rate:pay.internal:443"`) || !strings.Contains(body, "s-paused") || !strings.Contains(body, "Limit set") {
		t.Fatalf("limits page after the set:\n%s", body)
	}
	// What the engine refuses, the page shows.
	if status, body, _ := operator.post("limit-set", confirmed(url.Values{"kind": {string(engine.LimitWorkerConcurrency)}, "target": {"no-port"},
		"value": {"1"}, "csrf": {operator.token}}), map[string]string{"Origin": e.url}); status != http.StatusBadRequest || !strings.Contains(body, "HOST:PORT") {
		t.Fatalf("an invalid limit: %d\n%s", status, body)
	}
	del := url.Values{"kind": {string(engine.LimitWorkerRate)}, "target": {"pay.internal:443"}, "csrf": {operator.token}, "confirm": {"yes"}}
	if status, _, _ := operator.post("limit-delete", del, map[string]string{"Origin": e.url}); status != http.StatusSeeOther {
		t.Fatalf("limit delete: %d", status)
	}
	if ls, _ := e.eng.ListLimits(ctx); len(ls) != 0 {
		t.Fatalf("limits after the removal: %+v", ls)
	}

	var got []string
	for _, line := range strings.Split(strings.TrimSpace(rs.audit.String()), "\n") {
		var en audit.Entry
		if err := json.Unmarshal([]byte(line), &en); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		got = append(got, en.Operation+" "+en.Actor+" "+en.Source+" "+en.Outcome+" "+en.Limit)
	}
	want := []string{"limit/set dash console forbidden ", "limit/set oncall console ok rate:pay.internal:443=0",
		"limit/set oncall console invalid_argument ", "limit/delete oncall console ok rate:pay.internal:443 removed"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("audit: %q, want %q", got, want)
	}
}
