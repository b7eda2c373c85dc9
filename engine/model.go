package engine

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/iwf-server/iwf-server/engine/internal/record"
)

// Reserved state ids of iWF decisions.
const (
	GracefulCompletingState = "_SYS_GRACEFUL_COMPLETING_WORKFLOW"
	ForceCompletingState    = "_SYS_FORCE_COMPLETING_WORKFLOW"
	ForceFailingState       = "_SYS_FORCE_FAILING_WORKFLOW"
	DeadEndState            = "_SYS_DEAD_END"
	reservedStatePrefix     = "_SYS_"
	reservedChannelPrefix   = "__IwfSystem_"
)

// System search attributes.
const (
	SystemSAWorkflowType      = "IwfWorkflowType"
	SystemSAExecutingStateIDs = "IwfExecutingStateIds"
	systemSAGlobalVersion     = "IwfGlobalWorkflowVersion"
)

// Workflow error types (iWF's WorkflowErrorType).
const (
	errStateDecisionFailing = "STATE_DECISION_FAILING_WORKFLOW_ERROR_TYPE"
	errClientAPIFailing     = "CLIENT_API_FAILING_WORKFLOW_ERROR_TYPE"
	errStateAPIFail         = "STATE_API_FAIL_ERROR_TYPE"
	errInvalidUserCode      = "INVALID_USER_WORKFLOW_CODE_ERROR_TYPE"
)

// decodeRun reads the engine's record of a run row.
func decodeRun(r *Run) (*record.Run, error) {
	d, err := record.DecodeRun(r.Data)
	if err != nil {
		return nil, fmt.Errorf("decoding run %s: %w", r.RunID, err)
	}
	return d, nil
}

// decodeExec reads the engine's record of an execution row.
func decodeExec(x *Execution) (*record.Execution, error) {
	d, err := record.DecodeExecution(x.Data)
	if err != nil {
		return nil, fmt.Errorf("decoding execution %s/%s: %w", x.RunID, x.ExecutionID, err)
	}
	return d, nil
}

// encode is record.Encode: every value the engine stores is a record type
// or a map of plain values.
func encode(v any) []byte { return record.Encode(v) }

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

func slice[T any](p *[]T) []T {
	if p == nil {
		return nil
	}
	return *p
}

func unixMs(t time.Time) int64 { return t.UnixMilli() }

// MaxNameBytes is the longest id, state id, channel name or attribute key
// the server accepts, in bytes.
const MaxNameBytes = 1024

// CheckName reports a name (an id, state id, channel name or attribute
// key) that is not valid UTF-8, holds the character U+0000 or is longer
// than MaxNameBytes.
func CheckName(field, s string) error {
	if !utf8.ValidString(s) {
		return Errorf(CodeInvalidArgument, "%s is not valid UTF-8", field)
	}
	if err := checkNoNUL(field, s); err != nil {
		return err
	}
	if len(s) > MaxNameBytes {
		return Errorf(CodeInvalidArgument, "%s is %d bytes long; the limit is %d", field, len(s), MaxNameBytes)
	}
	return nil
}

// checkNoNUL refuses a text the stores keep as text (a name, a KEYWORD or
// TEXT search attribute value) when it holds U+0000: PostgreSQL cannot
// store that character in text, so both stores refuse it alike rather
// than one keeping what the other rejects. Payloads (encoded objects) are
// kept as bytes and may hold it.
func checkNoNUL(field, s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return Errorf(CodeInvalidArgument, "%s holds the character U+0000 (NUL), which ids, names and search attribute texts may not contain", field)
	}
	return nil
}

func isReserved(stateID string) bool { return strings.HasPrefix(stateID, reservedStatePrefix) }
