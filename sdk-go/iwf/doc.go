// Package iwf is the Go SDK of iwf-server, a durable workflow server that
// speaks iWF's v1 REST API. Because it speaks that wire, the SDK also works
// against an iWF server (github.com/indeedeng/iwf).
//
// A workflow is a state machine whose code lives in your process, the
// worker. The server keeps the workflow's durable state (which states run,
// timers, channel messages, data and search attributes) and calls the
// worker over HTTP to run each state:
//
//   - Define a Workflow: its states (WorkflowState, optionally
//     StateWithWaitUntil and StateWithOptions), channels, attributes and
//     RPC methods.
//   - In WaitUntil a state asks for commands (TimerCommand, SignalCommand,
//     InternalChannelCommand) combined with AllCommandsCompleted,
//     AnyCommandCompleted or AnyCommandCombinationsCompleted. Once they
//     complete, Execute reads the CommandResults and returns a
//     StateDecision: SingleNextState, MultiNextStates,
//     GracefulCompleteWorkflow, ForceCompleteWorkflow, ForceFailWorkflow,
//     DeadEnd or a conditional close.
//   - Both read and write the workflow's Persistence (data attributes,
//     search attributes, state locals) and publish to internal channels
//     through Communication. Payloads are Objects, encoded by an
//     ObjectEncoder (JSON by default); read them with Object.Get or As.
//   - Serve the worker with NewWorkerService(NewRegistry(...)), a plain
//     http.Handler.
//   - Start and drive workflows with a Client: StartWorkflow,
//     SignalWorkflow, GetSimpleWorkflowResult, InvokeRPC and the rest.
//     Server errors are *APIError values; branch on them with
//     IsWorkflowAlreadyStartedError, IsWorkflowNotExistsError,
//     IsLongPollTimeoutError and IsRPCError. A workflow that did not
//     complete gives a *WorkflowAbnormalExitError.
//
// The package imports only the standard library.
package iwf
