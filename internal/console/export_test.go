package console

import (
	"context"
	"strconv"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// Summary is a flat view of a derived timeline and diagram for tests.
type Summary struct {
	Executions []string // "id state parent status nextStates"
	Edges      []string // "from->to xN"
	Closed     bool
}

// Derive exposes the timeline and diagram derivation to the external tests:
// the events go through the run page's scan, with a page that holds every
// execution, listed in the order they started.
func Derive(events []iwfapi.WorkflowHistoryEvent, now time.Time) Summary {
	return DerivePage(events, now, len(events)+1, 0)
}

// DerivePage is Derive for one page of size executions before the
// execution ordinal before (0: the newest), listed in the order they started.
func DerivePage(events []iwfapi.WorkflowHistoryEvent, now time.Time, size, before int) Summary {
	sc := newScan(size, cursors{Executions: before})
	for _, ev := range events {
		_ = sc.add(storedEvent(ev))
	}
	v := sc.finish(now)
	var s Summary
	s.Closed = v.Timeline.Closed
	xs := v.Timeline.Executions
	for i := len(xs) - 1; i >= 0; i-- {
		x := xs[i]
		line := x.ID + " " + x.StateID + " parent=" + x.Parent + " " + x.Status
		for _, n := range x.NextStates {
			line += " ->" + n
		}
		if len(x.WaitUntil.Failures)+len(x.Execute.Failures) > 0 {
			line += " failures=" + itoa(len(x.WaitUntil.Failures)+len(x.Execute.Failures))
		}
		s.Executions = append(s.Executions, line)
	}
	for _, e := range v.Diagram.Edges {
		s.Edges = append(s.Edges, e.From.Key+"->"+e.To.Key+" x"+itoa(e.Count))
	}
	return s
}

func itoa(n int) string { return strconv.Itoa(n) }

// ScanRun makes the run page's pass over the history of a run (its first
// page of each list): outlined as the page does it (the outline, then the
// events shown read by id), or else over every event with its data (as
// the page did before), to compare their costs.
func ScanRun(ctx context.Context, eng *engine.Engine, workflowID string, outlined bool) error {
	sc := newScan(100, cursors{})
	if !outlined {
		_, _, err := eng.ScanHistory(ctx, workflowID, "", 0, sc.add)
		sc.finish(time.Now())
		return err
	}
	runID, _, err := eng.ScanHistoryOutline(ctx, workflowID, "", 0, outline, sc.add)
	if err != nil {
		return err
	}
	evs, err := eng.HistoryEvents(ctx, runID, sc.missing())
	if err != nil {
		return err
	}
	sc.fill(evs)
	sc.finish(time.Now())
	return nil
}
