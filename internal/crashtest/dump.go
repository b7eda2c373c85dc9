package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// Dump is the part of the server's internal dump of a workflow's current run
// (POST /api/v1/workflow/internal/dump) that the tests read.
type Dump struct {
	// Status is the run's status.
	Status string `json:"status"`
	// Counters are the state execution counters per state id.
	Counters map[string]int `json:"stateExecutionCounters"`
	// Executions are the run's state executions.
	Executions []struct {
		ExecutionID string `json:"stateExecutionId"`
		StateID     string `json:"stateId"`
		Status      string `json:"status"`
	} `json:"stateExecutions"`
	// Signals and Internal are the buffered messages per channel.
	Signals  map[string]iwfapi.ChannelInfo `json:"signalChannels"`
	Internal map[string]iwfapi.ChannelInfo `json:"internalChannels"`
	// DataAttributes are the run's data attributes.
	DataAttributes []iwfapi.KeyValue `json:"dataAttributes"`
	// History is the run's history, oldest first.
	History []struct {
		ID          int64           `json:"id"`
		Type        string          `json:"type"`
		ExecutionID string          `json:"stateExecutionId"`
		Data        json.RawMessage `json:"data"`
	} `json:"history"`
}

// ReadDump reads a workflow's internal dump (all pages) from srv.
func ReadDump(srv *Server, id string) (*Dump, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var data strings.Builder
	for page := int32(0); ; page++ {
		resp, err := srv.Client().DumpWorkflowInternalWithResponse(ctx, iwfapi.WorkflowDumpRequest{WorkflowId: id, PageNum: page})
		if err != nil {
			return nil, fmt.Errorf("dump %s: %w", id, err)
		}
		if resp.JSON200 == nil {
			return nil, fmt.Errorf("dump %s: %d %s", id, resp.StatusCode(), resp.Body)
		}
		data.WriteString(resp.JSON200.JsonData)
		if page+1 >= resp.JSON200.TotalPages {
			break
		}
	}
	var d Dump
	if err := json.Unmarshal([]byte(data.String()), &d); err != nil {
		return nil, fmt.Errorf("dump %s: %w", id, err)
	}
	return &d, nil
}

// Events counts history events per "<type> <executionId>".
func (d *Dump) Events() map[string]int {
	n := map[string]int{}
	for _, e := range d.History {
		n[e.Type+" "+e.ExecutionID]++
	}
	return n
}

// Attr is the data of a data attribute ("" when absent).
func (d *Dump) Attr(key string) string {
	for _, kv := range d.DataAttributes {
		if deref(kv.Key) == key {
			return dataOf(kv.Value)
		}
	}
	return ""
}

// CheckOnce checks the exactly-once invariants of a closed run's dump: the
// run closed once, and every execution started once and had at most one
// waitUntil answer and exactly one execute answer applied.
func (d *Dump) CheckOnce() []string {
	var problems []string
	ev := d.Events()
	if n := ev["WorkflowClosed "]; n != 1 {
		problems = append(problems, fmt.Sprintf("WorkflowClosed recorded %d times", n))
	}
	for _, x := range d.Executions {
		if n := ev["StateExecutionStarted "+x.ExecutionID]; n != 1 {
			problems = append(problems, fmt.Sprintf("%s: StateExecutionStarted recorded %d times", x.ExecutionID, n))
		}
		if n := ev["WaitUntilCompleted "+x.ExecutionID]; n > 1 {
			problems = append(problems, fmt.Sprintf("%s: WaitUntilCompleted applied %d times", x.ExecutionID, n))
		}
		if n := ev["ExecuteCompleted "+x.ExecutionID]; n != 1 || x.Status != "COMPLETED" {
			problems = append(problems, fmt.Sprintf("%s: ExecuteCompleted applied %d times, status %s", x.ExecutionID, n, x.Status))
		}
	}
	return problems
}
