package iwf

import (
	"fmt"
	"time"

	"github.com/iwf-server/iwf-server/sdk-go/internal/wire"
)

// Command is something a state waits for after WaitUntil: a timer, a
// message on a signal channel or a message on an internal channel. Build
// one with TimerCommand, SignalCommand or InternalChannelCommand and
// combine them with AllCommandsCompleted, AnyCommandCompleted or
// AnyCommandCombinationsCompleted.
type Command struct {
	id       string
	kind     commandKind
	duration time.Duration
	channel  string
}

type commandKind int

const (
	timerCommand commandKind = iota
	signalCommand
	internalChannelCommand
)

// TimerCommand waits for a duration, counted from when WaitUntil returns
// and rounded up to whole seconds. The id names the command in
// CommandResults and for Client.SkipTimerByID; it may be empty.
func TimerCommand(id string, duration time.Duration) Command {
	return Command{id: id, kind: timerCommand, duration: duration}
}

// SignalCommand waits for one message on a signal channel, and consumes it.
func SignalCommand(id, channel string) Command {
	return Command{id: id, kind: signalCommand, channel: channel}
}

// InternalChannelCommand waits for one message on an internal channel, and
// consumes it.
func InternalChannelCommand(id, channel string) Command {
	return Command{id: id, kind: internalChannelCommand, channel: channel}
}

// CommandRequest is what WaitUntil returns: commands and when they count as
// complete. A nil *CommandRequest means no commands: Execute runs at once.
type CommandRequest struct {
	waitingType  wire.CommandWaitingType
	commands     []Command
	combinations [][]string
}

// AllCommandsCompleted waits until every command has completed.
func AllCommandsCompleted(commands ...Command) *CommandRequest {
	return &CommandRequest{waitingType: wire.CommandWaitingTypeAllCompleted, commands: commands}
}

// AnyCommandCompleted waits until at least one command has completed. The
// others are abandoned: they consume no message and report WAITING or
// SCHEDULED.
func AnyCommandCompleted(commands ...Command) *CommandRequest {
	return &CommandRequest{waitingType: wire.CommandWaitingTypeAnyCompleted, commands: commands}
}

// AnyCommandCombinationsCompleted waits until the completed commands cover
// one of the combinations, each a list of command ids (an id listed twice
// needs two completed commands with that id). Every command must have an id
// and every id in a combination must name a command.
//
//	iwf.AnyCommandCombinationsCompleted([][]string{{"timer"}, {"approve", "approve"}},
//		iwf.TimerCommand("timer", time.Hour),
//		iwf.SignalCommand("approve", "approvals"),
//		iwf.SignalCommand("approve", "approvals"))
func AnyCommandCombinationsCompleted(combinations [][]string, commands ...Command) *CommandRequest {
	return &CommandRequest{waitingType: wire.CommandWaitingTypeAnyCombinationCompleted, commands: commands, combinations: combinations}
}

// toWire validates the request against the workflow and converts it.
func (r *CommandRequest) toWire(cw *compiledWorkflow) (*wire.CommandRequest, error) {
	if r == nil {
		r = AllCommandsCompleted()
	}
	w := &wire.CommandRequest{CommandWaitingType: ptr(r.waitingType)}
	var timers []wire.TimerCommand
	var signals []wire.SignalCommand
	var internals []wire.InterStateChannelCommand
	ids := map[string]bool{}
	for _, c := range r.commands {
		ids[c.id] = true
		switch c.kind {
		case timerCommand:
			timers = append(timers, wire.TimerCommand{CommandId: ptr(c.id), DurationSeconds: ptr(seconds(c.duration))})
		case signalCommand:
			if !cw.signalChannels.has(c.channel) {
				return nil, fmt.Errorf("iwf: command %q waits on signal channel %q, which workflow %q does not declare in SignalChannels", c.id, c.channel, cw.typ)
			}
			signals = append(signals, wire.SignalCommand{CommandId: ptr(c.id), SignalChannelName: c.channel})
		case internalChannelCommand:
			if !cw.internalChannels.has(c.channel) {
				return nil, fmt.Errorf("iwf: command %q waits on internal channel %q, which workflow %q does not declare in InternalChannels", c.id, c.channel, cw.typ)
			}
			internals = append(internals, wire.InterStateChannelCommand{CommandId: ptr(c.id), ChannelName: c.channel})
		}
	}
	w.TimerCommands = nonEmpty(timers)
	w.SignalCommands = nonEmpty(signals)
	w.InterStateChannelCommands = nonEmpty(internals)
	if r.waitingType == wire.CommandWaitingTypeAnyCombinationCompleted {
		if ids[""] {
			return nil, fmt.Errorf("iwf: AnyCommandCombinationsCompleted needs an id on every command")
		}
		if len(r.combinations) == 0 {
			return nil, fmt.Errorf("iwf: AnyCommandCombinationsCompleted needs at least one combination")
		}
		combos := make([]wire.CommandCombination, 0, len(r.combinations))
		for _, combo := range r.combinations {
			for _, id := range combo {
				if !ids[id] {
					return nil, fmt.Errorf("iwf: combination %q names unknown command id %q", combo, id)
				}
			}
			combos = append(combos, wire.CommandCombination{CommandIds: ptr(append([]string{}, combo...))})
		}
		w.CommandCombinations = &combos
	}
	return w, nil
}

// TimerStatus is the state of a timer command.
type TimerStatus string

// The timer statuses.
const (
	TimerFired     TimerStatus = "FIRED"     // fired or skipped
	TimerScheduled TimerStatus = "SCHEDULED" // abandoned before firing
)

// ChannelStatus is the state of a signal or internal-channel command.
type ChannelStatus string

// The channel command statuses.
const (
	ChannelReceived ChannelStatus = "RECEIVED" // a message was consumed
	ChannelWaiting  ChannelStatus = "WAITING"  // abandoned before a message came
)

// TimerResult is the result of a timer command.
type TimerResult struct {
	CommandID string      // the command's id
	Status    TimerStatus // FIRED or SCHEDULED
}

// ChannelResult is the result of a signal or internal-channel command.
type ChannelResult struct {
	CommandID string        // the command's id
	Channel   string        // the channel it waited on
	Status    ChannelStatus // RECEIVED or WAITING
	// Value is the consumed message; null if none was received or the
	// message had no value.
	Value Object
}

// Received reports whether the command consumed a message.
func (r ChannelResult) Received() bool { return r.Status == ChannelReceived }

// CommandResults are the results of the commands WaitUntil requested, in
// request order within each kind. A state without WaitUntil gets the zero
// value.
type CommandResults struct {
	Timers           []TimerResult   // timer commands
	Signals          []ChannelResult // signal commands
	InternalChannels []ChannelResult // internal-channel commands
	// WaitUntilFailed is set when WaitUntil failed for good and the state
	// proceeded to Execute under ProceedOnWaitUntilFailure.
	WaitUntilFailed bool
}

// TimerStatus returns the status of the timer command with that id, or ""
// if there is none.
func (r CommandResults) TimerStatus(commandID string) TimerStatus {
	for _, t := range r.Timers {
		if t.CommandID == commandID {
			return t.Status
		}
	}
	return ""
}

// SignalByCommandID returns the first signal command result with that id.
func (r CommandResults) SignalByCommandID(commandID string) (ChannelResult, bool) {
	return byCommandID(r.Signals, commandID)
}

// SignalByChannel returns the result of a signal command on that channel,
// preferring one that received a message.
func (r CommandResults) SignalByChannel(channel string) (ChannelResult, bool) {
	return byChannel(r.Signals, channel)
}

// InternalMessageByCommandID returns the first internal-channel command
// result with that id.
func (r CommandResults) InternalMessageByCommandID(commandID string) (ChannelResult, bool) {
	return byCommandID(r.InternalChannels, commandID)
}

// InternalMessageByChannel returns the result of an internal-channel
// command on that channel, preferring one that received a message.
func (r CommandResults) InternalMessageByChannel(channel string) (ChannelResult, bool) {
	return byChannel(r.InternalChannels, channel)
}

func byCommandID(rs []ChannelResult, id string) (ChannelResult, bool) {
	for _, r := range rs {
		if r.CommandID == id {
			return r, true
		}
	}
	return ChannelResult{}, false
}

func byChannel(rs []ChannelResult, channel string) (ChannelResult, bool) {
	var found *ChannelResult
	for i := range rs {
		if rs[i].Channel != channel {
			continue
		}
		if rs[i].Received() {
			return rs[i], true
		}
		if found == nil {
			found = &rs[i]
		}
	}
	if found == nil {
		return ChannelResult{}, false
	}
	return *found, true
}

func commandResultsFromWire(w *wire.CommandResults, enc ObjectEncoder) CommandResults {
	var r CommandResults
	if w == nil {
		return r
	}
	r.WaitUntilFailed = deref(w.StateWaitUntilFailed)
	for _, t := range slice(w.TimerResults) {
		r.Timers = append(r.Timers, TimerResult{CommandID: t.CommandId, Status: TimerStatus(t.TimerStatus)})
	}
	for _, s := range slice(w.SignalResults) {
		r.Signals = append(r.Signals, ChannelResult{CommandID: s.CommandId, Channel: s.SignalChannelName,
			Status: ChannelStatus(s.SignalRequestStatus), Value: newObject(s.SignalValue, enc)})
	}
	for _, c := range slice(w.InterStateChannelResults) {
		r.InternalChannels = append(r.InternalChannels, ChannelResult{CommandID: c.CommandId, Channel: c.ChannelName,
			Status: ChannelStatus(c.RequestStatus), Value: newObject(c.Value, enc)})
	}
	return r
}
