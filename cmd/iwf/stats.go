package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

const statsPath = "/api/v1/workflow/stats"

func cmdStats(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("workflow stats", "iwf workflow stats --type TYPE [--max-runs N]")
	typ := fs.String("type", "", "the workflow type (required)")
	maxRuns := fs.Int("max-runs", 0, "read at most this many open runs, the oldest first; 0 means the server's default, 10000 (at most 100000)")
	if err := c.parseSub(fs, args, "type"); err != nil {
		return err
	}
	if *maxRuns < 0 || *maxRuns > 100_000 {
		return usagef("%s: --max-runs %d: want 0 to 100000", fs.Name(), *maxRuns)
	}
	req := iwfapi.WorkflowStatsRequest{WorkflowType: *typ}
	if *maxRuns > 0 {
		req.MaxRuns = ptr(int32(*maxRuns))
	}
	var resp iwfapi.WorkflowStatsResponse
	if printed, err := c.call(ctx, statsPath, req, &resp); printed || err != nil {
		return err
	}
	runs := fmt.Sprintf("%d open runs read", resp.Runs)
	if resp.Truncated {
		runs += " (the oldest; the type has more: --max-runs)"
	}
	fmt.Fprintf(c.stdout, "Workflow type %s: %s\n", resp.WorkflowType, runs)
	if len(resp.States) == 0 {
		_, err := fmt.Fprintln(c.stdout, "No live state executions: no open run of this type is in any state.")
		return err
	}
	fmt.Fprintln(c.stdout)
	t := newTable(c.stdout, "STATE", "PHASE", "EXECUTIONS", "OLDEST SINCE", "OLDEST WORKFLOW", "OLDEST EXECUTION")
	paused := false
	for _, s := range resp.States {
		for _, p := range s.Phases {
			t.row(s.StateId, string(p.Phase), strconv.Itoa(int(p.Count)), formatMillis(&p.OldestSinceTimestampMs), p.OldestWorkflowId, p.OldestStateExecutionId)
			paused = paused || p.Phase == iwfapi.StatePhasePaused
		}
	}
	if err := t.flush(); err != nil {
		return err
	}
	if paused {
		fmt.Fprintln(c.stdout, "\nPAUSED: calls held because the run, its workflow type or its worker host is paused;\n"+
			"iwf workflow describe --id ID says which, iwf pause list lists the paused types and hosts.")
	}
	var waits [][2]string
	for _, s := range resp.States {
		var w []string
		for _, x := range s.Waits {
			name := strings.ToLower(strings.ReplaceAll(string(x.Kind), "_", " "))
			if x.Name != nil {
				name += " " + *x.Name
			}
			w = append(w, fmt.Sprintf("%s (%d)", name, x.Executions))
		}
		if len(w) > 0 {
			waits = append(waits, [2]string{s.StateId, strings.Join(w, ", ")})
		}
	}
	if len(waits) == 0 {
		return nil
	}
	fmt.Fprintln(c.stdout, "\nWaiting for:")
	t = newTable(c.stdout, "STATE", "COMMANDS NOT YET COMPLETED (EXECUTIONS)")
	for _, w := range waits {
		t.row(w[0], w[1])
	}
	if err := t.flush(); err != nil {
		return err
	}
	if resp.WaitingTruncated {
		fmt.Fprintf(c.stdout, "(counted among the first %d executions waiting for commands)\n", resp.WaitingRead)
	}
	return nil
}
