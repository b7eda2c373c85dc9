package console_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"os"
	"reflect"
	"regexp"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/console"
)

// loopType is the workflow type of loopWorker.
const loopType = "LoopWorkflow"

// loopWorker is an in-process worker (engine.WorkerClient) for loopType.
// State "loop" (input: its round, from 1) skips waitUntil; until round
// rounds it moves to the next round and fan executions of "work", which
// end their thread (_SYS_DEAD_END); the last round completes the workflow.
type loopWorker struct{ rounds, fan int }

// WaitUntil implements engine.WorkerClient; loop states skip it.
func (w loopWorker) WaitUntil(ctx context.Context, baseURL string, req *iwfapi.WorkflowStateStartRequest) (*iwfapi.WorkflowStateStartResponse, error) {
	return &iwfapi.WorkflowStateStartResponse{}, nil
}

// RPC implements engine.WorkerClient.
func (w loopWorker) RPC(ctx context.Context, baseURL string, req *iwfapi.WorkflowWorkerRpcRequest) (*iwfapi.WorkflowWorkerRpcResponse, error) {
	return &iwfapi.WorkflowWorkerRpcResponse{}, nil
}

// Execute implements engine.WorkerClient.
func (w loopWorker) Execute(ctx context.Context, baseURL string, req *iwfapi.WorkflowStateDecideRequest) (*iwfapi.WorkflowStateDecideResponse, error) {
	skip := &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
	var resp iwfapi.WorkflowStateDecideResponse
	switch req.WorkflowStateId {
	case "loop":
		round, _ := strconv.Atoi(deref(req.StateInput.Data))
		if round >= w.rounds {
			resp.StateDecision = &iwfapi.StateDecision{NextStates: &[]iwfapi.StateMovement{{StateId: "_SYS_GRACEFUL_COMPLETING_WORKFLOW"}}}
			break
		}
		next := []iwfapi.StateMovement{{StateId: "loop", StateInput: text(strconv.Itoa(round + 1)), StateOptions: skip}}
		for range w.fan {
			next = append(next, iwfapi.StateMovement{StateId: "work", StateOptions: skip})
		}
		resp.StateDecision = &iwfapi.StateDecision{NextStates: &next}
	default:
		resp.StateDecision = &iwfapi.StateDecision{NextStates: &[]iwfapi.StateMovement{{StateId: "_SYS_DEAD_END"}}}
	}
	return &resp, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// startLoop runs a loop workflow to its end and returns its run id.
func (e *env) runLoop(t *testing.T, id string) string {
	t.Helper()
	ctx := context.Background()
	resp, err := e.eng.StartWorkflow(ctx, iwfapi.WorkflowStartRequest{
		WorkflowId: id, IwfWorkflowType: loopType, IwfWorkerUrl: "http://worker.invalid", StartStateId: ptr("loop"),
		StateInput: text("1"), StateOptions: &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}, WorkflowTimeoutSeconds: 3600,
	})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for {
		g, err := e.eng.GetWorkflowWithWait(wctx, iwfapi.WorkflowGetRequest{WorkflowId: id, WaitTimeSeconds: ptr(int32(10))})
		if engine.CodeOf(err) == engine.CodeLongPollTimeout {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if g.WorkflowStatus != iwfapi.WorkflowStatusRunning {
			if g.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
				t.Fatalf("%s ended %s", id, g.WorkflowStatus)
			}
			return *resp.WorkflowRunId
		}
	}
}

// TestLongRunPage renders the page of a run with 20,001 state executions:
// under 1 MB of HTML, one page of each list with the counts of all, the
// diagram's counts over every execution, and "older" links that page back
// without gaps or overlaps.
func TestLongRunPage(t *testing.T) {
	const rounds, fan = 1001, 19 // 1,001 loop executions and 19,000 work ones
	e := newEnvWorker(t, "sqlite", nil, loopWorker{rounds: rounds, fan: fan})
	began := time.Now()
	runID := e.runLoop(t, "loop-1")
	t.Logf("20,001 state executions run in %s", time.Since(began).Round(time.Millisecond))
	ctx := context.Background()
	history := 0
	for after := int64(0); ; {
		h, err := e.eng.WorkflowHistory(ctx, iwfapi.WorkflowHistoryRequest{WorkflowId: "loop-1", WorkflowRunId: &runID, AfterEventId: &after, PageSize: ptr(int32(1000))})
		if err != nil {
			t.Fatal(err)
		}
		history += len(h.Events)
		if !deref(h.HasMore) {
			break
		}
		after = h.Events[len(h.Events)-1].EventId
	}

	c := &http.Client{}
	var body string
	// The page is served repeat times (IWF_RUNPAGE_REPEAT, default 5) and
	// the median time logged; IWF_RUNPAGE_CPUPROFILE names a file for a
	// CPU profile of these requests. The time is not asserted: a loaded
	// machine makes it vary (docs/console.md gives the figures).
	repeat := 5
	if n, err := strconv.Atoi(os.Getenv("IWF_RUNPAGE_REPEAT")); err == nil && n > 0 {
		repeat = n
	}
	if path := os.Getenv("IWF_RUNPAGE_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	times := make([]time.Duration, 0, repeat)
	cpus := make([]time.Duration, 0, repeat) // the process's CPU time per page (the engine is idle)
	for i := range repeat {
		began = time.Now()
		cpu := processCPU()
		var status int
		status, body = get(t, c, e.url+"/ui/workflows/loop-1")
		times = append(times, time.Since(began))
		cpus = append(cpus, processCPU()-cpu)
		t.Logf("run page %d: %d bytes in %s (%s CPU)", i+1, len(body), times[i].Round(time.Millisecond), cpus[i].Round(time.Millisecond))
		if status != 200 {
			t.Fatalf("run page: %d\n%.2000s", status, body)
		}
	}
	slices.Sort(times)
	slices.Sort(cpus)
	t.Logf("run page of 20,001 state executions: median %s (%s CPU) of %d, %d bytes", times[len(times)/2].Round(time.Millisecond),
		cpus[len(cpus)/2].Round(time.Millisecond), repeat, len(body))
	// The page's pass over the history, outlined as the page makes it and
	// over every event with its data as it made it before: CPU medians.
	for _, outlined := range []bool{false, true} {
		cpus := make([]time.Duration, 0, repeat)
		for range repeat {
			cpu := processCPU()
			if err := console.ScanRun(ctx, e.eng, "loop-1", outlined); err != nil {
				t.Fatal(err)
			}
			cpus = append(cpus, processCPU()-cpu)
		}
		slices.Sort(cpus)
		t.Logf("history pass (outlined %v): median %s CPU of %d", outlined, cpus[len(cpus)/2].Round(time.Millisecond), repeat)
	}
	if len(body) > 1<<20 {
		t.Fatalf("the run page has %d bytes, want at most 1 MiB", len(body))
	}
	for _, want := range []string{
		"showing 100 of 20,001 state executions (#19,902–#20,001), newest first · 19,901 older",
		fmt.Sprintf("showing 100 of %s history events, newest first · %s older", thousandsOf(history), thousandsOf(history-100)),
		fmt.Sprintf("Raw history (%s events)", thousandsOf(history)),
		"<title>loop: 1,001 execution(s)</title>",
		"<title>work: 19,000 execution(s)</title>",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the run page lacks %q", want)
		}
	}
	// Every transition, counted over all executions: start→loop (×1, no
	// label), loop→loop ×1000, loop→work and work→dead end ×19000 each,
	// loop→completion (×1).
	counts := map[string]int{}
	for _, m := range regexp.MustCompile(`class="count"[^>]*>×([\d,]+)<`).FindAllStringSubmatch(body, -1) {
		counts[m[1]]++
	}
	if want := map[string]int{"1,000": 1, "19,000": 2}; !reflect.DeepEqual(counts, want) {
		t.Errorf("edge counts %v, want %v", counts, want)
	}
	if n := strings.Count(body, `<path class="edge"`); n != 5 {
		t.Errorf("%d edges, want 5", n)
	}
	rows := rowIDs(body)
	if len(rows) != 100 || rows[0] != "work-19000" || rows[99] != "loop-997" {
		t.Fatalf("timeline rows %d: first %q, last %q", len(rows), rows[0], rows[len(rows)-1])
	}
	if t.Failed() {
		t.FailNow()
	}

	// The older page of executions: the 100 before, newest first.
	older := regexp.MustCompile(`id="older-executions" href="([^"]+)"`).FindStringSubmatch(body)
	if older == nil {
		t.Fatal("no link to older executions")
	}
	_, page2 := get(t, c, e.url+html.UnescapeString(older[1]))
	rows2 := rowIDs(page2)
	if len(rows2) != 100 || rows2[0] != "work-18905" || !strings.Contains(page2, "(#19,802–#19,901)") || !strings.Contains(page2, "back to the newest") {
		t.Fatalf("older executions: %d rows from %v", len(rows2), rows2[:min(3, len(rows2))])
	}
	// The older page of the history continues where the first ended.
	ids := historyIDs(body)
	olderH := regexp.MustCompile(`id="older-history" href="([^"]+)"`).FindStringSubmatch(body)
	if len(ids) != 100 || olderH == nil {
		t.Fatalf("history page: %d events, older link %v", len(ids), olderH)
	}
	_, h2 := get(t, c, e.url+html.UnescapeString(olderH[1]))
	ids2 := historyIDs(h2)
	if len(ids2) != 100 || ids2[0] >= ids[99] || !strings.Contains(h2, "back to the newest") {
		t.Fatalf("older history: %d events from %v, after %d", len(ids2), ids2[:min(3, len(ids2))], ids[99])
	}
	for i := 1; i < len(ids2); i++ {
		if ids2[i] >= ids2[i-1] {
			t.Fatalf("older history not newest first: %v", ids2)
		}
	}
}

// rowIDs returns the state execution ids of a run page's timeline rows.
func rowIDs(body string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<details class="row[^"]*">\s*<summary><span class="label"><code>([^<]+)</code>`).FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

// historyIDs returns the event ids of a run page's history table.
func historyIDs(body string) []int64 {
	var out []int64
	for _, m := range regexp.MustCompile(`<tr><td>(\d+)</td>`).FindAllStringSubmatch(body, -1) {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		out = append(out, n)
	}
	return out
}

// thousandsOf writes n as the console does.
func thousandsOf(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// TestBufferedSignalsPage renders the page of a run with thousands of
// buffered signals: counts per channel, one page of messages and of run
// events, and a page far below 1 MB.
func TestBufferedSignalsPage(t *testing.T) {
	e := newEnv(t, "sqlite")
	e.start(t, "sig-1")
	waitStatus(t, e, "sig-1", iwfapi.WorkflowStatusRunning)
	const a, b = 1200, 800 // signals on "noise-a" and "noise-b", which nothing waits for
	began := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < a+b; i += 8 {
				ch := "noise-a"
				if i >= a {
					ch = "noise-b"
				}
				if err := e.eng.SignalWorkflow(context.Background(), iwfapi.WorkflowSignalRequest{WorkflowId: "sig-1", SignalChannelName: ch, SignalValue: text(strconv.Itoa(i))}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d signals sent in %s", a+b, time.Since(began).Round(time.Millisecond))
	began = time.Now()
	status, body := get(t, &http.Client{}, e.url+"/ui/workflows/sig-1")
	t.Logf("run page: %d bytes in %s", len(body), time.Since(began).Round(time.Millisecond))
	if status != 200 || len(body) > 1<<20 {
		t.Fatalf("run page: %d, %d bytes", status, len(body))
	}
	for _, want := range []string{
		"2,000 message(s) not yet consumed; the first 100 are shown.",
		"<td>signal</td><td><code>noise-a</code></td><td class=\"n\">1,200</td>",
		"<td>signal</td><td><code>noise-b</code></td><td class=\"n\">800</td>",
		"messages (100 shown, oldest first per channel)",
		"showing 100 of 2,000 run events, newest first · 1,900 older",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the run page lacks %q", want)
		}
	}
	if t.Failed() {
		i := strings.Index(body, `id="events"`)
		t.Fatalf("%.3000s", body[max(0, i):])
	}
}
