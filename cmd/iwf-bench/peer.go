package main

// The comparison with an embedded library (-peer dbos): W1 @1 and W1b on
// this server against the same shape on DBOS Transact, run by the
// project's neighbour tool ../shared/peerbench, interleaved store by store
// and round by round, so that both sides meet the same machine in the
// same minutes. The figures compared are the ones users feel:
//
//   - latency: W1 @1's start -> result (getWithWait) p50 against
//     peerbench's p50 at one in flight (RunWorkflow -> GetResult);
//   - throughput: W1b's state executions/s (50 in flight, each workflow
//     awaited) against peerbench's steps/s at 50 in flight.
//
// Each round runs, per store: our W1 @1 and W1b (a fresh server and
// database each), then peerbench on that store. The table gives every
// round's pair and ratio, and the median of the ratios, with the targets.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// The peers -peer accepts, and the targets the comparison checks.
const (
	peerDBOS = "dbos"
	// peerLatN is the workflows of each side's latency run (W1 @1's -n
	// W1 unless set, peerbench's -lat-n).
	peerLatN = 1000
	// peerP50Max is the greatest ratio of our p50 to the peer's that
	// passes: below the library's.
	peerP50Max = 1.0
)

// peerRateMin is, per store, the least ratio of our state executions/s to
// the peer's steps/s that passes.
var peerRateMin = map[string]float64{storeSQLite: 2.5, storePostgres: 1.3}

// peerFigures is what one peerbench run measured (its -json file).
type peerFigures struct {
	Peer      string  `json:"peer"`
	Store     string  `json:"store"`
	StepsPerS float64 `json:"steps_per_s"`
	LatP50ms  float64 `json:"lat_p50_ms"`
	Errors    int     `json:"errors"`
}

// peerPair is one store's figures of one round: ours and the peer's.
type peerPair struct {
	round int
	store string
	// oursP50 is W1 @1's getWithWait p50; oursRate W1b's state
	// executions/s. Zero when the run failed.
	oursP50  time.Duration
	oursRate float64
	peer     *peerFigures
	// errs are the runs of the round that failed, on either side.
	errs []string
}

// p50Ratio and rateRatio compare the pair; 0 when a side is missing.
func (p peerPair) p50Ratio() float64 {
	if p.peer == nil || p.peer.LatP50ms <= 0 || p.oursP50 <= 0 {
		return 0
	}
	return float64(p.oursP50) / float64(time.Millisecond) / p.peer.LatP50ms
}

func (p peerPair) rateRatio() float64 {
	if p.peer == nil || p.peer.StepsPerS <= 0 || p.oursRate <= 0 {
		return 0
	}
	return p.oursRate / p.peer.StepsPerS
}

// oursFrom takes W1 @1's getWithWait p50 and W1b's state executions/s
// from a store's report.
func oursFrom(sr *storeReport) (p50 time.Duration, rate float64) {
	for _, r := range sr.results {
		switch {
		case r.workload == "W1" && r.inFlight == 1:
			p50 = waitP50(r)
		case r.workload == "W1b":
			rate = r.throughput() * float64(r.statesPerWorkflow)
		}
	}
	return p50, rate
}

// peerStoreFlag is peerbench's -store for one of ours.
func peerStoreFlag(store string) string {
	if store == storePostgres {
		return "postgres"
	}
	return "sqlite"
}

// peerBinary returns o.peerBin, or builds peerbench from the shared
// directory beside the checkout into tmp.
func peerBinary(ctx context.Context, o *options, root, tmp string, progress func(string, ...any)) (string, error) {
	if o.peerBin != "" {
		return o.peerBin, nil
	}
	dir := filepath.Join(root, "..", "shared", "peerbench")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("-peer: no peerbench at %s (pass -peer-bin with a built one): %w", dir, err)
	}
	progress("building peerbench (%s) ...", dir)
	bin := filepath.Join(tmp, "peerbench")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("-peer: building peerbench: %w\n%s", err, out)
	}
	return bin, nil
}

// runPeerOnce runs peerbench on one store and reads its figures. A run
// that reports errors is a failure: its figures would flatter the peer.
func runPeerOnce(ctx context.Context, bin string, o *options, store, tmp string, round int) (*peerFigures, error) {
	out := filepath.Join(tmp, fmt.Sprintf("peer-%s-%s-%d.json", o.peer, peerStoreFlag(store), round))
	args := []string{"-peer", o.peer, "-store", peerStoreFlag(store), "-json", out}
	args = append(args, peerCounts(o)...)
	if store == storePostgres {
		args = append(args, "-pg", o.pgURL)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = tmp
	log, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("peerbench %s: %w: %s", strings.Join(args, " "), err, lastLines(string(log), 3))
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("peerbench wrote no result: %w", err)
	}
	return parsePeerFigures(b)
}

// peerCounts are peerbench's workflow counts: its own defaults but
// peerLatN latency workflows, and small ones for a -quick smoke run.
func peerCounts(o *options) []string {
	if o.quick {
		return []string{"-warm-n", "20", "-lat-n", "100", "-thr-n", "300"}
	}
	return []string{"-lat-n", fmt.Sprint(peerLatN)}
}

// parsePeerFigures reads peerbench's -json output.
func parsePeerFigures(b []byte) (*peerFigures, error) {
	var f peerFigures
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("peerbench's result: %w", err)
	}
	if f.Errors > 0 {
		return nil, fmt.Errorf("peerbench: %d workflows failed", f.Errors)
	}
	if f.StepsPerS <= 0 || f.LatP50ms <= 0 {
		return nil, fmt.Errorf("peerbench's result has no figures: %s", strings.TrimSpace(string(b)))
	}
	return &f, nil
}

// lastLines returns the last n non-empty lines of s, joined by " | ".
func lastLines(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}

// runPeer runs the comparison: o.rounds rounds of, per store, our W1 @1
// and W1b, then the peer's run; and prints the table.
func runPeer(ctx context.Context, o *options, root, tmp, bin string, w *worker, out io.Writer, progress func(string, ...any)) error {
	peerBin, err := peerBinary(ctx, o, root, tmp, progress)
	if err != nil {
		return err
	}
	var pairs []peerPair
	for round := 1; round <= o.rounds; round++ {
		for _, store := range o.stores {
			progress("round %d of %d, %s: W1 @1 and W1b on this server ...", round, o.rounds, store)
			sr := runStore(ctx, o, store, bin, tmp, w, progress)
			if err := ctx.Err(); err != nil {
				return err
			}
			p := peerPair{round: round, store: store}
			if sr.skipped != "" {
				p.errs = append(p.errs, sr.skipped)
				pairs = append(pairs, p)
				continue
			}
			p.errs = append(p.errs, sr.failed...)
			p.oursP50, p.oursRate = oursFrom(sr)
			progress("round %d of %d, %s: %s on peerbench ...", round, o.rounds, store, o.peer)
			if p.peer, err = runPeerOnce(ctx, peerBin, o, store, tmp, round); err != nil {
				if ctxErr := ctx.Err(); ctxErr != nil {
					return ctxErr
				}
				p.errs = append(p.errs, err.Error())
				progress("%v", err)
			}
			pairs = append(pairs, p)
		}
	}
	printPeer(out, o, pairs)
	return nil
}

// medianFloat returns the median of v (the mean of the middle two of an
// even count); 0 when v is empty. v is not changed.
func medianFloat(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// peerVerdict is one store's outcome: the medians of the rounds' ratios
// and whether they meet the targets. complete is false when a round lacks
// a figure (then the medians cover the rounds that have one).
type peerVerdict struct {
	p50Ratio, rateRatio float64
	p50Pass, ratePass   bool
	rounds, complete    int
}

// verdictOf judges one store's pairs.
func verdictOf(store string, pairs []peerPair) peerVerdict {
	var p50s, rates []float64
	v := peerVerdict{}
	for _, p := range pairs {
		if p.store != store {
			continue
		}
		v.rounds++
		a, b := p.p50Ratio(), p.rateRatio()
		if a > 0 {
			p50s = append(p50s, a)
		}
		if b > 0 {
			rates = append(rates, b)
		}
		if a > 0 && b > 0 {
			v.complete++
		}
	}
	v.p50Ratio, v.rateRatio = medianFloat(p50s), medianFloat(rates)
	v.p50Pass = len(p50s) > 0 && v.p50Ratio < peerP50Max
	v.ratePass = len(rates) > 0 && v.rateRatio >= peerRateMin[store]
	return v
}

// printPeer writes the comparison table.
func printPeer(out io.Writer, o *options, pairs []peerPair) {
	fmt.Fprintf(out, "\n== against %s: %d rounds, interleaved per store ==\n", peerName(o.peer), o.rounds)
	fmt.Fprintf(out, "  the same shape on both sides: two steps, each one loopback HTTP call to a worker; the peer run by ../shared/peerbench\n")
	fmt.Fprintf(out, "  p50: our W1 @1 start -> getWithWait returned (%s workflows); the peer's RunWorkflow -> GetResult at 1 in flight (peerbench %s)\n",
		fmtInt(int64(o.counts["W1"])), strings.Join(peerCounts(o), " "))
	fmt.Fprintf(out, "  rate: our W1b state executions/s (%d in flight, each awaited); the peer's steps/s at 50 in flight\n", w1bInFlight)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	header := "store\tfigure"
	for r := 1; r <= o.rounds; r++ {
		header += fmt.Sprintf("\tround %d: ours / peer = ratio", r)
	}
	fmt.Fprintln(tw, header+"\tmedian ratio\ttarget\t")
	for _, store := range o.stores {
		v := verdictOf(store, pairs)
		p50Row, rateRow := store+"\tp50 @1, ms", store+"\tstate executions/s @50"
		for _, p := range pairs {
			if p.store != store {
				continue
			}
			p50Row += "\t" + p.p50Cell()
			rateRow += "\t" + p.rateCell()
		}
		p50Row += fmt.Sprintf("\t%s\t< %.2f %s\t", ratioCell(v.p50Ratio), peerP50Max, passMiss(v.p50Pass))
		rateRow += fmt.Sprintf("\t%s\t>= %.2f %s\t", ratioCell(v.rateRatio), peerRateMin[store], passMiss(v.ratePass))
		fmt.Fprintln(tw, p50Row)
		fmt.Fprintln(tw, rateRow)
	}
	tw.Flush()
	for _, store := range o.stores {
		if v := verdictOf(store, pairs); v.complete < v.rounds {
			fmt.Fprintf(out, "  %s: %d of %d rounds have both figures; the medians cover those that have each\n", store, v.complete, v.rounds)
		}
	}
	for _, p := range pairs {
		for _, e := range p.errs {
			fmt.Fprintf(out, "  round %d, %s FAILED: %s\n", p.round, p.store, e)
		}
	}
}

// p50Cell and rateCell format the pair as "ours / peer = ratio", with
// "-" for what is missing.
func (p peerPair) p50Cell() string {
	ours, theirs := "-", "-"
	if p.oursP50 > 0 {
		ours = fmt.Sprintf("%.2f", float64(p.oursP50)/float64(time.Millisecond))
	}
	if p.peer != nil {
		theirs = fmt.Sprintf("%.2f", p.peer.LatP50ms)
	}
	return ours + " / " + theirs + " = " + ratioCell(p.p50Ratio())
}

func (p peerPair) rateCell() string {
	ours, theirs := "-", "-"
	if p.oursRate > 0 {
		ours = fmtRate(p.oursRate)
	}
	if p.peer != nil {
		theirs = fmtRate(p.peer.StepsPerS)
	}
	return ours + " / " + theirs + " = " + ratioCell(p.rateRatio())
}

// ratioCell formats a ratio, "-" when unknown.
func ratioCell(r float64) string {
	if r <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", r)
}

// passMiss names a verdict.
func passMiss(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

// peerName is the library a peer name stands for, as peerbench runs it.
func peerName(peer string) string {
	if peer == peerDBOS {
		return "DBOS Transact, an embedded library"
	}
	return peer
}

// errPeerFlags reports flags that -peer cannot honour.
var errPeerFlags = errors.New("-peer runs W1 @1 and W1b only, without the breakdown; drop -workloads, -inflight, -breakdown and -pprof")
