package console

// Archived runs: with Options.Archive set, a run that retention deleted
// from the store is shown from the archive (the object the sweep wrote
// before deleting it), read-only, with the same paging as a live run's
// page. The object is read as a stream: the scan keeps what the page
// shows and no more, and stops after MaxHistoryEvents events.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/archivedoc"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/archive"
)

// Archive is where the console reads archived runs; *archive.Bucket
// satisfies it. Both methods return an error wrapping archive.ErrNotFound
// when there is no such run.
type Archive interface {
	// Read reads the archived run runID of workflowID, calling onEvent with
	// each history event in order; onEvent may end the reading with
	// archive.ErrStop.
	Read(ctx context.Context, workflowID, runID string, onEvent func(archivedoc.Event) error) (*archivedoc.Run, error)
	// Newest returns the id of the archived run of workflowID that closed
	// last, and how many runs of it are archived.
	Newest(ctx context.Context, workflowID string) (string, int, error)
}

var _ Archive = (*archive.Bucket)(nil)

// archivedView is what an archived run's page says of the archive.
type archivedView struct {
	At time.Time
	// Runs is the number of archived runs of the workflow id when the
	// page shows the one that closed last (0 when the URL named the run).
	Runs int
}

// archivedRun serves the page of a run the store does not have (notFound
// is the store's answer) from the archive.
func (c *console) archivedRun(w http.ResponseWriter, r *http.Request, id, runParam string, at cursors, notFound error) {
	ctx := r.Context()
	runID, runs := runParam, 0
	var err error
	if runID == "" {
		runID, runs, err = c.opts.Archive.Newest(ctx, id)
	}
	if err == nil {
		c.renderArchived(w, r, id, runID, runs, at)
		return
	}
	if errors.Is(err, archive.ErrNotFound) {
		c.failErr(w, r, notFound)
		return
	}
	c.archiveFailed(w, r, id, err)
}

// archiveFailed answers a failed read of the archive.
func (c *console) archiveFailed(w http.ResponseWriter, r *http.Request, id string, err error) {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		c.failErr(w, r, err)
		return
	}
	c.opts.Logger.Error().Err(err).Str("workflowId", id).Msg("console: read archived run")
	c.fail(w, r, http.StatusServiceUnavailable, "the run is not in the store and the archive could not be read (see the server log)")
}

// renderArchived reads the archived run runID of id and renders its page.
func (c *console) renderArchived(w http.ResponseWriter, r *http.Request, id, runID string, runs int, at cursors) {
	ctx := r.Context()
	size := c.opts.RunPageSize
	sc := newScan(size, at)
	read, truncated := 0, false
	run, err := c.opts.Archive.Read(ctx, id, runID, func(ev archivedoc.Event) error {
		if read >= c.opts.MaxHistoryEvents {
			truncated = true
			return archive.ErrStop
		}
		read++
		return sc.add(archivedEvent(ev))
	})
	if errors.Is(err, archive.ErrNotFound) {
		c.fail(w, r, http.StatusNotFound, "workflow "+id+" has no run "+runID+" in the store nor in the archive")
		return
	}
	if err != nil {
		c.archiveFailed(w, r, id, err)
		return
	}
	d := iwfapi.WorkflowDescribeResponse{WorkflowId: run.WorkflowID, WorkflowRunId: run.RunID, WorkflowType: run.WorkflowType,
		Status: iwfapi.WorkflowStatus(run.Status), StartedTimestampMs: run.StartedMs, ClosedTimestampMs: &run.ClosedMs}
	if run.ErrorType != "" {
		d.ErrorType = &run.ErrorType
	}
	if run.ErrorMessage != "" {
		d.ErrorMessage = &run.ErrorMessage
	}
	p := &runPage{WorkflowID: id, RunParam: runID, D: d, Duration: runDuration(d, c.opts.Now()),
		Archived: &archivedView{At: time.UnixMilli(run.ArchivedMs), Runs: runs},
		Input:    archivedObject(run.Input), HistoryTruncated: truncated}
	for _, o := range run.Results {
		p.Results = append(p.Results, iwfapi.StateCompletionOutput{CompletedStateExecutionId: o.CompletedStateExecutionID,
			CompletedStateId: o.CompletedStateID, CompletedStateOutput: archivedObject(o.CompletedStateOutput)})
	}
	for _, kv := range run.DataAttributes {
		p.Data = append(p.Data, iwfapi.KeyValue{Key: kv.Key, Value: archivedObject(kv.Value)})
	}
	for _, sa := range run.SearchAttributes {
		if b, err := json.Marshal(sa); err == nil {
			p.Search = append(p.Search, b)
		}
	}
	// The page's links name the run, so that they keep showing this one.
	q := r.URL.Query()
	q.Set("run", runID)
	v := sc.finish(c.opts.Now())
	p.view(c, id, q, at, v)
	p.rows(v, nil)
	c.render(w, r, http.StatusOK, "run", id+" (archived)", false, p)
}

// archivedEvent is an archived history event as the store holds one.
func archivedEvent(ev archivedoc.Event) *engine.HistoryEvent {
	out := &engine.HistoryEvent{ID: ev.EventID, At: time.UnixMilli(ev.TimestampMs), Type: ev.EventType, ExecutionID: ev.ExecutionID}
	if len(ev.Data) > 0 && string(ev.Data) != "null" {
		out.Data = []byte(ev.Data)
	}
	return out
}

// archivedObject is an archived value as the run page shows values.
func archivedObject(v *archivedoc.Value) *iwfapi.EncodedObject {
	if v == nil {
		return nil
	}
	return &iwfapi.EncodedObject{Data: v.Data, Encoding: v.Encoding, ExtPath: v.ExtPath, ExtStoreId: v.ExtStoreID}
}

// idQuery matches a list query that names one workflow id: WorkflowId =
// 'x' (or "x").
var idQuery = regexp.MustCompile(`^\s*WorkflowId\s*=\s*(?:'((?:[^']|'')*)'|"((?:[^"\\]|\\.)*)")\s*$`)

// archivedLookup returns the archived runs of the workflow id a list
// query names, when the store has none: the link to the one that closed
// last and their number.
func (c *console) archivedLookup(ctx context.Context, query string) (string, string, int) {
	m := idQuery.FindStringSubmatch(query)
	if m == nil || c.opts.Archive == nil {
		return "", "", 0
	}
	id := m[1]
	if m[2] != "" {
		var s string
		if json.Unmarshal([]byte(`"`+m[2]+`"`), &s) != nil {
			return "", "", 0
		}
		id = s
	} else {
		id = regexp.MustCompile(`''`).ReplaceAllString(id, "'")
	}
	runID, n, err := c.opts.Archive.Newest(ctx, id)
	if err != nil {
		if !errors.Is(err, archive.ErrNotFound) {
			c.opts.Logger.Warn().Err(err).Str("workflowId", id).Msg("console: look up archived runs")
		}
		return "", "", 0
	}
	return id, c.runURL(id, runID), n
}
