package crashtest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/internal/archive"
)

// TestKillDuringArchivingSweep kills the server twice in the middle of a
// retention sweep that archives (--archive-url file://…): once as soon as
// the first runs are written to the archive (before any is deleted), once
// as soon as the restarted sweep has deleted its first batch. After each
// kill every expired run is whole in the store or gone from it, and a run
// gone from the store has a complete archived object (its history as long
// as it was in the store); no running run, nor a run of a type kept
// forever, is deleted or archived. A run whose object was written before
// the kill but which was not deleted, and one whose object is stale (an
// empty history written before), are archived again without a failure. A
// last sweep leaves every expired run archived and deleted.
func TestKillDuringArchivingSweep(t *testing.T) {
	forEachStore(t, func(t *testing.T, db string) {
		const closed, running, kept = 400, 4, 10
		w := NewWorker(t)
		done := func(next string) State {
			return State{Execute: func(*iwfapi.WorkflowStateDecideRequest) *iwfapi.WorkflowStateDecideResponse {
				return &iwfapi.WorkflowStateDecideResponse{StateDecision: &iwfapi.StateDecision{
					NextStates: &[]iwfapi.StateMovement{{StateId: next, StateOptions: &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}}},
				}}
			}}
		}
		w.State("A", done("B"))
		w.State("B", done("_SYS_GRACEFUL_COMPLETING_WORKFLOW"))
		w.State("Park", State{WaitUntil: func(*iwfapi.WorkflowStateStartRequest) *iwfapi.WorkflowStateStartResponse {
			return &iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
				CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
				SignalCommands:     &[]iwfapi.SignalCommand{{SignalChannelName: "go"}},
			}}
		}, Execute: done("_SYS_GRACEFUL_COMPLETING_WORKFLOW").Execute})

		dir := filepath.Join(t.TempDir(), "archive")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		archiveURL := "file://" + dir
		bucket, err := archive.Open(context.Background(), archiveURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { bucket.Close() })

		srv := startServer(t, db, "fill", "--retention", "0")
		start := func(srv *Server, id, typ, state string) {
			ctx := Ctx(t, time.Minute)
			resp, err := srv.Client().StartWorkflowWithResponse(ctx, iwfapi.WorkflowStartRequest{
				WorkflowId: id, IwfWorkflowType: typ, IwfWorkerUrl: w.URL(), WorkflowTimeoutSeconds: 0,
				StartStateId: ptr(state), StateOptions: &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(state != "Park")},
			})
			if err != nil || resp.StatusCode() != http.StatusOK {
				t.Errorf("start %s: %v %s", id, err, resp.Body)
			}
		}
		var wg sync.WaitGroup
		ids := make(chan string)
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for id := range ids {
					start(srv, id, "Brief", "A")
				}
			}()
		}
		for i := range closed {
			ids <- fmt.Sprintf("brief-%d", i)
		}
		close(ids)
		wg.Wait()
		for i := range kept {
			start(srv, fmt.Sprintf("kept-%d", i), "Kept", "A")
		}
		for i := range running {
			start(srv, fmt.Sprintf("running-%d", i), "Brief", "Park")
		}
		if t.Failed() {
			return
		}
		// historyLen reads a run's whole history from the store; false
		// when the workflow does not exist.
		historyLen := func(srv *Server, id string) (int, bool) {
			t.Helper()
			ctx := Ctx(t, time.Minute)
			resp, err := srv.Client().GetWorkflowHistoryWithResponse(ctx, iwfapi.WorkflowHistoryRequest{WorkflowId: id, PageSize: ptr(int32(1000))})
			if err != nil {
				t.Fatalf("history %s: %v", id, err)
			}
			if resp.StatusCode() == http.StatusBadRequest && resp.JSON400 != nil && deref(resp.JSON400.SubStatus) == iwfapi.ErrorSubStatusWorkflowNotExists {
				return 0, false
			}
			if resp.JSON200 == nil {
				t.Fatalf("history %s: %d %s", id, resp.StatusCode(), resp.Body)
			}
			return len(resp.JSON200.Events), true
		}
		want := map[string]int{}
		runIDs := map[string]string{}
		for i := range closed {
			id := fmt.Sprintf("brief-%d", i)
			r := result(t, srv, id, time.Minute)
			if r.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
				t.Fatalf("%s: %s", id, mustJSON(r))
			}
			want[id], _ = historyLen(srv, id)
			runIDs[id] = r.WorkflowRunId
		}
		srv.Kill()

		// A stale object for brief-0 (an empty history, as a write of an
		// older server could have left): the sweep must replace it.
		stale := &archive.Run{WorkflowID: "brief-0", RunID: runIDs["brief-0"], WorkflowType: "Brief", Status: "COMPLETED"}
		if err := bucket.Put(context.Background(), stale, func(context.Context) ([]archive.Event, error) { return nil, nil }); err != nil {
			t.Fatal(err)
		}

		// archived reads a run's archived object through and returns the
		// number of events it holds; false when there is none.
		archived := func(id, runID string) (int, bool) {
			t.Helper()
			n := 0
			run, err := bucket.Read(Ctx(t, time.Minute), id, runID, func(archive.Event) error { n++; return nil })
			if errors.Is(err, archive.ErrNotFound) {
				return 0, false
			}
			if err != nil {
				t.Fatalf("reading the archived %s: %v", id, err)
			}
			if run.WorkflowID != id || run.RunID != runID || run.Status != "COMPLETED" || run.HistoryEvents != n {
				t.Fatalf("archived %s: %+v with %d events", id, run, n)
			}
			return n, true
		}
		// check asserts the invariants that hold at any moment of a sweep
		// and returns how many expired runs are still in the store.
		check := func(name string) int {
			t.Helper()
			c := startServer(t, db, name, "--retention", "0")
			defer c.Kill()
			left, archivedLeft := 0, 0
			for id, n := range want {
				got, inStore := historyLen(c, id)
				if inStore {
					left++
					if got != n {
						t.Fatalf("%s half deleted: %d history events, %d before the sweep", id, got, n)
					}
					if _, ok := archived(id, runIDs[id]); ok {
						archivedLeft++
					}
					continue
				}
				a, ok := archived(id, runIDs[id])
				if !ok {
					t.Fatalf("%s was deleted without an archived object", id)
				}
				if a != n {
					t.Fatalf("%s deleted with an archived history of %d events, %d in the store", id, a, n)
				}
			}
			for _, id := range liveIDs(kept, running) {
				if _, ok := historyLen(c, id); !ok {
					t.Fatalf("%s (running or of a type kept forever) was deleted", id)
				}
				if _, _, err := bucket.Newest(Ctx(t, time.Minute), id); !errors.Is(err, archive.ErrNotFound) {
					t.Fatalf("%s (running or of a type kept forever) was archived (%v)", id, err)
				}
			}
			t.Logf("%s: %d of %d expired runs left in the store, %d of them already archived", name, left, closed, archivedLeft)
			return left
		}
		sweepArgs := []string{"--retention", "0", "--retention-for", "Brief=1ms", "--retention-interval", "50ms", "--archive-url", archiveURL}

		// Kill 1: as soon as the sweep wrote its first objects.
		s1 := startServer(t, db, "sweep-1", sweepArgs...)
		eventually(t, 2*time.Minute, "the first runs archived", func() bool { return metric(s1, "iwf_retention_runs_archived_total") > 0 })
		s1.Kill()
		check("check-1")

		// Kill 2: as soon as the restarted sweep deleted its first batch.
		s2 := startServer(t, db, "sweep-2", sweepArgs...)
		eventually(t, 2*time.Minute, "the first batch deleted", func() bool { return metric(s2, "iwf_retention_runs_deleted_total") > 0 })
		s2.Kill()
		left := check("check-2")
		if left == 0 {
			t.Log("the sweep had finished before the second kill; the checks above still hold")
		}

		// A last sweep archives and deletes the rest, without a failure.
		final := startServer(t, db, "final", sweepArgs...)
		eventually(t, 3*time.Minute, "every expired run deleted", func() bool {
			return metric(final, "iwf_retention_backlog_runs") == 0 && metric(final, "iwf_retention_runs_deleted_total") >= float64(left)
		})
		if f := metric(final, "iwf_retention_archive_failures_total"); f != 0 {
			t.Fatalf("%v archive failures in the last sweep", f)
		}
		for id, n := range want {
			if _, ok := historyLen(final, id); ok {
				t.Fatalf("%s left after the last sweep", id)
			}
			if a, ok := archived(id, runIDs[id]); !ok || a != n {
				t.Fatalf("%s: archived %v with %d events, want %d", id, ok, a, n)
			}
		}
		for _, id := range liveIDs(kept, running) {
			if _, ok := historyLen(final, id); !ok {
				t.Fatalf("%s was deleted", id)
			}
			if _, _, err := bucket.Newest(Ctx(t, time.Minute), id); !errors.Is(err, archive.ErrNotFound) {
				t.Fatalf("%s was archived (%v)", id, err)
			}
		}
		for _, s := range []*Server{s1, s2, final} {
			if l := s.Log(); strings.Contains(l, "archiving an expired run failed") {
				t.Fatalf("%s logged an archive failure", s.Name())
			}
		}
	})
}

// liveIDs are the ids of the runs of TestKillDuringArchivingSweep that
// no sweep may touch.
func liveIDs(kept, running int) []string {
	var out []string
	for i := range kept {
		out = append(out, fmt.Sprintf("kept-%d", i))
	}
	for i := range running {
		out = append(out, fmt.Sprintf("running-%d", i))
	}
	return out
}
