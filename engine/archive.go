package engine

// Archival: with an Archiver configured, a retention sweep writes each
// expired run to it before deleting the run, and deletes only the runs
// whose write succeeded. A run whose write failed stays in the store and
// is tried again at the next sweep (the sweep interval is the backoff).

//
// The archived document is the leaf package archivedoc's: the stored
// format, shared with its readers (internal/archive, the command line),
// and independent of the API's generated types. The engine maps its
// records to it here.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/iwf-server/iwf-server/archivedoc"
	"github.com/iwf-server/iwf-server/engine/internal/record"
)

// ArchiveFormat is the version of the archived document (ArchivedRun and
// its history) the engine writes.
const ArchiveFormat = archivedoc.Format

// ArchivedRun is an archived run without its history: the summary, the
// input, the results and the attributes, as the run had them when it was
// archived.
type ArchivedRun = archivedoc.Run

// ArchivedEvent is one history event of an archived run.
type ArchivedEvent = archivedoc.Event

// Archiver stores closed runs before retention deletes them
// (internal/archive's Bucket is one).
type Archiver interface {
	// Put writes run r and the history events next returns, page by page
	// until it returns none, as one object, replacing the object written
	// before for the same run if any. It returns nil only when the whole
	// object was written.
	Put(ctx context.Context, r *ArchivedRun, next func(context.Context) ([]ArchivedEvent, error)) error
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
	var vals archivedValues
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
			ErrorType: rd.ErrorType, ErrorMessage: rd.ErrorMsg, StartStateID: deref(rd.Start.StartStateID),
		}
		vals = archivedValues{Input: rd.Start.StateInput, Results: rd.Outputs}
		das, err := tx.DataAttributeGet(ctx, runID, nil)
		if err != nil {
			return err
		}
		for _, a := range das {
			vals.DataAttributes = append(vals.DataAttributes, record.KeyValue{Key: ptr(a.Key), Value: decodeValue(a.Value)})
		}
		sas, err := tx.SearchAttributeGet(ctx, runID, nil)
		if err != nil {
			return err
		}
		for _, a := range sas {
			var sa record.SearchAttribute
			if err := json.Unmarshal(a.Raw, &sa); err != nil {
				return fmt.Errorf("decoding search attribute %s of run %s: %w", a.Key, runID, err)
			}
			vals.SearchAttributes = append(vals.SearchAttributes, sa)
		}
		return nil
	})
	if err != nil {
		return doc.WorkflowID, err
	}
	// The archive outlives the run's external objects: it holds the
	// payloads themselves.
	if err := e.inline(ctx, false, doc.WorkflowID, runID, &vals); err != nil {
		return doc.WorkflowID, err
	}
	vals.fill(&doc)
	var after int64
	done := false
	next := func(ctx context.Context) ([]ArchivedEvent, error) {
		if done {
			return nil, nil
		}
		var page []ArchivedEvent
		err := e.storeView(ctx, func(ctx context.Context, tx ReadTx) error {
			events, err := tx.HistoryList(ctx, runID, after, archivePage)
			if err != nil {
				return err
			}
			page = make([]ArchivedEvent, 0, len(events))
			for _, ev := range events {
				page = append(page, archivedEvent(ev))
			}
			return nil
		})
		for i := 0; err == nil && i < len(page); i++ {
			page[i].Data, err = e.inlineRaw(ctx, false, doc.WorkflowID, runID, page[i].Data)
		}
		if err != nil {
			return nil, err
		}
		if len(page) < archivePage {
			done = true
		}
		if len(page) > 0 {
			after = page[len(page)-1].EventID
		}
		return page, nil
	}
	if err := e.cfg.Archive.Put(ctx, &doc, next); err != nil {
		return doc.WorkflowID, fmt.Errorf("archiving run %s of workflow %s: %w", runID, doc.WorkflowID, err)
	}
	return doc.WorkflowID, nil
}

// archivedValues are the values of an archived run's summary as the engine
// stores them, until fill maps them to the document's types.
type archivedValues struct {
	Input            *record.Value
	Results          []record.StateOutput
	DataAttributes   []record.KeyValue
	SearchAttributes []record.SearchAttribute
}

// fill sets the input, results and attributes of doc.
func (v *archivedValues) fill(doc *ArchivedRun) {
	doc.Input = archivedValue(v.Input)
	doc.Results, doc.DataAttributes, doc.SearchAttributes = nil, nil, nil
	for _, o := range v.Results {
		doc.Results = append(doc.Results, archivedoc.StateOutput{CompletedStateExecutionID: o.CompletedStateExecutionID,
			CompletedStateID: o.CompletedStateID, CompletedStateOutput: archivedValue(o.CompletedStateOutput)})
	}
	for _, kv := range v.DataAttributes {
		doc.DataAttributes = append(doc.DataAttributes, archivedoc.KeyValue{Key: kv.Key, Value: archivedValue(kv.Value)})
	}
	for _, sa := range v.SearchAttributes {
		doc.SearchAttributes = append(doc.SearchAttributes, archivedoc.SearchAttribute{Key: sa.Key, ValueType: sa.ValueType,
			StringValue: sa.StringValue, IntegerValue: sa.IntegerValue, DoubleValue: sa.DoubleValue, BoolValue: sa.BoolValue,
			StringArrayValue: copyStrings(sa.StringArrayValue)})
	}
}

// archivedValue is a stored value in the archived document.
func archivedValue(v *record.Value) *archivedoc.Value {
	if v == nil {
		return nil
	}
	return &archivedoc.Value{Encoding: v.Encoding, Data: v.Data, ExtPath: v.ExtPath, ExtStoreID: v.ExtStoreID}
}

// archivedEvent is a stored history event in the archived document. Its
// data is written as the history API shows it: an object, its keys
// sorted, numbers as JSON numbers of float64 precision (data that is not
// an object is left out).
func archivedEvent(ev *HistoryEvent) ArchivedEvent {
	out := ArchivedEvent{EventID: ev.ID, TimestampMs: ev.At.UnixMilli(), EventType: ev.Type, ExecutionID: ev.ExecutionID}
	if len(ev.Data) > 0 {
		var data map[string]any
		if json.Unmarshal(ev.Data, &data) == nil {
			out.Data, _ = json.Marshal(data)
		}
	}
	return out
}
