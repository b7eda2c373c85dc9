package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// describePath is the describe extension of the server.
const describePath = "/api/v1/workflow/describe"

func cmdDescribe(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("workflow describe", "iwf workflow describe --id ID [--run-id RUN]")
	id := fs.String("id", "", "the workflow id (required)")
	runID := fs.String("run-id", "", "the run; default the current run")
	if err := c.parseSub(fs, args, "id"); err != nil {
		return err
	}
	cl, ctx, cancel, err := c.client(ctx, false)
	if err != nil {
		return err
	}
	defer cancel()
	var d iwfapi.WorkflowDescribeResponse
	raw, err := cl.post(ctx, describePath, iwfapi.WorkflowDescribeRequest{WorkflowId: *id, WorkflowRunId: optional(*runID)}, &d)
	var ae *apiError
	if errors.As(err, &ae) && ae.noRoute() {
		return fmt.Errorf("the server at %s has no describe endpoint (POST %s): %w", cl.base, describePath, err)
	}
	if err != nil {
		return err
	}
	if c.json {
		return printJSON(c.stdout, raw)
	}
	var b kv
	b.add("Workflow ID", d.WorkflowId)
	b.add("Run ID", d.WorkflowRunId)
	b.add("Type", d.WorkflowType)
	b.add("Status", string(d.Status))
	b.addIf("Worker URL", d.WorkerUrl)
	b.add("Started", formatMillis(&d.StartedTimestampMs))
	if d.ClosedTimestampMs != nil {
		b.add("Closed", formatMillis(d.ClosedTimestampMs))
	}
	if d.TimeoutTimestampMs != nil {
		b.add("Times out", formatMillis(d.TimeoutTimestampMs))
	}
	if a := deref(d.RetryAttempt); a > 1 {
		b.add("Retry attempt", strconv.Itoa(int(a)))
	}
	b.addIf("Retried by run", deref(d.RetriedByRunId))
	b.addIf("Error type", deref(d.ErrorType))
	b.addIf("Error message", deref(d.ErrorMessage))
	if p := d.Paused; p != nil {
		b.add("Paused", pausedText(p))
	}
	b.write(c.stdout)
	if len(d.PendingStates) == 0 {
		return nil
	}
	fmt.Fprintln(c.stdout, "\nPending states:")
	t := newTable(c.stdout, "STATE EXECUTION", "STATE", "PHASE", "ATTEMPT", "FIRST ATTEMPT", "NEXT ATTEMPT", "WAITING FOR")
	for _, p := range d.PendingStates {
		attempt := ""
		if p.Attempt != nil {
			attempt = strconv.Itoa(int(*p.Attempt))
		}
		nextAttempt := formatMillis(p.NextAttemptTimestampMs)
		if deref(p.HeldByPause) {
			nextAttempt = "held: paused"
		}
		t.row(p.StateExecutionId, p.StateId, string(p.Phase), attempt, formatMillis(p.FirstAttemptTimestampMs),
			nextAttempt, waitingFor(p))
	}
	if err := t.flush(); err != nil {
		return err
	}
	var failures kv
	for _, p := range d.PendingStates {
		if f := p.LastFailure; f != nil {
			status := ""
			if f.HttpStatus != nil {
				status = fmt.Sprintf(", HTTP %d", *f.HttpStatus)
			}
			failures.add(p.StateExecutionId, fmt.Sprintf("%s attempt %d at %s%s: %s",
				f.Api, f.Attempt, formatMillis(&f.TimestampMs), status, oneLine(f.Error)))
		}
	}
	if len(failures.rows) > 0 {
		fmt.Fprintln(c.stdout, "\nLast failures:")
		failures.write(c.stdout)
	}
	return nil
}

// waitingFor renders a state's commands, e.g. "ANY_COMPLETED: timer t1 at
// 2025-01-02T00:00:00Z, signal approve (done)".
func waitingFor(p iwfapi.PendingStateExecution) string {
	if l := deref(p.WaitingForLimit); l != "" {
		return "limit " + l + " since " + formatMillis(p.WaitingForLimitSinceTimestampMs)
	}
	wt := string(deref(p.CommandWaitingType))
	cmds := deref(p.Commands)
	if len(cmds) == 0 {
		return wt
	}
	parts := make([]string, 0, len(cmds))
	for _, cmd := range cmds {
		var s string
		switch cmd.Kind {
		case iwfapi.PendingCommandKindTIMER:
			s = "timer"
			if id := deref(cmd.CommandId); id != "" {
				s += " " + id
			}
			if cmd.FiringTimestampMs != nil {
				s += " at " + formatMillis(cmd.FiringTimestampMs)
			}
		case iwfapi.PendingCommandKindSIGNAL:
			s = "signal " + deref(cmd.ChannelName)
		case iwfapi.PendingCommandKindINTERNALCHANNEL:
			s = "internal channel " + deref(cmd.ChannelName)
		default:
			s = strings.ToLower(string(cmd.Kind)) + " " + deref(cmd.CommandId)
		}
		if cmd.Done {
			s += " (done)"
		}
		parts = append(parts, s)
	}
	out := strings.Join(parts, ", ")
	if wt != "" {
		out = wt + ": " + out
	}
	return out
}

// pausedText says what paused a run, who, when and why: "the run, by
// oncall at 2025-01-02T03:04:05Z: worker down".
func pausedText(p *iwfapi.WorkflowPauseInfo) string {
	s := "the run"
	switch {
	case strings.HasPrefix(p.Scope, "type:"):
		s = "workflow type " + strings.TrimPrefix(p.Scope, "type:")
	case strings.HasPrefix(p.Scope, "host:"):
		s = "worker host " + strings.TrimPrefix(p.Scope, "host:")
	}
	if by := deref(p.PausedBy); by != "" {
		s += ", by " + by
	}
	if p.PausedTimestampMs != nil {
		s += " at " + formatMillis(p.PausedTimestampMs)
	}
	if r := deref(p.Reason); r != "" {
		s += ": " + oneLine(r)
	}
	return s
}
