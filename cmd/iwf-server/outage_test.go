package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
)

// completingWorker answers every waitUntil with no commands and every
// execute with a graceful completion.
func completingWorker(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1/workflowState/start":
			io.WriteString(w, `{}`)
		case "/api/v1/workflowState/decide":
			io.WriteString(w, `{"stateDecision":{"nextStates":[{"stateId":"_SYS_GRACEFUL_COMPLETING_WORKFLOW"}]}}`)
		default:
			w.WriteHeader(404)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// startLoad starts workflows one after another until stop is closed, and
// records the status of each start.
type startLoad struct {
	mu       sync.Mutex
	acked    []string // answered 200
	statuses map[int]int
	bad      []string // answers other than 200 and 503, or a 503 without its headers
	changed  chan struct{}
}

func (l *startLoad) count(status int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.statuses[status]
}

// waitFor blocks until cond holds on the load's counts, failing the test
// after two minutes.
func (l *startLoad) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	for !cond() {
		select {
		case <-l.changed:
		case <-deadline:
			t.Fatalf("timed out waiting for %s (statuses %v)", what, l.statuses)
		}
	}
}

func runLoad(t *testing.T, base, workerURL string, stop <-chan struct{}) (*startLoad, *sync.WaitGroup) {
	l := &startLoad{statuses: map[int]int{}, changed: make(chan struct{}, 1)}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		client := &http.Client{Timeout: time.Minute}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			id := fmt.Sprintf("load-%d", i)
			body := `{"workflowId":"` + id + `","iwfWorkflowType":"T","workflowTimeoutSeconds":0,"iwfWorkerUrl":"` + workerURL + `","startStateId":"S1"}`
			resp, err := client.Post(base+"/api/v1/workflow/start", "application/json", strings.NewReader(body))
			l.mu.Lock()
			if err != nil {
				l.bad = append(l.bad, fmt.Sprintf("%s: %v", id, err))
			} else {
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				l.statuses[resp.StatusCode]++
				switch {
				case resp.StatusCode == 200:
					l.acked = append(l.acked, id)
				case resp.StatusCode == 503 && resp.Header.Get("Retry-After") != "" &&
					strings.Contains(string(raw), "the store (PostgreSQL) is unavailable"):
				default:
					l.bad = append(l.bad, fmt.Sprintf("%s: %d %v %s", id, resp.StatusCode, resp.Header, raw))
				}
			}
			l.mu.Unlock()
			select {
			case l.changed <- struct{}{}:
			default:
			}
		}
	}()
	return l, &wg
}

// TestMainStoreOutage stops and restarts a PostgreSQL that the test owns
// while workflows are being started: during the outage the API answers
// 503 with Retry-After and a detail naming the store (never a 500), the
// healthcheck says so, and afterwards the server resumes by itself and
// every acknowledged workflow completes.
func TestMainStoreOutage(t *testing.T) {
	pg := pgtest.StartOwn(t)
	worker := completingWorker(t)
	m, out := startMain(t, "--db", pg.URL, "--poll-interval", "100ms", "--lease-duration", "3s")
	base := "http://" + m.Addr()

	stop := make(chan struct{})
	load, wg := runLoad(t, base, worker.URL, stop)
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	load.waitFor(t, "starts before the outage", func() bool { return load.count(200) >= 20 })

	pg.Stop()
	load.waitFor(t, "503 answers during the outage", func() bool { return load.count(503) >= 10 })
	if s := getStatus(t, http.DefaultClient, base+"/info/healthcheck", ""); s != 503 {
		t.Fatalf("healthcheck during the outage: %d", s)
	}
	before := load.count(200)

	pg.Start()
	load.waitFor(t, "starts after the restart", func() bool { return load.count(200) >= before+20 })
	close(stop)
	wg.Wait()

	load.mu.Lock()
	acked, bad, statuses := load.acked, load.bad, load.statuses
	load.mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("%d answers were neither 200 nor a proper 503, e.g. %s", len(bad), bad[0])
	}
	t.Logf("start answers: %v", statuses)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, id := range acked {
		for {
			status, _, body := callCtx(ctx, t, base+"/api/v1/workflow/getWithWait", `{"workflowId":"`+id+`"}`)
			if status == 200 && body["workflowStatus"] == "COMPLETED" {
				break
			}
			if status != 200 && status != 420 {
				t.Fatalf("getWithWait %s: %d %v", id, status, body)
			}
			if ctx.Err() != nil {
				t.Fatalf("%s did not complete: %v", id, body)
			}
		}
	}
	if strings.Contains(out.String(), "panic") || strings.Contains(out.String(), `"status":500`) {
		t.Fatalf("the server logged a panic or a 500:\n%s", out)
	}
	if !strings.Contains(out.String(), "store unavailable") {
		t.Fatalf("the engine did not log the outage:\n%s", out)
	}
}

func callCtx(ctx context.Context, t *testing.T, url, body string) (int, string, map[string]any) {
	t.Helper()
	if ctx.Err() != nil {
		t.Fatalf("deadline passed before POST %s", url)
	}
	return call(t, http.DefaultClient, url, "", body)
}
