package iwf

import (
	"math"
	"time"

	"github.com/iwf-server/iwf-server/sdk-go/internal/wire"
)

// StateOptions tune how the server runs a state's WaitUntil and Execute.
// The zero value means the server's defaults: 30 s per attempt, retries
// forever with exponential backoff, fail the workflow when retries run out,
// load all data and search attributes without locking. A state provides its
// options by implementing StateWithOptions.
//
// Whether WaitUntil is called is not an option: it is skipped exactly when
// the state does not implement StateWithWaitUntil.
type StateOptions struct {
	// WaitUntilTimeout and ExecuteTimeout bound each attempt of the API
	// call (rounded up to whole seconds; 0 = server default, 30 s).
	WaitUntilTimeout time.Duration
	ExecuteTimeout   time.Duration

	// WaitUntilRetryPolicy and ExecuteRetryPolicy control retries of failed
	// attempts (nil = server default: 1 s, ×2, capped at 100 s, unlimited).
	WaitUntilRetryPolicy *RetryPolicy
	ExecuteRetryPolicy   *RetryPolicy

	// WaitUntilFailurePolicy says what happens when WaitUntil has failed
	// for good: fail the workflow (default) or go on to Execute with
	// CommandResults.WaitUntilFailed set.
	WaitUntilFailurePolicy WaitUntilFailurePolicy
	// ExecuteFailurePolicy says what happens when Execute has failed for
	// good: fail the workflow (default) or, with ProceedToConfiguredState,
	// move to the state ExecuteFailureProceedStateID (which must belong to
	// the same workflow) with this state's input.
	ExecuteFailurePolicy         ExecuteFailurePolicy
	ExecuteFailureProceedStateID string

	// DataAttributesLoading and SearchAttributesLoading choose which
	// attributes both APIs receive, and which keys they lock.
	DataAttributesLoading   *LoadingPolicy
	SearchAttributesLoading *LoadingPolicy
	// The per-API policies override the two above for one API.
	WaitUntilDataAttributesLoading   *LoadingPolicy
	ExecuteDataAttributesLoading     *LoadingPolicy
	WaitUntilSearchAttributesLoading *LoadingPolicy
	ExecuteSearchAttributesLoading   *LoadingPolicy
}

// WaitUntilFailurePolicy is StateOptions.WaitUntilFailurePolicy.
type WaitUntilFailurePolicy string

// The WaitUntil failure policies.
const (
	FailWorkflowOnWaitUntilFailure WaitUntilFailurePolicy = "FAIL_WORKFLOW_ON_FAILURE"
	ProceedOnWaitUntilFailure      WaitUntilFailurePolicy = "PROCEED_ON_FAILURE"
)

// ExecuteFailurePolicy is StateOptions.ExecuteFailurePolicy.
type ExecuteFailurePolicy string

// The Execute failure policies.
const (
	FailWorkflowOnExecuteFailure ExecuteFailurePolicy = "FAIL_WORKFLOW_ON_EXECUTE_API_FAILURE"
	ProceedToConfiguredState     ExecuteFailurePolicy = "PROCEED_TO_CONFIGURED_STATE"
)

// RetryPolicy is an exponential backoff policy. Zero fields take the
// server's defaults (1 s, ×2, 100 s, unlimited attempts, unlimited
// duration). Durations are rounded up to whole seconds.
type RetryPolicy struct {
	InitialInterval    time.Duration // backoff before the first retry
	BackoffCoefficient float64       // growth of the backoff per retry
	MaximumInterval    time.Duration // cap on the backoff
	// MaximumAttempts counts the first attempt; 0 means unlimited.
	MaximumAttempts int
	// MaximumAttemptsDuration bounds all attempts of a state API, backoff
	// included; 0 means unlimited. It does not apply to workflow retries
	// (StartOptions.RetryPolicy).
	MaximumAttemptsDuration time.Duration
}

// LoadingPolicy selects the data or search attributes a state API or RPC
// receives, and the keys it locks while it runs.
type LoadingPolicy struct {
	// Type is what to load and lock; "" means LoadAllWithoutLocking.
	Type LoadingType
	// PartialLoadingKeys are loaded by the partial types.
	PartialLoadingKeys []string
	// LockingKeys are loaded and locked by the locking types.
	LockingKeys []string
}

// LoadingType is LoadingPolicy.Type.
type LoadingType string

// The loading types.
const (
	LoadAllWithoutLocking        LoadingType = "LOAD_ALL_WITHOUT_LOCKING"
	LoadPartialWithoutLocking    LoadingType = "LOAD_PARTIAL_WITHOUT_LOCKING"
	LoadPartialWithExclusiveLock LoadingType = "LOAD_PARTIAL_WITH_EXCLUSIVE_LOCK"
	LoadAllWithPartialLock       LoadingType = "LOAD_ALL_WITH_PARTIAL_LOCK"
	LoadNone                     LoadingType = "LOAD_NONE"
)

// seconds rounds a duration up to whole seconds.
func seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64(math.Ceil(d.Seconds()))
}

// seconds32 is seconds as an optional int32 wire field (nil for 0).
func seconds32(d time.Duration) *int32 {
	s := seconds(d)
	if s == 0 {
		return nil
	}
	if s > math.MaxInt32 {
		s = math.MaxInt32
	}
	return ptr(int32(s))
}

func optInt32(n int) *int32 {
	if n == 0 {
		return nil
	}
	return ptr(int32(n))
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func optBool(b bool) *bool {
	if !b {
		return nil
	}
	return &b
}

func (p *RetryPolicy) toWire() *wire.RetryPolicy {
	if p == nil {
		return nil
	}
	w := &wire.RetryPolicy{
		InitialIntervalSeconds:         seconds32(p.InitialInterval),
		MaximumIntervalSeconds:         seconds32(p.MaximumInterval),
		MaximumAttempts:                optInt32(p.MaximumAttempts),
		MaximumAttemptsDurationSeconds: seconds32(p.MaximumAttemptsDuration),
	}
	if p.BackoffCoefficient != 0 {
		w.BackoffCoefficient = ptr(float32(p.BackoffCoefficient))
	}
	return w
}

func (p *RetryPolicy) toWorkflowWire() *wire.WorkflowRetryPolicy {
	if p == nil {
		return nil
	}
	w := p.toWire()
	return &wire.WorkflowRetryPolicy{
		InitialIntervalSeconds: w.InitialIntervalSeconds,
		BackoffCoefficient:     w.BackoffCoefficient,
		MaximumIntervalSeconds: w.MaximumIntervalSeconds,
		MaximumAttempts:        w.MaximumAttempts,
	}
}

func (p *LoadingPolicy) toWire() *wire.PersistenceLoadingPolicy {
	if p == nil {
		return nil
	}
	w := &wire.PersistenceLoadingPolicy{
		PartialLoadingKeys: nonEmpty(p.PartialLoadingKeys),
		LockingKeys:        nonEmpty(p.LockingKeys),
	}
	if p.Type != "" {
		w.PersistenceLoadingType = ptr(wire.PersistenceLoadingType(p.Type))
	}
	return w
}

// toWire converts the options. The caller fills in what depends on the
// workflow: SkipWaitUntil and ExecuteApiFailureProceedStateOptions.
func (o *StateOptions) toWire() *wire.WorkflowStateOptions {
	w := &wire.WorkflowStateOptions{}
	if o == nil {
		return w
	}
	w.WaitUntilApiTimeoutSeconds = seconds32(o.WaitUntilTimeout)
	w.ExecuteApiTimeoutSeconds = seconds32(o.ExecuteTimeout)
	w.WaitUntilApiRetryPolicy = o.WaitUntilRetryPolicy.toWire()
	w.ExecuteApiRetryPolicy = o.ExecuteRetryPolicy.toWire()
	if o.WaitUntilFailurePolicy != "" {
		w.WaitUntilApiFailurePolicy = ptr(wire.WaitUntilApiFailurePolicy(o.WaitUntilFailurePolicy))
	}
	if o.ExecuteFailurePolicy != "" {
		w.ExecuteApiFailurePolicy = ptr(wire.ExecuteApiFailurePolicy(o.ExecuteFailurePolicy))
	}
	w.ExecuteApiFailureProceedStateId = optString(o.ExecuteFailureProceedStateID)
	w.DataAttributesLoadingPolicy = o.DataAttributesLoading.toWire()
	w.SearchAttributesLoadingPolicy = o.SearchAttributesLoading.toWire()
	w.WaitUntilApiDataAttributesLoadingPolicy = o.WaitUntilDataAttributesLoading.toWire()
	w.ExecuteApiDataAttributesLoadingPolicy = o.ExecuteDataAttributesLoading.toWire()
	w.WaitUntilApiSearchAttributesLoadingPolicy = o.WaitUntilSearchAttributesLoading.toWire()
	w.ExecuteApiSearchAttributesLoadingPolicy = o.ExecuteSearchAttributesLoading.toWire()
	return w
}

// WorkflowConfig tunes a workflow run. Zero fields are left to the server.
// Only ExecutingStateIDMode (and the deprecated DisableSystemSearchAttribute)
// change behaviour outside Temporal-based servers; the other fields are
// accepted for compatibility.
type WorkflowConfig struct {
	// ExecutingStateIDMode controls the system search attribute
	// IwfExecutingStateIds.
	ExecutingStateIDMode         ExecutingStateIDMode
	DisableSystemSearchAttribute bool // deprecated: ExecutingStateIDsDisabled
	ContinueAsNewThreshold       int  // Temporal only
	ContinueAsNewPageSizeInBytes int  // Temporal only
	OptimizeActivity             bool // Temporal only
	OptimizeTimer                bool // Temporal only
}

// ExecutingStateIDMode is WorkflowConfig.ExecutingStateIDMode.
type ExecutingStateIDMode string

// The executing-state-id modes.
const (
	ExecutingStateIDsForAllStates           ExecutingStateIDMode = "ENABLED_FOR_ALL"
	ExecutingStateIDsForStatesWithWaitUntil ExecutingStateIDMode = "ENABLED_FOR_STATES_WITH_WAIT_UNTIL"
	ExecutingStateIDsDisabled               ExecutingStateIDMode = "DISABLED"
)

func (c *WorkflowConfig) toWire() *wire.WorkflowConfig {
	if c == nil {
		return nil
	}
	w := &wire.WorkflowConfig{
		DisableSystemSearchAttribute: optBool(c.DisableSystemSearchAttribute),
		ContinueAsNewThreshold:       optInt32(c.ContinueAsNewThreshold),
		ContinueAsNewPageSizeInBytes: optInt32(c.ContinueAsNewPageSizeInBytes),
		OptimizeActivity:             optBool(c.OptimizeActivity),
		OptimizeTimer:                optBool(c.OptimizeTimer),
	}
	if c.ExecutingStateIDMode != "" {
		w.ExecutingStateIdMode = ptr(wire.ExecutingStateIdMode(c.ExecutingStateIDMode))
	}
	return w
}
