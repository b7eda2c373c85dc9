package engine

import (
	"fmt"
	"strings"
	"testing"
)

// TestStateCallLabelsBounded: iwf_state_calls_total names the first
// MaxMetricWorkflowTypes workflow types and MaxMetricStatesPerType states
// of each; every later type or state counts under OtherLabel, so however
// many distinct names a workload brings, the series stay bounded and no
// call goes uncounted.
func TestStateCallLabelsBounded(t *testing.T) {
	m := newMetrics()
	record := func(wt, st string) {
		lt, ls := m.stateLabels.labels(wt, st)
		m.stateCalls.inc(lt, ls, "execute", "ok")
	}
	const types, states = MaxMetricWorkflowTypes + 40, MaxMetricStatesPerType + 30
	calls := 0
	for i := range types {
		for j := range 3 {
			record(fmt.Sprintf("type-%d", i), fmt.Sprintf("state-%d", j))
			calls++
		}
	}
	for j := range states { // one type with many states
		record("type-0", fmt.Sprintf("many-%d", j))
		calls++
	}
	// Names admitted before the bounds were reached keep counting as themselves.
	record("type-1", "state-2")
	calls++

	var b strings.Builder
	m.stateCalls.write(&b)
	series, total := 0, 0
	seen := map[string]int{}
	for line := range strings.SplitSeq(strings.TrimSpace(b.String()), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		series++
		labels, value, _ := strings.Cut(line, "} ")
		var n int
		fmt.Sscan(value, &n)
		total += n
		seen[labels+"}"] = n
	}
	if total != calls {
		t.Fatalf("the series count %d calls, want %d", total, calls)
	}
	// Types: the admitted ones, 3 states each, plus type-0's extra states up to
	// the bound and its _other, plus one _other/_other series.
	want := MaxMetricWorkflowTypes*3 + (MaxMetricStatesPerType - 3) + 1 + 1
	if series != want {
		t.Fatalf("%d series, want %d:\n%s", series, want, b.String())
	}
	other := `iwf_state_calls_total{workflow_type="_other",state="_other",api="execute",outcome="ok"}`
	if got := seen[other]; got != (types-MaxMetricWorkflowTypes)*3 {
		t.Fatalf("%s = %d, want %d", other, got, (types-MaxMetricWorkflowTypes)*3)
	}
	type0Other := `iwf_state_calls_total{workflow_type="type-0",state="_other",api="execute",outcome="ok"}`
	if got := seen[type0Other]; got != states-(MaxMetricStatesPerType-3) {
		t.Fatalf("%s = %d, want %d", type0Other, got, states-(MaxMetricStatesPerType-3))
	}
	if got := seen[`iwf_state_calls_total{workflow_type="type-1",state="state-2",api="execute",outcome="ok"}`]; got != 2 {
		t.Fatalf("type-1/state-2 = %d, want 2", got)
	}
}

// TestMetricLabelValuesEscaped: workflow types come from users; quotes,
// backslashes, newlines and invalid UTF-8 are escaped or replaced so the
// exposition stays parseable, and long names are cut on a character
// boundary.
func TestMetricLabelValuesEscaped(t *testing.T) {
	m := newMetrics()
	long := strings.Repeat("é", 100) // 200 bytes
	for _, wt := range []string{"a\"b\\c\nd", "bad\xffutf8", long} {
		lt, ls := m.stateLabels.labels(wt, "s")
		m.stateCalls.inc(lt, ls, "waitUntil", "error")
	}
	var b strings.Builder
	m.stateCalls.write(&b)
	out := b.String()
	for _, want := range []string{
		`workflow_type="a\"b\\c\nd"`,
		"workflow_type=\"bad\uFFFDutf8\"",
		`workflow_type="` + strings.Repeat("é", 64) + `"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
	if strings.Count(out, "\n") != 2+3 {
		t.Errorf("want 2 comment lines and 3 series:\n%s", out)
	}
}

// TestLabelFreeCountersStartAtZero: a counter without labels is exported
// at 0 before its first increment, so that alerts on its rate see it.
func TestLabelFreeCountersStartAtZero(t *testing.T) {
	m := newMetrics()
	var b strings.Builder
	m.storeUnavailable.write(&b)
	if !strings.Contains(b.String(), "\niwf_store_unavailable_total 0\n") {
		t.Fatalf("got %q", b.String())
	}
	m.storeUnavailable.inc()
	b.Reset()
	m.storeUnavailable.write(&b)
	if !strings.Contains(b.String(), "\niwf_store_unavailable_total 1\n") || strings.Contains(b.String(), "total 0") {
		t.Fatalf("got %q", b.String())
	}
}
