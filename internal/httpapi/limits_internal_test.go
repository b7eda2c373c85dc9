package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/audit"
	"github.com/iwf-server/iwf-server/internal/auth"
)

// limitService serves the limit calls and workflow/stats; the rest of
// Service is never reached.
type limitService struct {
	stubService
	set   []engine.LimitChange
	stats []engine.StateStatsRequest
}

var limitAt = time.UnixMilli(1_700_000_000_000)

func (s *limitService) ListLimits(context.Context) ([]engine.Limit, error) {
	return []engine.Limit{{Kind: engine.LimitWorkerConcurrency, Target: "w:80", Value: 0, Source: "api", UpdatedBy: "oncall", UpdatedAt: limitAt}}, nil
}

func (s *limitService) SetLimit(ctx context.Context, c engine.LimitChange) (engine.Limit, error) {
	if c.Value < 0 {
		return engine.Limit{}, engine.Errorf(engine.CodeInvalidArgument, "limit value %g: want 0 (pause) or a positive number", c.Value)
	}
	s.set = append(s.set, c)
	return engine.Limit{Kind: c.Kind, Target: c.Target, Value: c.Value, Source: "api", UpdatedBy: engine.ActorOf(ctx), UpdatedAt: limitAt}, nil
}

func (s *limitService) DeleteLimit(_ context.Context, kind engine.LimitKind, target string) (engine.Limit, error) {
	return engine.Limit{Kind: kind, Target: target, Value: 3, Source: "flag", UpdatedAt: limitAt}, nil
}

func (s *limitService) StateStats(_ context.Context, req engine.StateStatsRequest) (engine.StateStatsAnswer, error) {
	s.stats = append(s.stats, req)
	return engine.StateStatsAnswer{WorkflowType: req.WorkflowType, Runs: 4, Truncated: true, WaitingRead: 2, States: []engine.StateUse{{
		StateID: "S", Executions: 3, Runs: 2,
		Phases: []engine.PhaseCount{{Phase: engine.PhaseWaitingCommands, Count: 3,
			Oldest: engine.ExecutionRef{WorkflowID: "w", RunID: "r", ExecutionID: "S-1", Since: limitAt}}},
		Waits: []engine.CommandWait{{Kind: "SIGNAL", Name: "go", Executions: 2}, {Kind: "TIMER", Executions: 1}},
	}}}, nil
}

// TestLimitAccessAndAudit: the limit calls need the operator role (a
// writer is refused, and audited as forbidden for a change); a set and a
// delete are audited with the limit and its value; workflow/stats needs
// the reader role. The bodies map both ways.
func TestLimitAccessAndAudit(t *testing.T) {
	var logged bytes.Buffer
	who := auth.Principal{Actor: "app", Role: auth.RoleWriter}
	guard := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), who)))
		})
	}
	svc := &limitService{}
	h, err := NewHandler(svc, Options{Guard: guard, Audit: audit.NewWriter(&logged)})
	if err != nil {
		t.Fatal(err)
	}
	post := func(path, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	entry := func() audit.Entry {
		t.Helper()
		var e audit.Entry
		if err := json.Unmarshal(logged.Bytes(), &e); err != nil {
			t.Fatalf("audit line %q: %v", logged.String(), err)
		}
		logged.Reset()
		return e
	}
	set := `{"kind":"WORKER_CONCURRENCY","target":"w:80","value":0}`
	for _, path := range []string{"list", "set", "delete"} {
		if rec := post("/api/v1/limit/"+path, set); rec.Code != 403 || !strings.Contains(rec.Body.String(), "needs the operator role") {
			t.Errorf("limit/%s as writer: %d %s", path, rec.Code, rec.Body)
		}
	}
	if lines := strings.Count(logged.String(), "\n"); lines != 2 || !strings.Contains(logged.String(), `"operation":"limit/set","workflowId":"","runId":"","outcome":"forbidden"`) {
		t.Errorf("the refused changes audited: %s", logged.String())
	}
	logged.Reset()

	who = auth.Principal{Actor: "oncall", Role: auth.RoleOperator}
	rec := post("/api/v1/limit/set", set)
	if rec.Code != 200 {
		t.Fatalf("limit/set: %d %s", rec.Code, rec.Body)
	}
	var l iwfapi.Limit
	if err := json.Unmarshal(rec.Body.Bytes(), &l); err != nil || !l.Paused || l.Kind != iwfapi.LimitKindWorkerConcurrency ||
		l.Target != "w:80" || deref(l.UpdatedBy) != "oncall" || l.UpdatedTimestampMs != limitAt.UnixMilli() {
		t.Fatalf("limit/set answered %s (%v)", rec.Body, err)
	}
	if e := entry(); e.Operation != "limit/set" || e.Limit != "worker:w:80=0" || e.Actor != "oncall" || e.Outcome != "ok" {
		t.Errorf("limit/set audit entry %+v", e)
	}
	if rec := post("/api/v1/limit/delete", `{"kind":"TYPE_CONCURRENCY","target":"Order"}`); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"value":3`) {
		t.Fatalf("limit/delete: %d %s", rec.Code, rec.Body)
	}
	if e := entry(); e.Operation != "limit/delete" || e.Limit != "type:Order removed" || e.Outcome != "ok" {
		t.Errorf("limit/delete audit entry %+v", e)
	}
	if rec := post("/api/v1/limit/set", `{"kind":"WORKER_RATE","target":"w:80","value":-1}`); rec.Code != 400 || !strings.Contains(rec.Body.String(), "want 0 (pause)") {
		t.Errorf("a negative limit: %d %s", rec.Code, rec.Body)
	}
	if e := entry(); e.Outcome != string(engine.CodeInvalidArgument) || e.Limit != "" {
		t.Errorf("a refused limit/set audit entry %+v", e)
	}
	if rec := post("/api/v1/limit/set", `{"kind":"NOT_A_KIND","target":"w:80","value":1}`); rec.Code != 400 {
		t.Errorf("an unknown kind: %d %s", rec.Code, rec.Body)
	}
	logged.Reset()
	if rec := post("/api/v1/limit/list", `{}`); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"paused":true`) {
		t.Errorf("limit/list: %d %s", rec.Code, rec.Body)
	}
	if logged.Len() != 0 {
		t.Errorf("limit/list audited: %s", logged.String())
	}

	who = auth.Principal{Actor: "dashboard", Role: auth.RoleReader}
	rec = post("/api/v1/workflow/stats", `{"workflowType":"Order","maxRuns":50}`)
	if rec.Code != 200 {
		t.Fatalf("workflow/stats as reader: %d %s", rec.Code, rec.Body)
	}
	var st iwfapi.WorkflowStatsResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	if st.Runs != 4 || !st.Truncated || len(st.States) != 1 || st.States[0].Phases[0].Phase != iwfapi.StatePhaseWaitingCommands ||
		st.States[0].Phases[0].OldestStateExecutionId != "S-1" || len(st.States[0].Waits) != 2 || st.States[0].Waits[1].Name != nil {
		t.Errorf("workflow/stats answered %s", rec.Body)
	}
	if len(svc.stats) != 1 || svc.stats[0] != (engine.StateStatsRequest{WorkflowType: "Order", MaxRuns: 50}) {
		t.Errorf("the engine was asked %+v", svc.stats)
	}
	if rec := post("/api/v1/workflow/stats", `{}`); rec.Code != 400 {
		t.Errorf("workflow/stats without a type: %d %s", rec.Code, rec.Body)
	}
}

// TestStatePhasesMapped: each phase the engine counts has its name in the
// API, a value of the StatePhase enum, and no two share one.
func TestStatePhasesMapped(t *testing.T) {
	seen := map[iwfapi.StatePhase]bool{}
	for _, p := range engine.StatePhases {
		a, ok := statePhases[p]
		if !ok || !a.Valid() || seen[a] {
			t.Errorf("engine phase %s maps to %q (known %v, valid %v, taken %v)", p, a, ok, a.Valid(), seen[a])
		}
		seen[a] = true
	}
	if len(statePhases) != len(engine.StatePhases) {
		t.Errorf("statePhases maps %d phases, the engine has %d", len(statePhases), len(engine.StatePhases))
	}
	out := stateStatsOut(engine.StateStatsAnswer{States: []engine.StateUse{{StateID: "S", Phases: []engine.PhaseCount{{Phase: engine.PhasePaused, Count: 2}}}}})
	if got := out.States[0].Phases[0]; got.Phase != iwfapi.StatePhasePaused || got.Count != 2 {
		t.Errorf("a PAUSED count answered %+v", got)
	}
}
