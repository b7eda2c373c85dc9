package engine

// The system search attribute IwfExecutingStateIds: which states have live
// executions, maintained as executions start and finish.

import (
	"slices"
	"sort"

	"github.com/iwf-server/iwf-server/engine/internal/record"
	"github.com/iwf-server/iwf-server/search"
)

// countsAsExecuting says whether a new execution is listed in the system
// search attribute IwfExecutingStateIds under the run's executingStateIdMode.
func countsAsExecuting(c record.Config, skipWaitUntil bool) bool {
	if deref(c.DisableSystemSearchAttribute) {
		return false
	}
	switch deref(c.ExecutingStateIDMode) {
	case record.ExecutingStateIDsDisabled:
		return false
	case record.ExecutingStateIDsEnabledAll:
		return true
	default:
		return !skipWaitUntil
	}
}

// finished takes an execution that leaves the live phases out of the run's
// live count and the executing-state count.
func finished(rd *record.Run, x *Execution, xd *record.Execution) {
	if rd.LiveCounted {
		rd.Live--
	}
	if xd.Counted && rd.Executing[x.StateID] > 0 {
		rd.Executing[x.StateID]--
		if rd.Executing[x.StateID] == 0 {
			delete(rd.Executing, x.StateID)
		}
	}
}

// executingStateIDs writes IwfExecutingStateIds when the set of counted
// executing stateIds changed since it was last written.
func (r *runTxn) executingStateIDs() error {
	ids := make([]string, 0, len(r.rd.Executing))
	for id := range r.rd.Executing {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	if slices.Equal(ids, r.rd.ExecutingWritten) {
		return nil
	}
	r.rd.ExecutingWritten = ids
	sa := record.SearchAttribute{Key: ptr(SystemSAExecutingStateIDs), ValueType: ptr(string(search.KeywordArray)), StringArrayValue: &ids}
	return r.tx.SearchAttributeUpsert(r.ctx, r.run.RunID, []*SearchAttribute{{Key: SystemSAExecutingStateIDs, ValueType: search.KeywordArray, Raw: encode(sa), Strings: ids}})
}
