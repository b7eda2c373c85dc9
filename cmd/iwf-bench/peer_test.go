package main

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParsePeerFigures(t *testing.T) {
	f, err := parsePeerFigures([]byte(`{"peer": "dbos", "store": "postgres", "steps_per_s": 985.1, "lat_p50_ms": 3.37, "errors": 0, "thr_c": 50}`))
	if err != nil {
		t.Fatal(err)
	}
	if f.StepsPerS != 985.1 || f.LatP50ms != 3.37 || f.Store != "postgres" {
		t.Fatalf("parsed %+v", f)
	}
	for _, bad := range []string{
		`{"steps_per_s": 985.1, "lat_p50_ms": 3.37, "errors": 2}`, // failed workflows would flatter the peer
		`{"steps_per_s": 0, "lat_p50_ms": 3.37}`,
		`{"steps_per_s": 985.1}`,
		`not json`,
	} {
		if _, err := parsePeerFigures([]byte(bad)); err == nil {
			t.Errorf("parsePeerFigures(%s): no error", bad)
		}
	}
}

func TestMedianFloat(t *testing.T) {
	v := []float64{3, 1, 2}
	if m := medianFloat(v); m != 2 {
		t.Errorf("median of %v = %v, want 2", v, m)
	}
	if !slices.Equal(v, []float64{3, 1, 2}) {
		t.Errorf("medianFloat sorted its argument: %v", v)
	}
	if m := medianFloat([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Errorf("median of an even count = %v, want 2.5", m)
	}
	if m := medianFloat(nil); m != 0 {
		t.Errorf("median of nothing = %v, want 0", m)
	}
}

// pair builds one round's figures: our p50 in ms and state executions/s,
// the peer's p50 and steps/s (peer nil when both are 0).
func pair(round int, store string, oursMs, oursRate, peerMs, peerRate float64) peerPair {
	p := peerPair{round: round, store: store, oursP50: time.Duration(oursMs * float64(time.Millisecond)), oursRate: oursRate}
	if peerMs > 0 || peerRate > 0 {
		p.peer = &peerFigures{LatP50ms: peerMs, StepsPerS: peerRate}
	}
	return p
}

func TestVerdictOf(t *testing.T) {
	pairs := []peerPair{
		pair(1, storeSQLite, 1.82, 2679, 1.95, 764),
		pair(1, storePostgres, 3.47, 2087, 3.37, 985),
		pair(2, storeSQLite, 2.13, 2579, 2.29, 678),
		pair(2, storePostgres, 3.73, 1928, 3.50, 1025),
		pair(3, storeSQLite, 1.75, 3035, 2.02, 724),
		pair(3, storePostgres, 3.73, 1852, 3.29, 973),
	}
	sq := verdictOf(storeSQLite, pairs)
	if !sq.p50Pass || !sq.ratePass || sq.rounds != 3 || sq.complete != 3 {
		t.Errorf("SQLite: %+v, want both PASS over 3 complete rounds", sq)
	}
	// The median of the rounds' ratios, not the ratio of the medians.
	if want := 2.13 / 2.29; abs(sq.p50Ratio-want) > 1e-9 {
		t.Errorf("SQLite p50 ratio %v, want %v", sq.p50Ratio, want)
	}
	pg := verdictOf(storePostgres, pairs)
	if pg.p50Pass || !pg.ratePass {
		t.Errorf("PostgreSQL: %+v, want the p50 to MISS (every round above the peer's) and the rate to PASS", pg)
	}
	// At the target exactly: a ratio of 1.00 is not below the library.
	even := verdictOf(storeSQLite, []peerPair{pair(1, storeSQLite, 2, 1000, 2, 400)})
	if even.p50Pass || !even.ratePass {
		t.Errorf("ratios 1.00 and 2.50: %+v, want p50 MISS and rate PASS", even)
	}
	// A round without the peer's figures counts, but not in the medians.
	partial := verdictOf(storePostgres, []peerPair{pair(1, storePostgres, 3, 2000, 4, 1000), pair(2, storePostgres, 3, 2000, 0, 0)})
	if partial.rounds != 2 || partial.complete != 1 || !partial.p50Pass {
		t.Errorf("one round without the peer: %+v", partial)
	}
	// No figures at all is no PASS.
	if none := verdictOf(storePostgres, []peerPair{{round: 1, store: storePostgres}}); none.p50Pass || none.ratePass {
		t.Errorf("no figures: %+v, want MISS", none)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func TestPrintPeer(t *testing.T) {
	o := &options{stores: []string{storeSQLite, storePostgres}, rounds: 2, peer: peerDBOS, counts: map[string]int{"W1": 1000}}
	pairs := []peerPair{
		pair(1, storeSQLite, 1.82, 2679, 1.95, 764),
		pair(1, storePostgres, 3.47, 2087, 3.37, 985),
		pair(2, storeSQLite, 2.13, 2579, 2.29, 678),
		{round: 2, store: storePostgres, errs: []string{"peerbench: 3 workflows failed"}},
	}
	var b bytes.Buffer
	printPeer(&b, o, pairs)
	out := b.String()
	for _, want := range []string{
		"1.82 / 1.95 = 0.93",
		"2,679 / 764 = 3.51",
		"< 1.00 PASS",
		"3.47 / 3.37 = 1.03",
		"< 1.00 MISS",
		"- / - = -",
		"PostgreSQL: 1 of 2 rounds have both figures",
		"round 2, PostgreSQL FAILED: peerbench: 3 workflows failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
}

func TestParseOptionsPeer(t *testing.T) {
	o, err := parseOptions([]string{"-peer", "DBOS", "-rounds", "5"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.peer != peerDBOS || o.rounds != 5 || o.inFlight != 1 || o.breakdown || o.counts["W1"] != peerLatN ||
		len(o.workloads) != 2 || !o.workloads["W1"] || !o.workloads["W1b"] {
		t.Errorf("-peer dbos: %+v", o)
	}
	if o, err = parseOptions([]string{"-peer", "dbos", "-n", "W1=300"}, io.Discard); err != nil || o.counts["W1"] != 300 {
		t.Errorf("-peer with -n W1=300: %v, count %d", err, o.counts["W1"])
	}
	for _, args := range [][]string{
		{"-peer", "dbos", "-workloads", "W2"},
		{"-peer", "dbos", "-inflight", "8"},
		{"-peer", "dbos", "-breakdown=true"},
	} {
		if _, err := parseOptions(args, io.Discard); !errors.Is(err, errPeerFlags) {
			t.Errorf("parseOptions(%q) = %v, want errPeerFlags", args, err)
		}
	}
	for _, args := range [][]string{
		{"-peer", "river"},
		{"-peer", "dbos", "-rounds", "0"},
		{"-rounds", "3"},
		{"-peer-bin", "/tmp/peerbench"},
	} {
		if _, err := parseOptions(args, io.Discard); err == nil {
			t.Errorf("parseOptions(%q): no error", args)
		}
	}
}
