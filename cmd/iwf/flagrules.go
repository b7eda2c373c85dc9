package main

// Flags that apply only in some cases. A command line that gives a flag
// where it has no effect — --archive-url without --archived, --channel on a
// batch that terminates — is refused as a usage error (exit code 2) naming
// the flag and where it applies, never run with the flag silently dropped.
// parseSub checks every subcommand's rules after parsing; the rules of all
// subcommands are in this one table.

import (
	"flag"
	"strings"
)

// flagRule says that flags apply only when applies holds.
type flagRule struct {
	flags []string
	// when says where they apply, after "applies only": "with --archived".
	when string
	// applies reports whether the flags apply to the command line parsed
	// into fs.
	applies func(c *cli, fs *flag.FlagSet) bool
	// by, when set, is the flag whose value decides; the error shows the
	// value given.
	by string
}

// flagRules are the rules of each subcommand, by flag set name.
var flagRules = map[string][]flagRule{
	"workflow get": {
		{flags: []string{"archive-url"}, when: "with --archived", applies: isSet("archived")},
	},
	"workflow history": {
		{flags: []string{"archive-url"}, when: "with --archived", applies: isSet("archived")},
	},
	"workflow start": {
		{flags: []string{"input"}, when: "with --start-state: it is the start state's input", applies: isGiven("start-state")},
	},
	"workflow reset": {
		{flags: []string{"event-id"}, when: "with --type HISTORY_EVENT_ID", applies: valueIs("type", "HISTORY_EVENT_ID"), by: "type"},
		{flags: []string{"event-time"}, when: "with --type HISTORY_EVENT_TIME", applies: valueIs("type", "HISTORY_EVENT_TIME"), by: "type"},
		{flags: []string{"state-id"}, when: "with --type STATE_ID", applies: valueIs("type", "STATE_ID"), by: "type"},
		{flags: []string{"state-execution-id"}, when: "with --type STATE_EXECUTION_ID", applies: valueIs("type", "STATE_EXECUTION_ID"), by: "type"},
	},
	"workflow list": {
		{flags: []string{"brief"}, when: "without --json (--json prints the server's answer as it is)",
			applies: func(c *cli, _ *flag.FlagSet) bool { return !c.json }},
	},
	"batch start": {
		{flags: []string{"channel", "value"}, when: "with --operation signal", applies: valueIs("operation", "signal"), by: "operation"},
		{flags: []string{"reset-type", "event-id", "event-time", "state-id", "skip-signal-reapply"}, when: "with --operation reset",
			applies: valueIs("operation", "reset"), by: "operation"},
		{flags: []string{"state-execution-id"}, when: "with --operation reset or skip-timer",
			applies: valueIs("operation", "reset", "skip-timer"), by: "operation"},
		{flags: []string{"timer-command-id", "timer-index"}, when: "with --operation skip-timer", applies: valueIs("operation", "skip-timer"), by: "operation"},
		{flags: []string{"timer-index"}, when: "without --timer-command-id: give one of the two",
			applies: func(_ *cli, fs *flag.FlagSet) bool { return !isGiven("timer-command-id")(nil, fs) }},
		{flags: []string{"worker-url"}, when: "with --operation set-worker-url", applies: valueIs("operation", "set-worker-url"), by: "operation"},
	},
}

// isSet holds when the boolean flag name is true.
func isSet(name string) func(*cli, *flag.FlagSet) bool {
	return func(_ *cli, fs *flag.FlagSet) bool {
		f := fs.Lookup(name)
		return f != nil && f.Value.String() == "true"
	}
}

// isGiven holds when flag name has a non-empty value.
func isGiven(name string) func(*cli, *flag.FlagSet) bool {
	return func(_ *cli, fs *flag.FlagSet) bool {
		f := fs.Lookup(name)
		return f != nil && f.Value.String() != ""
	}
}

// valueIs holds when flag name's value is one of values (case aside), or
// is empty or unknown: a missing or bad value is the command's own error,
// which names it better.
func valueIs(name string, values ...string) func(*cli, *flag.FlagSet) bool {
	return func(_ *cli, fs *flag.FlagSet) bool {
		f := fs.Lookup(name)
		if f == nil || f.Value.String() == "" {
			return true
		}
		v := f.Value.String()
		for _, want := range values {
			if strings.EqualFold(v, want) {
				return true
			}
		}
		return !knownValue(fs.Name(), name, v)
	}
}

// knownValue reports whether v is a valid value of flag name of the
// subcommand sub, for the flags that valueIs decides by.
func knownValue(sub, name, v string) bool {
	var known []string
	switch {
	case sub == "batch start" && name == "operation":
		for op := range batchOperations {
			known = append(known, op)
		}
	case sub == "workflow reset" && name == "type":
		known = []string{"BEGINNING", "HISTORY_EVENT_ID", "HISTORY_EVENT_TIME", "STATE_ID", "STATE_EXECUTION_ID"}
	default:
		return true
	}
	for _, k := range known {
		if strings.EqualFold(v, k) {
			return true
		}
	}
	return false
}

// checkFlagRules refuses a flag given on the command line where its
// subcommand's rules say it does not apply.
func (c *cli) checkFlagRules(fs *flag.FlagSet) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, r := range flagRules[fs.Name()] {
		var bad []string
		for _, name := range r.flags {
			if given[name] {
				bad = append(bad, "--"+name)
			}
		}
		if len(bad) == 0 || r.applies(c, fs) {
			continue
		}
		verb := "applies"
		if len(bad) > 1 {
			verb = "apply"
		}
		here := ""
		if r.by != "" {
			here = " (here --" + r.by + " " + fs.Lookup(r.by).Value.String() + ")"
		}
		return usagef("%s: %s %s only %s%s", fs.Name(), strings.Join(bad, ", "), verb, r.when, here)
	}
	return nil
}
