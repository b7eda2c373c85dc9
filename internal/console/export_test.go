package console

import (
	"strconv"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// Summary is a flat view of a derived timeline and diagram for tests.
type Summary struct {
	Executions []string // "id state parent status nextStates"
	Edges      []string // "from->to xN"
	Closed     bool
}

// Derive exposes the timeline and diagram derivation to the external tests.
func Derive(events []iwfapi.WorkflowHistoryEvent, now time.Time) Summary {
	tl := buildTimeline(events, now)
	var s Summary
	s.Closed = tl.Closed
	for _, x := range tl.Executions {
		line := x.ID + " " + x.StateID + " parent=" + x.Parent + " " + x.Status
		for _, n := range x.NextStates {
			line += " ->" + n
		}
		if len(x.WaitUntil.Failures)+len(x.Execute.Failures) > 0 {
			line += " failures=" + itoa(len(x.WaitUntil.Failures)+len(x.Execute.Failures))
		}
		s.Executions = append(s.Executions, line)
	}
	for _, e := range buildDiagram(tl).Edges {
		s.Edges = append(s.Edges, e.From.Key+"->"+e.To.Key+" x"+itoa(e.Count))
	}
	return s
}

func itoa(n int) string { return strconv.Itoa(n) }
