package engine

// The edge between the wire and the stored format: every conversion between
// the generated iwfapi types and the engine's record types is here. Inside,
// the engine works on records only; iwfapi types are decoded requests and
// worker answers on the way in, and responses and worker requests on the
// way out.

import (
	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine/internal/record"
)

// mapSlice converts an optional slice element by element.
func mapSlice[A, B any](p *[]A, f func(A) B) *[]B {
	if p == nil {
		return nil
	}
	out := make([]B, len(*p))
	for i, a := range *p {
		out[i] = f(a)
	}
	return &out
}

// mapPtr converts an optional value.
func mapPtr[A, B any](p *A, f func(A) B) *B {
	if p == nil {
		return nil
	}
	b := f(*p)
	return &b
}

// mapEnum converts an optional string-typed enum.
func mapEnum[A, B ~string](p *A) *B {
	if p == nil {
		return nil
	}
	b := B(*p)
	return &b
}

func copyStrings(p *[]string) *[]string {
	if p == nil {
		return nil
	}
	s := append([]string{}, (*p)...)
	return &s
}

// ---- wire to record ----

func valueIn(v iwfapi.EncodedObject) record.Value {
	return record.Value{Encoding: v.Encoding, Data: v.Data, ExtPath: v.ExtPath, ExtStoreID: v.ExtStoreId}
}

func kvIn(kv iwfapi.KeyValue) record.KeyValue {
	return record.KeyValue{Key: kv.Key, Value: mapPtr(kv.Value, valueIn)}
}

func searchAttributeIn(sa iwfapi.SearchAttribute) record.SearchAttribute {
	return record.SearchAttribute{
		Key: sa.Key, ValueType: mapEnum[iwfapi.SearchAttributeValueType, string](sa.ValueType),
		StringValue: sa.StringValue, IntegerValue: sa.IntegerValue, DoubleValue: sa.DoubleValue,
		BoolValue: sa.BoolValue, StringArrayValue: copyStrings(sa.StringArrayValue),
	}
}

func retryIn(p iwfapi.RetryPolicy) record.RetryPolicy {
	return record.RetryPolicy{
		InitialIntervalSeconds: p.InitialIntervalSeconds, BackoffCoefficient: p.BackoffCoefficient,
		MaximumIntervalSeconds: p.MaximumIntervalSeconds, MaximumAttempts: p.MaximumAttempts,
		MaximumAttemptsDurationSeconds: p.MaximumAttemptsDurationSeconds,
	}
}

func loadingIn(p iwfapi.PersistenceLoadingPolicy) record.LoadingPolicy {
	return record.LoadingPolicy{
		PersistenceLoadingType: mapEnum[iwfapi.PersistenceLoadingType, string](p.PersistenceLoadingType),
		PartialLoadingKeys:     copyStrings(p.PartialLoadingKeys), LockingKeys: copyStrings(p.LockingKeys),
		UseKeyAsPrefix: p.UseKeyAsPrefix, LazyLoadingLargeDataAttributes: p.LazyLoadingLargeDataAttributes,
	}
}

func optionsIn(o iwfapi.WorkflowStateOptions) record.StateOptions {
	return record.StateOptions{
		SkipStartAPI: o.SkipStartApi, SkipWaitUntil: o.SkipWaitUntil,

		StartAPITimeoutSeconds: o.StartApiTimeoutSeconds, WaitUntilAPITimeoutSeconds: o.WaitUntilApiTimeoutSeconds,
		DecideAPITimeoutSeconds: o.DecideApiTimeoutSeconds, ExecuteAPITimeoutSeconds: o.ExecuteApiTimeoutSeconds,

		StartAPIRetryPolicy: mapPtr(o.StartApiRetryPolicy, retryIn), WaitUntilAPIRetryPolicy: mapPtr(o.WaitUntilApiRetryPolicy, retryIn),
		DecideAPIRetryPolicy: mapPtr(o.DecideApiRetryPolicy, retryIn), ExecuteAPIRetryPolicy: mapPtr(o.ExecuteApiRetryPolicy, retryIn),

		StartAPIFailurePolicy:                mapEnum[iwfapi.StartApiFailurePolicy, string](o.StartApiFailurePolicy),
		WaitUntilAPIFailurePolicy:            mapEnum[iwfapi.WaitUntilApiFailurePolicy, string](o.WaitUntilApiFailurePolicy),
		ExecuteAPIFailurePolicy:              mapEnum[iwfapi.ExecuteApiFailurePolicy, string](o.ExecuteApiFailurePolicy),
		ExecuteAPIFailureProceedStateID:      o.ExecuteApiFailureProceedStateId,
		ExecuteAPIFailureProceedStateOptions: mapPtr(o.ExecuteApiFailureProceedStateOptions, optionsIn),

		DataObjectsLoadingPolicy:                  mapPtr(o.DataObjectsLoadingPolicy, loadingIn),
		DataAttributesLoadingPolicy:               mapPtr(o.DataAttributesLoadingPolicy, loadingIn),
		SearchAttributesLoadingPolicy:             mapPtr(o.SearchAttributesLoadingPolicy, loadingIn),
		WaitUntilAPIDataAttributesLoadingPolicy:   mapPtr(o.WaitUntilApiDataAttributesLoadingPolicy, loadingIn),
		WaitUntilAPISearchAttributesLoadingPolicy: mapPtr(o.WaitUntilApiSearchAttributesLoadingPolicy, loadingIn),
		ExecuteAPIDataAttributesLoadingPolicy:     mapPtr(o.ExecuteApiDataAttributesLoadingPolicy, loadingIn),
		ExecuteAPISearchAttributesLoadingPolicy:   mapPtr(o.ExecuteApiSearchAttributesLoadingPolicy, loadingIn),
	}
}

func commandsIn(c iwfapi.CommandRequest) record.Commands {
	return record.Commands{
		CommandWaitingType: mapEnum[iwfapi.CommandWaitingType, string](c.CommandWaitingType),
		DeciderTriggerType: mapEnum[iwfapi.DeciderTriggerType, string](c.DeciderTriggerType),
		CommandCombinations: mapSlice(c.CommandCombinations, func(cc iwfapi.CommandCombination) record.Combination {
			return record.Combination{CommandIDs: copyStrings(cc.CommandIds)}
		}),
		TimerCommands: mapSlice(c.TimerCommands, func(t iwfapi.TimerCommand) record.TimerCommand {
			return record.TimerCommand{CommandID: t.CommandId, DurationSeconds: t.DurationSeconds, FiringUnixTimestampSeconds: t.FiringUnixTimestampSeconds}
		}),
		SignalCommands: mapSlice(c.SignalCommands, func(s iwfapi.SignalCommand) record.SignalCommand {
			return record.SignalCommand{CommandID: s.CommandId, SignalChannelName: s.SignalChannelName, AtLeast: s.AtLeast, AtMost: s.AtMost}
		}),
		InterStateChannelCommands: mapSlice(c.InterStateChannelCommands, func(s iwfapi.InterStateChannelCommand) record.ChannelCommand {
			return record.ChannelCommand{CommandID: s.CommandId, ChannelName: s.ChannelName, AtLeast: s.AtLeast, AtMost: s.AtMost}
		}),
	}
}

func movementIn(m iwfapi.StateMovement) record.Movement {
	return record.Movement{StateID: m.StateId, StateInput: mapPtr(m.StateInput, valueIn), StateOptions: mapPtr(m.StateOptions, optionsIn), WaitForKey: m.WaitForKey}
}

func decisionIn(d iwfapi.StateDecision) record.Decision {
	return record.Decision{
		NextStates: mapSlice(d.NextStates, movementIn),
		ConditionalClose: mapPtr(d.ConditionalClose, func(c iwfapi.WorkflowConditionalClose) record.ConditionalClose {
			return record.ConditionalClose{
				ConditionalCloseType: mapEnum[iwfapi.WorkflowConditionalCloseType, string](c.ConditionalCloseType),
				ChannelName:          c.ChannelName, CloseInput: mapPtr(c.CloseInput, valueIn),
			}
		}),
	}
}

func publishIn(p iwfapi.InterStateChannelPublishing) record.Publish {
	return record.Publish{ChannelName: p.ChannelName, Value: mapPtr(p.Value, valueIn)}
}

func configIn(c iwfapi.WorkflowConfig) record.Config {
	return record.Config{
		DisableSystemSearchAttribute: c.DisableSystemSearchAttribute,
		ExecutingStateIDMode:         mapEnum[iwfapi.ExecutingStateIdMode, string](c.ExecutingStateIdMode),
		ContinueAsNewThreshold:       c.ContinueAsNewThreshold, ContinueAsNewPageSizeInBytes: c.ContinueAsNewPageSizeInBytes,
		OptimizeActivity: c.OptimizeActivity, OptimizeTimer: c.OptimizeTimer,
	}
}

func startOptionsIn(o iwfapi.WorkflowStartOptions) record.StartOptions {
	return record.StartOptions{
		IDReusePolicy:             mapEnum[iwfapi.IDReusePolicy, string](o.IdReusePolicy),
		WorkflowIDReusePolicy:     mapEnum[iwfapi.WorkflowIDReusePolicy, string](o.WorkflowIDReusePolicy),
		CronSchedule:              o.CronSchedule,
		WorkflowStartDelaySeconds: o.WorkflowStartDelaySeconds,
		RetryPolicy: mapPtr(o.RetryPolicy, func(p iwfapi.WorkflowRetryPolicy) record.WorkflowRetryPolicy {
			return record.WorkflowRetryPolicy{InitialIntervalSeconds: p.InitialIntervalSeconds, BackoffCoefficient: p.BackoffCoefficient, MaximumIntervalSeconds: p.MaximumIntervalSeconds, MaximumAttempts: p.MaximumAttempts}
		}),
		SearchAttributes:         mapSlice(o.SearchAttributes, searchAttributeIn),
		DataAttributes:           mapSlice(o.DataAttributes, kvIn),
		WorkflowConfigOverride:   mapPtr(o.WorkflowConfigOverride, configIn),
		UseMemoForDataAttributes: o.UseMemoForDataAttributes,
		WorkflowAlreadyStartedOptions: mapPtr(o.WorkflowAlreadyStartedOptions, func(a iwfapi.WorkflowAlreadyStartedOptions) record.AlreadyStarted {
			return record.AlreadyStarted{IgnoreAlreadyStartedError: a.IgnoreAlreadyStartedError, RequestID: a.RequestId}
		}),
	}
}

func startIn(r iwfapi.WorkflowStartRequest) record.Start {
	return record.Start{
		WorkflowID: r.WorkflowId, IwfWorkflowType: r.IwfWorkflowType, WorkflowTimeoutSeconds: r.WorkflowTimeoutSeconds,
		IwfWorkerURL: r.IwfWorkerUrl, StartStateID: r.StartStateId, StateInput: mapPtr(r.StateInput, valueIn),
		StateOptions: mapPtr(r.StateOptions, optionsIn), StartOptions: mapPtr(r.WorkflowStartOptions, startOptionsIn),
		WaitForCompletionStateExecutionIDs: copyStrings(r.WaitForCompletionStateExecutionIds),
		WaitForCompletionStateIDs:          copyStrings(r.WaitForCompletionStateIds),
	}
}

func skipTimerIn(r iwfapi.WorkflowSkipTimerRequest) record.SkipTimer {
	return record.SkipTimer{WorkflowStateExecutionID: r.WorkflowStateExecutionId, TimerCommandID: r.TimerCommandId, TimerCommandIndex: r.TimerCommandIndex}
}

// ---- record to wire ----

func valueOut(v record.Value) iwfapi.EncodedObject {
	return iwfapi.EncodedObject{Encoding: v.Encoding, Data: v.Data, ExtPath: v.ExtPath, ExtStoreId: v.ExtStoreID}
}

func kvOut(kv record.KeyValue) iwfapi.KeyValue {
	return iwfapi.KeyValue{Key: kv.Key, Value: mapPtr(kv.Value, valueOut)}
}

func searchAttributeOut(sa record.SearchAttribute) iwfapi.SearchAttribute {
	return iwfapi.SearchAttribute{
		Key: sa.Key, ValueType: mapEnum[string, iwfapi.SearchAttributeValueType](sa.ValueType),
		StringValue: sa.StringValue, IntegerValue: sa.IntegerValue, DoubleValue: sa.DoubleValue,
		BoolValue: sa.BoolValue, StringArrayValue: copyStrings(sa.StringArrayValue),
	}
}

func outputOut(o record.StateOutput) iwfapi.StateCompletionOutput {
	return iwfapi.StateCompletionOutput{CompletedStateId: o.CompletedStateID, CompletedStateExecutionId: o.CompletedStateExecutionID, CompletedStateOutput: mapPtr(o.CompletedStateOutput, valueOut)}
}

func configOut(c record.Config) iwfapi.WorkflowConfig {
	return iwfapi.WorkflowConfig{
		DisableSystemSearchAttribute: c.DisableSystemSearchAttribute,
		ExecutingStateIdMode:         mapEnum[string, iwfapi.ExecutingStateIdMode](c.ExecutingStateIDMode),
		ContinueAsNewThreshold:       c.ContinueAsNewThreshold, ContinueAsNewPageSizeInBytes: c.ContinueAsNewPageSizeInBytes,
		OptimizeActivity: c.OptimizeActivity, OptimizeTimer: c.OptimizeTimer,
	}
}

func resultsOut(r record.CommandResults) iwfapi.CommandResults {
	return iwfapi.CommandResults{
		StateStartApiSucceeded: r.StateStartAPISucceeded, StateWaitUntilFailed: r.StateWaitUntilFailed,
		TimerResults: mapSlice(r.TimerResults, func(t record.TimerResult) iwfapi.TimerResult {
			return iwfapi.TimerResult{CommandId: t.CommandID, TimerStatus: iwfapi.TimerStatus(t.TimerStatus)}
		}),
		SignalResults: mapSlice(r.SignalResults, func(s record.SignalResult) iwfapi.SignalResult {
			return iwfapi.SignalResult{CommandId: s.CommandID, SignalChannelName: s.SignalChannelName, SignalRequestStatus: iwfapi.ChannelRequestStatus(s.SignalRequestStatus), SignalValue: mapPtr(s.SignalValue, valueOut)}
		}),
		InterStateChannelResults: mapSlice(r.InterStateChannelResults, func(c record.ChannelResult) iwfapi.InterStateChannelResult {
			return iwfapi.InterStateChannelResult{CommandId: c.CommandID, ChannelName: c.ChannelName, RequestStatus: iwfapi.ChannelRequestStatus(c.RequestStatus), Value: mapPtr(c.Value, valueOut)}
		}),
	}
}
