package httpapi_test

import (
	"context"

	"github.com/iwf-server/iwf-server/engine"
)

// The limit calls and workflow/stats of fakeService (handler_test.go).

func (f *fakeService) ListLimits(context.Context) ([]engine.Limit, error) {
	return nil, f.record("ListLimits")
}
func (f *fakeService) SetLimit(_ context.Context, c engine.LimitChange) (engine.Limit, error) {
	return engine.Limit{Kind: c.Kind, Target: c.Target, Value: c.Value}, f.record(c)
}
func (f *fakeService) DeleteLimit(_ context.Context, kind engine.LimitKind, target string) (engine.Limit, error) {
	return engine.Limit{Kind: kind, Target: target}, f.record(target)
}
func (f *fakeService) StateStats(_ context.Context, req engine.StateStatsRequest) (engine.StateStatsAnswer, error) {
	return engine.StateStatsAnswer{WorkflowType: req.WorkflowType}, f.record(req)
}
