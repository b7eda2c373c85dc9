package chaos

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The checker of the linear workload: three models, each a porcupine
// NondeterministicModel partitioned by workflow and attribute, and the
// report of a violation (the smallest failing prefix of the partition, the
// longest partial linearization porcupine found, and porcupine's HTML
// visualization).

type opKind string

const (
	opIncr   opKind = "incr"   // the locking RPC: counter += 1, returns the new value
	opSet    opKind = "set"    // dataobjects/set of the register
	opGet    opKind = "get"    // dataobjects/get of the register
	opSignal opKind = "signal" // a signal, counted by the workflow
	opCount  opKind = "count"  // dataobjects/get of the signal count
)

// outcome is what a call's answer says about its effect.
type outcome int

const (
	opOK            outcome = iota // answered 2xx: took effect, returned Value
	opFailed                       // refused or never sent: no effect
	opIndeterminate                // timed out, cut, or 5xx: may or may not take effect, at any time
)

func (o outcome) String() string {
	return [...]string{"ok", "failed", "indeterminate"}[o]
}

// linInput is a porcupine operation's input.
type linInput struct {
	Kind    opKind
	WF, Key string
	// ID names an increment (the RPC's input); Value is what a set writes
	// or a signal carries, unique in the run.
	ID, Value string
	// Settled marks the signal count read after every signal that arrived
	// was consumed.
	Settled bool
}

// linOutput is a porcupine operation's output.
type linOutput struct {
	Outcome outcome
	// Value is what an operation that answered 2xx returned.
	Value string
	// Maybe are, for an indeterminate increment, the values the worker
	// answered for it: if it took effect, the counter became one of them.
	Maybe []string
	// Err describes a failed or indeterminate call.
	Err string
}

// byKey partitions a history by workflow and attribute.
func byKey(history []porcupine.Operation) [][]porcupine.Operation {
	parts := map[string][]porcupine.Operation{}
	for _, op := range history {
		in := op.Input.(linInput)
		parts[in.WF+"/"+in.Key] = append(parts[in.WF+"/"+in.Key], op)
	}
	out := make([][]porcupine.Operation, 0, len(parts))
	for _, k := range sortedKeys(parts) {
		out = append(out, parts[k])
	}
	return out
}

func atoi(s string) (int, bool) {
	if s == "" {
		return 0, true // an attribute never written reads as 0
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// linearModel is one model and the attribute whose operations it checks.
type linearModel struct {
	name  string
	key   string
	model porcupine.NondeterministicModel
}

// A call whose outcome is unknown may take effect at any moment after it
// was made, or never. Porcupine can say so itself (the call returns at
// +infinity), but every such call then stays pending to the end of the
// history, and once a history is not linearizable the search tries every
// subset of them at every step: with 40 of them it ran out of time instead
// of finding the violation. The models therefore linearize such a call at
// its invocation (it returns at once) as a pending effect carried in the
// state, which any later operation may find taken, at most once, or never.
// That is the same set of histories: taking a pending effect as late as an
// operation needs it constrains nothing that taking it earlier would not.

// ctrState is the counter's value and its pending increments: for each
// increment whose outcome is unknown and that may still take effect, the
// values the worker answered for it ("5" or "5|7"), sorted, joined by ",".
type ctrState struct {
	n       int
	pending string
}

// regState is the register's value and the values of the sets whose
// outcome is unknown that may still take effect, sorted, joined by ",".
type regState struct {
	value, pending string
}

// sigState is the signal counter's state: signals known to have arrived,
// signals that may still turn out to have arrived (their calls' outcome is
// unknown), and the count the workflow had reached when it was last read.
type sigState struct{ arrived, pending, counted int }

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func joinSorted(items []string) string {
	items = append([]string(nil), items...)
	sort.Strings(items)
	return strings.Join(items, ",")
}

// canon drops the pending values the counter has passed (it only grows),
// and the increments left with none.
func (st ctrState) canon() ctrState {
	items := splitList(st.pending)
	st.pending = ""
	for _, item := range items {
		st = st.withPending(strings.Split(item, "|"))
	}
	return st
}

// withPending adds the pending increment with values to st, keeping only
// the values above its counter; nothing when none is left.
func (st ctrState) withPending(values []string) ctrState {
	var keep []string
	for _, v := range values {
		if n, ok := atoi(v); ok && v != "" && n > st.n {
			keep = append(keep, strconv.Itoa(n))
		}
	}
	if len(keep) == 0 {
		return st
	}
	sort.Strings(keep)
	st.pending = joinSorted(append(splitList(st.pending), strings.Join(keep, "|")))
	return st
}

// reach returns the states in which the counter, at st.n, reaches target
// by pending increments taking effect one after another, each with one of
// its values.
func (st ctrState) reach(target int) []ctrState {
	if st.n == target {
		return []ctrState{st}
	}
	if st.n > target {
		return nil
	}
	var out []ctrState
	items := splitList(st.pending)
	tried := map[string]bool{}
	for i, item := range items {
		if tried[item] || !slices.Contains(strings.Split(item, "|"), strconv.Itoa(st.n+1)) {
			continue
		}
		tried[item] = true
		rest := append(append([]string(nil), items[:i]...), items[i+1:]...)
		next := ctrState{n: st.n + 1, pending: strings.Join(rest, ",")}.canon()
		out = append(out, next.reach(target)...)
	}
	return out
}

var linearModels = []linearModel{
	// A counter with increment-and-return: an increment that answered
	// returns the new value; one whose answer was lost took effect with a
	// value the worker answered for it (none if the worker never saw it),
	// at any moment after it was made, or not at all.
	{name: "counter", key: keyCounter, model: porcupine.NondeterministicModel{
		Partition: byKey,
		Init:      func() []any { return []any{ctrState{}} },
		Step: func(state, input, output any) []any {
			st, out := state.(ctrState), output.(linOutput)
			switch out.Outcome {
			case opOK:
				v, ok := atoi(out.Value)
				if !ok || out.Value == "" {
					return nil
				}
				var next []any
				for _, r := range st.reach(v - 1) {
					r.n = v
					next = append(next, r.canon())
				}
				return next
			case opIndeterminate:
				return []any{st.withPending(out.Maybe)}
			}
			return []any{st}
		},
		DescribeOperation: describeOp,
		DescribeState: func(s any) string {
			st := s.(ctrState)
			return fmt.Sprintf("%d pending=[%s]", st.n, st.pending)
		},
	}},
	// A register: a set with a unique value, a get returns the last set
	// (or a set whose outcome was unknown, taking effect then).
	{name: "register", key: keyRegister, model: porcupine.NondeterministicModel{
		Partition: byKey,
		Init:      func() []any { return []any{regState{}} },
		Step: func(state, input, output any) []any {
			st, in, out := state.(regState), input.(linInput), output.(linOutput)
			switch {
			case in.Kind == opSet && out.Outcome == opOK:
				st.value = in.Value
			case in.Kind == opSet && out.Outcome == opIndeterminate:
				st.pending = joinSorted(append(splitList(st.pending), in.Value))
			case in.Kind == opGet && out.Outcome == opOK && out.Value != st.value:
				pending := splitList(st.pending)
				i := slices.Index(pending, out.Value)
				if i < 0 {
					return nil
				}
				st.value, st.pending = out.Value, strings.Join(slices.Delete(pending, i, i+1), ",")
			}
			return []any{st}
		},
		DescribeOperation: describeOp,
		DescribeState: func(s any) string {
			st := s.(regState)
			return fmt.Sprintf("%q pending=[%s]", st.value, st.pending)
		},
	}},
	// A counter of signals: a signal adds one to those that arrived (no
	// output); the count the workflow keeps lags behind, since a signal is
	// consumed after it is acknowledged, but never exceeds the signals that
	// arrived and never goes back; read once every arrived signal was
	// consumed, it equals them: between the acknowledged and the attempted
	// signals.
	{name: "signals", key: keySignals, model: porcupine.NondeterministicModel{
		Partition: byKey,
		Init:      func() []any { return []any{sigState{}} },
		Step: func(state, input, output any) []any {
			st, in, out := state.(sigState), input.(linInput), output.(linOutput)
			switch {
			case in.Kind == opSignal && out.Outcome == opOK:
				st.arrived++
			case in.Kind == opSignal && out.Outcome == opIndeterminate:
				st.pending++
			case in.Kind == opCount && out.Outcome == opOK:
				v, ok := atoi(out.Value)
				if !ok || v < st.counted || v > st.arrived+st.pending || (in.Settled && v < st.arrived) {
					return nil
				}
				// The count needs at least v arrived (exactly v when
				// settled): pending signals take effect as needed.
				took := max(0, v-st.arrived)
				st.arrived, st.pending, st.counted = st.arrived+took, st.pending-took, v
			}
			return []any{st}
		},
		DescribeOperation: describeOp,
		DescribeState: func(s any) string {
			st := s.(sigState)
			return fmt.Sprintf("arrived=%d pending=%d counted=%d", st.arrived, st.pending, st.counted)
		},
	}},
}

// describeOp is an operation as the report and the visualization show it.
func describeOp(input, output any) string {
	in, out := input.(linInput), output.(linOutput)
	var call string
	switch in.Kind {
	case opIncr:
		call = "incr(" + in.ID + ")"
	case opSet, opSignal:
		call = string(in.Kind) + "(" + in.Value + ")"
	case opCount:
		call = "count()"
		if in.Settled {
			call = "settled count()"
		}
	default:
		call = string(in.Kind) + "()"
	}
	switch out.Outcome {
	case opOK:
		if in.Kind == opSet || in.Kind == opSignal {
			return call + " ok"
		}
		return fmt.Sprintf("%s -> %q", call, out.Value)
	case opFailed:
		return call + " failed, no effect (" + out.Err + ")"
	}
	s := call + " indeterminate (" + out.Err + ")"
	if in.Kind == opIncr {
		s += fmt.Sprintf(", worker answered %v", out.Maybe)
	}
	return s
}

// linearResult is what the checker found in one run's history.
type linearResult struct {
	ops, indeterminate, failed int
	violations                 int // partitions that are not linearizable
	unknown                    int // partitions porcupine could not decide in time
}

// linearCheckTimeout bounds porcupine's search for one model.
const linearCheckTimeout = 5 * time.Minute

// checkLinear checks a history against the three models and logs every
// violation: the smallest failing prefix of each partition that is not
// linearizable, the longest partial linearization, and the path of the
// visualization. With CHAOS_LINEAR_DIR set, the visualization of every
// model's whole history is written there too.
func checkLinear(t testing.TB, store string, history []porcupine.Operation) linearResult {
	t.Helper()
	var res linearResult
	res.ops = len(history)
	for _, op := range history {
		switch op.Output.(linOutput).Outcome {
		case opIndeterminate:
			res.indeterminate++
		case opFailed:
			res.failed++
		}
	}
	for _, m := range linearModels {
		var sub []porcupine.Operation
		for _, op := range history {
			if op.Input.(linInput).Key == m.key {
				sub = append(sub, op)
			}
		}
		if len(sub) == 0 {
			continue
		}
		model := m.model.ToModel()
		began := time.Now()
		result, info := porcupine.CheckOperationsVerbose(model, sub, linearCheckTimeout)
		t.Logf("linearizability: model %s, %d operations in %d partitions: %s in %s",
			m.name, len(sub), len(byKey(sub)), result, time.Since(began).Round(time.Millisecond))
		if dir := os.Getenv("CHAOS_LINEAR_DIR"); dir != "" {
			path := filepath.Join(dir, fmt.Sprintf("%s-%s.html", store, m.name))
			if err := os.MkdirAll(dir, 0o755); err == nil {
				if err := porcupine.VisualizePath(model, info, path); err != nil {
					t.Logf("visualization of %s: %v", m.name, err)
				}
			}
		}
		switch result {
		case porcupine.Unknown:
			res.unknown++
			t.Logf("linearizability: porcupine could not decide model %s within %s; its history: %s", m.name, linearCheckTimeout, saveHistory(store, m.name, sub))
		case porcupine.Illegal:
			for _, part := range byKey(sub) {
				if porcupine.CheckOperationsTimeout(model, part, linearCheckTimeout) == porcupine.Illegal {
					res.violations++
					reportViolation(t, store, m.name, model, part)
				}
			}
		}
	}
	return res
}

// reportViolation logs the smallest failing prefix of a partition that is
// not linearizable and writes its visualization.
func reportViolation(t testing.TB, store, name string, model porcupine.Model, part []porcupine.Operation) {
	t.Helper()
	part = append([]porcupine.Operation(nil), part...)
	sort.SliceStable(part, func(i, j int) bool { return part[i].Call < part[j].Call })
	smallest := smallestFailing(model, part)
	_, info := porcupine.CheckOperationsVerbose(model, smallest, linearCheckTimeout)
	in := part[0].Input.(linInput)
	var b strings.Builder
	fmt.Fprintf(&b, "linearizability violation: store=%s model=%s partition %s/%s: the smallest failing prefix, %d of the partition's %d operations, in order of invocation:\n",
		store, name, in.WF, in.Key, len(smallest), len(part))
	b.WriteString(describeOps(smallest))
	longest := 0
	var partial []porcupine.Operation
	for _, p := range info.PartialLinearizationsOperations() {
		for _, l := range p {
			if len(l) > longest {
				longest, partial = len(l), l
			}
		}
	}
	fmt.Fprintf(&b, "the longest partial linearization (%d operations; no pending operation can follow it):\n", longest)
	state := model.Init()
	for _, op := range partial {
		_, state = model.Step(state, op.Input, op.Output)
		fmt.Fprintf(&b, "  %s => %s\n", model.DescribeOperation(op.Input, op.Output), model.DescribeState(state))
	}
	dir, err := linearDir()
	if err == nil {
		base := filepath.Join(dir, fmt.Sprintf("%s-%s-%s", store, name, strings.NewReplacer("/", "_", " ", "_").Replace(in.WF)))
		if err = porcupine.VisualizePath(model, info, base+".html"); err == nil {
			_, full := porcupine.CheckOperationsVerbose(model, part, linearCheckTimeout)
			err = porcupine.VisualizePath(model, full, base+"-whole.html")
			fmt.Fprintf(&b, "visualization: %s.html (the whole partition: %s-whole.html)\n", base, base)
		}
	}
	if err != nil {
		fmt.Fprintf(&b, "visualization not written: %v\n", err)
	}
	fmt.Fprintf(&b, "the partition's history (JSON): %s\n", saveHistory(store, name+"-"+in.WF, part))
	t.Log(b.String())
}

// saveHistory writes a model's history as JSON next to the visualizations,
// for a look at it without the run, and returns the path (or why not).
func saveHistory(store, name string, ops []porcupine.Operation) string {
	dir, err := linearDir()
	if err != nil {
		return err.Error()
	}
	type op struct {
		Client       int
		Call, Return int64
		Input        linInput
		Output       linOutput
	}
	var out []op
	for _, o := range ops {
		out = append(out, op{o.ClientId, o.Call, o.Return, o.Input.(linInput), o.Output.(linOutput)})
	}
	data, err := json.Marshal(out)
	if err != nil {
		return err.Error()
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%s-history.json", store, name))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return err.Error()
	}
	return path
}

// linearDir is where violations' visualizations go: CHAOS_LINEAR_DIR, or a
// new temporary directory that outlives the test.
func linearDir() (string, error) {
	if dir := os.Getenv("CHAOS_LINEAR_DIR"); dir != "" {
		return dir, os.MkdirAll(dir, 0o755)
	}
	return os.MkdirTemp("", "chaos-linear-")
}

// smallestFailing returns the shortest prefix of a non-linearizable
// partition that is still not linearizable: the history as it stood at the
// earliest moment an operation returned and made it so (operations invoked
// by then and not yet returned turned indeterminate).
func smallestFailing(model porcupine.Model, ops []porcupine.Operation) []porcupine.Operation {
	var returns []int64
	for _, op := range ops {
		if op.Output.(linOutput).Outcome != opIndeterminate {
			returns = append(returns, op.Return)
		}
	}
	sort.Slice(returns, func(i, j int) bool { return returns[i] < returns[j] })
	illegal := func(i int) bool {
		return porcupine.CheckOperationsTimeout(model, prefix(ops, returns[i]), time.Minute) == porcupine.Illegal
	}
	if len(returns) == 0 || !illegal(len(returns)-1) {
		return ops
	}
	lo, hi := 0, len(returns)-1 // illegal(hi) holds
	for lo < hi {
		mid := (lo + hi) / 2
		if illegal(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return prefix(ops, returns[hi])
}

// prefix is the history as it stood at time at: the operations invoked by
// then, those that had not returned turned indeterminate.
func prefix(ops []porcupine.Operation, at int64) []porcupine.Operation {
	var out []porcupine.Operation
	for _, op := range ops {
		if op.Call > at {
			continue
		}
		if o := op.Output.(linOutput); op.Return > at && o.Outcome == opOK {
			if op.Input.(linInput).Kind == opIncr {
				o.Maybe = append(append([]string(nil), o.Maybe...), o.Value)
			}
			o.Outcome, o.Value, o.Err = opIndeterminate, "", "not returned yet"
			op.Output, op.Return = o, op.Call // as every indeterminate call (see the models)
		}
		out = append(out, op)
	}
	return out
}

// describeOps lists operations one a line: client, invocation and return
// (ms since the workload began; ∞ for an indeterminate one), what it was.
func describeOps(ops []porcupine.Operation) string {
	var b strings.Builder
	for _, op := range ops {
		ret := fmt.Sprintf("%.3f]", float64(op.Return)/1e6)
		if op.Output.(linOutput).Outcome == opIndeterminate {
			ret = "∞)"
		}
		in := op.Input.(linInput)
		fmt.Fprintf(&b, "  client %d [%.3f, %s ms %s %s\n", op.ClientId, float64(op.Call)/1e6, ret, in.WF, describeOp(op.Input, op.Output))
	}
	return b.String()
}

// TestLinearModels runs the three models on histories of known outcome:
// the checker must find what is wrong and accept what an indeterminate call
// allows.
func TestLinearModels(t *testing.T) {
	const inf = math.MaxInt64
	op := func(client int, call, ret int64, in linInput, out linOutput) porcupine.Operation {
		in.WF = "w"
		switch in.Kind {
		case opIncr:
			in.Key = keyCounter
		case opSet, opGet:
			in.Key = keyRegister
		default:
			in.Key = keySignals
		}
		if ret == inf {
			ret = call // an indeterminate call is linearized at its invocation, its effect pending (see the models)
		}
		return porcupine.Operation{ClientId: client, Call: call, Return: ret, Input: in, Output: out}
	}
	incr := func(id string) linInput { return linInput{Kind: opIncr, ID: id} }
	set := func(v string) linInput { return linInput{Kind: opSet, Value: v} }
	get, count, settled := linInput{Kind: opGet}, linInput{Kind: opCount}, linInput{Kind: opCount, Settled: true}
	signal := linInput{Kind: opSignal}
	okv := func(v string) linOutput { return linOutput{Outcome: opOK, Value: v} }
	unknown := func(maybe ...string) linOutput { return linOutput{Outcome: opIndeterminate, Maybe: maybe} }
	refused := linOutput{Outcome: opFailed}
	cases := []struct {
		name    string
		history []porcupine.Operation
		illegal bool
	}{
		{"increments in order", []porcupine.Operation{op(0, 0, 10, incr("a"), okv("1")), op(1, 20, 30, incr("b"), okv("2"))}, false},
		{"a lost update: two increments return 1", []porcupine.Operation{op(0, 0, 10, incr("a"), okv("1")), op(1, 5, 15, incr("b"), okv("1"))}, true},
		{"an increment returns a value from before an earlier one", []porcupine.Operation{op(0, 0, 10, incr("a"), okv("2")), op(1, 20, 30, incr("b"), okv("1"))}, true},
		{"a refused increment changes nothing", []porcupine.Operation{op(0, 0, 10, incr("a"), refused), op(1, 20, 30, incr("b"), okv("1"))}, false},
		{"an indeterminate increment that took effect", []porcupine.Operation{op(0, 0, inf, incr("a"), unknown("1")), op(1, 20, 30, incr("b"), okv("2"))}, false},
		{"an indeterminate increment that did not", []porcupine.Operation{op(0, 0, inf, incr("a"), unknown("1")), op(1, 20, 30, incr("b"), okv("1"))}, false},
		{"an indeterminate increment the worker never saw cannot take effect", []porcupine.Operation{op(0, 0, inf, incr("a"), unknown()), op(1, 20, 30, incr("b"), okv("2"))}, true},
		{"a read after a set sees it", []porcupine.Operation{op(0, 0, 10, set("x"), okv("")), op(1, 20, 30, get, okv("x"))}, false},
		{"a stale read after a set", []porcupine.Operation{op(0, 0, 10, set("x"), okv("")), op(1, 20, 30, get, okv(""))}, true},
		{"a read concurrent with a set may see either", []porcupine.Operation{op(0, 0, 10, set("x"), okv("")), op(1, 5, 30, get, okv(""))}, false},
		{"an indeterminate set seen late", []porcupine.Operation{op(0, 0, inf, set("x"), unknown()), op(1, 20, 30, get, okv("")), op(1, 40, 50, get, okv("x"))}, false},
		{"a read that goes back", []porcupine.Operation{op(0, 0, inf, set("x"), unknown()), op(1, 20, 30, get, okv("x")), op(1, 40, 50, get, okv(""))}, true},
		{"a count lags behind an acknowledged signal", []porcupine.Operation{op(0, 0, 10, signal, okv("")), op(1, 20, 30, count, okv("0")), op(1, 40, 50, count, okv("1"))}, false},
		{"a count above the signals sent", []porcupine.Operation{op(0, 0, 10, signal, okv("")), op(1, 20, 30, count, okv("2"))}, true},
		{"a count that goes back", []porcupine.Operation{op(0, 0, 10, signal, okv("")), op(1, 20, 30, count, okv("1")), op(1, 40, 50, count, okv("0"))}, true},
		{"a settled count misses an acknowledged signal", []porcupine.Operation{op(0, 0, 10, signal, okv("")), op(1, 20, 30, settled, okv("0"))}, true},
		{"a settled count with an indeterminate signal that arrived", []porcupine.Operation{op(0, 0, 10, signal, okv("")), op(0, 15, inf, signal, unknown()), op(1, 20, 30, settled, okv("2"))}, false},
		{"a settled count with an indeterminate signal that did not", []porcupine.Operation{op(0, 0, 10, signal, okv("")), op(0, 15, inf, signal, unknown()), op(1, 20, 30, settled, okv("1"))}, false},
		{"an indeterminate increment takes effect later, with the value the worker answered", []porcupine.Operation{op(0, 0, inf, incr("a"), unknown("2")), op(1, 10, 20, incr("b"), okv("1")), op(1, 30, 40, incr("c"), okv("3"))}, false},
		{"an indeterminate increment cannot take effect with another value", []porcupine.Operation{op(0, 0, inf, incr("a"), unknown("1")), op(1, 10, 20, incr("b"), okv("1")), op(1, 30, 40, incr("c"), okv("3"))}, true},
		{"an indeterminate set takes effect after a later set", []porcupine.Operation{op(0, 0, inf, set("x"), unknown()), op(1, 10, 20, set("y"), okv("")), op(1, 30, 40, get, okv("x"))}, false},
		{"an indeterminate set takes effect once", []porcupine.Operation{op(0, 0, inf, set("x"), unknown()), op(1, 10, 20, get, okv("x")), op(1, 30, 40, set("y"), okv("")), op(1, 50, 60, get, okv("x"))}, true},
		{"indeterminate signals counted later", []porcupine.Operation{op(0, 0, inf, signal, unknown()), op(0, 5, inf, signal, unknown()), op(1, 10, 20, count, okv("1")), op(1, 30, 40, settled, okv("2"))}, false},
		{"more counted than attempted", []porcupine.Operation{op(0, 0, inf, signal, unknown()), op(1, 10, 20, count, okv("1")), op(1, 30, 40, settled, okv("2"))}, true},
		{"a failed signal cannot be counted", []porcupine.Operation{op(0, 0, 10, signal, refused), op(1, 20, 30, settled, okv("1"))}, true},
	}
	t.Setenv("CHAOS_LINEAR_DIR", t.TempDir())
	for _, c := range cases {
		res := checkLinear(quietTB{t}, "test", c.history)
		if got := res.violations == 1; got != c.illegal || res.violations > 1 || res.unknown > 0 {
			t.Errorf("%s: %+v, want illegal=%v", c.name, res, c.illegal)
		}
	}

	// The smallest failing prefix of a long history ends where it went
	// wrong: ten good increments, a lost update, ten more.
	var ops []porcupine.Operation
	at := int64(0)
	for i := 1; i <= 21; i++ {
		v := i
		if i > 11 {
			v = i - 1
		}
		ops = append(ops, op(i%3, at, at+10, incr(fmt.Sprint(i)), okv(strconv.Itoa(v))))
		at += 20
	}
	ops[10].Call = ops[9].Call + 5 // the lost update: 10 and 11 overlap and both return 10
	ops[10].Output = okv("10")
	model := linearModels[0].model.ToModel()
	if porcupine.CheckOperations(model, ops) {
		t.Fatal("the history with a lost update is linearizable")
	}
	if got := smallestFailing(model, ops); len(got) != 11 {
		t.Errorf("smallest failing prefix: %d operations, want 11:\n%s", len(got), describeOps(got))
	}
}

// quietTB keeps the checker's logs of histories that are meant to fail out
// of a passing test's output.
type quietTB struct{ testing.TB }

func (quietTB) Logf(string, ...any) {}
func (quietTB) Log(...any)          {}
func (quietTB) Helper()             {}
