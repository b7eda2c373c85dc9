package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/iwf-server/iwf-server/archivedoc"
)

// Exit codes, documented in `iwf --help` and docs/cli.md.
const (
	exitOK          = 0 // success
	exitServerError = 1 // the server answered with an error (or an unexpected answer)
	exitUsage       = 2 // bad command line
	exitUnreachable = 3 // no answer from the server
	exitNotFound    = 4 // the workflow (or the path) does not exist
)

const (
	defaultServer  = "http://127.0.0.1:8801"
	defaultTimeout = 30 * time.Second
)

// usageError is a bad command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// usagef returns a usageError.
func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// errHelp means a help text was printed: exit code 0.
var errHelp = errors.New("help printed")

// cli is one invocation: its output streams and its global flags.
type cli struct {
	stdout, stderr io.Writer
	server         string
	token          string
	json           bool
	timeout        time.Duration
	timeoutSet     bool // --timeout was given
	getenv         func(string) string
}

// command is a subcommand of `iwf workflow` or of `iwf`.
type command struct {
	summary string
	run     func(ctx context.Context, c *cli, args []string) error
}

var workflowCommands = map[string]command{
	"start":      {"start a workflow", cmdStart},
	"get":        {"show a workflow's status and results (--wait: until it closes)", cmdGet},
	"describe":   {"show where a workflow stands: its pending states, commands and failures", cmdDescribe},
	"list":       {"search workflows with a query", cmdList},
	"signal":     {"send a value to a workflow's signal channel", cmdSignal},
	"stop":       {"cancel, terminate or fail a workflow", cmdStop},
	"reset":      {"reset a workflow to an earlier point as a new run", cmdReset},
	"history":    {"print a workflow run's history", cmdHistory},
	"rpc":        {"call a workflow's RPC and print its output", cmdRPC},
	"skip-timer": {"fire a waiting timer of a state execution now", cmdSkipTimer},
	"pause":      {"hold a workflow's worker calls until it is resumed (operator role)", cmdPause},
	"resume":     {"resume a paused workflow: its held calls are made (operator role)", cmdResume},
	"stats":      {"show how many open runs of a workflow type are in each state, and the oldest", cmdStats},
}

var topCommands = map[string]command{
	"health":  {"check that the server answers", cmdHealth},
	"version": {"print this command's release, commit, build date and Go version", cmdVersion},
}

const exitCodesHelp = `Exit codes:
  0  success
  1  the server answered with an error (its status and detail are printed)
  2  usage error: unknown command, bad or missing flags
  3  cannot reach the server, or no answer within --timeout
  4  not found: the workflow does not exist (or the server lacks the endpoint;
     with --archived: no archived run)
`

const globalFlagsHelp = `Global flags (accepted before or after the command):
  --server URL        the server's base URL (env IWF_SERVER, default ` + defaultServer + `)
  --token TOKEN       send "Authorization: Bearer TOKEN" with every request (env IWF_TOKEN)
  --json              print the server's JSON answer, pretty-printed, instead of tables
  --timeout DURATION  give up waiting for the server after this long (default 30s;
                      get --wait waits without limit unless --timeout is given)
`

// run runs the command line args (without the program name) and returns
// the process's exit code. Output goes to stdout; errors, one line each,
// to stderr. getenv reads the environment (IWF_SERVER, IWF_TOKEN,
// IWF_ARCHIVE_URL).
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	c := &cli{stdout: stdout, stderr: stderr, server: defaultServer, timeout: defaultTimeout, getenv: getenv}
	if v := getenv("IWF_SERVER"); v != "" {
		c.server = v
	}
	c.token = getenv("IWF_TOKEN")
	err := c.dispatch(ctx, args)
	switch {
	case err == nil, errors.Is(err, errHelp):
		return exitOK
	}
	fmt.Fprintln(stderr, "iwf: "+oneLine(err.Error()))
	return exitCode(err)
}

// exitCode maps an error to the exit code scripts rely on.
func exitCode(err error) int {
	var ue *usageError
	var ae *apiError
	var ne *unreachableError
	switch {
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &ne):
		return exitUnreachable
	case errors.As(err, &ae) && ae.notFound(), errors.Is(err, archivedoc.ErrNotFound):
		return exitNotFound
	}
	return exitServerError
}

func (c *cli) dispatch(ctx context.Context, args []string) error {
	fs := c.flagSet("iwf", "iwf [global flags] <command> [flags]")
	fs.Usage = func() { c.printTopUsage(c.stdout) }
	if err := c.parse(fs, args); err != nil {
		return err
	}
	args = fs.Args()
	if len(args) == 0 {
		return usagef("a command is required (see iwf --help)")
	}
	switch name := args[0]; name {
	case "help":
		c.printTopUsage(c.stdout)
		return nil
	case "workflow", "wf":
		if len(args) < 2 {
			return usagef("workflow: a subcommand is required: %s", strings.Join(sortedNames(workflowCommands), ", "))
		}
		if args[1] == "help" || args[1] == "-h" || args[1] == "--help" {
			c.printTopUsage(c.stdout)
			return nil
		}
		cmd, ok := workflowCommands[args[1]]
		if !ok {
			return usagef("workflow: unknown subcommand %q (one of %s)", args[1], strings.Join(sortedNames(workflowCommands), ", "))
		}
		return cmd.run(ctx, c, args[2:])
	case "batch":
		if len(args) < 2 {
			return usagef("batch: a subcommand is required: %s", strings.Join(sortedNames(batchCommands), ", "))
		}
		if args[1] == "help" || args[1] == "-h" || args[1] == "--help" {
			c.printTopUsage(c.stdout)
			return nil
		}
		cmd, ok := batchCommands[args[1]]
		if !ok {
			return usagef("batch: unknown subcommand %q (one of %s)", args[1], strings.Join(sortedNames(batchCommands), ", "))
		}
		return cmd.run(ctx, c, args[2:])
	case "limit":
		if len(args) < 2 {
			return usagef("limit: a subcommand is required: %s", strings.Join(sortedNames(limitCommands), ", "))
		}
		if args[1] == "help" || args[1] == "-h" || args[1] == "--help" {
			c.printTopUsage(c.stdout)
			return nil
		}
		cmd, ok := limitCommands[args[1]]
		if !ok {
			return usagef("limit: unknown subcommand %q (one of %s)", args[1], strings.Join(sortedNames(limitCommands), ", "))
		}
		return cmd.run(ctx, c, args[2:])
	case "pause":
		if len(args) < 2 {
			return usagef("pause: a subcommand is required: %s", strings.Join(sortedNames(pauseCommands), ", "))
		}
		if args[1] == "help" || args[1] == "-h" || args[1] == "--help" {
			c.printTopUsage(c.stdout)
			return nil
		}
		cmd, ok := pauseCommands[args[1]]
		if !ok {
			return usagef("pause: unknown subcommand %q (one of %s)", args[1], strings.Join(sortedNames(pauseCommands), ", "))
		}
		return cmd.run(ctx, c, args[2:])
	default:
		cmd, ok := topCommands[name]
		if !ok {
			return usagef("unknown command %q (see iwf --help)", name)
		}
		return cmd.run(ctx, c, args[1:])
	}
}

func (c *cli) printTopUsage(w io.Writer) {
	fmt.Fprint(w, `iwf is the command line of an iwf-server.

Usage:
  iwf [global flags] workflow <subcommand> [flags]
  iwf [global flags] batch <subcommand> [flags]
  iwf [global flags] pause <subcommand> [flags]
  iwf [global flags] limit <subcommand> [flags]
  iwf [global flags] health
  iwf [global flags] version

Workflow subcommands:
`)
	for _, name := range sortedNames(workflowCommands) {
		fmt.Fprintf(w, "  %-11s %s\n", name, workflowCommands[name].summary)
	}
	fmt.Fprintf(w, "\nBatch subcommands (operator role):\n")
	for _, name := range sortedNames(batchCommands) {
		fmt.Fprintf(w, "  %-11s %s\n", name, batchCommands[name].summary)
	}
	fmt.Fprintf(w, "\nLimit subcommands (operator role):\n")
	for _, name := range sortedNames(limitCommands) {
		fmt.Fprintf(w, "  %-11s %s\n", name, limitCommands[name].summary)
	}
	fmt.Fprintf(w, "\nPause subcommands (workflow types and worker hosts; operator role, list: reader):\n")
	for _, name := range sortedNames(pauseCommands) {
		fmt.Fprintf(w, "  %-11s %s\n", name, pauseCommands[name].summary)
	}
	fmt.Fprintf(w, "\nOther commands:\n")
	for _, name := range sortedNames(topCommands) {
		fmt.Fprintf(w, "  %-11s %s\n", name, topCommands[name].summary)
	}
	fmt.Fprint(w, "\n"+globalFlagsHelp+"\n"+exitCodesHelp+"\nRun `iwf workflow <subcommand> --help` for a subcommand's flags. See docs/cli.md.\n")
}

func sortedNames(m map[string]command) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// flagSet returns a flag set with the global flags registered, so that
// they are accepted after a subcommand too. Its errors are returned, never
// printed by the flag package.
func (c *cli) flagSet(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.server, "server", c.server, "the server's base `URL` (env IWF_SERVER)")
	fs.StringVar(&c.token, "token", c.token, "a bearer `token` sent with every request (env IWF_TOKEN)")
	fs.BoolVar(&c.json, "json", c.json, "print the server's JSON answer instead of tables")
	fs.Func("timeout", "give up waiting for the server after this `duration` (default 30s)", func(s string) error {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return fmt.Errorf("want a positive duration such as 30s or 2m")
		}
		c.timeout, c.timeoutSet = d, true
		return nil
	})
	fs.Usage = func() {
		fmt.Fprintf(c.stdout, "Usage: %s\n\nFlags:\n", synopsis)
		printFlags(c.stdout, fs)
		fmt.Fprint(c.stdout, "\n"+exitCodesHelp)
	}
	return fs
}

// printFlags prints a flag set's flags, the command's own first.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	global := map[string]bool{"server": true, "token": true, "json": true, "timeout": true}
	var own, glob []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if global[f.Name] {
			glob = append(glob, f)
		} else {
			own = append(own, f)
		}
	})
	for _, f := range append(own, glob...) {
		name, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		fmt.Fprintf(w, "%-30s %s", line, usage)
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.Name != "token" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	}
}

// parse parses args; -h and --help print the usage and return errHelp.
func (c *cli) parse(fs *flag.FlagSet, args []string) error {
	// The flag package calls Usage on every error; only help prints it.
	usage := fs.Usage
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		usage()
		return errHelp
	case err != nil:
		if fs.Name() == "iwf" {
			return usagef("%v (see iwf --help)", err)
		}
		return usagef("%s: %v (see iwf %s --help)", fs.Name(), err, fs.Name())
	}
	return nil
}

// parseSub parses a subcommand's args, which take no positional arguments,
// and refuses flags given where they do not apply (flagRules).
func (c *cli) parseSub(fs *flag.FlagSet, args []string, required ...string) error {
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("%s: unexpected argument %q (flags are written --name value)", fs.Name(), fs.Arg(0))
	}
	for _, name := range required {
		if f := fs.Lookup(name); f != nil && f.Value.String() == "" {
			return usagef("%s: --%s is required", fs.Name(), name)
		}
	}
	return c.checkFlagRules(fs)
}

// client returns a client of the server and the context bounding the
// command by --timeout (unbounded when wait is set and --timeout was not
// given).
// call posts req to path and decodes the answer into resp (nil: none).
// With --json it prints the server's answer and reports printed, so that
// the caller has nothing left to do.
func (c *cli) call(ctx context.Context, path string, req, resp any) (printed bool, err error) {
	cl, ctx, cancel, err := c.client(ctx, false)
	if err != nil {
		return false, err
	}
	defer cancel()
	raw, err := cl.post(ctx, path, req, resp)
	if err != nil {
		return false, err
	}
	if c.json {
		return true, printJSON(c.stdout, raw)
	}
	return false, nil
}

func (c *cli) client(ctx context.Context, wait bool) (*client, context.Context, context.CancelFunc, error) {
	base := strings.TrimRight(c.server, "/")
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return nil, nil, nil, usagef("--server %q: want an http:// or https:// URL", c.server)
	}
	cancel := context.CancelFunc(func() {})
	if !wait || c.timeoutSet {
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
	}
	return &client{base: base, token: c.token, http: &http.Client{}}, ctx, cancel, nil
}
