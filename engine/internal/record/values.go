package record

// The types below are the stored form of what workers and API callers send:
// state inputs, options, command requests, decisions, attributes. Their JSON
// names are those of format version 1 and must not change. Optional fields
// are pointers where the engine distinguishes "absent" from a zero value
// (a legacy field that overrides a newer one when present).

// Value is an encoded object: a user value with its encoding.
type Value struct {
	Encoding   *string `json:"encoding,omitempty"`
	Data       *string `json:"data,omitempty"`
	ExtPath    *string `json:"extPath,omitempty"`
	ExtStoreID *string `json:"extStoreId,omitempty"`
}

// KeyValue is one data attribute or state local.
type KeyValue struct {
	Key   *string `json:"key,omitempty"`
	Value *Value  `json:"value,omitempty"`
}

// SearchAttribute is a search attribute as written by a caller or worker.
type SearchAttribute struct {
	Key              *string   `json:"key,omitempty"`
	ValueType        *string   `json:"valueType,omitempty"`
	StringValue      *string   `json:"stringValue,omitempty"`
	IntegerValue     *int64    `json:"integerValue,omitempty"`
	DoubleValue      *float64  `json:"doubleValue,omitempty"`
	BoolValue        *bool     `json:"boolValue,omitempty"`
	StringArrayValue *[]string `json:"stringArrayValue,omitempty"`
}

// RetryPolicy is a state API's retry policy.
type RetryPolicy struct {
	InitialIntervalSeconds         *int32   `json:"initialIntervalSeconds,omitempty"`
	BackoffCoefficient             *float32 `json:"backoffCoefficient,omitempty"`
	MaximumIntervalSeconds         *int32   `json:"maximumIntervalSeconds,omitempty"`
	MaximumAttempts                *int32   `json:"maximumAttempts,omitempty"`
	MaximumAttemptsDurationSeconds *int32   `json:"maximumAttemptsDurationSeconds,omitempty"`
}

// The loading types of a LoadingPolicy.
const (
	LoadAllWithoutLocking        = "LOAD_ALL_WITHOUT_LOCKING"
	LoadAllWithPartialLock       = "LOAD_ALL_WITH_PARTIAL_LOCK"
	LoadNone                     = "LOAD_NONE"
	LoadPartialWithExclusiveLock = "LOAD_PARTIAL_WITH_EXCLUSIVE_LOCK"
	LoadPartialWithoutLocking    = "LOAD_PARTIAL_WITHOUT_LOCKING"
)

// LoadingPolicy says which data or search attributes a state API loads and
// locks.
type LoadingPolicy struct {
	PersistenceLoadingType         *string   `json:"persistenceLoadingType,omitempty"`
	PartialLoadingKeys             *[]string `json:"partialLoadingKeys,omitempty"`
	LockingKeys                    *[]string `json:"lockingKeys,omitempty"`
	UseKeyAsPrefix                 *bool     `json:"useKeyAsPrefix,omitempty"`
	LazyLoadingLargeDataAttributes *bool     `json:"lazyLoadingLargeDataAttributes,omitempty"`
}

// Failure policies of the state APIs.
const (
	WaitUntilProceedOnFailure      = "PROCEED_ON_FAILURE"
	StartAPIProceedToDecide        = "PROCEED_TO_DECIDE_ON_START_API_FAILURE"
	ExecuteProceedToConfigured     = "PROCEED_TO_CONFIGURED_STATE"
	ExecutingStateIDsDisabled      = "DISABLED"
	ExecutingStateIDsEnabledAll    = "ENABLED_FOR_ALL"
	CloseOnInternalChannelEmpty    = "FORCE_COMPLETE_ON_INTERNAL_CHANNEL_EMPTY"
	CloseOnSignalChannelEmpty      = "FORCE_COMPLETE_ON_SIGNAL_CHANNEL_EMPTY"
	TriggerAllCompleted            = "ALL_COMMAND_COMPLETED"
	TriggerAnyCompleted            = "ANY_COMMAND_COMPLETED"
	TriggerAnyCombinationCompleted = "ANY_COMMAND_COMBINATION_COMPLETED"
)

// StateOptions are a state's options, legacy field names included (the
// engine resolves which one applies).
type StateOptions struct {
	SkipStartAPI  *bool `json:"skipStartApi,omitempty"`
	SkipWaitUntil *bool `json:"skipWaitUntil,omitempty"`

	StartAPITimeoutSeconds     *int32 `json:"startApiTimeoutSeconds,omitempty"`
	WaitUntilAPITimeoutSeconds *int32 `json:"waitUntilApiTimeoutSeconds,omitempty"`
	DecideAPITimeoutSeconds    *int32 `json:"decideApiTimeoutSeconds,omitempty"`
	ExecuteAPITimeoutSeconds   *int32 `json:"executeApiTimeoutSeconds,omitempty"`

	StartAPIRetryPolicy     *RetryPolicy `json:"startApiRetryPolicy,omitempty"`
	WaitUntilAPIRetryPolicy *RetryPolicy `json:"waitUntilApiRetryPolicy,omitempty"`
	DecideAPIRetryPolicy    *RetryPolicy `json:"decideApiRetryPolicy,omitempty"`
	ExecuteAPIRetryPolicy   *RetryPolicy `json:"executeApiRetryPolicy,omitempty"`

	StartAPIFailurePolicy                *string       `json:"startApiFailurePolicy,omitempty"`
	WaitUntilAPIFailurePolicy            *string       `json:"waitUntilApiFailurePolicy,omitempty"`
	ExecuteAPIFailurePolicy              *string       `json:"executeApiFailurePolicy,omitempty"`
	ExecuteAPIFailureProceedStateID      *string       `json:"executeApiFailureProceedStateId,omitempty"`
	ExecuteAPIFailureProceedStateOptions *StateOptions `json:"executeApiFailureProceedStateOptions,omitempty"`

	DataObjectsLoadingPolicy                  *LoadingPolicy `json:"dataObjectsLoadingPolicy,omitempty"`
	DataAttributesLoadingPolicy               *LoadingPolicy `json:"dataAttributesLoadingPolicy,omitempty"`
	SearchAttributesLoadingPolicy             *LoadingPolicy `json:"searchAttributesLoadingPolicy,omitempty"`
	WaitUntilAPIDataAttributesLoadingPolicy   *LoadingPolicy `json:"waitUntilApiDataAttributesLoadingPolicy,omitempty"`
	WaitUntilAPISearchAttributesLoadingPolicy *LoadingPolicy `json:"waitUntilApiSearchAttributesLoadingPolicy,omitempty"`
	ExecuteAPIDataAttributesLoadingPolicy     *LoadingPolicy `json:"executeApiDataAttributesLoadingPolicy,omitempty"`
	ExecuteAPISearchAttributesLoadingPolicy   *LoadingPolicy `json:"executeApiSearchAttributesLoadingPolicy,omitempty"`
}

// Commands is a waitUntil answer's command request.
type Commands struct {
	CommandWaitingType        *string           `json:"commandWaitingType,omitempty"`
	DeciderTriggerType        *string           `json:"deciderTriggerType,omitempty"`
	CommandCombinations       *[]Combination    `json:"commandCombinations,omitempty"`
	TimerCommands             *[]TimerCommand   `json:"timerCommands,omitempty"`
	SignalCommands            *[]SignalCommand  `json:"signalCommands,omitempty"`
	InterStateChannelCommands *[]ChannelCommand `json:"interStateChannelCommands,omitempty"`
}

// Combination is one combination of command ids (ANY_COMBINATION).
type Combination struct {
	CommandIDs *[]string `json:"commandIds,omitempty"`
}

// TimerCommand waits for a duration or until a time.
type TimerCommand struct {
	CommandID                  *string `json:"commandId,omitempty"`
	DurationSeconds            *int64  `json:"durationSeconds,omitempty"`
	FiringUnixTimestampSeconds *int64  `json:"firingUnixTimestampSeconds,omitempty"`
}

// SignalCommand waits for a message on a signal channel.
type SignalCommand struct {
	CommandID         *string `json:"commandId,omitempty"`
	SignalChannelName string  `json:"signalChannelName"`
	AtLeast           *int32  `json:"atLeast,omitempty"`
	AtMost            *int32  `json:"atMost,omitempty"`
}

// ChannelCommand waits for a message on an internal channel.
type ChannelCommand struct {
	CommandID   *string `json:"commandId,omitempty"`
	ChannelName string  `json:"channelName"`
	AtLeast     *int32  `json:"atLeast,omitempty"`
	AtMost      *int32  `json:"atMost,omitempty"`
}

// Command result statuses.
const (
	TimerFired      = "FIRED"
	TimerScheduled  = "SCHEDULED"
	ChannelReceived = "RECEIVED"
	ChannelWaiting  = "WAITING"
)

// CommandResults is what an execute call receives about its commands.
type CommandResults struct {
	StateStartAPISucceeded   *bool            `json:"stateStartApiSucceeded,omitempty"`
	StateWaitUntilFailed     *bool            `json:"stateWaitUntilFailed,omitempty"`
	TimerResults             *[]TimerResult   `json:"timerResults,omitempty"`
	SignalResults            *[]SignalResult  `json:"signalResults,omitempty"`
	InterStateChannelResults *[]ChannelResult `json:"interStateChannelResults,omitempty"`
}

// TimerResult is the outcome of a timer command.
type TimerResult struct {
	CommandID   string `json:"commandId"`
	TimerStatus string `json:"timerStatus"`
}

// SignalResult is the outcome of a signal command.
type SignalResult struct {
	CommandID           string `json:"commandId"`
	SignalChannelName   string `json:"signalChannelName"`
	SignalRequestStatus string `json:"signalRequestStatus"`
	SignalValue         *Value `json:"signalValue,omitempty"`
}

// ChannelResult is the outcome of an internal channel command.
type ChannelResult struct {
	CommandID     string `json:"commandId"`
	ChannelName   string `json:"channelName"`
	RequestStatus string `json:"requestStatus"`
	Value         *Value `json:"value,omitempty"`
}

// Movement moves a workflow to a state.
type Movement struct {
	StateID      string        `json:"stateId"`
	StateInput   *Value        `json:"stateInput,omitempty"`
	StateOptions *StateOptions `json:"stateOptions,omitempty"`
	WaitForKey   *string       `json:"waitForKey,omitempty"`
}

// Decision is an execute answer's state decision.
type Decision struct {
	NextStates       *[]Movement       `json:"nextStates,omitempty"`
	ConditionalClose *ConditionalClose `json:"conditionalClose,omitempty"`
}

// ConditionalClose closes the workflow when a channel is empty.
type ConditionalClose struct {
	ConditionalCloseType *string `json:"conditionalCloseType,omitempty"`
	ChannelName          *string `json:"channelName,omitempty"`
	CloseInput           *Value  `json:"closeInput,omitempty"`
}

// Publish is one message published to an internal channel.
type Publish struct {
	ChannelName string `json:"channelName"`
	Value       *Value `json:"value,omitempty"`
}

// StateOutput is a completed state's output, part of a workflow's results.
type StateOutput struct {
	CompletedStateID          string `json:"completedStateId"`
	CompletedStateExecutionID string `json:"completedStateExecutionId"`
	CompletedStateOutput      *Value `json:"completedStateOutput,omitempty"`
}

// Config is a run's workflow config.
type Config struct {
	DisableSystemSearchAttribute *bool   `json:"disableSystemSearchAttribute,omitempty"`
	ExecutingStateIDMode         *string `json:"executingStateIdMode,omitempty"`
	ContinueAsNewThreshold       *int32  `json:"continueAsNewThreshold,omitempty"`
	ContinueAsNewPageSizeInBytes *int32  `json:"continueAsNewPageSizeInBytes,omitempty"`
	OptimizeActivity             *bool   `json:"optimizeActivity,omitempty"`
	OptimizeTimer                *bool   `json:"optimizeTimer,omitempty"`
}

// Start is the start request a run was created from; retries, cron runs
// and resets start from it again.
type Start struct {
	WorkflowID                         string        `json:"workflowId"`
	IwfWorkflowType                    string        `json:"iwfWorkflowType"`
	WorkflowTimeoutSeconds             int32         `json:"workflowTimeoutSeconds"`
	IwfWorkerURL                       string        `json:"iwfWorkerUrl"`
	StartStateID                       *string       `json:"startStateId,omitempty"`
	StateInput                         *Value        `json:"stateInput,omitempty"`
	StateOptions                       *StateOptions `json:"stateOptions,omitempty"`
	StartOptions                       *StartOptions `json:"workflowStartOptions,omitempty"`
	WaitForCompletionStateExecutionIDs *[]string     `json:"waitForCompletionStateExecutionIds,omitempty"`
	WaitForCompletionStateIDs          *[]string     `json:"waitForCompletionStateIds,omitempty"`
}

// StartOptions are a start request's workflow options.
type StartOptions struct {
	IDReusePolicy                 *string              `json:"idReusePolicy,omitempty"`
	WorkflowIDReusePolicy         *string              `json:"workflowIDReusePolicy,omitempty"`
	CronSchedule                  *string              `json:"cronSchedule,omitempty"`
	WorkflowStartDelaySeconds     *int32               `json:"workflowStartDelaySeconds,omitempty"`
	RetryPolicy                   *WorkflowRetryPolicy `json:"retryPolicy,omitempty"`
	SearchAttributes              *[]SearchAttribute   `json:"searchAttributes,omitempty"`
	DataAttributes                *[]KeyValue          `json:"dataAttributes,omitempty"`
	WorkflowConfigOverride        *Config              `json:"workflowConfigOverride,omitempty"`
	UseMemoForDataAttributes      *bool                `json:"useMemoForDataAttributes,omitempty"`
	WorkflowAlreadyStartedOptions *AlreadyStarted      `json:"workflowAlreadyStartedOptions,omitempty"`
}

// WorkflowRetryPolicy retries a failed workflow as a new run.
type WorkflowRetryPolicy struct {
	InitialIntervalSeconds *int32   `json:"initialIntervalSeconds,omitempty"`
	BackoffCoefficient     *float32 `json:"backoffCoefficient,omitempty"`
	MaximumIntervalSeconds *int32   `json:"maximumIntervalSeconds,omitempty"`
	MaximumAttempts        *int32   `json:"maximumAttempts,omitempty"`
}

// AlreadyStarted says how a start of a running workflow id is answered.
type AlreadyStarted struct {
	IgnoreAlreadyStartedError bool    `json:"ignoreAlreadyStartedError"`
	RequestID                 *string `json:"requestId,omitempty"`
}

// SkipTimer names a timer command to complete early.
type SkipTimer struct {
	WorkflowStateExecutionID string  `json:"workflowStateExecutionId"`
	TimerCommandID           *string `json:"timerCommandId,omitempty"`
	TimerCommandIndex        *int32  `json:"timerCommandIndex,omitempty"`
}
