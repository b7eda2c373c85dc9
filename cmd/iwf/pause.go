package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// pauseCommands pause and resume workflow types and worker hosts
// (`iwf pause …`); `iwf workflow pause|resume` do one run.
var pauseCommands = map[string]command{
	"list":   {"list the paused workflow types and worker hosts, with the calls each holds", cmdPauseList},
	"set":    {"pause a workflow type (--type) or a worker host (--host): hold their worker calls", cmdPauseSet},
	"delete": {"resume a paused workflow type or worker host, its held calls at --rps a second", cmdPauseDelete},
}

func cmdPause(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("workflow pause", "iwf workflow pause --id ID [--run-id RUN] [--reason TEXT]")
	id := fs.String("id", "", "the workflow id (required)")
	runID := fs.String("run-id", "", "the run; default the current run")
	reason := fs.String("reason", "", "why; shown in describe, in the history and to RPC callers")
	if err := c.parseSub(fs, args, "id"); err != nil {
		return err
	}
	req := iwfapi.WorkflowPauseRequest{WorkflowId: *id, WorkflowRunId: optional(*runID), Reason: optional(*reason)}
	return c.simple(ctx, "/api/v1/workflow/pause", req, fmt.Sprintf("workflow %s paused: no worker call until `iwf workflow resume --id %s`", *id, shellQuote(*id)))
}

func cmdResume(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("workflow resume", "iwf workflow resume --id ID [--run-id RUN]")
	id := fs.String("id", "", "the workflow id (required)")
	runID := fs.String("run-id", "", "the run; default the current run")
	if err := c.parseSub(fs, args, "id"); err != nil {
		return err
	}
	req := iwfapi.WorkflowResumeRequest{WorkflowId: *id, WorkflowRunId: optional(*runID)}
	return c.simple(ctx, "/api/v1/workflow/resume", req, fmt.Sprintf("workflow %s resumed", *id))
}

// scopeFlags registers --type and --host, one of which names a scope.
func scopeFlags(c *cli, name, synopsis string) (fs *flag.FlagSet, typ, host *string) {
	fs = c.flagSet(name, synopsis)
	typ = fs.String("type", "", "the iWF workflow type")
	host = fs.String("host", "", "the worker host, HOST:PORT as the worker URLs name it")
	return fs, typ, host
}

// checkScope refuses a command line that names no scope or two.
func checkScope(fs *flag.FlagSet, typ, host string) error {
	if (typ == "") == (host == "") {
		return usagef("%s: give either --type or --host", fs.Name())
	}
	return nil
}

func cmdPauseSet(ctx context.Context, c *cli, args []string) error {
	fs, typ, host := scopeFlags(c, "pause set", "iwf pause set --type TYPE | --host HOST:PORT [--reason TEXT]")
	reason := fs.String("reason", "", "why; shown in the listing, in describe and to RPC callers")
	if err := c.parseSub(fs, args); err != nil {
		return err
	}
	if err := checkScope(fs, *typ, *host); err != nil {
		return err
	}
	req := iwfapi.PauseSetRequest{WorkflowType: optional(*typ), WorkerHost: optional(*host), Reason: optional(*reason)}
	var resp iwfapi.PauseScopeInfo
	if printed, err := c.call(ctx, "/api/v1/pause/set", req, &resp); printed || err != nil {
		return err
	}
	_, err := fmt.Fprintf(c.stdout, "%s paused: its worker calls are held until `iwf pause delete %s`\n", scopeLabel(resp.WorkflowType, resp.WorkerHost), scopeArgs(resp.WorkflowType, resp.WorkerHost))
	return err
}

func cmdPauseDelete(ctx context.Context, c *cli, args []string) error {
	fs, typ, host := scopeFlags(c, "pause delete", "iwf pause delete --type TYPE | --host HOST:PORT [--rps N]")
	rps := fs.Float64("rps", 0, "held calls made due per second, from 0.01 to 10000; 0 means the server's default, 50")
	if err := c.parseSub(fs, args); err != nil {
		return err
	}
	if err := checkScope(fs, *typ, *host); err != nil {
		return err
	}
	req := iwfapi.PauseDeleteRequest{WorkflowType: optional(*typ), WorkerHost: optional(*host)}
	if *rps != 0 {
		req.Rps = rps
	}
	var resp iwfapi.PauseDeleteResponse
	if printed, err := c.call(ctx, "/api/v1/pause/delete", req, &resp); printed || err != nil {
		return err
	}
	msg := fmt.Sprintf("%s resumed: %d held calls", scopeLabel(optional(*typ), optional(*host)), resp.Resumed)
	if resp.LastDueTimestampMs != nil {
		msg += ", the last due at " + formatMillis(resp.LastDueTimestampMs)
	}
	_, err := fmt.Fprintln(c.stdout, msg)
	return err
}

func cmdPauseList(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("pause list", "iwf pause list")
	if err := c.parseSub(fs, args); err != nil {
		return err
	}
	var resp iwfapi.PauseListResponse
	if printed, err := c.call(ctx, "/api/v1/pause/list", iwfapi.PauseListRequest{}, &resp); printed || err != nil {
		return err
	}
	t := newTable(c.stdout, "SCOPE", "HELD CALLS", "PAUSED BY", "PAUSED", "REASON")
	for _, p := range resp.Pauses {
		t.row(scopeLabel(p.WorkflowType, p.WorkerHost), strconv.FormatInt(p.HeldCalls, 10), p.PausedBy, formatMillis(&p.PausedTimestampMs), oneLine(deref(p.Reason)))
	}
	return t.flush()
}

// scopeLabel names a scope for people: "workflow type T", "worker host H".
func scopeLabel(typ, host *string) string {
	if t := deref(typ); t != "" {
		return "workflow type " + t
	}
	return "worker host " + deref(host)
}

// scopeArgs are the flags that name a scope on the command line.
func scopeArgs(typ, host *string) string {
	if t := deref(typ); t != "" {
		return "--type " + shellQuote(t)
	}
	return "--host " + shellQuote(deref(host))
}
