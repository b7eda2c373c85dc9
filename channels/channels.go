// Package channels holds the pure logic of a state's command waiting: which
// commands a buffered message completes, in which order, and when a state's
// waiting condition (ALL / ANY / ANY_COMBINATION) is met.
//
// It knows nothing of storage, HTTP or time sources; the engine feeds it the
// current command progress and the number of buffered messages per channel,
// and applies the consumption it plans in one store transaction.
package channels

import (
	"errors"
	"fmt"
)

// Kind is the kind of a command.
type Kind int

// The command kinds.
const (
	Timer Kind = iota + 1
	Signal
	Internal
)

// WaitingType is the waiting condition of a command request.
type WaitingType string

// The waiting types; the values are iWF's CommandWaitingType.
const (
	AllCompleted            WaitingType = "ALL_COMPLETED"
	AnyCompleted            WaitingType = "ANY_COMPLETED"
	AnyCombinationCompleted WaitingType = "ANY_COMBINATION_COMPLETED"
)

// Command is one command of a state's command request.
type Command struct {
	Kind    Kind
	ID      string // commandId; may be empty
	Channel string // signal or internal channel name; empty for timers
}

// Request is a state's command request: the commands in request order (timers,
// then signals, then internal channels, as the engine lays them out), the
// waiting type and, for ANY_COMBINATION_COMPLETED, the combinations of ids.
type Request struct {
	Commands     []Command
	WaitingType  WaitingType
	Combinations [][]string
}

// Validate checks a request the way iWF does before waiting on it: with at
// least one command a waiting type is mandatory, and a combination request
// needs ids on every command, at least one combination, and only known ids
// inside combinations. An invalid answer counts as a failed worker attempt.
func (r Request) Validate() error {
	if len(r.Commands) == 0 {
		return nil
	}
	switch r.WaitingType {
	case AllCompleted, AnyCompleted:
		return nil
	case AnyCombinationCompleted:
	case "":
		return errors.New("commandWaitingType is required when commands are given")
	default:
		return fmt.Errorf("unsupported commandWaitingType %q", r.WaitingType)
	}
	ids := make(map[string]bool, len(r.Commands))
	for i, c := range r.Commands {
		if c.ID == "" {
			return fmt.Errorf("command %d has no commandId, which ANY_COMBINATION_COMPLETED requires", i)
		}
		ids[c.ID] = true
	}
	if len(r.Combinations) == 0 {
		return errors.New("ANY_COMBINATION_COMPLETED requires commandCombinations")
	}
	for _, combo := range r.Combinations {
		for _, id := range combo {
			if !ids[id] {
				return fmt.Errorf("commandCombinations names unknown commandId %q", id)
			}
		}
	}
	return nil
}

// Satisfied reports whether the waiting condition is met, given which
// commands have completed (completed[i] for Commands[i]).
func (r Request) Satisfied(completed []bool) bool {
	if len(r.Commands) == 0 {
		return true
	}
	switch r.WaitingType {
	case AllCompleted:
		for _, done := range completed {
			if !done {
				return false
			}
		}
		return true
	case AnyCompleted:
		for _, done := range completed {
			if done {
				return true
			}
		}
		return false
	case AnyCombinationCompleted:
		doneByID := map[string]int{}
		for i, done := range completed {
			if done {
				doneByID[r.Commands[i].ID]++
			}
		}
		for _, combo := range r.Combinations {
			need := map[string]int{}
			for _, id := range combo {
				need[id]++
			}
			ok := true
			for id, n := range need {
				if doneByID[id] < n {
					ok = false
					break
				}
			}
			if ok {
				return true
			}
		}
		return false
	}
	return false
}

// ChannelKey names one buffered channel of a run.
type ChannelKey struct {
	Kind    Kind // Signal or Internal
	Channel string
}

// Consumption is one planned message consumption: command Command takes the
// Nth (0-based) buffered message of its channel.
type Consumption struct {
	Command int
	Key     ChannelKey
	N       int
}

// Plan decides which waiting channel commands consume buffered messages.
// available reports how many messages are buffered per channel. Commands are
// served in request order, one message each, and planning stops the moment
// the waiting condition is met, so abandoned commands consume nothing. Plan
// marks the consuming commands in completed and returns the consumptions in
// order; for each channel, consumers take messages 0, 1, 2 ... in that order.
func (r Request) Plan(completed []bool, available map[ChannelKey]int) []Consumption {
	if r.Satisfied(completed) {
		return nil
	}
	return r.plan(completed, available, true)
}

// PlanAll is Plan at the moment commands are registered: every waiting
// channel command that a buffered message can satisfy consumes one, in
// request order and FIFO per channel, whether or not the waiting condition
// is met on the way (iWF matches the whole buffer before it evaluates the
// condition). It marks the consuming commands in completed.
func (r Request) PlanAll(completed []bool, available map[ChannelKey]int) []Consumption {
	return r.plan(completed, available, false)
}

// plan serves the waiting channel commands in request order, FIFO per
// channel; with stopWhenMet it stops as soon as the condition is met.
func (r Request) plan(completed []bool, available map[ChannelKey]int, stopWhenMet bool) []Consumption {
	var out []Consumption
	taken := map[ChannelKey]int{}
	for i, c := range r.Commands {
		if completed[i] || c.Kind == Timer {
			continue
		}
		k := ChannelKey{Kind: c.Kind, Channel: c.Channel}
		if taken[k] >= available[k] {
			continue
		}
		out = append(out, Consumption{Command: i, Key: k, N: taken[k]})
		taken[k]++
		completed[i] = true
		if stopWhenMet && r.Satisfied(completed) {
			break
		}
	}
	return out
}

// Channels returns the distinct channels the not-yet-completed commands wait
// on, in first-use order.
func (r Request) Channels(completed []bool) []ChannelKey {
	var out []ChannelKey
	seen := map[ChannelKey]bool{}
	for i, c := range r.Commands {
		if completed[i] || c.Kind == Timer {
			continue
		}
		k := ChannelKey{Kind: c.Kind, Channel: c.Channel}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}
