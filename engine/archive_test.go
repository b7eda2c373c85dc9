package engine_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/archive"
)

// TestArchiveBeforeDelete: with an archive, an expired run is written to
// it before it is deleted, and the object holds the run: summary, input,
// results, attributes and every history event. While the archive cannot
// be written the run is kept and the failure counted; the next sweep with
// a working archive archives it, replacing an object written before, and
// deletes it.
func TestArchiveBeforeDelete(t *testing.T) {
	var dirs sync.Map // *testing.T -> the archive's directory
	forEachStoreWithT(t, func(t *testing.T, c *engine.Config) {
		dir := filepath.Join(t.TempDir(), "archive")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := archive.Open(context.Background(), "file://"+dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		dirs.Store(t, dir)
		c.Archive = b
		c.Clock = &shiftClock{}
		c.Retention = time.Hour
		c.SweepInterval = 24 * time.Hour // the test sweeps itself
	}, func(t *testing.T, h *harness) {
		ctx := context.Background()
		v, _ := dirs.Load(t)
		dir := v.(string)
		clock := h.clock.(*shiftClock)
		h.worker.state("Done", stateHandlers{Execute: func(iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			return decide(next(engine.GracefulCompletingState, &iwfapi.EncodedObject{Encoding: ptr("json"), Data: ptr(`"done"`)})), 200
		}})
		const id = "orders/2024 ü?#.." // escaped into one key of its own
		input := &iwfapi.EncodedObject{Encoding: ptr("json"), Data: ptr(`{"n":1}`)}
		runID := h.start(id, "Done", input, func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
			r.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{DataAttributes: &[]iwfapi.KeyValue{
				{Key: ptr("customer"), Value: &iwfapi.EncodedObject{Encoding: ptr("json"), Data: ptr(`"c-17"`)}},
			}, SearchAttributes: &[]iwfapi.SearchAttribute{
				{Key: ptr("CustomerId"), ValueType: ptr(iwfapi.SearchAttributeValueTypeKeyword), StringValue: ptr("c-17")},
			}}
		})
		if got := h.result(id); got.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			t.Fatalf("%s: %s", id, mustJSON(got))
		}
		h.idle()
		var history []iwfapi.WorkflowHistoryEvent
		if _, _, err := h.eng.ScanHistory(ctx, id, runID, 0, func(ev *engine.HistoryEvent) error {
			history = append(history, engine.HistoryEventOut(ev))
			return nil
		}); err != nil || len(history) < 3 {
			t.Fatalf("history: %d events, %v", len(history), err)
		}
		exists := func() bool {
			_, err := h.eng.GetWorkflow(ctx, iwfapi.WorkflowGetRequest{WorkflowId: id})
			if err != nil && engine.CodeOf(err) != engine.CodeWorkflowNotExists {
				t.Fatalf("get %s: %v", id, err)
			}
			return err == nil
		}
		clock.offset.Store(int64(2 * time.Hour))

		// The archive's directory is a regular file: no object can be
		// written under it (not even by root).
		if err := os.Rename(dir, dir+".away"); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dir, []byte("not a directory"), 0o644); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 2; i++ { // each sweep tries again
			st, err := h.eng.Sweep(ctx)
			if err != nil || st.Deleted != 0 || st.Archived != 0 || st.ArchiveFailed != 1 || st.Backlog != 1 {
				t.Fatalf("sweep %d with a broken archive: %+v, %v; want 1 failed, none deleted, backlog 1", i, st, err)
			}
			if !exists() {
				t.Fatal("a run whose archive write failed was deleted")
			}
			if got, want := gauge(t, h, "iwf_retention_archive_failures_total"), string(rune('0'+i)); got != want {
				t.Fatalf("iwf_retention_archive_failures_total %q, want %s", got, want)
			}
		}

		// Repaired, the next sweep archives and deletes it.
		if err := os.Remove(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(dir+".away", dir); err != nil {
			t.Fatal(err)
		}
		// An object of the run is there already, as after a sweep that
		// stopped between the write and the deletion: it is replaced.
		stale, err := archive.Open(ctx, "file://"+dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := stale.Put(ctx, &archive.Run{WorkflowID: id, RunID: runID, Status: "STALE"}, func(context.Context) ([]archive.Event, error) {
			return nil, nil
		}); err != nil {
			t.Fatal(err)
		}
		stale.Close()
		st, err := h.eng.Sweep(ctx)
		if err != nil || st.Deleted != 1 || st.Archived != 1 || st.ArchiveFailed != 0 || st.Backlog != 0 {
			t.Fatalf("sweep with the archive repaired: %+v, %v; want 1 archived and deleted", st, err)
		}
		if exists() {
			t.Fatal("the archived run was not deleted")
		}
		if got := gauge(t, h, "iwf_retention_runs_archived_total"); got != "1" {
			t.Fatalf("iwf_retention_runs_archived_total %q, want 1", got)
		}

		// The object decodes to the run, read through a bucket of its own.
		b, err := archive.Open(ctx, "file://"+dir)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		newest, n, err := b.Newest(ctx, id)
		if err != nil || newest != runID || n != 1 {
			t.Fatalf("Newest: %s (%d runs), %v; want %s", newest, n, err, runID)
		}
		var got []archive.Event
		run, err := b.Read(ctx, id, runID, func(ev archive.Event) error {
			got = append(got, ev)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if run.WorkflowID != id || run.RunID != runID || run.WorkflowType != "TestWorkflow" || run.Status != "COMPLETED" ||
			run.StartedMs == 0 || run.ClosedMs < run.StartedMs || run.StartStateID != "Done" || run.HistoryEvents != len(history) {
			t.Fatalf("archived summary: %s", mustJSON(run))
		}
		if mustJSON(run.Input) != mustJSON(input) {
			t.Fatalf("archived input %s, want %s", mustJSON(run.Input), mustJSON(input))
		}
		if len(run.Results) != 1 || run.Results[0].CompletedStateID != "Done" || deref(run.Results[0].CompletedStateOutput.Data) != `"done"` {
			t.Fatalf("archived results: %s", mustJSON(run.Results))
		}
		if len(run.DataAttributes) != 1 || deref(run.DataAttributes[0].Key) != "customer" || deref(run.DataAttributes[0].Value.Data) != `"c-17"` {
			t.Fatalf("archived data attributes: %s", mustJSON(run.DataAttributes))
		}
		if len(run.SearchAttributes) != 1 || deref(run.SearchAttributes[0].Key) != "CustomerId" || deref(run.SearchAttributes[0].StringValue) != "c-17" {
			t.Fatalf("archived search attributes: %s", mustJSON(run.SearchAttributes))
		}
		// The events as the history API shows them, one for one, byte for
		// byte.
		wantJSON, _ := json.Marshal(history)
		gotJSON, _ := json.Marshal(got)
		if string(gotJSON) != string(wantJSON) {
			t.Fatalf("archived history (%d events):\n%s\nwant (%d events):\n%s", len(got), gotJSON, len(history), wantJSON)
		}
	})
}
