package main

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// us is a moment microseconds after an arbitrary origin.
func us(n int) time.Time { return time.Unix(1000, 0).Add(time.Duration(n) * time.Microsecond) }

// bdFixture is one W1 workflow as the breakdown sees it: the bench's
// timestamps and the server's spans of its trace (microseconds):
//
//	client sends start 0; start request 100..900, its store.update 300..800
//	execute S1: phase 1000..2300, worker call span 1300..1800, worker
//	  received 1500 and answered 1600, store.update 1900..2200
//	execute S2: phase 2400..3400, worker call span 2500..3000, worker
//	  received 2700 and answered 2750, store.update 3100..3300
//	getWithWait request 1200..3500; the client has the result at 3700
func bdFixture() (bdWorkflow, []bdSpan) {
	w := bdWorkflow{traceID: "t", sent: us(0), returned: us(3700), calls: []workerCall{
		{api: "execute", state: "S1", traceparent: "00-0123456789abcdef0123456789abcdef-00000000000000c1-01", arrived: us(1500), answered: us(1600)},
		{api: "execute", state: "S2", traceparent: "00-0123456789abcdef0123456789abcdef-00000000000000c2-01", arrived: us(2700), answered: us(2750)},
	}}
	spans := []bdSpan{
		{id: "00000000000000a0", parent: "", name: spanStart, start: us(100), end: us(900)},
		{id: "00000000000000a1", parent: "00000000000000a0", name: spanStoreUpdate, start: us(300), end: us(800)},
		{id: "00000000000000b1", parent: "00000000000000a0", name: "state S1 (S1-1)", start: us(0), end: us(2300)},
		{id: "00000000000000d1", parent: "00000000000000b1", name: "execute S1", start: us(1000), end: us(2300)},
		{id: "00000000000000c1", parent: "00000000000000d1", name: "worker execute", start: us(1300), end: us(1800)},
		{id: "00000000000000e0", parent: "00000000000000d1", name: spanStoreUpdate, start: us(1010), end: us(1100)}, // before the call: not its commit
		{id: "00000000000000e1", parent: "00000000000000d1", name: spanStoreUpdate, start: us(1900), end: us(2200)},
		{id: "00000000000000b2", parent: "00000000000000a0", name: "state S2 (S2-1)", start: us(1900), end: us(3400)},
		{id: "00000000000000d2", parent: "00000000000000b2", name: "execute S2", start: us(2400), end: us(3400)},
		{id: "00000000000000c2", parent: "00000000000000d2", name: "worker execute", start: us(2500), end: us(3000)},
		{id: "00000000000000e2", parent: "00000000000000d2", name: spanStoreUpdate, start: us(3100), end: us(3300)},
		{id: "00000000000000f0", parent: "", name: spanGetWithWait, start: us(1200), end: us(3500)},
	}
	return w, spans
}

func TestLegsOf(t *testing.T) {
	w, spans := bdFixture()
	legs, total, err := legsOf(w, spans)
	if err != nil {
		t.Fatal(err)
	}
	d := func(n int) time.Duration { return time.Duration(n) * time.Microsecond }
	want := []leg{
		{name: "start -> run committed", d: d(800), parts: []legPart{{"client->server", d(100)}, {"handler", d(200)}, {"tx", d(500)}}},
		{name: "commit -> execute S1 received", d: d(700), parts: []legPart{{"dispatch", d(200)}, {"read inputs", d(300)}, {"call", d(200)}}},
		{name: "execute S1 in the worker", d: d(100)},
		{name: "execute S1 answer -> committed", d: d(600), parts: []legPart{{"reply", d(200)}, {"apply", d(100)}, {"tx", d(300)}}},
		{name: "commit -> execute S2 received", d: d(500), parts: []legPart{{"dispatch", d(200)}, {"read inputs", d(100)}, {"call", d(200)}}},
		{name: "execute S2 in the worker", d: d(50)},
		{name: "execute S2 answer -> run closed, committed", d: d(550), parts: []legPart{{"reply", d(250)}, {"apply", d(100)}, {"tx", d(200)}}},
		{name: "close commit -> getWithWait returned", d: d(400), parts: []legPart{{"server", d(200)}, {"reply", d(200)}}},
	}
	if !reflect.DeepEqual(legs, want) {
		t.Errorf("legs:\n got %+v\nwant %+v", legs, want)
	}
	if total != d(3700) {
		t.Errorf("total %v, want 3.7ms", total)
	}
	var sum time.Duration
	for _, l := range legs {
		sum += l.d
	}
	if sum != total {
		t.Errorf("the legs add up to %v, the total is %v", sum, total)
	}

	// A worker call whose span did not arrive: the workflow cannot be cut.
	w.calls[1].traceparent = "00-0123456789abcdef0123456789abcdef-00000000000000ff-01"
	if _, _, err := legsOf(w, spans); err == nil || !strings.Contains(err.Error(), "worker call 2") {
		t.Errorf("missing worker-call span: err %v", err)
	}
	if _, _, err := legsOf(w, spans[2:]); err == nil {
		t.Error("missing start span: no error")
	}
}

func TestSummarizeLegs(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	wf := func(a, x, b float64) []leg {
		return []leg{{name: "a", d: ms(a), parts: []legPart{{"x", ms(x)}}}, {name: "b", d: ms(b)}}
	}
	per := [][]leg{wf(1, 0.4, 3), wf(2, 0.5, 1), {{name: "a", d: ms(1)}, {name: "c", d: ms(1)}}, wf(5, 0.1, 2)}
	totals := []time.Duration{ms(4), ms(3), ms(2), ms(7)}
	b := summarizeLegs(per, totals)
	// Nearest rank over 3 values: p50 is the 2nd, p90 the 3rd.
	want := []legStat{
		{name: "a", p50: ms(2), p90: ms(5), parts: []legPart{{"x", ms(0.4)}}},
		{name: "b", p50: ms(2), p90: ms(3)},
	}
	if !reflect.DeepEqual(b.legs, want) {
		t.Errorf("legs:\n got %+v\nwant %+v", b.legs, want)
	}
	if b.n != 3 || b.left != 1 || b.sumP50 != ms(4) || b.total.p50 != ms(4) || b.p90 != ms(7) {
		t.Errorf("n %d left %d sumP50 %v total p50 %v p90 %v; want 3, 1, 4ms, 4ms, 7ms", b.n, b.left, b.sumP50, b.total.p50, b.p90)
	}
}

func TestWithBreakdown(t *testing.T) {
	table := "run  p50\nW1 @128  1 ms\n  W1 @1  2 ms\nW2 @64  3 ms\n"
	sr := &storeReport{store: storeSQLite, breakdown: &breakdownResult{n: 1, legs: []legStat{{name: "a"}}}}
	got := withBreakdown(table, sr)
	lines := strings.Split(got, "\n")
	if len(lines) < 5 || !strings.HasPrefix(lines[3], "  breakdown of W1 @1 on SQLite") || lines[len(lines)-2] != "W2 @64  3 ms" {
		t.Errorf("breakdown not under the W1 @1 row:\n%s", got)
	}
}

func TestSpanIDOf(t *testing.T) {
	if got := spanIDOf("00-0123456789abcdef0123456789abcdef-00f067aa0ba902b7-01"); got != "00f067aa0ba902b7" {
		t.Errorf("got %q", got)
	}
	if got := spanIDOf(""); got != "" {
		t.Errorf("empty traceparent: %q", got)
	}
}
