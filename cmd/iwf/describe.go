package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// describePath is the describe extension of the server.
const describePath = "/api/v1/workflow/describe"

// describeRequest and describeResponse are the describe extension's wire
// shape, written here until its generated types are in api/iwfapi.
type describeRequest struct {
	WorkflowID    string `json:"workflowId"`
	WorkflowRunID string `json:"workflowRunId,omitempty"`
}

type describeResponse struct {
	WorkflowID         string         `json:"workflowId"`
	WorkflowRunID      string         `json:"workflowRunId"`
	WorkflowType       string         `json:"workflowType"`
	Status             string         `json:"status"`
	WorkerURL          string         `json:"workerUrl"`
	StartedTimestampMs int64          `json:"startedTimestampMs"`
	ClosedTimestampMs  *int64         `json:"closedTimestampMs,omitempty"`
	TimeoutTimestampMs *int64         `json:"timeoutTimestampMs,omitempty"`
	ErrorType          string         `json:"errorType,omitempty"`
	ErrorMessage       string         `json:"errorMessage,omitempty"`
	PendingStates      []pendingState `json:"pendingStates"`
}

type pendingState struct {
	StateExecutionID        string          `json:"stateExecutionId"`
	StateID                 string          `json:"stateId"`
	Phase                   string          `json:"phase"`
	Attempt                 *int64          `json:"attempt,omitempty"`
	FirstAttemptTimestampMs *int64          `json:"firstAttemptTimestampMs,omitempty"`
	NextAttemptTimestampMs  *int64          `json:"nextAttemptTimestampMs,omitempty"`
	LastFailure             *attemptFailure `json:"lastFailure,omitempty"`
	CommandWaitingType      string          `json:"commandWaitingType,omitempty"`
	Commands                []stateCommand  `json:"commands,omitempty"`
}

type attemptFailure struct {
	API         string `json:"api"`
	Attempt     int64  `json:"attempt"`
	TimestampMs int64  `json:"timestampMs"`
	Status      *int64 `json:"status,omitempty"`
	Error       string `json:"error"`
}

type stateCommand struct {
	Kind              string `json:"kind"`
	CommandID         string `json:"commandId,omitempty"`
	ChannelName       string `json:"channelName,omitempty"`
	FiringTimestampMs *int64 `json:"firingTimestampMs,omitempty"`
	Done              bool   `json:"done"`
}

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
	var d describeResponse
	raw, err := cl.post(ctx, describePath, describeRequest{WorkflowID: *id, WorkflowRunID: *runID}, &d)
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
	b.add("Workflow ID", d.WorkflowID)
	b.add("Run ID", d.WorkflowRunID)
	b.add("Type", d.WorkflowType)
	b.add("Status", d.Status)
	b.addIf("Worker URL", d.WorkerURL)
	b.add("Started", formatMillis(&d.StartedTimestampMs))
	if d.ClosedTimestampMs != nil {
		b.add("Closed", formatMillis(d.ClosedTimestampMs))
	}
	if d.TimeoutTimestampMs != nil {
		b.add("Times out", formatMillis(d.TimeoutTimestampMs))
	}
	b.addIf("Error type", d.ErrorType)
	b.addIf("Error message", d.ErrorMessage)
	b.write(c.stdout)
	if len(d.PendingStates) == 0 {
		return nil
	}
	fmt.Fprintln(c.stdout, "\nPending states:")
	t := newTable(c.stdout, "STATE EXECUTION", "STATE", "PHASE", "ATTEMPT", "FIRST ATTEMPT", "NEXT ATTEMPT", "WAITING FOR")
	for _, p := range d.PendingStates {
		attempt := ""
		if p.Attempt != nil {
			attempt = strconv.FormatInt(*p.Attempt, 10)
		}
		t.row(p.StateExecutionID, p.StateID, p.Phase, attempt, formatMillis(p.FirstAttemptTimestampMs),
			formatMillis(p.NextAttemptTimestampMs), waitingFor(p))
	}
	if err := t.flush(); err != nil {
		return err
	}
	var failures kv
	for _, p := range d.PendingStates {
		if f := p.LastFailure; f != nil {
			status := ""
			if f.Status != nil {
				status = fmt.Sprintf(", status %d", *f.Status)
			}
			failures.add(p.StateExecutionID, fmt.Sprintf("%s attempt %d at %s%s: %s",
				f.API, f.Attempt, formatMillis(&f.TimestampMs), status, oneLine(f.Error)))
		}
	}
	if len(failures.rows) > 0 {
		fmt.Fprintln(c.stdout, "\nLast failures:")
		failures.write(c.stdout)
	}
	return nil
}

// waitingFor renders a state's commands: "ALL_COMPLETED: timer t1 at …
// (done), signal approve".
func waitingFor(p pendingState) string {
	if len(p.Commands) == 0 {
		return p.CommandWaitingType
	}
	parts := make([]string, 0, len(p.Commands))
	for _, cmd := range p.Commands {
		var s string
		switch cmd.Kind {
		case "TIMER":
			s = "timer"
			if cmd.CommandID != "" {
				s += " " + cmd.CommandID
			}
			if cmd.FiringTimestampMs != nil {
				s += " at " + formatMillis(cmd.FiringTimestampMs)
			}
		case "SIGNAL":
			s = "signal " + cmd.ChannelName
		case "INTERNAL_CHANNEL":
			s = "internal channel " + cmd.ChannelName
		default:
			s = strings.ToLower(cmd.Kind) + " " + cmd.CommandID
		}
		if cmd.Done {
			s += " (done)"
		}
		parts = append(parts, s)
	}
	out := strings.Join(parts, ", ")
	if p.CommandWaitingType != "" {
		out = p.CommandWaitingType + ": " + out
	}
	return out
}
