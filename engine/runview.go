package engine

// Reads for pages that show one run, however long it ran: a pass over its
// history that holds nothing but what the caller keeps, and point reads of
// the executions and buffered messages the page shows (extensions of this
// server, used by the console; not part of the REST API).

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
)

// scanPage is the number of history events ScanHistory reads at a time.
const scanPage = 2000

// ScanHistory calls fn with the history events of a run (runID "" means
// the workflow's current run), oldest first, all read from one snapshot in
// pages, and returns the run's id. It stops after maxEvents events
// (maxEvents <= 0: no limit) and then reports whether events were left
// unread; an error from fn ends the scan with that error. fn may keep the
// events it is given. A caller that shows a run newest first keeps the
// last events it was given (the store reads a history oldest first).
func (e *Engine) ScanHistory(ctx context.Context, workflowID, runID string, maxEvents int, fn func(*HistoryEvent) error) (string, bool, error) {
	return e.scanHistory(ctx, workflowID, runID, maxEvents, fn, func(ctx context.Context, tx ReadTx, id string, after int64, limit int) ([]*HistoryEvent, error) {
		return tx.HistoryList(ctx, id, after, limit)
	})
}

// ScanHistoryOutline is ScanHistory without the data of most events: only
// the events od selects carry their Data (ReadTx.HistoryOutline), the
// others have none. A page that shows a few events of a long history
// scans its outline and then reads the events it shows (HistoryEvents).
func (e *Engine) ScanHistoryOutline(ctx context.Context, workflowID, runID string, maxEvents int, od OutlineData, fn func(*HistoryEvent) error) (string, bool, error) {
	return e.scanHistory(ctx, workflowID, runID, maxEvents, fn, func(ctx context.Context, tx ReadTx, id string, after int64, limit int) ([]*HistoryEvent, error) {
		return tx.HistoryOutline(ctx, id, after, limit, od)
	})
}

// HistoryEvents returns the history events of run runID (a run id, not a
// workflow id) with the given ids, with their data, in id order; ids it
// does not have are left out.
func (e *Engine) HistoryEvents(ctx context.Context, runID string, ids []int64) ([]*HistoryEvent, error) {
	var out []*HistoryEvent
	err := e.storeView(ctx, func(ctx context.Context, tx ReadTx) error {
		var err error
		out, err = tx.HistoryGet(ctx, runID, ids)
		return err
	})
	if err == nil {
		for _, ev := range out {
			if ev.Data, err = e.inlineRaw(ctx, true, "", runID, ev.Data); err != nil {
				return nil, err
			}
		}
	}
	return out, err
}

// scanHistory is ScanHistory with the page read by read.
func (e *Engine) scanHistory(ctx context.Context, workflowID, runID string, maxEvents int, fn func(*HistoryEvent) error,
	read func(ctx context.Context, tx ReadTx, id string, after int64, limit int) ([]*HistoryEvent, error)) (string, bool, error) {
	var id string
	truncated := false
	err := e.storeView(ctx, func(ctx context.Context, tx ReadTx) error {
		var err error
		truncated = false
		if id, err = resolveRun(ctx, tx, workflowID, runID); err != nil {
			return err
		}
		var after int64
		seen := 0
		for {
			limit := scanPage
			if maxEvents > 0 {
				if seen >= maxEvents {
					more, err := tx.HistoryOutline(ctx, id, after, 1, OutlineData{})
					truncated = len(more) > 0
					return err
				}
				limit = min(limit, maxEvents-seen)
			}
			events, err := read(ctx, tx, id, after, limit)
			if err != nil {
				return err
			}
			for _, ev := range events {
				// Pages show payloads inline (read within the scan's
				// snapshot: the scan hands events over as it reads them).
				if ev.Data, err = e.inlineRaw(ctx, true, workflowID, id, ev.Data); err != nil {
					return err
				}
				if err := fn(ev); err != nil {
					return err
				}
			}
			seen += len(events)
			if len(events) < limit {
				return nil
			}
			after = events[len(events)-1].ID
		}
	})
	return id, truncated, err
}

// RunInspection is what InspectRun reads of a run.
type RunInspection struct {
	// Executions are the state executions asked for that exist, in the
	// order asked, with their stored records (Data).
	Executions []*Execution
	// SignalCounts and InternalCounts are the numbers of buffered
	// (unconsumed) messages per signal and internal channel.
	SignalCounts, InternalCounts map[string]int
	// Signals and Internal are buffered messages, at most the limit asked
	// for of each kind: channels in name order, each channel's oldest
	// first.
	Signals, Internal []*Message
	// SearchAttributes are the run's search attributes as written, in key
	// order.
	SearchAttributes []json.RawMessage
}

// InspectRun reads, in one snapshot, parts of a run that a page shows a
// bounded number of: the named state executions, the buffered messages
// (counts per channel and at most messages of each kind) and the search
// attributes. runID must name an existing run.
func (e *Engine) InspectRun(ctx context.Context, workflowID, runID string, executionIDs []string, messages int) (*RunInspection, error) {
	var out *RunInspection
	err := e.storeView(ctx, func(ctx context.Context, tx ReadTx) error {
		out = &RunInspection{}
		id, err := resolveRun(ctx, tx, workflowID, runID)
		if err != nil {
			return err
		}
		for _, xid := range executionIDs {
			x, err := tx.ExecutionGet(ctx, id, xid)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			out.Executions = append(out.Executions, x)
		}
		peek := func(kind ChannelKind, counts map[string]int) ([]*Message, error) {
			channels := make([]string, 0, len(counts))
			for ch := range counts {
				channels = append(channels, ch)
			}
			sort.Strings(channels)
			var msgs []*Message
			for _, ch := range channels {
				if len(msgs) >= messages {
					break
				}
				m, err := tx.MessagePeek(ctx, id, kind, ch, messages-len(msgs))
				if err != nil {
					return nil, err
				}
				msgs = append(msgs, m...)
			}
			return msgs, nil
		}
		if out.SignalCounts, err = tx.MessageCounts(ctx, id, ChannelSignal); err != nil {
			return err
		}
		if out.Signals, err = peek(ChannelSignal, out.SignalCounts); err != nil {
			return err
		}
		if out.InternalCounts, err = tx.MessageCounts(ctx, id, ChannelInternal); err != nil {
			return err
		}
		if out.Internal, err = peek(ChannelInternal, out.InternalCounts); err != nil {
			return err
		}
		sas, err := tx.SearchAttributeGet(ctx, id, nil)
		if err != nil {
			return err
		}
		for _, a := range sas {
			out.SearchAttributes = append(out.SearchAttributes, a.Raw)
		}
		return nil
	})
	if err == nil {
		err = e.inlineInspection(ctx, workflowID, runID, out)
	}
	return out, err
}

// inlineInspection loads the external objects that the records and the
// messages of an inspection refer to.
func (e *Engine) inlineInspection(ctx context.Context, workflowID, runID string, in *RunInspection) error {
	if !e.payloadsOn() {
		return nil
	}
	var err error
	for _, x := range in.Executions {
		if x.Data, err = e.inlineRaw(ctx, true, workflowID, runID, x.Data); err != nil {
			return err
		}
	}
	for _, msgs := range [][]*Message{in.Signals, in.Internal} {
		for _, m := range msgs {
			if m.Value, err = e.inlineRaw(ctx, true, workflowID, runID, m.Value); err != nil {
				return err
			}
		}
	}
	return nil
}
