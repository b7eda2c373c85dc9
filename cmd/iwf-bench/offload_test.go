package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// TestW6Answers checks W6's execute answers: S1 upserts a 1 MiB JSON string
// and moves to S2, S2 upserts another and completes; hasW6Blob accepts S1's
// attribute only whole.
func TestW6Answers(t *testing.T) {
	s1, s2 := w6Answers()
	var a1, a2 iwfapi.WorkflowStateDecideResponse
	if err := json.Unmarshal(s1, &a1); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(s2, &a2); err != nil {
		t.Fatal(err)
	}
	for i, a := range []iwfapi.WorkflowStateDecideResponse{a1, a2} {
		kv := (*a.UpsertDataObjects)[0]
		data := *kv.Value.Data
		var str string
		if len(data) != w6AttrBytes || json.Unmarshal([]byte(data), &str) != nil || len(str) != w6AttrBytes-2 {
			t.Errorf("S%d: data of %d bytes, not a JSON string of %d", i+1, len(data), w6AttrBytes)
		}
	}
	if (*a1.StateDecision.NextStates)[0].StateId != stateS2 || (*a2.StateDecision.NextStates)[0].StateId != gracefulComplete {
		t.Error("S1 must move to S2, S2 complete the workflow")
	}
	if *(*a1.UpsertDataObjects)[0].Value.Data == *(*a2.UpsertDataObjects)[0].Value.Data {
		t.Error("the two attributes are equal")
	}
	if !hasW6Blob(a1.UpsertDataObjects) {
		t.Error("hasW6Blob refused S1's attribute")
	}
	short := []iwfapi.KeyValue{{Key: ptr("blob1"), Value: &iwfapi.EncodedObject{Data: ptr(`"abc"`)}}}
	ref := []iwfapi.KeyValue{{Key: ptr("blob1"), Value: &iwfapi.EncodedObject{ExtStoreId: ptr("local"), ExtPath: ptr("x/y")}}}
	if hasW6Blob(nil) || hasW6Blob(&short) || hasW6Blob(&ref) {
		t.Error("hasW6Blob accepted a missing, short or unread attribute")
	}
}

// TestOffloadGoals checks the external-storage targets: W1x's rate as a
// share of W1's at the same in-flight count, W6x's database bytes per
// workflow, and the summary line.
func TestOffloadGoals(t *testing.T) {
	win := cpuUse{wall: 10 * time.Second}
	w1 := &result{workload: "W1", inFlight: 64, statesPerWorkflow: 2, completed: 10000, cpu: win, lat: dist{p50: 10 * time.Millisecond}, dbBefore: -1, dbAfter: -1}
	w1at1 := &result{workload: "W1", inFlight: 1, statesPerWorkflow: 2, completed: 500, cpu: win, dbBefore: -1, dbAfter: -1}
	w1x := &result{workload: "W1x", inFlight: 64, statesPerWorkflow: 2, completed: 9400, cpu: win, lat: dist{p50: 11 * time.Millisecond}, dbBefore: -1, dbAfter: -1}
	w6 := &result{workload: "W6", inFlight: 16, statesPerWorkflow: 2, completed: 300, cpu: win, lat: dist{p50: 400 * time.Millisecond},
		ran: 400, dbBefore: 1 << 20, dbAfter: 1<<20 + 400*(2<<20)}
	w6x := &result{workload: "W6x", inFlight: 16, statesPerWorkflow: 2, completed: 450, cpu: win, lat: dist{p50: 200 * time.Millisecond},
		ran: 500, dbBefore: 1 << 20, dbAfter: 1<<20 + 500*6*1024}
	sr := &storeReport{store: storeSQLite, results: []*result{w1at1, w1, w1x, w6, w6x}}
	var share, bytes goal
	for _, g := range goals(storeSQLite) {
		switch g.workload {
		case "W1x":
			share = g
		case "W6x":
			bytes = g
		}
	}
	v, shown, ok, _ := sr.figure(share)
	if !ok || math.Abs(v-0.94) > 1e-9 || shown != "0.94" || v >= share.limit {
		t.Errorf("W1x share: %v %q %v, want 0.94, a miss of 0.95", v, shown, ok)
	}
	v, shown, ok, _ = sr.figure(bytes)
	if !ok || v != 6 || shown != "6.0 KiB" || v > bytes.limit {
		t.Errorf("W6x bytes: %v %q %v, want 6 KiB, a pass", v, shown, ok)
	}
	if got := w6.dbPerWorkflow(); got != 2<<20 {
		t.Errorf("W6 bytes per workflow %v", got)
	}
	sum := offloadSummary(sr)
	for _, want := range []string{"W1x @64 / W1 @64: states/s 0.94, p50 1.10", "W6x @16 / W6 @16: states/s 1.50, p50 0.50, database bytes per workflow 6.0 KiB / 2.00 MiB = 0.003"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary %q lacks %q", sum, want)
		}
	}
	// Without W1 @64 the share is not measured.
	sr.results = []*result{w1at1, w1x}
	if _, _, ok, _ := sr.figure(share); ok {
		t.Error("a share without its base run")
	}
	w6x.dbAfter = -1
	sr.results = []*result{w6x}
	if v, shown, ok, _ := sr.figure(bytes); !ok || !math.IsInf(v, 1) || shown != "not measured" {
		t.Errorf("unmeasured bytes: %v %q %v", v, shown, ok)
	}
	for b, want := range map[float64]string{812: "812 B", 5.3 * 1024: "5.3 KiB", 2.07 * (1 << 20): "2.07 MiB", math.NaN(): "-"} {
		if got := fmtBytes(b); got != want {
			t.Errorf("fmtBytes(%v) = %q, want %q", b, got, want)
		}
	}
	if fmtLimit(0.95) != "0.95" || fmtLimit(2000) != "2,000" {
		t.Error("fmtLimit")
	}
}
