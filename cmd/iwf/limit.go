package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

var limitCommands = map[string]command{
	"list":   {"list the concurrency and rate limits on worker calls in force", cmdLimitList},
	"set":    {"set or change a limit (0 pauses the calls it applies to); every node applies it within seconds", cmdLimitSet},
	"delete": {"remove a limit; the calls waiting for it go ahead", cmdLimitDelete},
}

// limitFlags are the flags that name a limit, as the server's flags do,
// with the kind each names.
var limitFlags = []struct {
	name string
	kind iwfapi.LimitKind
}{
	{"worker-concurrency", iwfapi.LimitKindWorkerConcurrency},
	{"worker-rate", iwfapi.LimitKindWorkerRate},
	{"type-concurrency", iwfapi.LimitKindTypeConcurrency},
}

// limitFlagOf names the flag of a kind of limit.
func limitFlagOf(k iwfapi.LimitKind) string {
	for _, f := range limitFlags {
		if f.kind == k {
			return f.name
		}
	}
	return string(k)
}

// oneLimitFlag returns the kind and the value of the one limit flag given.
func oneLimitFlag(fs *flag.FlagSet, values map[string]*string) (iwfapi.LimitKind, string, error) {
	var kind iwfapi.LimitKind
	var value string
	n := 0
	for _, f := range limitFlags {
		if *values[f.name] != "" {
			kind, value = f.kind, *values[f.name]
			n++
		}
	}
	if n != 1 {
		return "", "", usagef("%s: give one of --worker-concurrency, --worker-rate or --type-concurrency", fs.Name())
	}
	return kind, value, nil
}

func cmdLimitList(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("limit list", "iwf limit list")
	if err := c.parseSub(fs, args); err != nil {
		return err
	}
	var resp iwfapi.LimitListResponse
	if printed, err := c.call(ctx, "/api/v1/limit/list", iwfapi.LimitListRequest{}, &resp); printed || err != nil {
		return err
	}
	t := newTable(c.stdout, "LIMIT", "TARGET", "VALUE", "SOURCE", "UPDATED BY", "UPDATED")
	for _, l := range resp.Limits {
		t.row(limitFlagOf(l.Kind), l.Target, limitValue(l), l.Source, deref(l.UpdatedBy), formatMillis(&l.UpdatedTimestampMs))
	}
	return t.flush()
}

// limitValue is a limit's value with its unit: "0 (paused)" for 0.
func limitValue(l iwfapi.Limit) string {
	if l.Paused {
		return "0 (paused)"
	}
	v := strconv.FormatFloat(l.Value, 'g', -1, 64)
	if l.Kind == iwfapi.LimitKindWorkerRate {
		return v + "/s"
	}
	return v
}

func cmdLimitSet(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("limit set", "iwf limit set --worker-concurrency HOST:PORT=N | --worker-rate HOST:PORT=R | --type-concurrency TYPE=N")
	values := map[string]*string{
		"worker-concurrency": fs.String("worker-concurrency", "", "at most N waitUntil/execute calls in flight to the worker host: `HOST:PORT=N` (0 pauses them)"),
		"worker-rate":        fs.String("worker-rate", "", "at most R waitUntil/execute calls per second to the worker host: `HOST:PORT=R` (a fraction is allowed; 0 pauses them)"),
		"type-concurrency":   fs.String("type-concurrency", "", "at most N state executions of the workflow type in waitUntil/execute at once: `TYPE=N` (0 pauses them)"),
	}
	if err := c.parseSub(fs, args); err != nil {
		return err
	}
	kind, arg, err := oneLimitFlag(fs, values)
	if err != nil {
		return err
	}
	i := strings.LastIndexByte(arg, '=')
	if i <= 0 {
		return usagef("%s: --%s %q: want TARGET=VALUE", fs.Name(), limitFlagOf(kind), arg)
	}
	v, err := strconv.ParseFloat(arg[i+1:], 64)
	if err != nil {
		return usagef("%s: --%s %q: the value is not a number", fs.Name(), limitFlagOf(kind), arg)
	}
	// The server checks the limit (a HOST:PORT, a whole number of calls,
	// the bounds) and answers what is wrong.
	var l iwfapi.Limit
	if printed, err := c.call(ctx, "/api/v1/limit/set", iwfapi.LimitSetRequest{Kind: kind, Target: arg[:i], Value: v}, &l); printed || err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.stdout, "%s %s = %s: set; every node applies it within seconds\n", limitFlagOf(l.Kind), l.Target, limitValue(l))
	return err
}

func cmdLimitDelete(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("limit delete", "iwf limit delete --worker-concurrency HOST:PORT | --worker-rate HOST:PORT | --type-concurrency TYPE")
	values := map[string]*string{
		"worker-concurrency": fs.String("worker-concurrency", "", "the worker host's concurrency limit: `HOST:PORT`"),
		"worker-rate":        fs.String("worker-rate", "", "the worker host's rate limit: `HOST:PORT`"),
		"type-concurrency":   fs.String("type-concurrency", "", "the workflow type's concurrency limit: `TYPE`"),
	}
	if err := c.parseSub(fs, args); err != nil {
		return err
	}
	kind, target, err := oneLimitFlag(fs, values)
	if err != nil {
		return err
	}
	var l iwfapi.Limit
	if printed, err := c.call(ctx, "/api/v1/limit/delete", iwfapi.LimitDeleteRequest{Kind: kind, Target: target}, &l); printed || err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.stdout, "%s %s (was %s): removed; the calls waiting for it go ahead\n", limitFlagOf(l.Kind), l.Target, limitValue(l))
	return err
}
