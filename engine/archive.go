package engine

// Archival: with an Archiver configured, a retention sweep writes each
// expired run to it before deleting the run, and deletes only the runs
// whose write succeeded. A run whose write failed stays in the store and
// is tried again at the next sweep (the sweep interval is the backoff).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// ArchiveFormat is the version of the archived document (ArchivedRun and
// its history) the engine writes.
const ArchiveFormat = 1

// ArchivedRun is an archived run without its history: the summary, the input, the
// results and the attributes, as the run had them when it was archived.
type ArchivedRun struct {
	// Format is the document's version (ArchiveFormat).
	Format       int    `json:"format"`
	WorkflowID   string `json:"workflowId"`
	RunID        string `json:"workflowRunId"`
	WorkflowType string `json:"workflowType"`
	// Status is the run's final iWF WorkflowStatus.
	Status string `json:"status"`
	// StartedMs, ClosedMs and ArchivedMs are unix milliseconds.
	StartedMs    int64  `json:"startedTimestampMs"`
	ClosedMs     int64  `json:"closedTimestampMs"`
	ArchivedMs   int64  `json:"archivedTimestampMs"`
	ErrorType    string `json:"errorType,omitempty"`
	ErrorMessage string `json:"errorMessage,omitempty"`
	// StartStateID and Input are the start state and its input.
	StartStateID string                `json:"startStateId,omitempty"`
	Input        *iwfapi.EncodedObject `json:"input,omitempty"`
	// Results are the state completion outputs the run recorded.
	Results          []iwfapi.StateCompletionOutput `json:"results,omitempty"`
	DataAttributes   []iwfapi.KeyValue              `json:"dataAttributes,omitempty"`
	SearchAttributes []iwfapi.SearchAttribute       `json:"searchAttributes,omitempty"`
	// HistoryEvents is the number of events of the document's history.
	HistoryEvents int `json:"historyEvents"`
}

// Archiver stores closed runs before retention deletes them
// (internal/archive's Bucket is one).
type Archiver interface {
	// Put writes run r and the history events next returns, page by page
	// until it returns none, as one object, replacing the object written
	// before for the same run if any. It returns nil only when the whole
	// object was written.
	Put(ctx context.Context, r *ArchivedRun, next func(context.Context) ([]iwfapi.WorkflowHistoryEvent, error)) error
}

// archivePage is the number of history events read per read transaction
// while a run is archived.
const archivePage = 1000

// archiveRuns writes the runs ids names to the archive and returns those
// written; a run gone meanwhile (deleted by another sweep) is left out
// without an error. Each failure is counted, logged at warn and counted in
// st.ArchiveFailed.
func (e *Engine) archiveRuns(ctx context.Context, ids []string, st *SweepStats) []string {
	ok := make([]string, 0, len(ids))
	for _, id := range ids {
		wid, err := e.archiveRun(ctx, id)
		switch {
		case err == nil:
			ok = append(ok, id)
			st.Archived++
			e.metrics.runsArchived.inc()
		case errors.Is(err, ErrNotFound):
		case ctx.Err() != nil:
			return ok
		default:
			st.ArchiveFailed++
			e.metrics.archiveFailures.inc()
			e.log.Warn().Err(err).Str("workflowId", wid).Str("runId", id).
				Msg("archiving an expired run failed: the run is kept and archived again at the next sweep")
		}
	}
	return ok
}

// archiveRun writes one run to the archive and returns its workflow id:
// its summary, input, results and attributes read in one read
// transaction, then its history a page per read transaction, so that no
// transaction lasts as long as the upload and no more than a page of
// events is held at once. An expired run is closed: nothing changes it.
func (e *Engine) archiveRun(ctx context.Context, runID string) (string, error) {
	var doc ArchivedRun
	err := e.storeView(ctx, func(ctx context.Context, tx ReadTx) error {
		run, err := tx.RunGet(ctx, runID)
		if err != nil {
			return err
		}
		rd, err := decodeRun(run)
		if err != nil {
			return err
		}
		doc = ArchivedRun{
			WorkflowID: run.WorkflowID, RunID: run.RunID, WorkflowType: run.WorkflowType, Status: string(run.Status),
			StartedMs: unixMs(run.StartedAt), ClosedMs: unixMs(run.ClosedAt), ArchivedMs: unixMs(e.cfg.Clock.Now()),
			ErrorType: rd.ErrorType, ErrorMessage: rd.ErrorMsg,
			StartStateID: deref(rd.Start.StartStateID), Input: mapPtr(rd.Start.StateInput, valueOut),
			Results: slice(mapSlice(&rd.Outputs, outputOut)),
		}
		das, err := tx.DataAttributeGet(ctx, runID, nil)
		if err != nil {
			return err
		}
		doc.DataAttributes = fromStoreDataAttributes(das)
		sas, err := tx.SearchAttributeGet(ctx, runID, nil)
		if err != nil {
			return err
		}
		doc.SearchAttributes = make([]iwfapi.SearchAttribute, 0, len(sas))
		for _, a := range sas {
			var sa iwfapi.SearchAttribute
			if err := json.Unmarshal(a.Raw, &sa); err != nil {
				return fmt.Errorf("decoding search attribute %s of run %s: %w", a.Key, runID, err)
			}
			doc.SearchAttributes = append(doc.SearchAttributes, sa)
		}
		return nil
	})
	if err != nil {
		return doc.WorkflowID, err
	}
	var after int64
	done := false
	next := func(ctx context.Context) ([]iwfapi.WorkflowHistoryEvent, error) {
		if done {
			return nil, nil
		}
		var page []iwfapi.WorkflowHistoryEvent
		err := e.storeView(ctx, func(ctx context.Context, tx ReadTx) error {
			events, err := tx.HistoryList(ctx, runID, after, archivePage)
			if err != nil {
				return err
			}
			page = make([]iwfapi.WorkflowHistoryEvent, 0, len(events))
			for _, ev := range events {
				page = append(page, HistoryEventOut(ev))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if len(page) < archivePage {
			done = true
		}
		if len(page) > 0 {
			after = page[len(page)-1].EventId
		}
		return page, nil
	}
	if err := e.cfg.Archive.Put(ctx, &doc, next); err != nil {
		return doc.WorkflowID, fmt.Errorf("archiving run %s of workflow %s: %w", runID, doc.WorkflowID, err)
	}
	return doc.WorkflowID, nil
}
